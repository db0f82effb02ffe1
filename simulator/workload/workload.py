"""Workloads: when requests arrive and how long their prompts and outputs are.

A scenario's `workload:` block, e.g.

    workload:
      arrival: {process: poisson, qps: 4.0}     # requests per second
      num_requests: 500
      prompt_len: {dist: lognormal, mean: 1000, sigma: 0.8, max: 8192}   # tokens
      output_len: 256                           # tokens (an int is a fixed length)

`preset: <name>` (simulator/workload/workload_presets.py: sharegpt, mtbench, cnn_dailymail, gsm8k, pg19) fills
prompt_len and output_len with a published dataset's length distributions; a prompt_len or
output_len the scenario sets wins over the preset's. Arrivals and num_requests still come from the
scenario.

Arrival processes (every synthetic process puts its first request at t = 0):
  poisson      {qps}                 i.i.d. exponential gaps, mean 1/qps
  gamma        {qps, cv}             i.i.d. Gamma gaps, shape 1/cv^2, mean 1/qps (cv = 1 is Poisson)
  constant     {qps}                 gaps of exactly 1/qps
  closed_loop  {concurrency, think_time_s = 0}
                                     `concurrency` users each send the next request think_time_s
                                     after the previous finishes; arrival_s is all zeros and the
                                     engine schedules them
  trace        {path, time_scale = 1, max_requests}
                                     replay a CSV with columns arrived_at, num_prefill_tokens,
                                     num_decode_tokens (data/traces/*.csv); times are multiplied by
                                     time_scale (2.0 = half the rate); prompt_len/output_len, if
                                     given, replace the trace's lengths
  schedule     {rates, shape = step, period_s = 86400, time_compression = 1, rate_scale = 1}
                                     a rate that varies over a repeating period (a day): rows
                                     [start_s, qps], held (step) or joined by straight lines
                                     (linear); non-homogeneous Poisson arrivals, exact by
                                     inversion (simulator/workload/rate_schedule.py); num_requests null
                                     means the expected count of one period, rounded

Common random numbers: `generate_requests` spawns three child generators from the one it is
given, in a fixed order (arrivals, prompt lengths, output lengths), so the baseline and the
speculative run of a comparison, seeded alike, see identical requests.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..common.csvio import as_counts, read_csv_columns, require_columns, resolve_path
from ..common.errors import SpecsightInputError, closest_names, require_int, require_range
from ..common.limits import (
    MAX_LIST,
    MAX_QPS,
    MAX_REQUESTS,
    MAX_SECONDS,
    MAX_TOKENS,
    MAX_USERS,
    MIN_QPS,
    POS,
    path_field,
)
from ..common.schema import REQUIRED, Float, Int, ListOf, Pair, Section, Str, Variants, check
from .length_dist import LENGTH, LengthDist
from .prefix import MOONCAKE_BLOCK_TOKENS, PREFIX, Chains, PrefixSpec, load_hash_trace
from .rate_schedule import DEFAULT_PERIOD_S, SCHEDULE_OPTIONS, SHAPES, RateSchedule
from .workload_presets import PRESETS, preset_lengths

ARRIVALS = ("poisson", "gamma", "constant", "closed_loop", "trace", "schedule")
ARRIVAL_KEYS = {
    "poisson": ("qps",),
    "gamma": ("qps", "cv"),
    "constant": ("qps",),
    "closed_loop": ("concurrency", "think_time_s"),
    "trace": ("path", "time_scale", "max_requests"),
    "schedule": ("rates",) + SCHEDULE_OPTIONS,     # they build a RateSchedule (from_mapping)
}
DEFAULT_NUM_REQUESTS = 1000
TRACE_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")


@dataclass(frozen=True)
class Requests:
    """One run's requests, as parallel arrays of length num_requests (read-only)."""
    arrival_s: np.ndarray      # [N] float64, nondecreasing; all zeros for closed_loop
    prompt_len: np.ndarray     # [N] int64 >= 1, tokens
    output_len: np.ndarray     # [N] int64 >= 1, tokens to generate
    chains: Chains | None = None   # prefix-block hashes (a hash trace or workload.prefix; None: none shared)

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.prompt_len) != n or len(self.output_len) != n:
            raise ValueError("Requests arrays must have equal lengths")
        for a in (self.arrival_s, self.prompt_len, self.output_len):
            a.flags.writeable = False

    def __len__(self) -> int:
        return len(self.arrival_s)


