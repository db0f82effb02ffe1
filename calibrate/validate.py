"""Predict a ground-truth run with the simulator's cost model and compare, round by round.

For every recorded round the simulator's own pieces cost the same work:

    K = 0   CostModel pass: one new token per sequence over its cached context
            + CostModel.round_overhead_s(0) (iteration_us)
    K > 0   Drafter.propose_time_s (method draft_model: K sequential draft passes, the first one
            ingesting 2 tokens per sequence, as the loop does) + CostModel verify pass (K + 1
            tokens per sequence, logits at every position) + CostModel.round_overhead_s(K)
            (iteration_us + verify_round_us)
(each pass with the profile's sampling_row_us per logit row where the profile has it)

with each sequence's recorded context and the recorded accept lengths (the acceptance is replayed
as a trace, so predicted and measured runs emit exactly the same tokens). Predicted and measured
totals, mean round times and tokens/s are compared per (batch, K), and so is the speedup of each
K > 0 over K = 0 at the same batch.

NOTE: this costs rounds directly with CostModel + Drafter rather than through the SimPy engine
(simulator.run.simulate): the engine draws acceptance from per-position rates and schedules
arrivals and prefills, while a ground-truth run is a fixed batch replaying recorded accept
lengths; the per-iteration cost the engine charges is this same CostModel + Drafter sum.

Warm-up rounds, and rounds that captured a CUDA graph, are left out of both sides. Rounds
disturbed by the machine (a shared CPU's scheduler can stall a process for seconds) are
dropped by a stated rule: wall time above STALL_FACTOR x the median of its (batch, K); the count
dropped is reported, and predicted totals are taken over the same rounds.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from simulator.costs.cost_model import CostModel, PassShape
from simulator.hardware.hardware import HardwareProfile, load_profile
from simulator.models.model_config import spec_from_config
from simulator.speculation.drafters import Drafter, DrafterSpec

STALL_FACTOR = 5.0
CI_LEVEL = 0.95                 # the measured speedup's interval (speedup_interval)
BOOTSTRAP_RESAMPLES = 4000
MIN_ROUNDS = 5                  # fewer rounds to draw from: no interval (nan, counted as unsettled)


def _spec(part: dict, where: str):
    return spec_from_config(part["config"], part["name"], where)


def predict_rounds(run: dict, hw: HardwareProfile, dtype: str | None = None) -> pd.DataFrame:
    """One row per recorded round: measured and predicted seconds, tokens emitted; costed at
    `dtype` (default: the dtype the run was measured in)."""
    dtype = dtype or run["provenance"]["dtype"]
    target = _spec(run["target"], "groundtruth run: target")
    cm = CostModel(target, hw, tp=1, dtype=dtype)
    drafter = None
    tmp = None
    if run.get("draft"):
        tmp = tempfile.TemporaryDirectory()
        cfg = Path(tmp.name) / f"{run['draft']['name'].replace('/', '_')}.json"
        cfg.write_text(json.dumps(run["draft"]["config"]))
        kmax = max([r["k"] for r in run["runs"]] + [1])
        drafter = Drafter(DrafterSpec(method="draft_model", num_speculative_tokens=kmax, model=str(cfg)), target, cm)
    rows = []
    try:
        for rec in run["runs"]:
            B, K = rec["batch"], rec["k"]
            for r in rec["rounds"]:
                ctx = np.asarray(r["committed_before"], float)          # committed tokens per sequence
                if K == 0:
                    t_draft = 0.0
                    t_verify = cm.shape_time_s(PassShape.from_sequences([(1, c - 1) for c in ctx]))
                else:
                    assert drafter is not None
                    t_draft = float(drafter.propose_time_s(B, K, float(np.sum(ctx - 2)), catchup_tokens=2 * B))
                    t_verify = cm.shape_time_s(PassShape.from_sequences([(K + 1, c - 1) for c in ctx]))
                pred = t_draft + float(t_verify) + cm.round_overhead_s(K)
                rows.append({"batch": B, "k": K, "round": r["round"],
                             "warmup": bool(r["warmup"]) or r.get("captured_graphs", 0) > 0,
                             "wall_s": r["wall_s"], "draft_s": r["draft_s"], "pred_s": pred,
                             "pred_draft_s": t_draft, "emitted": int(np.sum(r["accepted"])) + B})
    finally:
        if tmp is not None:
            tmp.cleanup()
    return pd.DataFrame(rows)


def speedup_interval(speedup: float, walls_k: pd.DataFrame, walls_0: pd.DataFrame, *, paired: bool, seed: int = 0,
                     level: float = CI_LEVEL, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float]:
    """The measured speedup's percentile-bootstrap interval from its rounds' wall times
    (walls_*: columns round, wall_s); (nan, nan) with fewer than MIN_ROUNDS rounds to draw from.

    The emitted tokens stay as recorded (the prediction replays them), so this is the timing's
    uncertainty given the recorded accept lengths: each resample draws rounds with replacement and
    scales the speedup by (mean_0* / mean_0) / (mean_K* / mean_K). paired (an interleaved run:
    round r of every K ran side by side): only the round indices both configurations kept are
    drawn, the same ones for both, so a drift they shared cancels; else each is drawn on its own.
    NOTE: rounds are taken as independent draws. The interval cannot see a machine whose speed
    moves between runs (docs/calibration.md shows fresh CPU runs whose intervals do not overlap),
    and at 16 rounds a percentile bootstrap covers a little less than its level."""
    rng = np.random.default_rng(seed)
    if paired:
        both = walls_k.merge(walls_0, on="round", suffixes=("_k", "_0"))
        if len(both) < MIN_ROUNDS:
            return math.nan, math.nan
        wk, w0 = both["wall_s_k"].to_numpy(), both["wall_s_0"].to_numpy()
        ik = i0 = rng.integers(0, len(both), (resamples, len(both)))
    else:
        wk, w0 = walls_k["wall_s"].to_numpy(), walls_0["wall_s"].to_numpy()
        if min(len(wk), len(w0)) < MIN_ROUNDS:
            return math.nan, math.nan
        ik = rng.integers(0, len(wk), (resamples, len(wk)))
        i0 = rng.integers(0, len(w0), (resamples, len(w0)))
    s = speedup * (w0[i0].mean(1) / w0.mean()) / (wk[ik].mean(1) / wk.mean())
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(s, [tail, 100.0 - tail])
    return float(lo), float(hi)


def compare(rounds: pd.DataFrame, stall_factor: float = STALL_FACTOR, seed: int = 0,
            interleaved: bool = False) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Per (batch, K): totals, mean round, tokens/s, their errors, and speedups over K = 0 with the
    measured one's interval (speedup_interval; seed: its resampling; interleaved: the run's rounds
    of every K ran in turn, so they are drawn in pairs)."""
    df = rounds[~rounds["warmup"]].copy()
    med = df.groupby(["batch", "k"])["wall_s"].transform("median")
    df["stall"] = df["wall_s"] > stall_factor * med
    kept = df[~df["stall"]]
    if kept.empty:
        raise ValueError("no timed rounds to compare: every round was a warm-up, captured a CUDA graph or stalled")
    rows, walls = [], {}
    for (b, k), g in kept.groupby(["batch", "k"]):
        walls[(b, k)] = g.sort_values("round")[["round", "wall_s"]]        # for speedup_interval
        tm, tp = g["wall_s"].sum(), g["pred_s"].sum()
        tok = g["emitted"].sum()
        rows.append({"batch": int(b), "k": int(k), "rounds": len(g),
                     "dropped_stalls": int(df[(df["batch"] == b) & (df["k"] == k)]["stall"].sum()),
                     "tokens_per_round_per_seq": tok / len(g) / b,
                     "measured_total_s": tm, "predicted_total_s": tp,
                     "measured_round_ms": 1e3 * tm / len(g), "predicted_round_ms": 1e3 * tp / len(g),
                     "measured_draft_ms": 1e3 * g["draft_s"].mean(),
                     "predicted_draft_ms": 1e3 * g["pred_draft_s"].mean(),
                     "measured_tok_s": tok / tm, "predicted_tok_s": tok / tp})
    t = pd.DataFrame(rows)
    t["total_err"] = (t["predicted_total_s"] - t["measured_total_s"]) / t["measured_total_s"]
    t["round_err"] = t["total_err"]          # same rounds on both sides: mean round error = total error
    t["tok_s_err"] = (t["predicted_tok_s"] - t["measured_tok_s"]) / t["measured_tok_s"]
    base = t[t["k"] == 0].set_index("batch")
    t["measured_speedup"] = [r.measured_tok_s / base.loc[r.batch, "measured_tok_s"]
                             if r.batch in base.index else np.nan for r in t.itertuples()]
    t["predicted_speedup"] = [r.predicted_tok_s / base.loc[r.batch, "predicted_tok_s"]
                              if r.batch in base.index else np.nan for r in t.itertuples()]
    ci = [speedup_interval(r.measured_speedup, walls[(r.batch, r.k)], walls[(r.batch, 0)], paired=interleaved,
                           seed=seed)
          if r.k > 0 and r.batch in base.index else (np.nan, np.nan) for r in t.itertuples()]
    t["measured_speedup_lo"], t["measured_speedup_hi"] = [c[0] for c in ci], [c[1] for c in ci]
    spec = t[t["k"] > 0].dropna(subset=["measured_speedup"])
    agree = ((spec["measured_speedup"] > 1) == (spec["predicted_speedup"] > 1))
    settled = (spec["measured_speedup_lo"] > 1) | (spec["measured_speedup_hi"] < 1)   # the CI excludes 1
    summary = {
        "tok_s_ape_median": float(np.median(np.abs(t["tok_s_err"]))),
        "tok_s_ape_max": float(np.max(np.abs(t["tok_s_err"]))),
        "total_ape_median": float(np.median(np.abs(t["total_err"]))),
        "speedup_sign_agreement": float(agree.mean()) if len(agree) else float("nan"),
        "speedup_sign_disagreements": [f"B={r.batch} K={r.k}" for r, a in zip(spec.itertuples(), agree) if not a],
        "speedup_ci_level": CI_LEVEL,
        "speedup_sign_unsettled": [f"B={r.batch} K={r.k}" for r, c in zip(spec.itertuples(), settled) if not c],
        "rounds_kept": int(len(kept)), "rounds_dropped_as_stalls": int(df["stall"].sum()),
        "stall_rule": f"wall > {stall_factor:g} x median of its (batch, K)",
    }
    return t, summary


