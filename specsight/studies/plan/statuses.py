"""How the plans describe their rows: why a capacity search found no rate (study.py), and the
status words of a configuration in the search (search.py), its tables and its plot."""
from __future__ import annotations

MIN_QPS = 1e-3               # below this a configuration is declared unable to meet the SLO


def no_rate_meets(who: str, limited_by: str) -> str:
    """Why a search found no capacity: no probed rate down to MIN_QPS meets the SLO."""
    return f"{who}: no rate >= {MIN_QPS} requests/s meets the SLO ({limited_by})"


# The simulator's words when memory is what refuses a configuration: simulator/costs/kv_cache.py kv_budget
# (weights and activation reserve leave no KV blocks) and simulator/run/mixed.py (the KV cache cannot hold
# the longest request). tests/test_plan_search.py checks both still read so.
NO_FIT = ("no room for a KV cache", "cannot hold the longest request")
MEETS, AT_LOAD, NO_RATE = "meets SLO", "misses SLO at load", "no rate meets SLO"
NO_FIT_STATUS, CANNOT_RUN = "does not fit", "cannot run"
STATUS_ORDER = (MEETS, AT_LOAD, NO_RATE, NO_FIT_STATUS, CANNOT_RUN)
ERROR_PREFIX = "SpecsightInputError: "          # how points.py writes an input error (dropped in the tables)
