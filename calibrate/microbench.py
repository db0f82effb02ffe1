"""Time real forward passes over a grid of batch shapes; resumable, one JSONL line per point.

A point is one forward pass shape: (model role, layers, batch B, new tokens per sequence n,
context c). The target is timed at two layer counts (time must grow linearly with layers; the
per-layer slope is reported), with logits at every position (the verify pass: n = K + 1); the
draft at its step shapes (n = 1, and n = 2 for the first step of a round, which also ingests the
last committed token), logits at the last position. Each pass returns float32 probabilities
(LM head + softmax: what a sampler reads).

Timing (STYLE.md, calibration): warm-up passes first, device synchronised around
time.perf_counter for every repeat, the median kept (the minimum and all repeats are recorded
too). Each point is appended to the JSONL file as soon as it is measured, under a key that
hashes everything that identifies the measurement (model dims, device, dtype, torch version,
threads, repeats); a rerun with the same key skips the points already there, so an interrupted
calibration resumes where it stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from simulator.jsonl import open_append, read_records, write_record
from simulator.model_spec import ModelSpec

from .layers import DecoderModel, PassRunner, synchronize


@dataclass(frozen=True)
class Grid:
    batches: tuple[int, ...]
    new_tokens: tuple[int, ...]          # verify widths K + 1
    contexts: tuple[int, ...]
    draft_new_tokens: tuple[int, ...] = (1, 2)
    sampling_ks: tuple[int, ...] = (0, 2, 4)
    max_tokens: int = 1 << 30            # skip passes with more than this many tokens B * n
    max_kv_tokens: int = 1 << 40         # skip shapes with more than this many cached tokens B * c


GRIDS = {
    # name: grid. GPU grids span decode to the knee; the CPU ones stay within seconds per point.
    "cuda": Grid(batches=(1, 2, 4, 8, 16, 32, 64, 128, 256), new_tokens=(1, 2, 3, 5, 8),
                 contexts=(128, 512, 2048, 8192, 32768), max_tokens=2048, max_kv_tokens=1 << 21),
    "cuda-quick": Grid(batches=(1, 4, 16, 64, 256), new_tokens=(1, 3, 5), contexts=(128, 1024, 8192, 32768),
                       max_tokens=1280, max_kv_tokens=1 << 20),
    "cpu": Grid(batches=(1, 2, 4, 8, 16, 32), new_tokens=(1, 2, 3, 5, 8), contexts=(128, 512, 2048),
                max_tokens=128, max_kv_tokens=1 << 15),
    # cpu-quick covers the CPU ground truth's shapes (batch 1..32, verify widths 1..5, context ~300):
    # 80 passes, about 20 s on one thread at dims / 8, layers 2 and 4.
    "cpu-quick": Grid(batches=(1, 4, 8, 16, 32), new_tokens=(1, 3, 5), contexts=(128, 512), max_tokens=160,
                      max_kv_tokens=1 << 14, sampling_ks=(0, 2, 4)),
    "cpu-tiny": Grid(batches=(1, 4, 8), new_tokens=(1, 3), contexts=(64, 256), max_tokens=32,
                     max_kv_tokens=1 << 12, draft_new_tokens=(1,), sampling_ks=(0, 2)),
}


@dataclass(frozen=True)
class BenchConfig:
    target: ModelSpec                    # dims as timed (already scaled on the CPU)
    draft: ModelSpec | None
    layers: tuple[int, int]              # the two target layer counts
    draft_layers: int
    grid: Grid
    device: str = "cpu"
    dtype: str = "fp32"
    warmup: int = 2
    repeats: int = 5
    seed: int = 0
    graphs: bool = False                 # CUDA graphs for the passes (calibrate.layers.PassRunner)
    # Bytes read before every timed repeat to evict the caches (0: none, repeats run back to back
    # with a warm cache). See `Evictor`.
    evict_bytes: int = 0
    # Sweeps over the grid: the repeats of every pass are split over this many passes through the
    # whole grid (1: a pass's repeats back to back). See `measure`.
    sweeps: int = 1

    def identity(self) -> dict[str, Any]:
        """Everything a measurement depends on (the resume key hashes this)."""
        def dims(s: ModelSpec | None) -> Any:
            if s is None:
                return None
            return {k: getattr(s, k) for k in ("hidden_size", "num_heads", "num_kv_heads", "head_dim",
                                                "intermediate_size", "vocab_size", "attention_bias")}
        return {"target": dims(self.target), "draft": dims(self.draft), "device": device_name(self.device),
                "dtype": self.dtype, "torch": torch.__version__, "threads": torch.get_num_threads(),
                "warmup": self.warmup, "repeats": self.repeats, "graphs": self.graphs,
                **({"evict_bytes": self.evict_bytes} if self.evict_bytes else {}),
                **({"sweeps": self.n_sweeps} if self.n_sweeps > 1 else {})}

    @property
    def n_sweeps(self) -> int:
        return max(1, min(self.sweeps, self.repeats))

    def evictor(self) -> "Evictor | None":
        """The cache-evicting read run before every timed repeat, or None (evict_bytes 0)."""
        return Evictor(self.evict_bytes, self.device) if self.evict_bytes else None

    def sweep_repeats(self, s: int) -> int:
        """Timed repeats of every pass in sweep s: `repeats` split as evenly as they go."""
        q, r = divmod(self.repeats, self.n_sweeps)
        return q + (1 if s < r else 0)

    @property
    def key(self) -> str:
        return hashlib.sha1(json.dumps(self.identity(), sort_keys=True).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Point:
    role: str          # "target" | "draft" | "host" (per-round host work: sampling draws, verify_chain)
    layers: int
    batch: int
    new_tokens: int    # for "host": K
    context: int

    @property
    def id(self) -> str:
        return f"{self.role}:{self.layers}:{self.batch}:{self.new_tokens}:{self.context}"


def device_name(device: str) -> str:
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


def grid_points(cfg: BenchConfig) -> list[Point]:
    g, pts = cfg.grid, []
    for L in sorted(set(cfg.layers)):
        for b in g.batches:
            for c in g.contexts:
                if b * c > g.max_kv_tokens:
                    continue
                pts += [Point("target", L, b, n, c) for n in g.new_tokens if b * n <= g.max_tokens]
    if cfg.draft is not None:
        for b in g.batches:
            for c in g.contexts:
                if b * c <= g.max_kv_tokens:
                    pts += [Point("draft", cfg.draft_layers, b, n, c) for n in g.draft_new_tokens if b * n <= g.max_tokens]
    for b in g.batches:
        pts += [Point("host", 0, b, k, 0) for k in g.sampling_ks]
    return pts


def time_fn(fn: Callable[[], Any], device: str, warmup: int, repeats: int,
            before: Callable[[], Any] | None = None) -> list[float]:
    """Seconds per call: warm-up calls, then `repeats` calls each bracketed by device syncs.
    before: run (untimed) before every timed call, e.g. an `Evictor`."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    out = []
    for _ in range(repeats):
        if before is not None:
            before()
        synchronize(device)
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        out.append(time.perf_counter() - t0)
    return out


