"""A time-varying request rate: a piecewise-constant or piecewise-linear rate over a period that
repeats (a day), and its non-homogeneous Poisson arrivals.

A scenario gives it as the `schedule` arrival process:

    workload:
      arrival:
        process: schedule
        rates: [[0, 20.0], [3600, 18.5], ...]   # rows [start_s, qps], start_s from 0, increasing
        shape: step                  # step: qps holds until the next row; linear: straight lines between rows
        period_s: 86400              # the schedule repeats after this (linear: the last row runs back to the first)
        time_compression: 60         # the clock runs this many times faster: times divide by it, rates do not
        rate_scale: 1.0              # multiply every rate
      num_requests: null             # null: round(expected requests in one period); an int: the first N arrivals

With lambda(t) the rate (requests/s) and Lambda(t) = integral_0^t lambda its integral (expected
requests by t), the arrivals are exact, by inversion of the time-rescaling theorem (Brown et al.
2002, "The time-rescaling theorem and its application to neural spike train data analysis", Neural
Computation 14(2), section 2): if E_1 < E_2 < ... are a unit-rate Poisson process (cumulative sums
of Exp(1) gaps), t_k = Lambda^{-1}(E_k) are a Poisson process of rate lambda(t). Lambda is piecewise
linear (step) or piecewise quadratic (linear), so Lambda^{-1} is closed-form per piece: no thinning,
no rejected draws, one exponential per request. Unlike the homogeneous processes, the first arrival
is not moved to t = 0 (the rate there may be small).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..common.errors import SpecsightInputError

SHAPES = ("step", "linear")
DEFAULT_PERIOD_S = 86400.0             # one day
SCHEDULE_OPTIONS = ("shape", "period_s", "time_compression", "rate_scale")   # from_rows' keyword arguments


@dataclass(frozen=True)
class RateSchedule:
    """lambda(t) over one period on the simulated clock: rows (start_s, qps), already compressed and scaled."""
    start_s: tuple[float, ...]         # [P] piece starts, s; start_s[0] = 0, strictly increasing, < period_s
    qps: tuple[float, ...]             # [P] requests/s at each start (>= 0, at least one > 0)
    shape: str = "step"                # step | linear
    period_s: float = DEFAULT_PERIOD_S # s; the schedule repeats after it

    def __post_init__(self) -> None:
        w = "workload.arrival"
        if self.shape not in SHAPES:
            raise SpecsightInputError(f"{w}.shape", self.shape, "one of " + ", ".join(SHAPES))
        if len(self.start_s) == 0 or len(self.start_s) != len(self.qps):
            raise SpecsightInputError(f"{w}.rates", list(zip(self.start_s, self.qps)),
                                      "at least one row [start_s, qps]")
        if not math.isfinite(self.period_s) or self.period_s <= 0:
            raise SpecsightInputError(f"{w}.period_s", self.period_s, "a number of seconds > 0")
        if self.start_s[0] != 0:
            raise SpecsightInputError(f"{w}.rates[0][0]", self.start_s[0], "0: the first row starts the period")
        for i in range(1, len(self.start_s)):
            if not self.start_s[i] > self.start_s[i - 1]:
                raise SpecsightInputError(f"{w}.rates[{i}][0]", self.start_s[i],
                                          f"start times strictly increasing: > {self.start_s[i - 1]:g}")
        if not self.start_s[-1] < self.period_s:
            raise SpecsightInputError(f"{w}.period_s", self.period_s,
                                      f"> the last row's start ({self.start_s[-1]:g} s after compression)")
        for i, q in enumerate(self.qps):
            if not (math.isfinite(q) and q >= 0):
                raise SpecsightInputError(f"{w}.rates[{i}][1]", q, "a rate >= 0 requests/s")
        if not max(self.qps) > 0:
            raise SpecsightInputError(f"{w}.rates", [list(r) for r in zip(self.start_s, self.qps)],
                                      "at least one rate > 0 (no request would ever arrive)")

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[float]], shape: str = "step", period_s: float = DEFAULT_PERIOD_S,
                  time_compression: float = 1.0, rate_scale: float = 1.0) -> RateSchedule:
        """From a scenario's rows [start_s, qps] on the real clock: times / time_compression, rates x rate_scale."""
        w = "workload.arrival"
        for name, v in (("time_compression", time_compression), ("rate_scale", rate_scale)):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise SpecsightInputError(f"{w}.{name}", v, "a number > 0")
        for i, r in enumerate(rows):
            if len(r) != 2:
                raise SpecsightInputError(f"{w}.rates[{i}]", r, "a row [start_s, qps]")
        return cls(tuple(float(r[0]) / time_compression for r in rows),
                   tuple(float(r[1]) * rate_scale for r in rows), shape, float(period_s) / time_compression)

    # ---- the rate and its integral over one period ----------------------------------------------
    @property
    def _knots(self) -> tuple[np.ndarray, np.ndarray]:
        """[P+1] piece boundaries (s) and the rate at each piece's start and end ([P] each, as a pair)."""
        t = np.append(np.asarray(self.start_s, dtype=np.float64), self.period_s)
        q = np.asarray(self.qps, dtype=np.float64)
        q_end = q if self.shape == "step" else np.append(q[1:], q[0])    # linear: back to the first row's rate
        return t, np.stack([q, q_end])

    def piece_integrals(self) -> np.ndarray:
        """[P] expected requests in each piece of one period (trapezoids; step: rectangles)."""
        t, (q0, q1) = self._knots
        return 0.5 * (q0 + q1) * np.diff(t)

    @property
    def requests_per_period(self) -> float:
        """Lambda(period_s): expected requests in one period."""
        return float(self.piece_integrals().sum())

    def rate(self, t_s: np.ndarray) -> np.ndarray:
        """lambda(t), requests/s, at times t_s >= 0 (the period repeats)."""
        t, (q0, q1) = self._knots
        x = np.mod(np.asarray(t_s, dtype=np.float64), self.period_s)
        i = np.searchsorted(t, x, side="right") - 1
        return q0[i] + (q1[i] - q0[i]) * (x - t[i]) / (t[i + 1] - t[i])

    def cumulative(self, t_s: np.ndarray) -> np.ndarray:
        """Lambda(t): expected requests in [0, t) for t >= 0."""
        t, (q0, q1) = self._knots
        per = self.piece_integrals()
        cum = np.concatenate(([0.0], np.cumsum(per)))
        x = np.asarray(t_s, dtype=np.float64)
        cycles = np.floor(x / self.period_s)
        r = x - cycles * self.period_s
        i = np.clip(np.searchsorted(t, r, side="right") - 1, 0, len(per) - 1)
        s = np.maximum(r - t[i], 0.0)
        slope = (q1[i] - q0[i]) / (t[i + 1] - t[i])
        return cycles * cum[-1] + cum[i] + q0[i] * s + 0.5 * slope * s * s

    def inverse(self, u: np.ndarray) -> np.ndarray:
        """Lambda^{-1}(u): the time by which u requests are expected (u >= 0), closed form per piece."""
        t, (q0, q1) = self._knots
        per = self.piece_integrals()
        cum = np.concatenate(([0.0], np.cumsum(per)))
        total = cum[-1]
        u = np.asarray(u, dtype=np.float64)
        cycles = np.floor(u / total)
        r = u - cycles * total
        # a piece of zero integral is never chosen: r in [cum[i], cum[i+1]) needs cum[i+1] > cum[i]
        i = np.clip(np.searchsorted(cum, r, side="right") - 1, 0, len(per) - 1)
        d = np.maximum(r - cum[i], 0.0)                    # requests past the piece's start
        a = q0[i]
        b = (q1[i] - q0[i]) / (t[i + 1] - t[i])            # slope, requests/s^2
        # solve a s + b s^2 / 2 = d for s >= 0: s = 2 d / (a + sqrt(a^2 + 2 b d)), stable for b = 0 and a = 0
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.where(d > 0, 2.0 * d / (a + np.sqrt(np.maximum(a * a + 2.0 * b * d, 0.0))), 0.0)
        s = np.minimum(s, t[i + 1] - t[i])                 # rounding at a piece's end
        return cycles * self.period_s + t[i] + s

    def arrivals(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """[n] float64 arrival times, s: the first n points of the Poisson process of rate lambda(t)."""
        unit = np.cumsum(rng.exponential(1.0, n))          # a unit-rate Poisson process
        return self.inverse(unit)
