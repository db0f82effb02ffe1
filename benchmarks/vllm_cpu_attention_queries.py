"""vLLM's CPU attention with 1, 2, 3 and 5 queries a sequence (a decode, and verifies of K = 1, 2, 4):
how much a verify's extra queries cost in its one cpu_attention_with_kv_cache call (docs/engines.md,
"The CPU profile"). One layer of tiny-m's shape (16 heads of 64, bf16), one thread, the cache evicted
before each call, 20 timed calls after 3 untimed; prints the median and the least time and the least
time over one query's.

    PYTHONPATH=. .venv/bin/python benchmarks/vllm_cpu_attention_queries.py [--engine-venv .venv-vllm]
"""
import argparse
import math
import statistics
import time

import torch

from calibrate.vllm_attention import PagedKVCache, attend, load_kernels, step_metadata

HEADS, KV_HEADS, HEAD_DIM = 16, 16, 64          # models/groundtruth/tiny-m/config.json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine-venv", default=".venv-vllm")
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(load_kernels(args.engine_venv))
    dt = torch.bfloat16
    evict = torch.empty(32 << 20, dtype=torch.uint8)
    for B in (1, 4, 16):
        for ctx in (128, 512):
            base = None
            for n in (1, 2, 3, 5):
                cache = PagedKVCache.new(B, ctx + 8, 1, KV_HEADS, HEAD_DIM, dt)
                cache.lengths[:] = ctx
                meta = step_metadata(cache, n, HEADS, KV_HEADS, HEAD_DIM, dt)
                q = torch.randn(B * n, HEADS, HEAD_DIM, dtype=dt)
                k = torch.randn(B * n, KV_HEADS, HEAD_DIM, dtype=dt)
                v = torch.randn_like(k)
                ts = []
                for i in range(23):
                    evict.add_(1)
                    a = time.perf_counter()
                    attend(q, k, v, cache.kv[0], meta, 1 / math.sqrt(HEAD_DIM))
                    if i >= 3:
                        ts.append(time.perf_counter() - a)
                med, least = statistics.median(ts), min(ts)
                base = base or least
                print(f"B={B:2d} ctx={ctx} queries={n}: median {med * 1e6:7.1f} us, least {least * 1e6:7.1f} us, "
                      f"least / least at 1 query {least / base:5.2f}", flush=True)


if __name__ == "__main__":
    main()
