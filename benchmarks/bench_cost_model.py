"""Benchmark: cost-model evaluations per second (not a test).

Prints the scalar fast path (what the simulator calls once per iteration), the explained path
(`breakdown`, the baseline in this same process) and the vectorised path (numpy arrays, what
analytic sweeps use), with medians over repeats and the ratios between them.

    python benchmarks/bench_cost_model.py [--model llama-3.1-70b --gpu h100-sxm --tp 4]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from simulator.costs.cost_model import CostModel, PassShape
from simulator.hardware.hardware import load_profile
from simulator.models.catalog import load_model


def median_rate(fn, n: int, repeats: int = 5) -> float:
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        rates.append(n / (time.perf_counter() - t0))
    return statistics.median(rates)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="llama-3.1-8b")
    ap.add_argument("--gpu", default="h100-sxm")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args()
    cm = CostModel(load_model(args.model), load_profile(args.gpu), tp=args.tp)
    rng = np.random.default_rng(0)
    b = rng.integers(1, 256, 1024).astype(float)
    c = rng.integers(100, 8000, 1024).astype(float)
    T, C, P, L = b * 4, b * c, b * (4 * c + 10), b * 4

    # Python floats, as the simulator passes
    Tl, Cl, Pl, Ll, Bl = T.tolist(), C.tolist(), P.tolist(), L.tolist(), b.tolist()

    def scalar(n):
        f = cm.time_s
        for i in range(n):
            j = i & 1023
            f(Tl[j], Cl[j], Pl[j], Ll[j], Bl[j])

    shapes = [PassShape(float(b[j]), Tl[j], Cl[j], Pl[j], Ll[j]) for j in range(1024)]

    def explained(n):
        for i in range(n):
            cm.breakdown(shapes[i & 1023])

    def vectorised(n):
        reps = n // 1024
        for _ in range(reps):
            cm.time_s(T, C, P, L, b)

    Tv, Cv, Pv, Lv, Bv = (np.resize(x, 10_000) for x in (T, C, P, L, b))
    t0 = time.perf_counter()
    for _ in range(20):
        cm.time_s(Tv, Cv, Pv, Lv, Bv)
    sweep_s = (time.perf_counter() - t0) / 20

    r_scalar = median_rate(scalar, args.n // 4)
    r_explained = median_rate(explained, args.n // 20)
    r_vec = median_rate(vectorised, args.n * 10)
    print(f"{args.model} on {args.gpu} x{args.tp}")
    print(f"scalar fast path  : {r_scalar:12,.0f} evaluations/s  ({1e6 / r_scalar:.2f} us each)")
    print(f"breakdown (base)  : {r_explained:12,.0f} evaluations/s  -> fast path is {r_scalar / r_explained:.1f}x")
    print(f"numpy vectorised  : {r_vec:12,.0f} points/s        -> {r_vec / r_scalar:.1f}x the scalar path")
    print(f"one 10^4-point array evaluation: {sweep_s * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
