"""specsight from Python: the studies of the command line, as functions returning data.

Run it as a script (`python examples/python_api.py`, a few seconds) or paste the cells into a
notebook. Every call returns DataFrames and frozen dataclasses; nothing is printed or written
unless you ask (the point store, `store=`, is where a long study resumes from). The scenarios are
the shipped ones, shrunk with `key.path=value` overrides (the CLI's --set) so this runs quickly.
See docs/api.md for the whole API.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import specsight

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
SINGLE_USER = SCENARIOS / "llama8b-rtx4090-single-user.yaml"      # Llama 3.1 8B on an RTX 4090, 1 user
CAPACITY = SCENARIOS / "llama70b-tp4-h100-capacity.yaml"         # Llama 3.1 70B, TP 4 on H100, Poisson load
SHORT = ["workload.num_requests=8", "workload.output_len=64"]    # fewer, shorter requests: seconds, not minutes


def run() -> dict[str, Any]:
    """Each study once; returns what each gave (tests/test_python_api.py checks it)."""
    # %% 1. Simulate a shipped scenario, with the plain-decoding baseline on the same requests.
    sc = specsight.load_scenario(SINGLE_USER, SHORT)
    sim = specsight.simulate(sc, baseline=True)
    # sim.requests, sim.iterations: DataFrames; sim.summary: a dict of headline metrics
    speedup = sim.summary["speedup_output_tokens_per_s"]

    # %% 2. Break-even: where does the draft model stop paying as the acceptance rate falls?
    be = specsight.breakeven(SINGLE_USER, axis="alpha", values=[0.2, 0.5, 0.8], ks=[2, 4],
                             overrides=SHORT, workers=1, progress=False)
    # be.frame: one row per (alpha, curve): speedup, the analytic model's, both runs' metrics
    table = be.frame.pivot(index="alpha", columns="curve", values="speedup")
    # be.verdict: break-even per curve, crossings, status, best K per alpha
    verdict = be.verdict

    # %% 3. The same question from the cost model alone (no simulation): break-even batch per K.
    an = specsight.analytic_breakeven("llama-3.1-8b", "h100-sxm", "draft_model:llama-3.2-1b", alpha=0.7, ks=[2, 4])

    # %% 4. A small sweep: two concurrencies x two K, each point with its baseline.
    sw = specsight.sweep(SINGLE_USER,
                         {"workload.arrival.concurrency": [1, 4], "drafter.num_speculative_tokens": [2, 4]},
                         overrides=SHORT, baseline=True, workers=1, progress=False)

    # %% 5. A capacity plan: replicas and $/M tokens for 10 requests/s within the scenario's SLO.
    plan = specsight.capacity_plan(CAPACITY, target_qps=10, policies=["off", "static"], tolerance=0.25,
                                   overrides=["workload.num_requests=40"], workers=1, progress=False)

    # %% 6. The plan's cheapest configuration as each engine launches it (docs/deploy.md): the
    # `vllm serve` argv with its --speculative-config, the SGLang flags, the TensorRT-LLM YAML.
    chosen = specsight.plan_deployment(plan, CAPACITY, ["workload.num_requests=40"], ["off", "static"])
    # chosen.deployment["vllm"].argv, .files (name, text), .notes; .unsupported says why not

    # %% 7. A configuration search: the cheapest GPU, TP and K for 10 requests/s within the SLO,
    # each GPU at its profile's price per GPU-hour (hardware_profiles/*.yaml cite theirs).
    search = specsight.plan_search(CAPACITY, target_qps=10, grid={"hardware.gpu": ["h100-sxm", "h200-sxm"],
                                                                    "drafter.num_speculative_tokens": [2, 3]},
                                   policies=["static"], tolerance=0.25, overrides=["workload.num_requests=40"],
                                   workers=1, progress=False)
    # search.rows: ranked, each with its grid point, status, fleet and $/M output tokens;
    # search.chosen: the cheapest that meets the SLO (None when none does)
    search_chosen = specsight.search_deployment(search)

    # %% 8. Saturation and capacity as data. Along the load, which points saturate (the queue
    # grows: no steady state), from which rate with and without speculation, and the highest
    # Poisson rate per GPU within the SLO beside the speedups (a coarse search: `tolerance`).
    load = specsight.breakeven(CAPACITY, axis="qps", values=[2, 8, 32], ks=[3], overrides=["workload.num_requests=200"],
                               tolerance=0.25, workers=1, progress=False)
    flags = load.frame[["qps", "speedup", "saturated", "base_saturated", "kv_limited"]]
    saturates_from = load.verdict.saturation        # {"plain": first saturated rate or None, "K=3": ...}
    capacities = load.capacity["capacities"]         # {"plain": {capacity_qps_per_gpu, ...}, "K=3": {...}}
    # Break-even on capacity itself: the SLO-bound rate per GPU with and without speculation, per K.
    cap = specsight.breakeven(CAPACITY, axis="k", values=[1, 3], metric="capacity",
                              overrides=["workload.num_requests=100"], tolerance=0.1, workers=1, progress=False)
    return {"simulation": sim, "speedup": speedup, "breakeven": be, "table": table, "verdict": verdict,
            "analytic": an, "sweep": sw, "plan": plan, "deployment": chosen, "search": search,
            "search_deployment": search_chosen, "load": load, "flags": flags, "saturates_from": saturates_from,
            "capacities": capacities, "capacity_breakeven": cap}


if __name__ == "__main__":
    out = run()
    print(f"simulated speedup on the single-user scenario: {out['speedup']:.2f}x")
    print("break-even study, speedup by alpha and K:")
    print(out["table"].round(3).to_string())
    print("break-even alpha per curve:", out["verdict"].breakeven, "| best K:", out["verdict"].best_k)
    print("analytic break-even batch per K:", out["analytic"].to_dict()["breakeven_batch"])
    print(out["sweep"].frame[["workload.arrival.concurrency", "drafter.num_speculative_tokens",
                              "output_tokens_per_s", "speedup_output_tokens_per_s"]].to_string(index=False))
    print(out["plan"].frame[["config", "max_qps_per_replica", "replicas", "cost_per_million_output_tokens_usd"]]
          .to_string(index=False))
    print(out["deployment"].text())
    print(out["search"].frame[["rank", "config", "status", "gpus", "cost_per_million_output_tokens_usd"]]
          .to_string(index=False))
    print("cheapest:", out["search"].chosen["config"] if out["search"].chosen else None)
    print(out["flags"].to_string(index=False))
    print("saturates from (requests/s):", out["saturates_from"])
    print("capacity per GPU within the SLO:", {k: v["capacity_qps_per_gpu"] for k, v in out["capacities"].items()})
    print(out["capacity_breakeven"].frame[["k", "spec_capacity_qps_per_gpu", "base_capacity_qps_per_gpu", "speedup"]]
          .to_string(index=False), "| best K:", out["capacity_breakeven"].verdict.best_k)
