"""Work limits: a scenario whose run would take more memory or time than stated is refused before
it runs, with the limit it exceeds and how to raise it.

    limits:                       # the scenario's own block (or --set limits.max_tokens=...)
      max_requests: 2000000       # requests per run: memory grows about 5 kB per request
                                  # (benchmarks/results/simulator_cpu.md: 100,000 requests, 0.53 GB peak)
      max_tokens: 2000000000      # num_requests x (mean prompt_len + mean output_len): the run's work
                                  # (the simulator covers 10^5-10^7 tokens per CPU-second)
      max_batch_slots: 10000000   # replicas x engine.max_num_seqs: arrays every replica holds
      max_replicas: 10000         # hardware.replicas: about 100 kB each (2,000 replicas: 186 MB peak)
      max_kernel_elements: 1e10   # kernel acceptance: output tokens x (K + 1) x vocab_size probabilities
                                  # (measured 3-4e6 per second on a loaded 2-core machine: benchmarks/cli_campaign.py)
      max_study_tokens: 1e11      # a study's points: the sum of their tokens (specsight/studies/shared/points.py)
Memory is checked as a run starts (check_memory): requests x 5 kB against MemAvailable,
so a limit raised past the machine is one line, not numpy's allocation error. Work estimated
to take more than about a minute is announced on stderr (`specsight: note: ...`) before it starts.

The defaults (LIMITS below) fit a laptop; a fleet study raises them, up to
the schema's maxima (docs/schema.md). A closed loop's `concurrency` costs nothing by itself:
users are created as their first request is issued (simulator/serving/engine.py).
"""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ..common.errors import SpecsightInputError
from ..common.limits import MAX_REPLICAS, MAX_REQUESTS, MAX_SEQS, MAX_TOKENS
from ..common.schema import Int, Section


def limit(source: Any, key: str) -> int:
    """The scenario's limit `key` (its `limits:` block, else the default)."""
    block = source.get("limits") if hasattr(source, "get") else None
    v = (block or {}).get(key)
    return int(LIMITS.keys[key].default if v is None else v)


def mean_tokens(dist: Any, trace_column: np.ndarray | None) -> float:
    """Mean length (tokens) a LengthDist draws, clipped to its bounds; a trace column's mean."""
    if dist is None:
        return float(np.mean(trace_column)) if trace_column is not None and len(trace_column) else 0.0
    hi = dist.max_len if dist.max_len is not None else MAX_TOKENS
    return float(min(max(dist.mean_estimate, dist.min_len, 1), hi))


BYTES_PER_REQUEST = 5_000         # simulator memory per request (benchmarks/results/simulator_cpu.md)
TOKENS_PER_S = 10 ** 7            # simulated tokens per CPU-second (the top of 10^5-10^7: a breakeven over batch
                                  # sizes 1..1024 ran 1.8e10 tokens at about 3e7 a second on this 2-core machine)
KERNEL_ELEMENTS_PER_S = 4 * 10 ** 6   # kernel acceptance probabilities per second (measured, see above)
ANNOUNCE_S = 60.0                 # work estimated longer than this is announced before it starts


def free_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def announce(text: str) -> None:
    """One `specsight: note:` line on stderr (printed whether or not stderr is a terminal)."""
    print(f"specsight: note: {text}", file=sys.stderr, flush=True)


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _refuse(field: str, value: Any, what: str, key: str, lim: int) -> SpecsightInputError:
    return SpecsightInputError(field, value, f"{what} exceeds limits.{key} = {lim:,}; raise it in the scenario "
                                             f"(limits: {{{key}: ...}}) or with --set limits.{key}=N")


def check_work_limits(sc: Any) -> None:
    """Refuse a scenario (a built simulator.scenario.scenario.Scenario) beyond its limits."""
    wl, src = sc.workload, sc.source
    n = int(wl.n_requests)
    lim = limit(src, "max_requests")
    if n > lim:
        raise _refuse("workload.num_requests", n, f"{n:,} requests (about 5 kB of memory each)", "max_requests", lim)
    trace = wl._trace or {}
    per_request = mean_tokens(wl.prompt_len, trace.get("num_prefill_tokens", np.zeros(0))[:n]) + \
        mean_tokens(wl.output_len, trace.get("num_decode_tokens", np.zeros(0))[:n])
    total = n * per_request
    lim = limit(src, "max_tokens")
    if total > lim:
        raise _refuse("workload", f"{n:,} requests x {per_request:,.0f} tokens",
                      f"{total:.3g} tokens to simulate", "max_tokens", lim)
    check_kernel_work(sc, n * mean_tokens(wl.output_len, trace.get("num_decode_tokens", np.zeros(0))[:n]))
    lim = limit(src, "max_replicas")
    if sc.hardware.replicas > lim:
        raise _refuse("hardware.replicas", sc.hardware.replicas, f"{sc.hardware.replicas:,} replicas (about 100 kB "
                      "of memory each)", "max_replicas", lim)
    slots = int(sc.hardware.replicas) * int(sc.engine.max_num_seqs)
    lim = limit(src, "max_batch_slots")
    if slots > lim:
        raise _refuse("engine.max_num_seqs", sc.engine.max_num_seqs,
                      f"hardware.replicas x max_num_seqs = {slots:,} batch slots", "max_batch_slots", lim)


