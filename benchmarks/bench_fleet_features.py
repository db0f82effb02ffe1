"""Speed of prefix caching and disaggregation on a fleet (not a test): wall and CPU seconds and peak
memory of one simulation, each case in a fresh process.

The workload of bench_simulator.py's fleet cases (CodeLlama-34B TP 2 on A100-80GB SXM, the Azure
2023 conversation trace's lengths in order, 2 requests/s per instance, EAGLE-3 K = 3 at alpha 0.7),
over 16 instances:
    mixed       16 mixed replicas, round robin (the reference: what the mixed fleet costs today)
    prefix      16 mixed replicas, prefix caching on, every prompt opening with a 256-token system
                prompt (workload.prefix), prefix-aware routing
    disagg      4 prefill + 12 decode instances (KV over the inter-node link), speculation on decode
    both        disagg with prefix caching on the prefill pool and prefix-aware routing

    .venv/bin/python benchmarks/bench_fleet_features.py --requests 1000000 --cases mixed prefix disagg both
    PYTHONHASHSEED=0 .venv/bin/python benchmarks/bench_fleet_features.py --instructions --requests 2000

--instructions runs each case under valgrind's callgrind, counting only inside `simulate` (after a
300-request run in the same process has loaded the compiled rounds): a count, not a time, the same
from run to run whatever else the machine is doing (about a minute per case at 2,000 requests).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

CASES = ("mixed", "prefix", "disagg", "both")
INSTANCES = 16


def case_scenario(name: str, requests: int, tmpdir: Path) -> dict:
    from bench_simulator import scenario
    sc = scenario(requests, True, tmpdir, replicas=INSTANCES)
    if name in ("prefix", "both"):
        sc["engine"].update(prefix_caching=True, router="prefix_aware")
        sc["workload"]["prefix"] = {"shared_tokens": 256}
    if name in ("disagg", "both"):
        sc["hardware"]["replicas"] = 1
        sc["disaggregation"] = {"prefill": {"instances": 4}, "decode": {"instances": 12}}
    return sc


def run_one(name: str, requests: int, under_callgrind: bool = False) -> dict:
    from simulator.run import simulate

    def callgrind(switch: str) -> None:       # count instructions only inside simulate
        if under_callgrind:
            subprocess.run(["callgrind_control", "-i", switch, str(os.getpid())], capture_output=True, check=True)
    with tempfile.TemporaryDirectory() as d:
        if under_callgrind:                   # the compiled rounds loaded, the trace read once
            simulate(case_scenario(name, 300, Path(d)), iterations="none")
        sc = case_scenario(name, requests, Path(d))
        callgrind("on")
        t0, c0 = time.perf_counter(), time.process_time()
        s = simulate(sc, iterations="none").summary
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        callgrind("off")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"case": name, "requests": requests, "instances": INSTANCES, "wall_s": round(wall, 1),
            "cpu_s": round(cpu, 1), "peak_rss_mb": round(peak_mb), "output_tokens_per_s": s["output_tokens_per_s"],
            "tpot_ms_p50": s["tpot_ms_p50"], "prefix_cache_hit_rate": s.get("prefix_cache_hit_rate")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--instructions", action="store_true",
                    help="count CPU instructions inside simulate under callgrind (valgrind must be installed)")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--under-callgrind", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one, args.requests, args.under_callgrind)))
        return 0
    for name in args.cases:
        cmd = [sys.executable, __file__, "--one", name, "--requests", str(args.requests)]
        if args.instructions:
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null",
                   *cmd, "--under-callgrind"]
        out = subprocess.run(cmd, capture_output=True, text=True)
        collected = [ln for ln in out.stderr.splitlines() if "Collected" in ln]
        if out.returncode or (args.instructions and not collected):
            print(f"{name}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
            return 1
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if args.instructions:
            row["instructions"] = int(collected[-1].split()[-1])
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
