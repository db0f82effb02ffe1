"""MKL's x @ W time by rows M on one thread, the weight evicted (300 MiB read) before each timed
product, fastest of 7: the weight-streaming rate of small matrix-matrix products on a CPU.

    (date -u +%FT%TZ; taskset -c 1 .venv/bin/python benchmarks/bench_gemm_small_m.py) \
        > benchmarks/results/calibration_cpu/gemm_small_m.txt
"""
import time

import torch

ROWS = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128, 160]
SHAPES = [(512, 3584), (256, 16032), (1792, 512)]       # (in, out) of the dims / 8 Llama-3.1-8B layers


def main() -> None:
    torch.set_num_threads(1)
    buf = torch.ones(300 * 2**20 // 4)
    for k, n in SHAPES:
        w = torch.randn(k, n)
        row = []
        for m in ROWS:
            x = torch.randn(m, k)
            times = []
            for _ in range(7):
                float(buf.sum())                         # evict the last-level cache
                t0 = time.perf_counter()
                x @ w
                times.append(time.perf_counter() - t0)
            row.append((m, min(times)))
        weight_bytes = 4 * k * n
        print(f"W {k}x{n} ({weight_bytes / 1e6:.1f} MB):", " ".join(f"{m}:{1e3 * t:.2f}" for m, t in row))
        print("   GB/s at M:", " ".join(f"{m}:{weight_bytes / t / 1e9:.1f}" for m, t in row[:8]),
              " GFLOP/s:", " ".join(f"{m}:{2 * m * k * n / t / 1e9:.0f}" for m, t in row[8:]))


if __name__ == "__main__":
    main()
