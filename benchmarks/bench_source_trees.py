"""Simulator speed of two source trees side by side (not a test): a scenario simulated by each,
in alternating subprocesses pinned to one core (each the fastest of three simulations, the
first of which also warms caches), medians over --repeat subprocesses and their ratio printed.

Default scenario: llama8b-h200-eagle3-batch, 2000 requests, on the calibrated H200 profile (a
one-token GEMV rate and attention waves) with the adaptive policy, whose candidate rounds make
many cost-model calls with Python ints. Compare a commit with the working tree:

    git worktree add /tmp/before HEAD~1
    .venv/bin/python benchmarks/bench_source_trees.py /tmp/before . --repeat 3
    git worktree remove /tmp/before

--set adds scenario overrides (key.path=value, repeatable) to the default ones.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

SCENARIO = "scenarios/llama8b-h200-eagle3-batch.yaml"
OVERRIDES = ["workload.num_requests=2000", "hardware.gpu=h200-sxm.calibrated", "policy.kind=adaptive"]
CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from simulator.run import simulate
from simulator.scenario.scenario import load_scenario
sc = load_scenario(sys.argv[2], json.loads(sys.argv[3]))
ts = []
for _ in range(3):          # the first run in a process also warms caches: the fastest of three
    t = time.perf_counter(); r = simulate(sc); ts.append(time.perf_counter() - t)
print(json.dumps({"s": min(ts), "iterations": len(r.iterations)}))
"""


def run(tree: Path, scenario: Path, overrides: list[str]) -> dict:
    cmd = [sys.executable, "-c", CHILD, str(tree), str(scenario), json.dumps(overrides)]
    if hasattr(os, "sched_setaffinity"):
        cmd = ["taskset", "-c", str(min(os.sched_getaffinity(0)))] + cmd
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--set", dest="extra", action="append", default=[])
    a = ap.parse_args()
    overrides = OVERRIDES + a.extra
    scenario = Path(__file__).resolve().parents[1] / SCENARIO
    times: dict[str, list[float]] = {"before": [], "after": []}
    iters = {}
    for _ in range(a.repeat):
        for name, tree in (("before", a.before), ("after", a.after)):
            r = run(tree.resolve(), scenario, overrides)
            times[name].append(r["s"])
            iters[name] = r["iterations"]
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{SCENARIO} {' '.join(overrides)}")
    for k in ("before", "after"):
        print(f"  {k:<6} {med[k]:.3f} s, median of {a.repeat} processes ({iters[k]} iterations)")
    print(f"  ratio before / after: {med['before'] / med['after']:.2f}"
          + ("" if iters["before"] == iters["after"] else "  (iteration counts differ: not the same run)"))


if __name__ == "__main__":
    main()
