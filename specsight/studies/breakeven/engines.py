"""Break-even by engine: one scenario's speedup under each serving engine (`engine.kind`).

`breakeven(scenario, axis, ..., engines=["ideal", "vllm"])` runs the break-even study once per
engine, the scenario's engine.kind set to it (the scenario unchanged for the engine it already
names, so `engines=["ideal"]` gives the study without `engines`, row for row). An engine that
specsight does not price (resolve_deployment refuses its engine.kind; `published.engine_refusal`
decides, as for the validation table) is reported in one line and left out; the others run. An
engine's own dynamic-K rule (policy kinds vllm_dynamic, sglang_adaptive, trtllm_schedule) runs
only under that engine; every other combination is reported as skipped.

Per engine, the lines tabled: the best static K at each point (the best of the K curves there) and
each other policy given; the verdict, per line and per curve (each static K and policy), its
crossings of speedup 1 and its status (crossings.py), and under a real engine the speedups'
intervals and the break-even's range (`speedup_interval`, `breakeven_interval`); on the qps
axis with an SLO, each engine's capacity within it (capacity.curve_capacities). The plot draws
one panel per engine with every curve (engine_plots.py).
"""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError
from simulator.scenario.engine_spec import ENGINE_KINDS
from simulator.speculation.policies import ENGINE_RULES

from ..published.study import engine_refusal
from ..shared.jsonable import json_safe
from ..shared.overrides import describe_scenario, own_policy
from .axes import LOG_AXES
from .capacity import QUICK_TOLERANCE, curve_capacities
from .crossings import as_number, breakeven_range, interval_edges, line_verdict
from .curves import BreakevenResult, comma_names, run_study

BEST_K = "best K"           # the line of the best static K at each point


def parse_engines(engines: Sequence[str] | str) -> list[str]:
    """'vllm,ideal' or ["vllm", "ideal"] -> the engine kinds, in order, each once."""
    return comma_names("--engines", engines, ENGINE_KINDS)


