"""The pass grids a calibration times: batch sizes, tokens per pass and contexts, by name.

`specsight calibrate --passes NAME` picks one (default: the device's, or its quick one). A grid
point is one forward pass shape (calibrate.microbench.grid_points): the target at every
(batch, new tokens, context) and both layer counts, the draft at its step widths, and the
round's host work at every (batch, K of sampling_ks).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Grid:
    """The shapes timed: every batch x context, each with every width that fits the caps."""
    batches: tuple[int, ...]
    new_tokens: tuple[int, ...]          # verify widths K + 1
    contexts: tuple[int, ...]
    draft_new_tokens: tuple[int, ...] = (1, 2)
    sampling_ks: tuple[int, ...] = (0, 2, 4)
    max_tokens: int = 1 << 30            # skip passes with more than this many tokens B * n
    max_kv_tokens: int = 1 << 40         # skip shapes with more than this many cached tokens B * c


GRIDS = {
    # name: grid. GPU grids span decode to the knee; the CPU ones stay within seconds per point.
    "cuda": Grid(batches=(1, 2, 4, 8, 16, 32, 64, 128, 256), new_tokens=(1, 2, 3, 5, 8),
                 contexts=(128, 512, 2048, 8192, 32768), max_tokens=2048, max_kv_tokens=1 << 21),
    "cuda-quick": Grid(batches=(1, 4, 16, 64, 256), new_tokens=(1, 3, 5), contexts=(128, 1024, 8192, 32768),
                       max_tokens=1280, max_kv_tokens=1 << 20),
    "cpu": Grid(batches=(1, 2, 4, 8, 16, 32), new_tokens=(1, 2, 3, 5, 8), contexts=(128, 512, 2048),
                max_tokens=128, max_kv_tokens=1 << 15),
    # cpu-quick covers the CPU ground truth's shapes (batch 1..32, verify widths 1..5, context ~300):
    # 80 passes, about 20 s on one thread at dims / 8, layers 2 and 4.
    "cpu-quick": Grid(batches=(1, 4, 8, 16, 32), new_tokens=(1, 3, 5), contexts=(128, 512), max_tokens=160,
                      max_kv_tokens=1 << 14, sampling_ks=(0, 2, 4)),
    "cpu-tiny": Grid(batches=(1, 4, 8), new_tokens=(1, 3), contexts=(64, 256), max_tokens=32,
                     max_kv_tokens=1 << 12, draft_new_tokens=(1,), sampling_ks=(0, 2)),
}