def last_level_cache_bytes(default: int = 256 << 20) -> int:
    """Size of this CPU's largest cache (Linux sysfs; `default` where it cannot be read)."""
    best = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            txt = f.read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(txt[-1:], 1)
            best = max(best, int(txt.rstrip("KMG")) * mult)
        except (OSError, ValueError):
            continue
    return best or default


class Evictor:
    """Reads a buffer of `nbytes` (float32) when called: what was in the caches is displaced, so
    the pass timed next streams its weights from memory.

    NOTE: why the CPU calibration evicts before every timed repeat. In a speculative round neither
    model's weights are cached when its pass starts: the draft's first step runs after the
    target's verify pass, which streams the target's weights (142 MB at 8 layers, dims / 8), and
    the verify pass after the draft's steps and sampling. Timed back to back, a pass finds its own
    weights still cached from the previous repeat. On the development VM (L3 300 MB, shared) a
    1-layer draft step at batch 8 took 3.2-3.4 ms back to back and 5.5-5.8 ms after a target pass
    or a 144 MB read; an 8-layer target pass 2-8 % longer cold than warm (/tmp experiments quoted
    in docs/calibration.md). The ground truth's draft phases ran 1.5-2.7x the warm step times."""

    def __init__(self, nbytes: int, device: str = "cpu"):
        self.buf = torch.ones(max(1, int(nbytes) // 4), dtype=torch.float32, device=device)

    def __call__(self) -> float:
        return float(self.buf.sum())


def read_points(path: Path, key: str) -> dict[str, dict]:
    """Measured points of this configuration in a JSONL file (a torn last line is ignored)."""
    return {rec["id"]: rec for rec in read_records(path) if rec.get("key") == key and "sweep" not in rec}


def calibration_inputs(calibration: dict, points_path: str | Path) -> tuple[list[dict], dict[str, ModelSpec]]:
    """What a calibrated profile was fitted on, from its `calibration` record and the points file
    `specsight calibrate` wrote: the measured points of its grid (read_points under the record's
    key) and the specs it timed (the catalog models at the record's scale), as fit_device and
    fit_attention_blocks take them."""
    from simulator.model_spec import load_model
    from .layers import scaled_spec
    scale = calibration.get("scale", 1)
    specs = {"target": scaled_spec(load_model(calibration["model"]), scale)}
    if calibration.get("draft"):
        specs["draft"] = scaled_spec(load_model(calibration["draft"]), scale)
    return list(read_points(Path(points_path), calibration["key"]).values()), specs


def read_sweeps(path: Path, key: str) -> dict[tuple[str, int], dict]:
    """The per-sweep records under `key`: (id, sweep) -> record (measure keeps those of the
    points not yet complete)."""
    return {(rec["id"], rec["sweep"]): rec for rec in read_records(path) if rec.get("key") == key and "sweep" in rec}


def measure(cfg: BenchConfig, jsonl: str | Path, progress: bool = True,
            host_work: Callable[[int, int, int, torch.Generator], Callable[[], Any]] | None = None) -> list[dict]:
    """Measure every grid point not yet in `jsonl` (appending each as it is measured); return all
    points of this configuration, old and new.

    host_work(B, K, V, generator) -> a callable doing one round's host-side sampling work (draws
    and, for K > 0, the exact verify kernel) on random probabilities; default: groundtruth's."""
    if host_work is None:
        from .groundtruth import host_work_fn as host_work
    jsonl = Path(jsonl)
    jsonl.parent.mkdir(parents=True, exist_ok=True)
    done = read_points(jsonl, cfg.key)
    todo = [p for p in grid_points(cfg) if p.id not in done]
    partial = {k: rec for k, rec in read_sweeps(jsonl, cfg.key).items() if k[0] not in done} \
        if cfg.n_sweeps > 1 else {}                   # sweeps on disk of the points still to finish
    resumed = sum(1 for (pid, s) in partial if s < cfg.n_sweeps - 1)
    bar = _progress(len(done) + len(todo) * cfg.n_sweeps, len(done) + resumed, progress)   # a step per pass per sweep
    runners: dict[str, PassRunner] = {}

    def runner(role: str) -> PassRunner:
        if role not in runners:
            runners.clear()          # one model in memory at a time
            if torch.device(cfg.device).type == "cuda":
                torch.cuda.empty_cache()
            spec = cfg.target if role == "target" else cfg.draft
            n = max(cfg.layers) if role == "target" else cfg.draft_layers
            runners[role] = PassRunner(DecoderModel(spec, n, dtype=cfg.dtype, device=cfg.device, seed=cfg.seed),
                                       graphs=cfg.graphs)
        return runners[role]

    gen = torch.Generator(device=cfg.device).manual_seed(cfg.seed)
    evict = cfg.evictor() if todo else None
    # Group the shapes that share a cache: (role, batch, context); within a group, each width at
    # both layer counts back to back, so the per-layer slope compares passes timed seconds apart
    # (a shared machine's speed drifts over minutes).
    todo.sort(key=lambda p: (p.role != "target", p.role, p.batch, p.context, p.new_tokens, p.layers))
    # NOTE: sweeps. With cfg.sweeps > 1 every sweep times every pass (its share of the repeats,
    # after the warm-up calls), so each pass's repeats are spread over the whole calibration and
    # every pass's statistic sees the same states of a drifting machine: otherwise a pass timed in
    # a fast minute and its neighbour in a slow one differ by the machine, not by their shapes.
    # Each sweep's times are appended as they are measured ("sweep" records); the point's record
    # follows its last sweep, so an interrupted calibration resumes within a sweep.
    cache_key, cache = None, None

    def time_point(p: Point, repeats: int) -> list[float]:
        nonlocal cache_key, cache
        if p.role == "host":
            cache_key, cache = None, None
            vocab = cfg.target.vocab_size
            return time_fn(host_work(p.batch, p.new_tokens, vocab, gen), cfg.device, cfg.warmup, repeats, before=evict)
        r = runner(p.role)
        ck = (p.role, p.batch, p.context)
        if ck != cache_key:
            r.reset()
            cache = None
            cache = r.model.new_cache(p.batch, p.context + max(cfg.grid.new_tokens) + PassRunner.KEY_BUCKET)
            cache_key = ck
        toks = torch.randint(0, r.model.spec.vocab_size, (p.batch, p.new_tokens), device=cfg.device, generator=gen)
        logits = "all" if p.role == "target" else "last"
        return time_fn(_pass(r, toks, cache, p.context, p.layers, logits), cfg.device, cfg.warmup, repeats, before=evict)

    with open_append(jsonl) as f:
        for s in range(cfg.n_sweeps):
            last = s == cfg.n_sweeps - 1
            for p in todo:
                if (p.id, s) not in partial:
                    t_s = time_point(p, cfg.sweep_repeats(s))     # (one sweep: all the repeats)
                    partial[(p.id, s)] = {"key": cfg.key, "id": p.id, "sweep": s, "times_s": [round(t, 9) for t in t_s],
                                          "t": time.strftime("%Y-%m-%dT%H:%M:%S")}
                    if cfg.n_sweeps > 1:
                        write_record(f, partial[(p.id, s)])
                    if not last:
                        bar.update(1)     # (sweeps resumed from disk are in the bar's start)
                if not last:
                    continue
                times = [t for i in range(cfg.n_sweeps) for t in partial[(p.id, i)]["times_s"]]
                rr = next(iter(runners.values())) if runners and p.role != "host" else None
                rec = {"key": cfg.key, "id": p.id, **dataclasses.asdict(p), "graphs": bool(rr and rr.graphs),
                       **({"graphs_failed": rr.graphs_failed} if rr is not None and rr.graphs_failed else {}),
                       "median_s": statistics.median(times),
                       "min_s": min(times), "times_s": times,
                       **({"sweeps": cfg.n_sweeps} if cfg.n_sweeps > 1 else {}),
                       "t": time.strftime("%Y-%m-%dT%H:%M:%S")}
                write_record(f, rec)
                done[p.id] = rec
                bar.update(1)
    bar.close()
    return list(done.values())


def _pass(r: PassRunner, toks: torch.Tensor, cache, context: int, layers: int, logits: str) -> Callable[[], Any]:
    """One forward pass over the first `layers` layers (the rest of the model stays idle), every
    sequence holding `context` cached tokens, through the ragged path the ground truth uses."""
    cache.lengths.fill_(context)
    return lambda: r(toks, cache, logits=logits, num_layers=layers, max_length=context)


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def _progress(total: int, initial: int, enabled: bool, desc: str = "calibrate"):
    """A progress bar on stderr when it is a terminal (tqdm's disable=None), else none."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, initial=initial, desc=desc, unit="pt", dynamic_ncols=True, disable=None)


# ---- device ceilings (the CPU has no datasheet here: measure them) --------------------------
def measure_peaks(device: str, dtype: str, nbytes: int, repeats: int = 5,
                  evict: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Read bandwidth over a buffer of `nbytes` and a square matmul's FLOP/s in `dtype`: the
    fastest of `repeats`. Used as the CPU profile's ceilings.

    NOTE: the bandwidth probe reads (a matrix-vector product over the buffer, as a decode pass
    reads its weights) rather than copies: a copy also writes, and on a CPU the write-allocate
    traffic and a second buffer of the same size change which cache level the data lives in
    (measured on the development Xeon, 32 MB: copy 14 GB/s counting read + write, read 24 GB/s).
    Both orientations of the product are timed and the faster kept: W x over W [rows, 512]
    (torch.mv) and x W over the same bytes viewed as [512, rows], the [in, out] layout of the
    timed model's weights (calibrate.layers.Linear). On the development Xeon (87 MB, one thread)
    the second read 14-15 GB/s where torch.mv read 10 GB/s: a ceiling the one-token passes
    exceed is no ceiling. evict: run before every timed read (`Evictor`), as before every timed
    pass, so the ceiling is measured from the memory level the passes stream from."""
    from .layers import TORCH_DTYPES
    cols = 512
    rows = max(2048, nbytes // (4 * cols))
    w = torch.ones(rows, cols, dtype=torch.float32, device=device)           # [rows, cols]
    x = torch.ones(cols, dtype=torch.float32, device=device)                 # [cols]
    w_in_out = w.view(cols, rows)                                            # [in = cols, out = rows], same bytes
    x_row = torch.ones(1, cols, dtype=torch.float32, device=device)          # [1, in]
    # A ceiling is the best a device does: the fastest repeat (interference only adds time).
    probes = {"W x (torch.mv, W [rows, 512])": lambda: torch.mv(w, x),
              "x W (W [512, rows], the model's [in, out] layout)": lambda: x_row @ w_in_out}
    read_s = {k: min(time_fn(fn, device, 2, repeats, before=evict)) for k, fn in probes.items()}
    read_kernel = min(read_s, key=read_s.get)
    bw = rows * cols * 4 / read_s[read_kernel]
    # Peak FLOP/s: the best of a few square matmuls (a CPU's GEMM blocking favours some sizes: on
    # the development Xeon 1024^3 ran 10-20 % below 512^3 and 2048^3).
    best, best_size = 0.0, 0
    for size in ((512, 1024, 2048) if torch.device(device).type == "cpu" else (8192,)):
        a = torch.randn(size, size, dtype=TORCH_DTYPES[dtype], device=device)
        b = torch.randn(size, size, dtype=TORCH_DTYPES[dtype], device=device)
        flops_s = 2 * size ** 3 / min(time_fn(lambda: a @ b, device, 2, repeats))
        if flops_s > best:
            best, best_size = flops_s, size
    return {"read_bytes_s": bw, "read_buffer_bytes": rows * cols * 4, "read_kernel": read_kernel,
            "read_bytes_s_by_kernel": {k: rows * cols * 4 / t for k, t in read_s.items()},
            "matmul_flops_s": best, "matmul_size": best_size}


def measure_dispatch(spec: ModelSpec, layers: int, device: str, dtype: str, warmup: int = 3,
                     repeats: int = 15) -> dict[str, float]:
    """Fixed time of a forward pass when its bytes and FLOPs are negligible: `spec`'s structure
    with every width shrunk to one 64-wide head (d = 64, MLP 64, vocabulary 256), one sequence,
    one token, 16 cached, `layers` layers; the fastest of `repeats`. Divided by the cost model's
    kernel count (simulator.cost_model: KERNELS_PER_LAYER per layer + KERNELS_FIXED) it is the
    per-kernel launch time: on a CPU the eager dispatch of every op, which the fit cannot tell
    apart from the memory time (both are flat in tokens and grow with layers)."""
    from simulator.cost_model import KERNELS_FIXED, KERNELS_PER_LAYER
    tiny = dataclasses.replace(spec, name=f"{spec.name}/dispatch", hidden_size=64, num_heads=1, num_kv_heads=1,
                               head_dim=64, intermediate_size=64, vocab_size=256, attention_bias=False)
    model = DecoderModel(tiny, layers, dtype=dtype, device=device)
    cache = model.new_cache(1, 64)
    toks = torch.zeros(1, 1, dtype=torch.int64, device=device)
    run = _pass(PassRunner(model), toks, cache, 16, layers, "all")
    t = min(time_fn(run, device, warmup, repeats))
    kernels = layers * KERNELS_PER_LAYER + KERNELS_FIXED
    return {"pass_s": t, "layers": layers, "kernels": kernels, "kernel_launch_us": 1e6 * t / kernels}


def points_table(points: Iterable[dict]):
    import pandas as pd
    return pd.DataFrame(list(points))
