"""Timing primitives of the calibration: a timed call between device syncs, the cache evictor,
and the progress bar.

Timing (STYLE.md, calibration): warm-up calls first, the device synchronised around
time.perf_counter for every repeat; the caller keeps a statistic of the repeats.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

import torch

from .layers import synchronize


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

    Why the CPU calibration evicts before every timed repeat: in a speculative round neither
    model's weights are cached when its pass starts. The draft's first step runs after the
    target's verify pass, which streams the target's weights (142 MB at 8 layers, dims / 8), and
    the verify pass after the draft's steps and sampling; timed back to back, a pass finds its own
    weights still cached from the previous repeat. benchmarks/bench_cold_cache.py measures the
    difference: a 1-layer draft step takes 13-33 % longer (median) after a target pass or a 144 MB
    read than after itself (its figures are in docs/calibration.md)."""

    def __init__(self, nbytes: int, device: str = "cpu"):
        self.buf = torch.ones(max(1, int(nbytes) // 4), dtype=torch.float32, device=device)

    def __call__(self) -> float:
        return float(self.buf.sum())


class ProgressBar(Protocol):
    """What the calibration asks of a progress bar (tqdm's, or one that shows nothing)."""

    def update(self, n: int = 1) -> object: ...

    def close(self) -> None: ...


class _NoBar:
    """A progress bar that shows nothing."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


class LineProgress:
    """Progress as lines on a stream that is not a terminal (a log, a pipe, CI): `desc: done/total
    points (P %)` at each tenth of the work and at the end, so a long run is never silent."""

    def __init__(self, total: int, initial: int, desc: str, stream: TextIO):
        self.total, self.done, self.desc, self.stream = max(1, total), initial, desc, stream
        self.shown = self._tenth()

    def _tenth(self) -> int:
        return 10 * self.done // self.total

    def update(self, n: int = 1) -> None:
        self.done += n
        if self._tenth() > self.shown or self.done >= self.total:
            self.shown = self._tenth()
            print(f"{self.desc}: {self.done}/{self.total} points ({100 * self.done // self.total} %)",
                  file=self.stream, flush=True)

    def close(self) -> None:
        pass


def progress_bar(total: int, initial: int, enabled: bool, desc: str = "calibrate",
                 stream: TextIO | None = None) -> ProgressBar:
    """A progress bar on stderr (`stream`) when it is a terminal, progress lines when it is not
    (LineProgress), nothing when not `enabled`."""
    if not enabled:
        return _NoBar()
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        return LineProgress(total, initial, desc, stream)
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, initial=initial, desc=desc, unit="pt", dynamic_ncols=True, file=stream)

