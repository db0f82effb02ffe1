"""What a calibration and a ground-truth run are asked to do (calibrate.pipeline runs them;
calibrate.inputs checks them first)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .machine import MachineConfig


@dataclass(frozen=True)
class CalibrationConfig:
    """A calibration on this machine; None fields take the device's defaults."""
    out: str | Path                          # profile YAML to write (its name is the file stem)
    model: str = "llama-3.1-8b"              # catalog model or config.json whose dims are timed
    draft: str | None = None                 # draft model whose step shapes are timed too
    layers: int | None = None                # target timed at N // 2 and N layers
    draft_layers: int | None = None
    passes: str | None = None                # pass grid (microbench.GRIDS); default: the device's
    quick: bool = False                      # default pass grid: the device's quick one
    repeats: int = 5
    warmup: int = 2
    sweeps: int | None = None                # default: `repeats` on a CPU, 1 on cuda
    evict: bool | None = None                # default: on for a CPU, off for cuda
    hardware: str | None = None              # cuda: base profile (default: from the device name)
    stat: str | None = None                  # statistic of the repeats fitted: median on cuda, min on cpu
    holdout: float = 0.3                     # fraction of grid cells held out (seeded)
    points: str | Path | None = None         # measured points (default: <out>.points.jsonl); resumed
    attention: str = "torch"                 # passes' attention: torch (SDPA) | vllm (vLLM's CPU kernels)
    engine_venv: str | Path = ".venv-vllm"   # with attention "vllm": the environment its kernels load from
    machine: MachineConfig = field(default_factory=MachineConfig)


@dataclass(frozen=True)
class GroundTruthConfig:
    """A ground-truth run (calibrate.groundtruth): real speculative decoding, timed per round."""
    model: str = "llama-3.1-8b"
    draft: str | None = "llama-3.2-1b"       # independent draft model (same vocabulary); used when a K > 0
    layers: int | None = None                # target layers (default: the device's)
    draft_layers: int | None = 1
    batches: tuple[int, ...] = (1, 8, 32)
    ks: tuple[int, ...] = (0, 2, 4)          # 0 = plain decoding
    steps: int | None = None                 # timed rounds per (batch, K); None: GTConfig.steps_for
    warmup: int = 3                          # warm-up rounds per (batch, K), recorded but flagged
    prompt_len: int = 256
    temperature: float = 1.0
    interleave: bool = True                  # each batch's K values run their rounds in turn
    out: str | Path | None = None            # RUN.json or a folder (DIR/groundtruth.json); None: not written
    machine: MachineConfig = field(default_factory=MachineConfig)
    arguments: Mapping[str, Any] | None = None   # recorded as provenance.arguments (default: these fields)
