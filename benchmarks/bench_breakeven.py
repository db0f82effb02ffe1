"""Break-even sweep speed (not a test; issue 6, item 5). Prints wall times and rates, asserts nothing.

    (a) analytic: the batch-aware analytic speedup (simulator/speculation/analytic.py) of Llama-3.1-8B with a
        Llama-3.2-1B draft (K = 3, alpha 0.75) on one H100 over a 100 x 100 grid of batch
        (1..1024, geometric) x context (128..131072 tokens, geometric) = 10^4 points, evaluated
        as numpy arrays, then the break-even batch of each context by interpolating where the
        speedup crosses 1. Goal: under 1 s.
    (b) simulated: `specsight breakeven`'s machinery (studies.breakeven.breakeven) on
        scenarios/llama70b-tp4-h100-chat-eagle3.yaml along the qps axis, 20 rates (1..40
        requests/s, geometric) x 2,000 requests each, static K = 3; every rate is simulated with
        speculation and with it off (the shared baseline), so 40 simulations, on a local
        process pool. Goal: a few minutes on 2 cores.

Run:
    .venv/bin/python benchmarks/bench_breakeven.py                 # both, 2 workers
    .venv/bin/python benchmarks/bench_breakeven.py --only analytic
    .venv/bin/python benchmarks/bench_breakeven.py --workers 1 --requests 500
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

ANALYTIC_SIDE = 100                       # grid side: 100 x 100 = 10^4 points
SIM_POINTS = 20                           # qps values
SIM_REQUESTS = 2000                       # requests per simulation
SIM_SCENARIO = REPO / "scenarios" / "llama70b-tp4-h100-chat-eagle3.yaml"


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def bench_analytic(repeats: int = 5) -> None:
    import numpy as np

    from simulator.costs.cost_model import CostModel
    from simulator.hardware.hardware import load_profile
    from simulator.models.catalog import load_model
    from simulator.speculation.analytic import breakeven_batch, speedup
    from simulator.speculation.drafters import Drafter, DrafterSpec

    t0 = time.perf_counter()
    target = load_model("llama-3.1-8b")
    cm = CostModel(target, load_profile("h100-sxm"))
    drafter = Drafter(DrafterSpec("draft_model", 3, model="llama-3.2-1b"), target, cm)
    setup_s = time.perf_counter() - t0
    batch = np.geomspace(1, 1024, ANALYTIC_SIDE)              # [100]
    context = np.geomspace(128, 131072, ANALYTIC_SIDE)        # [100]
    B, C = np.meshgrid(batch, context)                        # [100 contexts, 100 batches]
    times, solve_times = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        speedup(cm, drafter, B, C, 3, 0.75)                   # [100 contexts, 100 batches]
        t1 = time.perf_counter()
        # the break-even batch of each context, as `specsight breakeven --analytic` solves it
        be = np.array([breakeven_batch(cm, drafter, float(c), 3, 0.75, max_batch=1024.0).breakeven_batch or np.nan
                       for c in context])                     # [100]
        times.append(t1 - t0)
        solve_times.append(time.perf_counter() - t1)
    n = B.size
    best, best_solve = min(times), min(solve_times)
    print(f"(a) analytic break-even sweep: {n} points (batch x context), K=3, alpha 0.75, "
          "llama-3.1-8b + llama-3.2-1b on h100-sxm")
    print(f"    setup (load model, profile, cost model): {setup_s * 1e3:.1f} ms")
    print(f"    speedup surface: best {best * 1e3:.2f} ms, median {sorted(times)[len(times) // 2] * 1e3:.2f} ms "
          f"of {repeats}; {n / best:,.0f} points/s")
    print(f"    break-even batch of each of the {len(context)} contexts (analytic.breakeven_batch): best "
          f"{best_solve * 1e3:.1f} ms; surface + solve {(best + best_solve) * 1e3:.1f} ms, goal 1 s -> "
          f"{1.0 / (best + best_solve):,.0f}x under it")
    finite = be[np.isfinite(be)]
    print(f"    contexts with a break-even batch in 1..1024: {finite.size} of {len(context)}"
          + (f" (from {finite.min():.0f} to {finite.max():.0f} sequences)" if finite.size else ""))


def bench_simulated(workers: int, requests: int, points: int) -> None:
    import numpy as np

    from specsight.studies.breakeven.study import breakeven

    values = [float(f"{q:.4g}") for q in np.geomspace(1.0, 40.0, points)]
    t0 = time.perf_counter()
    # capacity=False: the wall time covers the 2 x `points` simulations it reports, not the capacity
    # search a qps study with an SLO adds (its probes are not among points_total)
    res = breakeven(SIM_SCENARIO, "qps", values, [3], ["static"], overrides=[f"workload.num_requests={requests}"],
                    workers=workers, progress=False, capacity=False)
    wall = time.perf_counter() - t0
    df = res.frame
    summ = res.verdict.to_dict()
    sims = res.points_total
    print(f"(b) simulated break-even sweep: {SIM_SCENARIO.name}, qps axis, {points} rates x {requests} requests, "
          f"K=3 + baseline = {sims} simulations, {workers} worker(s)")
    print(f"    wall {wall:.1f} s; {sims / wall:.2f} simulations/s; "
          f"{points * requests * 2 / wall:,.0f} simulated requests/s; "
          f"goal a few minutes")
    print(f"    break-even (TPOT p50, plain / speculative): qps = {summ['breakeven']['K=3']}; "
          f"speedup {df['speedup'].iloc[0]:.3f} at {values[0]} req/s, "
          f"{df['speedup'].iloc[-1]:.3f} at {values[-1]} req/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("analytic", "simulated"))
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--requests", type=int, default=SIM_REQUESTS)
    ap.add_argument("--points", type=int, default=SIM_POINTS)
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"python {platform.python_version()}; load average before: {loadavg()}")
    if args.only in (None, "analytic"):
        bench_analytic()
    if args.only in (None, "simulated"):
        bench_simulated(args.workers, args.requests, args.points)
    print(f"load average after: {loadavg()}")


if __name__ == "__main__":
    main()