@dataclass(frozen=True)
class WorkloadSpec:
    """A workload: an arrival process, a request count and two length distributions."""
    arrival: str = "poisson"
    qps: float | None = None                 # requests per second (poisson, gamma, constant)
    cv: float = 1.0                          # gamma: coefficient of variation of the gaps
    concurrency: int | None = None           # closed_loop: simultaneous users
    think_time_s: float = 0.0                # closed_loop: pause between a reply and the next request
    trace_path: str | None = None            # trace: CSV file
    time_scale: float = 1.0                  # trace: multiply arrival times by this
    max_requests: int | None = None          # trace: replay at most this many rows
    schedule: RateSchedule | None = None     # schedule: the rate over the period
    num_requests: int | None = None          # None: DEFAULT_NUM_REQUESTS, or every trace row
    prompt_len: LengthDist | None = None     # tokens; None only for trace (use the trace's)
    output_len: LengthDist | None = None     # tokens; None only for trace (use the trace's)
    preset: str | None = None                # simulator/workload/workload_presets.py name that filled the lengths
    prefix: PrefixSpec | None = None         # shared system prompt and multi-turn conversations (prefix.py)
    _trace: dict[str, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        w = "workload"
        if self.arrival not in ARRIVALS:
            raise SpecsightInputError(f"{w}.arrival.process", self.arrival, closest_names(self.arrival, ARRIVALS))
        if self.arrival in ("poisson", "gamma", "constant"):
            require_range(f"{w}.arrival.qps", self.qps, 0.0, lo_open=True)
        if self.arrival == "gamma":
            require_range(f"{w}.arrival.cv", self.cv, 0.0, lo_open=True)
        if self.arrival == "closed_loop":
            require_int(f"{w}.arrival.concurrency", self.concurrency, lo=1)
            require_range(f"{w}.arrival.think_time_s", self.think_time_s, 0.0)
        if self.arrival == "schedule" and not isinstance(self.schedule, RateSchedule):
            raise SpecsightInputError(f"{w}.arrival.rates", self.schedule, "required: rows [start_s, qps]")
        if self.arrival == "trace":
            require_range(f"{w}.arrival.time_scale", self.time_scale, 0.0, lo_open=True)
            if self.max_requests is not None:
                require_int(f"{w}.arrival.max_requests", self.max_requests, lo=1)
            if self._trace is None:
                object.__setattr__(self, "_trace", load_trace(self.trace_path, f"{w}.arrival.path"))
        else:
            for name in ("prompt_len", "output_len"):
                if getattr(self, name) is None:
                    raise SpecsightInputError(f"{w}.{name}", None,
                                              "required (an int or {dist: ...}) unless arrival is a trace")
        if self.num_requests is not None:
            require_int(f"{w}.num_requests", self.num_requests, lo=1)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], where: str = "workload") -> WorkloadSpec:
        """Build from a scenario's `workload:` mapping; unknown keys name their path."""
        raw = check(WORKLOAD, raw, where)       # types, ranges, names: WORKLOAD below
        arr = raw["arrival"]
        proc = arr["process"]
        kw: dict[str, Any] = {"arrival": proc}
        for key in ARRIVAL_KEYS[proc] if proc != "schedule" else ():
            if arr.get(key) is not None:
                kw["trace_path" if key == "path" else key] = arr[key]
        if raw.get("num_requests") is not None:
            kw["num_requests"] = raw["num_requests"]
        if raw.get("prefix") is not None:
            if proc == "trace":
                raise SpecsightInputError(f"{where}.prefix", raw["prefix"], "null with a trace (a hash trace "
                                          "names its own shared blocks)")
            kw["prefix"] = PrefixSpec(**raw["prefix"])
        lengths: Mapping[str, Any] = raw
        if raw.get("preset") is not None:
            kw["preset"] = raw["preset"]
            lengths = preset_lengths(raw["preset"], raw, where)
            if lengths["output_len"] is None and proc != "trace":
                raise SpecsightInputError(f"{where}.output_len", None,
                                          f"required: preset {raw['preset']} gives prompt lengths only")
        for name in ("prompt_len", "output_len"):
            if lengths.get(name) is not None:
                own = raw.get(name) is not None
                kw[name] = LengthDist.from_value(lengths[name], f"{where}.{name}" if own else
                                                 f"{where}.preset ({raw['preset']}) {name}")
        try:
            if proc == "schedule":
                opts = {k: arr[k] for k in SCHEDULE_OPTIONS if arr.get(k) is not None}
                kw["schedule"] = RateSchedule.from_rows(arr["rates"], **opts)
            return cls(**kw)
        except SpecsightInputError as e:   # __post_init__ and RateSchedule name paths under "workload"
            if where == "workload" or not e.field.startswith("workload"):
                raise
            raise SpecsightInputError(where + e.field[len("workload"):], e.value, e.allowed) from None

    @property
    def is_closed_loop(self) -> bool:
        return self.arrival == "closed_loop"

    @property
    def n_requests(self) -> int:
        """How many requests `generate_requests` returns (schedule without num_requests: the
        expected count over one period, rounded, at least 1)."""
        if self.arrival == "schedule" and self.num_requests is None:
            assert self.schedule is not None
            return max(1, round(self.schedule.requests_per_period))
        if self.arrival != "trace":
            return self.num_requests or DEFAULT_NUM_REQUESTS
        assert self._trace is not None
        n = len(self._trace["arrived_at"])
        for cap in (self.max_requests, self.num_requests):
            if cap is not None:
                n = min(n, cap)
        return n


