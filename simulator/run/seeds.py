"""Random streams of a run (common random numbers): the scenario seed spawns independent child
seeds for the workload, acceptance, n-gram matching and per-request acceptance binding, so a run
and its K = 0 baseline see identical arrivals and lengths."""
from __future__ import annotations

# child seeds of the scenario seed, by role (order is part of the reproducibility contract)
SEED_WORKLOAD, SEED_ACCEPTANCE, SEED_MATCH, SEED_BIND = range(4)
