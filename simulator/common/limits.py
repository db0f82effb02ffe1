"""The schema's limits: each integer and number of a scenario has a maximum a real deployment would
not exceed, high enough for a fleet study (10^9 requests, 10^9 users). Every concept's schema section
(beside its dataclass: drafters.py, workload.py, ...) bounds its keys with these, and docs/schema.md
lists them with the comment on each line (simulator/scenario/schema_table.py renders it).

Also the field shapes the sections share: a rate in [0, 1], a token length, a path or name.
"""
from __future__ import annotations

from typing import Any

from .schema import Float, Int, Str

MAX_REQUESTS = 10 ** 9  # requests in one scenario (a fleet-day); work limits: simulator/scenario/work_limits.py
MAX_USERS = 10 ** 9               # closed-loop concurrency (users are created lazily)
MAX_TOKENS = 10 ** 7              # one request's prompt or output length (the longest context windows)
MAX_K = 64                        # drafts per round
MAX_SEQS = 65_536                 # engine.max_num_seqs (each replica holds arrays of this size)
MAX_BATCHED_TOKENS = 10 ** 8      # tokens per iteration
MAX_BLOCK_SIZE = 65_536           # tokens per KV block
MAX_BLOCKS = 10 ** 10             # KV blocks per replica
MAX_TP = 1024                     # GPUs per replica
MAX_LAYERS = 1024                 # layers of a model (the deepest real ones have about 130)
MAX_REPLICAS = 100_000           # replicas behind one router
MAX_QPS = 10 ** 9                 # requests per second
MIN_QPS = 1e-6                    # one request in 11.6 days: arrival times stay far from float64's limits
MAX_SECONDS = 10 ** 7             # think time, step time (115 days)
MAX_MS = 10 ** 9                  # SLO thresholds
MAX_SEED = 2 ** 63 - 1            # the seed (numpy takes any size; int64 keeps it portable)
MAX_NAME = 200                    # characters of a name (scenario, column)
MAX_PATH = 1024                   # characters of a catalog name or a file path
MAX_TEXT = 10_000                 # characters of a description
MAX_LIST = 1024                   # per-position rates, schedule rows
MAX_VOCAB = 2 ** 18               # kernel acceptance vocabulary (its work grows with it: the largest real ones)
MAX_GB = 10 ** 5                  # memory figures (GB per GPU)
MAX_PRICE = 10 ** 6               # USD per GPU-hour (no GPU rents for more)

POS = dict(lo=0.0, lo_open=True)   # a Float's keywords for a strictly positive number


def rate_field(doc: str, **kw: Any) -> Float:
    """A rate or probability in [0, 1]."""
    return Float(doc=doc, lo=0.0, hi=1.0, **kw)


def tokens_field(doc: str, lo: int = 1, **kw: Any) -> Int:
    """A token count up to one request's longest length."""
    return Int(doc=doc, unit="tokens", lo=lo, hi=MAX_TOKENS, **kw)


def path_field(doc: str, **kw: Any) -> Str:
    """A catalog name or a file path."""
    return Str(doc=doc, max_len=MAX_PATH, **kw)
