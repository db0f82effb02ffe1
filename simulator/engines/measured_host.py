"""An engine's host time measured on its own runs (data/engine_host/<engine>-<version>-<device>.yaml,
written by calibrate/engine_host_fit.py), read by the engine model on the device class it was
measured on (device.py).

Per iteration (scheduler, input preparation, sampling, output processing):
    H(B) = a_s + b_s B
and per speculative round, beyond H(B), the proposer's and the verify step's host work for
method m at K drafts:
    P_m(B, K) = round_s + round_per_seq_s B + K (step_s + step_per_seq_s B)
(a per-round part: rejection sampling, the proposer's set-up; a per-draft-step part: the propose
loop's Python around each draft pass). Every constant is >= 0 (a non-negative least-squares fit)
with its held-out error in the file.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..common.errors import SpecsightInputError
from ..common.input_files import read_yaml

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "engine_host"
PROPOSER_KEYS = ("round_s", "round_per_seq_s", "step_s", "step_per_seq_s")
MAX_CONSTANT_S = 10.0


@dataclass(frozen=True)
class ProposerHost:
    round_s: float = 0.0
    round_per_seq_s: float = 0.0
    step_s: float = 0.0
    step_per_seq_s: float = 0.0

    def time_s(self, num_seqs: int, k: int) -> float:
        if k <= 0:
            return 0.0
        return self.round_s + self.round_per_seq_s * num_seqs + k * (self.step_s + self.step_per_seq_s * num_seqs)


@dataclass(frozen=True)
class MeasuredHost:
    """H(B) = a_s + b_s B per iteration, and each method's proposer host time per round."""
    a_s: float
    b_s: float
    proposers: Mapping[str, ProposerHost] = field(default_factory=dict)
    path: str = ""

    def iteration_s(self, num_seqs: int) -> float:
        return self.a_s + self.b_s * num_seqs

    def proposer(self, method: str) -> ProposerHost:
        if method not in self.proposers:
            raise SpecsightInputError("drafter.method", method,
                                      f"one whose proposer host time was measured in {self.path}: "
                                      f"{', '.join(self.proposers) or 'none'}")
        return self.proposers[method]


def _seconds(where: str, v: Any) -> float:
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and 0 <= v <= MAX_CONSTANT_S
    if not ok:
        raise SpecsightInputError(where, v, f"a number of seconds in [0, {MAX_CONSTANT_S:g}]")
    return float(v)


def measured_host_from_mapping(raw: Any, where: str) -> MeasuredHost:
    """A measured-host file's parsed YAML: {iteration: {a_s, b_s}, proposer: {METHOD: {...}}}."""
    if not isinstance(raw, Mapping) or not isinstance(raw.get("iteration"), Mapping):
        raise SpecsightInputError(where, type(raw).__name__, "a mapping with iteration: {a_s, b_s} and proposer")
    it = raw["iteration"]
    props = raw.get("proposer") or {}
    if not isinstance(props, Mapping):
        raise SpecsightInputError(f"{where}.proposer", type(props).__name__, "a mapping METHOD: {round_s, ...}")
    out = {}
    for m, p in props.items():
        if not isinstance(p, Mapping):
            raise SpecsightInputError(f"{where}.proposer.{m}", type(p).__name__, f"a mapping of {PROPOSER_KEYS}")
        out[str(m)] = ProposerHost(**{k: _seconds(f"{where}.proposer.{m}.{k}", p.get(k, 0.0)) for k in PROPOSER_KEYS})
    return MeasuredHost(_seconds(f"{where}.iteration.a_s", it.get("a_s")),
                        _seconds(f"{where}.iteration.b_s", it.get("b_s")), out, where)


@lru_cache(maxsize=16)
def load_measured_host(name: str) -> MeasuredHost:
    """data/engine_host/NAME.yaml (e.g. vllm-0.32.0-cpu), read once per process."""
    p = DATA_DIR / f"{name}.yaml"
    raw = read_yaml(p, "engine host constants", "profile")     # (its kind, size and YAML checked; no hang)
    return measured_host_from_mapping(raw, str(p.relative_to(DATA_DIR.parents[1])))