def load_trace(path: object, field: str) -> dict[str, np.ndarray]:
    """A request trace CSV: arrival times (s, nondecreasing) and token counts (>= 1); or a
    Mooncake-format JSONL (.jsonl, .jsonl.xz) with its block hashes (prefix.load_hash_trace)."""
    p = resolve_path(path, field)
    if p.name.endswith((".jsonl", ".jsonl.xz")):
        return load_hash_trace(p, field)
    cols = read_csv_columns(p, field)
    require_columns(cols, TRACE_COLUMNS, field, p)
    t = cols["arrived_at"]
    if len(t) == 0:
        raise SpecsightInputError(field, str(p), "trace has no rows")
    if np.any(np.diff(t) < 0) or t[0] < 0:
        raise SpecsightInputError(field, str(p), "arrived_at must be >= 0 and nondecreasing")
    return {"arrived_at": t,
            "num_prefill_tokens": as_counts(cols["num_prefill_tokens"], field, "num_prefill_tokens", lo=1,
                                        hi=MAX_TOKENS),
            "num_decode_tokens": as_counts(cols["num_decode_tokens"], field, "num_decode_tokens", lo=1,
                                       hi=MAX_TOKENS)}


def arrival_times(spec: WorkloadSpec, n: int, rng: np.random.Generator) -> np.ndarray:
    """[n] float64 arrival times in seconds, the first at 0 (trace: as recorded, scaled; schedule:
    the first n points of its Poisson process)."""
    if spec.arrival == "closed_loop":
        return np.zeros(n)
    if spec.arrival == "trace":
        assert spec._trace is not None
        return spec._trace["arrived_at"][:n] * spec.time_scale
    if spec.arrival == "schedule":
        assert spec.schedule is not None
        return spec.schedule.arrivals(n, rng)
    qps = float(spec.qps)  # type: ignore[arg-type]
    if spec.arrival == "poisson":
        gaps = rng.exponential(1.0 / qps, n - 1)
    elif spec.arrival == "gamma":
        shape = 1.0 / spec.cv ** 2             # mean = shape * scale = 1/qps, CV = 1/sqrt(shape)
        gaps = rng.gamma(shape, 1.0 / (qps * shape), n - 1)
    else:
        gaps = np.full(n - 1, 1.0 / qps)
    return np.concatenate(([0.0], np.cumsum(gaps)))


