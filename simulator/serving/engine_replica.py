"""The replica under a real engine: the same loop (simulator/serving/replica.py), with the engine's host
time added to each iteration (EngineStepCost.host_s), which depends on the iteration's batch and
GPU time and so cannot be one constant. The iteration log's overhead column carries it. The
compiled decode rounds do not apply (they take the roofline or fixed step costs only), so every
iteration runs in Python, with the same semantics.
"""
from __future__ import annotations

from .replica import Replica

OVERHEAD_COLUMN = 12      # the iteration row's host-overhead slot (Replica._schedule, ITER_COLUMNS order)
PREFILL_TOKENS_COLUMN = 5


class EngineReplica(Replica):
    """A Replica whose iterations pay the engine's host model."""

    def _schedule(self) -> float | None:
        dt = Replica._schedule(self)
        if dt is None:
            return None
        row = self._row
        host = self.cost.host_s(self._nd, self._k, row[PREFILL_TOKENS_COLUMN], dt)
        row[OVERHEAD_COLUMN] += host
        return dt + host
