# One thread, weights evicted (300 MiB read) before each timed x @ W: MKL time by rows M (fastest of 7).
# Usage: taskset -c 1 .venv/bin/python benchmarks/bench_gemm_small_m.py
import torch, time, statistics
torch.set_num_threads(1)
buf = torch.ones(300 * 2**20 // 4)
def evict(): float(buf.sum())
for (K, N) in [(512, 3584), (256, 16032), (1792, 512)]:
    W = torch.randn(K, N)
    row = []
    for M in [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 24, 32, 48, 64, 96, 128, 160]:
        x = torch.randn(M, K)
        ts = []
        for r in range(7):
            evict(); t0 = time.perf_counter(); y = x @ W; ts.append(time.perf_counter() - t0)
        t = min(ts)
        row.append((M, t))
    base = 4 * K * N
    print(f"W {K}x{N} ({base/1e6:.1f} MB):", " ".join(f"{M}:{1e3*t:.2f}" for M, t in row))
    print("   GB/s at M:", " ".join(f"{M}:{base/t/1e9:.1f}" for M, t in row[:8]), " GFLOP/s:", " ".join(f"{M}:{2*M*K*N/t/1e9:.0f}" for M, t in row[8:]))
