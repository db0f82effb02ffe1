"""The safety net for refactors: a fixed set of simulations whose every output is hashed.

Each case is a shipped scenario (with overrides) or a hand-built mapping, run with its K = 0
baseline and the event trace. `digest(result)` hashes every DataFrame (values, index, column names
and dtypes), the trace and the summary of the run and of its baseline. `tests/data/golden_runs.json`
holds the digests; `tests/test_golden_runs.py` compares against it, and
`python tests/golden_cases.py --write` rewrites it (only when a change is meant to alter results).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "data" / "golden_runs.json"

_SMALL = ["workload.num_requests=600"]


def fixed_ties_scenario(reps: int, arrival: dict, output_len: Any, ngram: bool) -> dict:
    """Fixed step costs exact in binary: iterations end exactly when requests arrive or another
    replica's iteration ends (the tie cases)."""
    sc: dict[str, Any] = {
        "name": "ties", "seed": 1,
        "hardware": {"kind": "fixed", "target_step_s": 0.25, "draft_step_s": 0.125, "replicas": reps},
        "workload": {"arrival": arrival, "num_requests": 40, "prompt_len": 4, "output_len": output_len},
        "engine": {"router": "least_outstanding"}}
    if ngram:
        sc["drafter"] = {"method": "ngram", "num_speculative_tokens": 2}
        sc["acceptance"] = {"model": "iid", "alpha": 0.5}
    return sc


def cases() -> dict[str, tuple[Any, list[str]]]:
    """name -> (scenario path or mapping, overrides)."""
    out: dict[str, tuple[Any, list[str]]] = {}
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        out[f"shipped/{path.stem}"] = (str(path), [])
    pol = str(ROOT / "scenarios" / "llama8b-h100-policies.yaml")
    for kind in ("static", "off", "batch_schedule", "adaptive", "goodput"):
        for qps in (6, 24):
            pol_set = "policy.kind=batch_schedule" if kind == "batch_schedule" else f"policy={{kind: {kind}}}"
            out[f"policy/{kind}/qps{qps}"] = (pol, _SMALL + [pol_set,
                                                           f"workload.arrival={{process: poisson, qps: {qps}}}"])
    eagle = str(ROOT / "scenarios" / "llama8b-h100-eagle3-chat.yaml")
    out["replicas2-least-outstanding"] = (eagle, _SMALL + ["workload.arrival={process: poisson, qps: 6}",
                                                           "hardware.replicas=2", "engine.router=least_outstanding"])
    out["preempt-adaptive"] = (str(ROOT / "scenarios" / "llama8b-h200-eagle3-batch.yaml"),
                               _SMALL + ["engine.num_gpu_blocks=600", "policy.kind=adaptive"])
    for prof in ("h200-sxm.calibrated", "a100-80gb-sxm.vidur"):
        for kind in ("static", "adaptive", "goodput"):
            out[f"profile/{prof}/{kind}"] = (eagle, _SMALL + [f"hardware.gpu={prof.split('.')[0]}",
                                                            f"hardware.profile={prof}", f"policy={{kind: {kind}}}"])
    for reps in (1, 2):
        for arr_name, arrival in (("constant", {"process": "constant", "qps": 4}),
                                  ("closed", {"process": "closed_loop", "concurrency": 3, "think_time_s": 0.5})):
            for out_name, out_len in (("1tok", 1), ("uniform", {"dist": "uniform", "low": 1, "high": 9})):
                for ngram in (False, True):
                    out[f"ties/r{reps}/{arr_name}/{out_name}/{'ngram' if ngram else 'plain'}"] = (
                        fixed_ties_scenario(reps, arrival, out_len, ngram), [])
    return out


def _frame_digest(h: hashlib._Hash, df: pd.DataFrame | None) -> None:
    if df is None:
        h.update(b"<none>")
        return
    h.update(repr(list(df.columns)).encode())
    h.update(repr([str(t) for t in df.dtypes]).encode())
    h.update(pd.util.hash_pandas_object(df, index=True).to_numpy().tobytes())


def digest(result: Any) -> str:
    h = hashlib.sha256()
    for r in (result, result.baseline):
        if r is None:
            h.update(b"<no baseline>")
            continue
        _frame_digest(h, r.requests)
        _frame_digest(h, r.iterations)
        h.update(repr(sorted((str(k), repr(v)) for k, v in r.summary.items())).encode())
        h.update(repr(r.trace).encode())
    return h.hexdigest()


def run_case(name: str) -> str:
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario
    scenario, overrides = cases()[name]
    if isinstance(scenario, str):
        sc = load_scenario(scenario, overrides)
    else:
        sc = load_scenario(scenario, overrides)
    return digest(simulate(sc, baseline=True, trace=True))


def main(argv: list[str]) -> int:
    names = sorted(cases())
    got = {n: run_case(n) for n in names}
    if "--write" in argv:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(got)} digests to {GOLDEN.relative_to(ROOT)}")
        return 0
    want = json.loads(GOLDEN.read_text())
    bad = [n for n in names if want.get(n) != got[n]]
    for n in bad:
        print(f"DIFFERS: {n}")
    print(f"{len(names) - len(bad)} of {len(names)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