def generate_requests(spec: WorkloadSpec, rng: np.random.Generator) -> Requests:
    """Draw one run's requests. Arrivals, prompt and output lengths each come from their own child
    generator (rng.spawn(3), always in that order): the same seed gives the same requests."""
    arr_rng, prompt_rng, output_rng = rng.spawn(3)
    n = spec.n_requests
    t = arrival_times(spec, n, arr_rng)
    if spec.prompt_len is not None:
        prompt = spec.prompt_len.sample(prompt_rng, n)
    else:
        assert spec._trace is not None
        prompt = spec._trace["num_prefill_tokens"][:n].copy()
    if spec.output_len is not None:
        output = spec.output_len.sample(output_rng, n)
    else:
        assert spec._trace is not None
        output = spec._trace["num_decode_tokens"][:n].copy()
    chains = None
    if spec.prefix is not None:
        prompt = spec.prefix.prompts(prompt, output)
        chains = Chains(spec.prefix.block_tokens, spec=spec.prefix)
    elif spec._trace is not None and "hash_flat" in spec._trace:
        chains = Chains(MOONCAKE_BLOCK_TOKENS, flat=spec._trace["hash_flat"],
                        offsets=spec._trace["hash_offsets"][: n + 1])
    return Requests(arrival_s=t, prompt_len=prompt, output_len=output, chains=chains)


# ---- the scenario's `workload:` block (composed into the scenario schema)
_QPS = Float(doc="requests per second", unit="1/s", lo=MIN_QPS, hi=MAX_QPS, default=REQUIRED)
ARRIVAL = Variants(doc="arrival process (a string names the process, its keys then sit in workload)",
                   tag="process", default=REQUIRED, variants={
    "poisson": {"qps": _QPS},
    "gamma": {"qps": _QPS, "cv": Float(doc="coefficient of variation of the gaps", lo=1e-3, hi=1e3, default=REQUIRED)},
    "constant": {"qps": _QPS},
    "closed_loop": {"concurrency": Int(doc="simultaneous users", unit="users", lo=1, hi=MAX_USERS, default=REQUIRED),
                    "think_time_s": Float(doc="pause between a reply and the next request", unit="s", lo=0.0,
                                          hi=MAX_SECONDS, default=0.0)},
    "trace": {"path": path_field("CSV with arrived_at, num_prefill_tokens, num_decode_tokens; or a Mooncake JSONL "
                                 "(.jsonl, .jsonl.xz: timestamp ms, input_length, output_length, hash_ids)",
                                 default=REQUIRED),
              "time_scale": Float(doc="multiply arrival times by this", hi=1e6, **POS, default=1.0),
              "max_requests": Int(doc="replay at most this many rows", lo=1, hi=MAX_REQUESTS, nullable=True)},
    "schedule": {
        "rates": ListOf(doc="rows [start_s, qps]: the rate from start_s (the first row at 0, starts increasing); "
                            "num_requests null: the expected count of one period", max_len=MAX_LIST, default=REQUIRED,
                        item=Pair(items=(Float(doc="start_s", unit="s", lo=0.0, hi=MAX_SECONDS),
                                         Float(doc="qps", unit="1/s", lo=0.0, hi=MAX_QPS)))),
        "shape": Str(doc="step: each rate holds until the next row; linear: straight lines between rows (the last "
                         "back to the first)", choices=SHAPES, default="step"),
        "period_s": Float(doc="the schedule repeats after this (> the last start_s)", unit="s", hi=MAX_SECONDS, **POS,
                          default=DEFAULT_PERIOD_S),
        "time_compression": Float(doc="the clock runs this many times faster: times divide by it, rates do not "
                                      "(60: an hour lasts a minute)", lo=1e-6, hi=1e6, default=1.0),
        "rate_scale": Float(doc="multiply every rate", hi=1e6, **POS, default=1.0)},
})

WORKLOAD = Section(doc="requests", default=REQUIRED, keys={
    "arrival": ARRIVAL,
    "num_requests": Int(doc="requests (trace: default every row)", lo=1, hi=MAX_REQUESTS, nullable=True,
                        default=1000),
    "preset": Str(doc="published dataset lengths (simulator/workload/workload_presets.py); prompt_len / output_len win",
                  choices=tuple(PRESETS), nullable=True),
    "prompt_len": LENGTH,
    "output_len": LENGTH,
    "prefix": PREFIX,
})
