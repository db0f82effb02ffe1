"""A scenario's `slo:` block: the per-request latency targets goodput counts against
(metrics.py); the dataclass and its schema section."""
from __future__ import annotations

from dataclasses import dataclass

from ..common.errors import require_range
from ..common.limits import MAX_MS, POS
from ..common.schema import Float, Section


@dataclass(frozen=True)
class SLOSpec:
    """Per-request latency targets for goodput: a request meets the SLO when its TPOT and its TTFT
    are both at or under these thresholds (ms). None: no target on that metric."""
    tpot_ms_p99: float | None = None
    ttft_ms_p99: float | None = None

    def __post_init__(self) -> None:
        for key in ("tpot_ms_p99", "ttft_ms_p99"):
            v = getattr(self, key)
            if v is not None:
                require_range(f"slo.{key}", v, 0.0, lo_open=True)


SLO = Section(doc="per-request latency targets", nullable=True, keys={
    "tpot_ms_p99": Float(doc="a request meets the SLO only if its TPOT <= this", unit="ms", hi=MAX_MS, **POS,
                         nullable=True),
    "ttft_ms_p99": Float(doc="... and its TTFT <= this", unit="ms", hi=MAX_MS, **POS, nullable=True),
})
