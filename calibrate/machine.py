"""The machine a calibration or ground truth runs on: its device defaults, setup and description.

A GPU runs the catalog models at full width, bf16, with CUDA graphs; a CPU runs them narrowed
(`CPU_SCALE`), fp32, one torch thread, at the depths below (docs/calibration.md gives the
reasons). `prepare_machine` applies the defaults and sets torch up; `environment` records what
the measurements ran on. torch is imported inside the functions, so this module loads without it.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.models.model_spec import ModelSpec

# NVIDIA/AMD device names (torch.cuda.get_device_name) -> datasheet profile, first match wins.
GPU_NAMES = (("H200", "h200-sxm"), ("H100 PCIe", "h100-pcie"), ("H100", "h100-sxm"), ("B200", "b200"),
             ("A100-SXM4-40GB", "a100-40gb-sxm"), ("A100", "a100-80gb-sxm"), ("L40S", "l40s"), ("L4", "l4"),
             ("4090", "rtx-4090"), ("MI325X", "mi325x"), ("MI300X", "mi300x"))
CPU_SCALE = 8          # width divisor on a CPU: catalog dims / 8 (docs/calibration.md)
CPU_THREADS = 1        # torch threads on a CPU: stable timings on shared 2-core CI runners
# CPU depths: the target's 8 layers at dims / 8 weigh 142 MB with its LM head and a 1-layer draft
# 20 MB (14 %), about Llama-3.2-1B's share of Llama-3.1-8B's bytes (15 %); a 4-layer target would
# give the draft 23 %, its LM head (vocabulary 16000) dominating the round.
CPU_LAYERS = 8         # target layers on a CPU (calibrate times N // 2 and N; groundtruth runs N)
CPU_DRAFT_LAYERS = 1   # draft layers on a CPU
GPU_LAYERS = 4         # target layers on cuda


@dataclass(frozen=True)
class MachineConfig:
    """How the models run; None: the device's default (cuda if torch sees one, else cpu)."""
    device: str | None = None        # "cuda" | "cpu"
    dtype: str | None = None         # bf16 on cuda, fp32 on cpu
    scale: int | None = None         # width divisor: 1 on cuda, CPU_SCALE on cpu
    threads: int | None = None       # torch CPU threads: CPU_THREADS on cpu (0: torch's default)
    seed: int = 0
    graphs: bool | None = None       # CUDA graphs for the passes: on for cuda (never on cpu)


@dataclass(frozen=True)
class Machine:
    """A MachineConfig with its defaults applied, torch set up for it."""
    device: str
    dtype: str
    scale: int
    graphs: bool


def prepare_machine(cfg: MachineConfig) -> Machine:
    """Apply the device defaults, check them, and set torch up: thread count and allocator on a
    CPU, the global seed."""
    import torch
    device = cfg.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise SpecsightInputError("--device", "cuda", "no CUDA device is visible to torch; use --device cpu")
    dtype = cfg.dtype or ("bf16" if device == "cuda" else "fp32")
    scale = cfg.scale or (1 if device == "cuda" else CPU_SCALE)
    if scale < 1:
        raise SpecsightInputError("--scale", scale, "must be an integer >= 1")
    if device == "cpu":
        threads = CPU_THREADS if cfg.threads is None else cfg.threads
        if threads > 0:
            torch.set_num_threads(threads)
        keep_freed_memory()
    torch.manual_seed(cfg.seed)
    return Machine(device, dtype, scale, graphs=device == "cuda" and (cfg.graphs is None or bool(cfg.graphs)))


def keep_freed_memory() -> None:
    """Linux/glibc: keep freed buffers in the process (no mmap for big blocks, no trimming), so
    repeated passes reuse memory instead of paying page faults each time (a server process reaches
    the same state after its first requests). Silently skipped elsewhere."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 30)    # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1 << 40)    # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def depths(layers: int | None, draft_layers: int | None, device: str) -> tuple[int, int]:
    """(target layers, draft layers): the given ones, else the device's (an unset draft depth: the
    target's on cuda, CPU_DRAFT_LAYERS on a CPU); both at least 1."""
    n = layers if layers is not None else (GPU_LAYERS if device == "cuda" else CPU_LAYERS)
    d = draft_layers if draft_layers is not None else (n if device == "cuda" else CPU_DRAFT_LAYERS)
    for flag, v in (("--layers", n), ("--draft-layers", d)):
        if v < 1:
            raise SpecsightInputError(flag, v, "must be >= 1")
    return n, d


def model_specs(model: str, draft: str | None, scale: int) -> tuple[ModelSpec, ModelSpec | None]:
    """The target's and draft's specs (catalog names or config.json paths) narrowed by `scale`;
    the draft must share the target's vocabulary."""
    from simulator.models.catalog import load_model

    from .layers import scaled_spec
    t = scaled_spec(load_model(model, field="--model"), scale)
    d = scaled_spec(load_model(draft, field="--draft"), scale) if draft else None
    if d is not None and d.vocab_size != t.vocab_size:
        raise SpecsightInputError("--draft", draft,
                                  f"vocabulary {d.vocab_size} differs from the target's {t.vocab_size}")
    return t, d


def guess_gpu_profile(device_name: str) -> str:
    """The datasheet profile of a GPU from its device name (GPU_NAMES)."""
    for key, prof in GPU_NAMES:
        if key.lower() in device_name.lower():
            return prof
    raise SpecsightInputError("--hardware", device_name, "unknown GPU: pass --hardware <hardware profile>")


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name with its core and torch thread counts."""
    import torch
    d = torch.device(device)
    if d.type == "cuda":
        return torch.cuda.get_device_name(d)
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} CPUs, torch threads {torch.get_num_threads()})"


def environment(device: str) -> dict[str, Any]:
    """Device, driver and library versions recorded with every calibration."""
    import torch
    env = {"device_name": device_name(device), "device": torch.device(device).type, "torch": torch.__version__,
           "python": platform.python_version(), "platform": platform.platform()}
    if torch.device(device).type == "cuda":
        env["cuda"] = torch.version.cuda
        env["sm_count"] = torch.cuda.get_device_properties(torch.device(device)).multi_processor_count
        env["sm_count_source"] = "torch.cuda.get_device_properties().multi_processor_count"
        try:
            import subprocess
            env["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                           capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        except Exception:   # noqa: BLE001 (nvidia-smi missing: record that)
            env["driver"] = "unknown (nvidia-smi unavailable)"
    else:
        env["sm_count"] = torch.get_num_threads()     # the workers an attention kernel's blocks run on
        env["sm_count_source"] = "torch.get_num_threads(), the workers torch's attention kernel runs its blocks on"
        env["driver"] = "n/a (CPU)"
        env["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return env