def with_engine(source: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The scenario under engine.kind `kind` (the scenario itself when it names that engine). A
    policy of the scenario's own that is another engine's rule gives way to static: every curve
    sets its own policy, and the scenario must still load under `kind`."""
    if (source.get("engine") or {}).get("kind", "ideal") == kind:
        return dict(source)
    out = copy.deepcopy(dict(source))
    out["engine"] = {**(out.get("engine") or {}), "kind": kind}
    if ENGINE_RULES.get(str(own_policy(out).get("kind") or out.get("policy")), kind) != kind:
        out["policy"] = {"kind": "static"}
    return out


@dataclass(frozen=True)
class EngineBreakevenResult:
    """A break-even study per engine. `frame`: every (engine, point, curve) row (the break-even
    frame with an `engine` column first; analytic_speedup on ideal's rows only); `lines`: per
    (engine, line, point) the speedup drawn, the curve that gives it and its K; `verdict`:
    engine -> line -> {breakeven, crossings, status}; `skipped`: one line per engine or
    policy/engine combination that did not run, and why."""
    axis: str
    values: list[float]
    metric: str
    engines: list[str]                       # asked for, in order
    ran: list[str]                           # those that ran
    skipped: list[str]
    frame: Any                               # pandas.DataFrame
    lines: Any                               # pandas.DataFrame
    verdict: dict[str, dict[str, dict[str, Any]]]
    results: dict[str, BreakevenResult]      # each engine's own study
    meta: dict[str, Any]
    points_simulated: int
    points_total: int
    capacity: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe: what `specsight breakeven --engines ... --json` prints, less timing and files."""
        keep = [c for c in self.frame.columns if c != "metric"]
        return json_safe({**self.meta, "axis": self.axis, "metric": self.metric,
                          "values": [as_number(v) for v in self.values], "engines": self.engines,
                          "engines_run": self.ran, "skipped": self.skipped, "verdict": self.verdict,
                          "lines": self.lines.to_dict("records"), "points": self.frame[keep].to_dict("records"),
                          "points_simulated": self.points_simulated, "points_total": self.points_total,
                          **({"capacity": self.capacity} if self.capacity else {})})

    def write(self, out_dir: str | Path, plot: bool = True) -> dict[str, str]:
        """breakeven_<axis>_engines.csv (every row), ..._engines_lines.csv (the lines tabled) and,
        with `plot`, breakeven_<axis>_engines.png (one panel per engine); returns {kind: path}."""
        from simulator.common.atomic_files import write_csv

        from .axes import AXIS_LABELS
        from .crossings import METRIC_LABELS
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = f"breakeven_{self.axis}_engines"
        from ..published.answer_intervals import csv_frame
        files = {"csv": str(write_csv(csv_frame(self.frame), out / f"{stem}.csv")),
                 "lines_csv": str(write_csv(csv_frame(self.lines), out / f"{stem}_lines.csv"))}
        if plot and len(self.lines):
            from .engine_plots import plot_engine_breakeven
            m = self.meta
            replicas = int(((next(iter(self.results.values())).source.get("hardware") or {}).get("replicas")) or 1)
            files["plot"] = str(plot_engine_breakeven(
                self.results, self.capacity, x=self.axis,
                title=f"{m['scenario']}: {m['deployment']}, drafter {m['drafter']}\n"
                      f"simulated speedup vs {self.axis}, one panel per engine (X = break-even)",
                xlabel=AXIS_LABELS[self.axis], ylabel=f"speedup ({METRIC_LABELS[self.metric]})",
                path=out / f"{stem}.png", logx=self.axis in LOG_AXES, replicas=replicas))
        return files


def breakeven_by_engine(source: Mapping[str, Any], engines: Sequence[str], axis: str, values: Sequence[float],
                        ks: Sequence[int], policies: Sequence[str], metric: str | None, requests_per_user: int,
                        store_path: Path | None, executor: Any, progress: bool, capacity: bool = False,
                        tolerance: float = QUICK_TOLERANCE) -> EngineBreakevenResult:
    """The study (breakeven.run_study) under each engine that specsight prices, each policy under
    the engines it runs on, and with `capacity` (qps axis) each engine's capacities within the
    SLO; see the module docstring."""
    import pandas as pd

    results: dict[str, BreakevenResult] = {}
    caps: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for e in engines:
        src = with_engine(source, e)
        refusal = engine_refusal(src)
        if refusal is not None:
            skipped.append(f"engine {e}: refused ({refusal.allowed})")
            continue
        pols = []
        for p in policies:
            why = rule_refusal(src, p, e, max(ks))
            if why:
                skipped.append(f"policy {p} under engine {e}: skipped ({why})")
            else:
                pols.append(p)
        if not pols:
            continue
        res = run_study(src, axis, values, ks, pols, None, [], metric, requests_per_user, store_path, executor,
                        progress)
        results[e] = res
        if capacity and axis == "qps":
            caps[e] = curve_capacities(src, res.curves, tolerance, store_path, executor, progress)
        failed: dict[str, list[str]] = {}       # the error -> the curves whose every point failed with it
        for label, g in res.frame.groupby("curve", sort=False):
            if (g["error"] != "").all():
                failed.setdefault(str(g["error"].iloc[0]), []).append(str(label))
        skipped += [f"{', '.join(labels)} under engine {e}: every point failed, e.g. {err}"
                    for err, labels in failed.items()]
    frames = [_engine_frame(r.frame, e) for e, r in results.items()]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["engine", axis, "curve"])
    lines = pd.DataFrame([row for e, r in results.items() for row in engine_lines(r, e)],
                         columns=["engine", "line", axis, "speedup", "speedup_interval", "curve", "k", "saturated",
                                  "kv_limited"])
    log = axis in LOG_AXES
    verdict: dict[str, dict[str, dict[str, Any]]] = {}
    for (e, line), g in lines.groupby(["engine", "line"], sort=False):
        g = g.sort_values(axis)
        v = line_verdict(g[axis].tolist(), g["speedup"].tolist(), log, g["saturated"].astype(bool).tolist())
        if any(isinstance(iv, (list, tuple)) for iv in g["speedup_interval"]):   # a real engine: where the
            v["breakeven_interval"] = breakeven_range(g[axis].tolist(), g["speedup"].tolist(),   # edges cross 1
                                                      *interval_edges(g["speedup_interval"]), log)
        verdict.setdefault(str(e), {})[str(line)] = v
    for e, r in results.items():           # then each curve's own, as the engine's panel draws it
        v = r.verdict
        for label in v.breakeven:
            verdict.setdefault(e, {}).setdefault(label, {"breakeven": v.breakeven[label],
                                                         "crossings": v.crossings.get(label, []),
                                                         "status": v.status.get(label),
                                                         **({"breakeven_interval": v.breakeven_interval.get(label)}
                                                            if v.breakeven_interval is not None else {})})
    metric_used = next((r.metric for r in results.values()), metric or "throughput")
    return EngineBreakevenResult(axis, list(values), metric_used, list(engines), list(results), skipped, frame, lines,
                                 verdict, results, describe_scenario(source),
                                 sum(r.points_simulated for r in results.values()),
                                 sum(r.points_total for r in results.values()), caps)


def _engine_frame(df: Any, engine: str) -> Any:
    """One engine's rows with the `engine` column first; the analytic model (the ideal engine's
    passes alone) only on ideal's rows."""
    out = df.assign(engine=engine)[["engine", *(c for c in df.columns if c != "engine")]]
    if engine != "ideal":
        out["analytic_speedup"] = float("nan")
    return out


def rule_refusal(source: Mapping[str, Any], policy: str, engine: str, k_max: int) -> str:
    """Why an engine's own rule cannot run here ('' when it can, or for any other policy): it runs
    under another engine, or the scenario under this one refuses it (its fields, its drafter)."""
    from simulator.scenario.scenario import load_scenario
    need = ENGINE_RULES.get(policy)
    if need is None:
        return ""
    if need != engine:
        return f"{policy} runs under engine.kind {need} only"
    own = own_policy(source)
    probe = copy.deepcopy(dict(source))
    probe["policy"] = dict(own) if own.get("kind") == policy else {"kind": policy}
    probe["drafter"] = {**probe["drafter"], "num_speculative_tokens": k_max}
    try:
        load_scenario(probe)
    except SpecsightInputError as err:
        return str(err)
    return ""


def engine_lines(res: BreakevenResult, engine: str) -> list[dict[str, Any]]:
    """One engine's lines, point by point: the best static K (where the axis is not K itself) and
    every other curve as it is."""
    df, axis = res.frame, res.axis
    rows: list[dict[str, Any]] = []
    static = df[df["policy"] == "static"] if axis != "k" else df.iloc[0:0]
    for v, g in static.groupby(axis, sort=True):
        ok = g.dropna(subset=["speedup"])
        if len(ok):
            j = ok["speedup"].idxmax()
            rows.append({"engine": engine, "line": BEST_K, axis: v, "speedup": float(ok.loc[j, "speedup"]),
                         "speedup_interval": ok.loc[j].get("speedup_interval"),
                         "curve": ok.loc[j, "curve"], "k": ok.loc[j, "k"], **_marks(ok.loc[j])})
        else:
            rows.append({"engine": engine, "line": BEST_K, axis: v, "speedup": float("nan"), "speedup_interval": None,
                         "curve": "", "k": None, **_marks(g.iloc[0])})
    rest = df if axis == "k" else df[df["policy"] != "static"]
    for label, g in rest.groupby("curve", sort=False):
        rows += [{"engine": engine, "line": label, axis: r[axis], "speedup": r["speedup"],
                  "speedup_interval": r.get("speedup_interval"), "curve": label, "k": r["k"], **_marks(r)}
                 for _, r in g.iterrows()]
    return rows


def _marks(row: Any) -> dict[str, bool]:
    """A line's point is saturated (KV-limited) when its run with or without speculation is."""
    return {"saturated": bool(row["saturated"] or row["base_saturated"]),
            "kv_limited": bool(row["kv_limited"] or row["base_kv_limited"])}