def check_memory(sc: Any) -> None:
    """Refuse a run whose requests need more memory than this machine has free (checked as the run
    starts, not when the scenario loads: a scenario file means the same on every machine)."""
    n = int(sc.workload.n_requests)
    free = free_memory_bytes()
    if free is not None and n * BYTES_PER_REQUEST > free:
        raise SpecsightInputError("workload.num_requests", n, f"needs about {n * BYTES_PER_REQUEST / 1e9:.3g} GB "
                                  f"(5 kB a request); this machine has {free / 1e9:.3g} GB free: lower num_requests")


def check_kernel_setup(acceptance: Any, source: Any) -> None:
    """Kernel acceptance's set-up draws (KernelAcceptance.setup_elements) against
    limits.max_kernel_elements, before they are drawn; announced past about a minute."""
    acc = getattr(acceptance, "base", acceptance)
    if getattr(acc, "name", None) != "kernel":
        return
    elements = acc.setup_elements()
    what = f"the set-up's Monte Carlo draws of vocab_size {acc.vocab_size:,}: {elements:.3g} probabilities"
    lim = limit(source, "max_kernel_elements")
    if elements > lim:
        raise _refuse("acceptance.vocab_size", acc.vocab_size, what, "max_kernel_elements", lim)
    if elements / KERNEL_ELEMENTS_PER_S > ANNOUNCE_S:
        announce(f"kernel acceptance: {what}; about {minutes(elements / KERNEL_ELEMENTS_PER_S)} at "
                 f"{KERNEL_ELEMENTS_PER_S:.0e} a second")


def check_kernel_work(sc: Any, output_tokens: float) -> None:
    """Kernel acceptance draws (K + 1) x vocab_size probabilities per sequence-round: refuse past
    limits.max_kernel_elements, announce past about a minute."""
    acc = getattr(sc, "acceptance", None)
    acc = getattr(acc, "base", acc)               # a tree drafter's per-token model
    if getattr(acc, "name", None) != "kernel":
        return
    elements = output_tokens * (acc.k_max + 1) * acc.vocab_size
    lim = limit(sc.source, "max_kernel_elements")
    what = (f"{output_tokens:.3g} output tokens x (K + 1 = {acc.k_max + 1}) x vocab_size {acc.vocab_size:,} = "
            f"{elements:.3g} probabilities to draw")
    if elements > lim:
        raise _refuse("acceptance.vocab_size", acc.vocab_size, what, "max_kernel_elements", lim)
    if elements / KERNEL_ELEMENTS_PER_S > ANNOUNCE_S:
        announce(f"kernel acceptance: {what}; about {minutes(elements / KERNEL_ELEMENTS_PER_S)} at "
                 f"{KERNEL_ELEMENTS_PER_S:.0e} a second")


def check_study_work(source: Any, point_tokens: list[float], slots: int) -> float:
    """A study's points: refuse past limits.max_study_tokens (their tokens summed); announce the
    estimate past about a minute; return the estimated seconds."""
    total = float(sum(point_tokens))
    lim = limit(source, "max_study_tokens")
    if total > lim:
        raise _refuse("points", f"{len(point_tokens):,} points", f"{total:.3g} tokens to simulate in all",
                      "max_study_tokens", lim)
    seconds = total / TOKENS_PER_S / max(1, slots)
    if seconds > ANNOUNCE_S:
        announce(f"{len(point_tokens):,} points, {total:.3g} tokens to simulate: about {minutes(seconds)} on "
                 f"{slots} process{'es' if slots > 1 else ''} (at {TOKENS_PER_S:.0e} tokens per CPU-second; "
                 "10x either way by scenario); progress below, every 30 s")
    return seconds

# ---- the scenario's `limits:` block (composed into the scenario schema)
LIMITS = Section(doc="work limits checked before a run (simulator/scenario/work_limits.py)", nullable=True, keys={
    "max_requests": Int(doc="requests per run (memory: about 5 kB each)", lo=1, hi=MAX_REQUESTS,
                        default=2_000_000),
    "max_tokens": Int(doc="num_requests x (mean prompt_len + mean output_len)", unit="tokens", lo=1,
                      hi=10 ** 15, default=2 * 10 ** 9),
    "max_batch_slots": Int(doc="replicas x max_num_seqs (per-slot arrays)", lo=1, hi=MAX_SEQS * MAX_REPLICAS,
                           default=10 ** 7),
    "max_replicas": Int(doc="hardware.replicas (memory: about 100 kB each)", lo=1, hi=MAX_REPLICAS, default=10_000),
    "max_kernel_elements": Int(doc="kernel acceptance: output tokens x (K + 1) x vocab_size probabilities drawn",
                               lo=1, hi=10 ** 18, default=10 ** 10),
    "max_study_tokens": Int(doc="a study (breakeven, plan, sweep): the points' max_tokens work summed", unit="tokens",
                            lo=1, hi=10 ** 18, default=10 ** 11),
})
