"""Simulator speed benchmark (not a test): decode iterations per wall-second, start-up, peak memory.

Scenario: CodeLlama-34B, TP 2 on A100-80GB SXM, Poisson arrivals at 2 requests/s, prompt and
output lengths resampled from the Azure 2023 conversation trace, max_num_seqs 128,
max_num_batched_tokens 4096; speculation off, and on with EAGLE-3 K = 3 (i.i.d. alpha 0.7).
There is no published EAGLE-3 head for CodeLlama-34B: the benchmark writes a one-layer EAGLE-3
head config with CodeLlama-34B's dimensions (full 32,000-token draft vocabulary) to a temporary
directory.

    (a) 10,000 requests     (b) 100,000 requests

Each case runs in a fresh subprocess (so peak RSS is its own) on one core. Reference: Vidur
(MLSys 2024) reports about 5,500 iterations/s. Run:

    .venv/bin/python benchmarks/bench_simulator.py            # all four cases
    .venv/bin/python benchmarks/bench_simulator.py --cases a-off a-on --profile   # + cProfile top 25
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

TRACE = "data/traces/azure_llm_inference_2023_conv.csv"
TRACE_FALLBACK = "/work/shared/data/traces/azure_llm_inference_2023_conv.csv"
CASES = {"a-off": (10_000, False), "a-on": (10_000, True), "b-off": (100_000, False), "b-on": (100_000, True)}
VIDUR_ITERS_PER_S = 5500.0


def eagle3_head(tmpdir: Path) -> Path:
    p = tmpdir / "eagle3-codellama-34b.json"
    p.write_text(json.dumps({
        "_source": "benchmark stand-in: a one-layer EAGLE-3 head with CodeLlama-34B's dimensions",
        "specsight": {"kind": "eagle3", "target": "codellama-34b"},
        "architectures": ["LlamaForCausalLMEagle3"],
        "num_hidden_layers": 1, "vocab_size": 32000, "draft_vocab_size": 32000,
    }))
    return p


def scenario(num_requests: int, speculate: bool, tmpdir: Path) -> dict:
    trace = TRACE if (REPO / TRACE).exists() else TRACE_FALLBACK
    sc = {
        "name": f"bench-{num_requests}-{'eagle3' if speculate else 'off'}", "seed": 0,
        "hardware": {"gpu": "a100-80gb-sxm", "tp": 2, "replicas": 1, "dtype": "bf16"},
        "model": "codellama-34b",
        "workload": {"arrival": {"process": "poisson", "qps": 2.0}, "num_requests": num_requests,
                     "prompt_len": {"dist": "empirical", "path": trace, "column": "num_prefill_tokens"},
                     "output_len": {"dist": "empirical", "path": trace, "column": "num_decode_tokens"}},
        "engine": {"max_num_seqs": 128, "max_num_batched_tokens": 4096},
    }
    if speculate:
        sc["drafter"] = {"method": "eagle3", "model": str(eagle3_head(tmpdir)), "num_speculative_tokens": 3}
        sc["acceptance"] = {"model": "iid", "alpha": 0.7}
        sc["policy"] = {"kind": "static"}
    return sc


def run_case(name: str, profile: bool) -> dict:
    """In this process: time imports, set-up, the event loop and the DataFrames."""
    t0 = time.perf_counter()
    import numpy as np
    import pandas  # noqa: F401  (imported by simulate() for its DataFrames; counted here)
    import simulator.engine as engine_mod
    import simulator.replica as replica_mod
    from simulator.run import simulate
    from simulator.scenario import load_scenario
    t_import = time.perf_counter() - t0

    # Per-iteration wall time (a perf_counter stamp when each iteration completes, ~0.1 us):
    # its median is robust to other processes stealing the core, unlike the loop's total.
    stamps: list[float] = []
    orig_complete = replica_mod.Replica._complete
    pc = time.perf_counter

    def stamped_complete(self):
        orig_complete(self)
        stamps.append(pc())
    replica_mod.Replica._complete = stamped_complete

    loop = {}
    orig_run = engine_mod.Engine.run

    def timed_run(self):
        loop["start"] = time.perf_counter()
        orig_run(self)
        loop["end"] = time.perf_counter()
    engine_mod.Engine.run = timed_run

    n, spec = CASES[name]
    with tempfile.TemporaryDirectory() as td:
        t1 = time.perf_counter()
        sc = load_scenario(scenario(n, spec, Path(td)))
        if profile:
            import cProfile
            import pstats
            pr = cProfile.Profile()
            pr.enable()
        r = simulate(sc)
        t_end = time.perf_counter()
        if profile:
            pr.disable()
            pstats.Stats(pr, stream=sys.stderr).sort_stats("tottime").print_stats(25)
    s = r.summary
    loop_s = loop["end"] - loop["start"]
    per_it = np.diff(np.asarray(stamps)) * 1e6
    return {
        "case": name, "requests": n, "speculation": "eagle3 K=3" if spec else "off",
        "iterations": s["num_iterations"], "decode_iterations": s["num_decode_rounds"],
        "simulated_s": round(s["duration_s"], 1), "import_s": round(t_import, 3),
        "startup_s": round(loop["start"] - t1, 3), "loop_s": round(loop_s, 3),
        "frames_and_summary_s": round(t_end - loop["end"], 3), "wall_s": round(t_end - t1, 3),
        "decode_iters_per_s": round(s["num_decode_rounds"] / loop_s),
        "iters_per_s": round(s["num_iterations"] / loop_s),
        "median_iteration_us": round(float(np.median(per_it)), 2),
        "mean_iteration_us_below_p90": round(float(per_it[per_it <= np.percentile(per_it, 90)].mean()), 2),
        "iters_per_s_from_median": round(1e6 / float(np.median(per_it))),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "output_tokens_per_s": round(s["output_tokens_per_s"], 1), "tpot_ms_p50": round(s["tpot_ms_p50"], 2),
        "mean_batch": round(s["mean_batch"], 1), "preemptions": s["preemptions"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions (slows the run)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(args.child, args.profile)))
        return 0
    rows = []
    for name in args.cases:
        cmd = [sys.executable, __file__, "--child", name] + (["--profile"] if args.profile else [])
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
        if sys.platform.startswith("linux"):
            cmd = ["taskset", "-c", "0"] + cmd           # one core
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return out.returncode
        if args.profile:
            print(out.stderr, file=sys.stderr)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{r['case']:6} {r['requests']:>7} req  spec {r['speculation']:<10}  "
              f"decode iters {r['decode_iterations']:>8}  loop {r['loop_s']:7.2f} s  "
              f"{r['decode_iters_per_s']:>7} decode it/s ({r['decode_iters_per_s'] / VIDUR_ITERS_PER_S:.1f}x Vidur)  "
              f"median iteration {r['median_iteration_us']:.1f} us (= {r['iters_per_s_from_median']} it/s)  "
              f"start-up {r['startup_s']:.2f} s (+ imports {r['import_s']:.2f} s)  wall {r['wall_s']:.2f} s  "
              f"peak RSS {r['peak_rss_mb']:.0f} MB", flush=True)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
