"""Reduce Vidur's legacy A100 attention table to the columns specsight reads.

    python scripts/reduce_vidur_attention.py [SRC] [DST]

SRC: Vidur's data/profiling/a100/attention.csv as of microsoft/vidur commit acb95f6 (2024-05, the
layout before the per-model folders; MIT licence), by default ../shared/data/vidur-profiling/
compute/a100/attention-legacy/attention.csv beside the checkout (or beside its parent folder).
DST: by default the repository's data/vidur-profiling/compute/a100/attention-legacy/attention.csv.

Every row is kept, in order; the columns kept are the model shape, the batch shape and the median
decode and prefill times (milliseconds per layer), each value copied as text, unchanged. The
dropped columns are min/max/mean/std of each timer, the reshape timers, and constants of this
profile (block_size 16, max_model_len 4096, the FlashAttention backend, Kineto timing).
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RELATIVE = Path("compute") / "a100" / "attention-legacy" / "attention.csv"
# ../shared beside the checkout (a git worktree sits one level deeper)
SOURCES = tuple(root / "shared" / "data" / "vidur-profiling" / RELATIVE for root in (REPO.parent, REPO.parent.parent))
DEFAULT_DST = REPO / "data" / "vidur-profiling" / RELATIVE
COLUMNS = ("n_embd", "n_q_head", "n_kv_head", "num_tensor_parallel_workers", "batch_size", "kv_cache_size",
           "prefill_chunk_size", "time_stats.attn_decode.median", "time_stats.attn_prefill.median")


def reduce_csv(src: Path, dst: Path) -> int:
    """Write the COLUMNS of src to dst; returns the number of data rows."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with src.open(newline="") as fin, dst.open("w", newline="") as fout:
        rows = csv.reader(fin)
        head = next(rows)
        missing = [c for c in COLUMNS if c not in head]
        if missing:
            raise SystemExit(f"{src}: no column(s) {', '.join(missing)}")
        idx = [head.index(c) for c in COLUMNS]
        out = csv.writer(fout, lineterminator="\n")
        out.writerow(COLUMNS)
        for row in rows:
            out.writerow([row[i] for i in idx])
            n += 1
    return n


def default_source() -> Path:
    """The first of SOURCES that exists (the first, to name in an error, if none does)."""
    return next((s for s in SOURCES if s.is_file()), SOURCES[0])


def main(argv: list[str]) -> None:
    src = Path(argv[0]) if argv else default_source()
    dst = Path(argv[1]) if len(argv) > 1 else DEFAULT_DST
    print(f"{reduce_csv(src, dst)} rows -> {dst}")


if __name__ == "__main__":
    main(sys.argv[1:])
