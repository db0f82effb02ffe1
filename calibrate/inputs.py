"""The calibration jobs' numeric inputs, each checked against a bound before torch is imported or
a pass is timed: one SpecsightInputError line naming the flag, the value and the range.

The bounds are the scenario schema's where one applies (simulator/scenario/schema_table.py: MAX_LAYERS,
MAX_SEQS, MAX_K, MAX_TOKENS, MAX_SEED); the rest are stated here.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from simulator.common.errors import SpecsightInputError, require_int, require_range
from simulator.common.limits import MAX_K, MAX_LAYERS, MAX_LIST, MAX_SEED, MAX_SEQS, MAX_TOKENS

if TYPE_CHECKING:
    from .configs import CalibrationConfig, GroundTruthConfig
    from .machine import MachineConfig

MAX_REPEATS = 100_000         # timed repeats, warm-up repeats, sweeps, rounds per (batch, K)
MAX_SCALE = 4096              # width divisor
MAX_THREADS = 4096            # torch CPU threads
MAX_TEMPERATURE = 100.0       # sampling temperature (softmax(logits / T) is uniform long before)


def check_machine(m: MachineConfig) -> None:
    """--scale, --threads, --seed (None: the device's default)."""
    if m.scale is not None:
        require_int("--scale", m.scale, lo=1, hi=MAX_SCALE)
    if m.threads is not None:
        require_int("--threads", m.threads, lo=0, hi=MAX_THREADS)
    require_int("--seed", m.seed, lo=0, hi=MAX_SEED)


def check_layers(layers: int | None, draft_layers: int | None) -> None:
    for flag, v in (("--layers", layers), ("--draft-layers", draft_layers)):
        if v is not None:
            require_int(flag, v, lo=1, hi=MAX_LAYERS)


def check_calibration(cfg: CalibrationConfig) -> None:
    """Every number of a calibration (calibrate_profile calls it first)."""
    check_machine(cfg.machine)
    check_layers(cfg.layers, cfg.draft_layers)
    require_int("--repeats", cfg.repeats, lo=1, hi=MAX_REPEATS)
    require_int("--warmup", cfg.warmup, lo=0, hi=MAX_REPEATS)
    if cfg.sweeps is not None:
        require_int("--sweeps", cfg.sweeps, lo=1, hi=MAX_REPEATS)
    require_range("--holdout", cfg.holdout, 0.0, 1.0, lo_open=True, hi_open=True)    # a fraction of the grid's cells


def _int_list(flag: str, values: Iterable[int], lo: int, hi: int) -> tuple[int, ...]:
    values = tuple(values)
    if not values or len(values) > MAX_LIST:
        raise SpecsightInputError(flag, values, f"1 to {MAX_LIST} comma-separated integers in [{lo}, {hi}]")
    return tuple(require_int(flag, v, lo=lo, hi=hi) for v in values)


def check_groundtruth(cfg: GroundTruthConfig) -> None:
    """Every number of a ground-truth run (record_groundtruth calls it first)."""
    check_machine(cfg.machine)
    check_layers(cfg.layers, cfg.draft_layers)
    _int_list("--batch", cfg.batches, 1, MAX_SEQS)
    ks = _int_list("--k", cfg.ks, 0, MAX_K)
    if any(k > 0 for k in ks) and not cfg.draft:
        raise SpecsightInputError("--draft", cfg.draft, "K > 0 needs a draft model")
    require_int("--prompt-len", cfg.prompt_len, lo=3, hi=MAX_TOKENS)
    if cfg.steps is not None:
        require_int("--steps", cfg.steps, lo=1, hi=MAX_REPEATS)
    require_int("--warmup", cfg.warmup, lo=0, hi=MAX_REPEATS)
    require_range("--temperature", cfg.temperature, 0.0, MAX_TEMPERATURE, lo_open=True)   # softmax(logits / T)


def run_path(out: str | Path) -> Path:
    """Where a ground-truth run goes: RUN.json, or DIR/groundtruth.json when `out` is not a .json path."""
    p = Path(out)
    return p if p.suffix == ".json" else p / "groundtruth.json"