def validate(run: dict, profile: str, dtype: str | None = None) -> tuple[pd.DataFrame, dict[str, Any]]:
    hw = load_profile(profile)
    dtype = dtype or run["provenance"]["dtype"]
    table, summary = compare(predict_rounds(run, hw, dtype), interleaved=bool(run.get("config", {}).get("interleave")))
    summary.update({"profile": hw.describe(), "run_device": run["provenance"].get("device_name"),
                    "run_dtype": run["provenance"]["dtype"], "predicted_dtype": dtype,
                    "target": run["target"]["name"], "target_layers": run["target"]["layers"],
                    "draft": (run.get("draft") or {}).get("name"),
                    "draft_layers": (run.get("draft") or {}).get("layers"),
                    "method": "CostModel + Drafter per recorded round (accept lengths replayed as a trace)"})
    return table, summary


def table_markdown(t: pd.DataFrame) -> str:
    lines = ["| batch | K | rounds | tokens/round/seq | round ms (measured) | round ms (predicted) | error | "
             f"tokens/s (measured) | tokens/s (predicted) | error | speedup vs K=0 (measured, {100 * CI_LEVEL:.0f} % "
             "interval) | (predicted) |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in t.itertuples():
        ci = "(too few rounds)" if np.isnan(r.measured_speedup_lo) else \
            f"({r.measured_speedup_lo:.3f}-{r.measured_speedup_hi:.3f})"
        sp_m = "-" if r.k == 0 or np.isnan(r.measured_speedup) else f"{r.measured_speedup:.2f}x {ci}"
        sp_p = "-" if r.k == 0 or np.isnan(r.predicted_speedup) else f"{r.predicted_speedup:.2f}x"
        lines.append(f"| {r.batch} | {r.k} | {r.rounds} | {r.tokens_per_round_per_seq:.2f} | "
                     f"{r.measured_round_ms:.2f} | "
                     f"{r.predicted_round_ms:.2f} | {100 * r.round_err:+.1f} % | {r.measured_tok_s:.0f} | "
                     f"{r.predicted_tok_s:.0f} | {100 * r.tok_s_err:+.1f} % | {sp_m} | {sp_p} |")
    return "\n".join(lines)


def speedup_lines(s: dict[str, Any]) -> list[str]:
    """The report's speedup lines; a run with no K > 0 configuration beside a K = 0 one of its
    batch has no speedup to compare, and says so in one line (not "nan %")."""
    if math.isnan(s["speedup_sign_agreement"]):
        return ["- speedup sign agreement: nothing to compare (no K > 0 configuration beside a K = 0 one "
                "of the same batch)"]
    return [f"- speedup sign agreement: {100 * s['speedup_sign_agreement']:.0f} %"
            + (f" (disagree: {', '.join(s['speedup_sign_disagreements'])})" if s["speedup_sign_disagreements"] else ""),
            f"- measured speedups whose {100 * s['speedup_ci_level']:.0f} % interval "
            f"(within-run timing bootstrap, accept lengths as recorded) "
            f"contains 1: {', '.join(s['speedup_sign_unsettled']) or 'none'}"]


def report_markdown(table: pd.DataFrame, summary: dict[str, Any]) -> str:
    s = summary
    head = [f"# Validation: {s['target']} ({s['target_layers']} layers)"
            + (f" + draft {s['draft']} ({s['draft_layers']} layers)" if s.get("draft") else ""),
            "", f"- run device: {s['run_device']}", f"- {s['profile']}", f"- method: {s['method']}",
            f"- tokens/s error: median {100 * s['tok_s_ape_median']:.1f} %, max {100 * s['tok_s_ape_max']:.1f} %",
            *speedup_lines(s),
            f"- rounds kept {s['rounds_kept']}, dropped as stalls {s['rounds_dropped_as_stalls']} "
            f"({s['stall_rule']})", ""]
    # (a blank line before the table: Markdown needs it)
    return "\n".join(head) + "\n" + table_markdown(table) + "\n"
