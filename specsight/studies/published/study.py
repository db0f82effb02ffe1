"""Published engine results as a validation table: each row simulated at its publication's setup and
compared with the published TPOT, tokens/s and speedup.

data/published/engine_results.yaml holds the rows: a published engine measurement each (setup,
figure, acceptance, source). For every row this module builds a scenario with the row's setup
(`scenario_for`), runs it with `simulator.run.simulate(..., baseline=True)` under the row's engine
(`engine_for`: the one place that decides which engine a row runs under) and compares the predicted
figure with the published one (`validate_published`).

Figures (a row's `checks`):
  tokens_per_s  plain decoding at batch 1: 1000 / the mean TPOT of the run (ms)
  speedup       basis tpot: plain TPOT / speculative TPOT (batch 1, per-request decode rate);
                basis throughput: speculative / plain output tokens/s of the whole run
error = |predicted - published| / published; side_ok (speedup rows): predicted and published lie on
the same side of 1.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulator.common.errors import SpecsightInputError
from simulator.common.paths import DATA_DIR
from simulator.speculation.acceptance_presets import alpha_for_tau
from simulator.speculation.spec_math import candidate_alpha

from .intervals import loso_intervals, residual_rows
from .own_publication import not_held_out_reason, row_spread

RESULTS_FILE = DATA_DIR / "published" / "engine_results.yaml"
NOT_MODELLED = "ideal (engine not modelled)"
FIGURES = ("tokens_per_s", "speedup")
BASES = ("tpot", "throughput")
ACCEPTANCE = ("stated", "assumed", "n/a")
# what a prediction reports besides the figure (NaN where a row has none)
PREDICTION_COLUMNS = ("plain_tpot_ms", "spec_tpot_ms", "plain_tokens_per_s", "spec_tokens_per_s", "accept_length")
# requests per closed-loop user: enough rounds that a speculative row's TPOT mean settles
REQUESTS_PER_USER = 64

# the engine version each publication ran, where specsight models that version (engine.version; a
# row not listed runs at its engine's default version): vLLM's own measurements of Apr-Jul 2025 and
# the vLLM run in TensorRT-LLM PR #4802 (Jun 2025) ran V1 at v0.9.x (no async scheduling, PIECEWISE
# graphs, the unpadded drafter batch: simulator/engines/vllm.py); SGLang PR #4716 (Mar 2025) and the
# SGLang docs' table, which SGLang issue #5502 cites on 2025-04-17 ('approximately 2.5x' for EAGLE-3:
# the same table, inferred), ran SGLang before the draft extend's CUDA graph (PR #6606, May 2025):
# v0.4 (simulator/engines/sglang.py)
ENGINE_VERSIONS = {
    "vLLM V1 (Apr-Jul 2025)": "v1-0.9",
    "vLLM V1, Jun 2025 (as measured in TensorRT-LLM PR #4802)": "v1-0.9",
    "SGLang docs (speculative decoding page)": "v0.4",
    "SGLang, Mar 2025": "v0.4",
    "TensorRT-LLM PyTorch backend, Jun 2025 (two-model EAGLE-3)": "0.20",
    "vLLM v0.10.1 (SpecDecode-Bench)": "v1-0.9",
    "vLLM V1, Apr 2025 (drafter eager, before PR #17211)": "v1-0.8",
}

# the table's goals (absolute relative error; the side band of the speedup)
TOKENS_PER_S_MAX_ERROR = 0.15
SPEEDUP_MEDIAN_MAX_ERROR = 0.15
SPEEDUP_MAX_ERROR = 0.30
SIDE_BAND = (0.95, 1.05)


@dataclass(frozen=True)
class PublishedRow:
    """One published measurement, as data/published/engine_results.yaml states it."""
    name: str
    ref: str                       # row number(s) of engines.md §4
    engine: str                    # vllm | sglang | trtllm, as published
    version: str                   # the engine's version as the source gives it
    setup: Mapping[str, Any]
    published: Mapping[str, float]
    checks: str                    # tokens_per_s | speedup
    source: str
    basis: str = "tpot"            # speedup rows: tpot (batch 1) | throughput
    acceptance: str = "n/a"        # stated | assumed | n/a (plain rows)
    acceptance_preset: str | None = None
    acceptance_source: str = ""
    assumed: str = ""
    assumed_accept_length: float | None = None   # an assumed AL (another run's) where no preset fits
    lacks: str = ""                # what the model lacks for this row and what its source leaves unknown

    def __post_init__(self) -> None:
        w = f"{RESULTS_FILE.name}: {self.name}"
        if self.checks not in FIGURES:
            raise SpecsightInputError(f"{w}.checks", self.checks, f"one of {FIGURES}")
        if self.basis not in BASES:
            raise SpecsightInputError(f"{w}.basis", self.basis, f"one of {BASES}")
        if self.acceptance not in ACCEPTANCE:
            raise SpecsightInputError(f"{w}.acceptance", self.acceptance, f"one of {ACCEPTANCE}")
        if self.checks not in self.published:
            raise SpecsightInputError(f"{w}.published", dict(self.published),
                                      f"must hold the checked figure {self.checks}")
        if (self.checks == "speedup") != ("drafter" in self.setup):
            raise SpecsightInputError(f"{w}.setup", dict(self.setup),
                                      "a drafter for speedup rows, none for tokens/s rows")
        if not self.source:
            raise SpecsightInputError(f"{w}.source", self.source, "the publication (PR, issue, blog)")

    @property
    def figure(self) -> float:
        """The published figure the row checks."""
        return float(self.published[self.checks])

    @property
    def drafter(self) -> Mapping[str, Any] | None:
        return self.setup.get("drafter")


@dataclass(frozen=True)
class PublishedCatalog:
    rows: tuple[PublishedRow, ...]
    datasets: Mapping[str, Mapping[str, Any]]
    waiting: tuple[Mapping[str, str], ...]     # rows waiting for the catalog (model or precision)
    excluded: tuple[Mapping[str, str], ...]    # rows that are not rows, and why


def load_published(path: Path | str | None = None) -> PublishedCatalog:
    """The rows, dataset lengths, and the waiting and excluded lists of the results file (default
    RESULTS_FILE, looked up when called)."""
    raw = yaml.safe_load(Path(RESULTS_FILE if path is None else path).read_text())
    rows = tuple(PublishedRow(**r) for r in raw["rows"])
    names = [r.name for r in rows]
    if len(set(names)) != len(names):
        raise SpecsightInputError(f"{Path(path).name}: rows", names, "unique names")
    for r in rows:
        if r.setup["dataset"] not in raw["datasets"]:
            raise SpecsightInputError(f"{r.name}.setup.dataset", r.setup["dataset"],
                                      f"one of {sorted(raw['datasets'])}")
    return PublishedCatalog(rows, raw["datasets"], tuple(raw.get("waiting", ())), tuple(raw.get("excluded", ())))


# ---- scenarios --------------------------------------------------------------------------------
def stated_alpha(accept_length: float, depth: int, branches: int = 1) -> float:
    """The per-token alpha that reproduces a stated accept length at this depth (K): the per-depth
    alpha of the tau rule (1 + a + ... + a^depth = accept length), and for a tree of `branches`
    candidates per depth the per-token alpha whose tree rule 1 - (1 - alpha)^branches gives it."""
    return candidate_alpha(alpha_for_tau(accept_length, depth), branches)


def _acceptance(row: PublishedRow) -> Any:
    d = row.drafter
    assert d is not None
    if row.acceptance_preset:
        return {"model": "preset", "name": row.acceptance_preset}
    branches = int(d["tree"]["branches"]) if d.get("tree") else 1
    if row.assumed_accept_length is not None:
        return {"model": "iid", "alpha": stated_alpha(float(row.assumed_accept_length), int(d["k"]), branches)}
    if row.acceptance != "stated" or "accept_length" not in row.published:
        raise SpecsightInputError(f"{row.name}.acceptance_preset", None,
                                  "a preset name (only a stated accept length converts without one)")
    return {"model": "iid", "alpha": stated_alpha(float(row.published["accept_length"]), int(d["k"]), branches)}


def scenario_for(row: PublishedRow, datasets: Mapping[str, Mapping[str, Any]], engine_kind: str = "ideal") -> dict:
    """The scenario of one row: a closed loop of `batch` users (batch 1: one request at a time),
    fixed prompt and output lengths (the row's where stated, else its dataset's), the row's model,
    drafter, K / tree, GPUs, TP and precision, run under `engine_kind`."""
    s = row.setup
    ds = datasets[s["dataset"]]
    batch = int(s["batch"])
    sc: dict[str, Any] = {
        "name": row.name,
        "seed": 0,
        "hardware": {"gpu": s["gpu"], "tp": int(s["tp"]), "dtype": s["precision"]},
        "model": s["model"],
        "workload": {"arrival": {"process": "closed_loop", "concurrency": batch},
                     "num_requests": REQUESTS_PER_USER * batch,
                     "prompt_len": int(s.get("prompt_tokens", ds["prompt_tokens"])),
                     "output_len": int(s.get("output_tokens", ds["output_tokens"]))},
        "engine": {"kind": engine_kind},
    }
    version = ENGINE_VERSIONS.get(row.version) if engine_kind == row.engine else None
    if version:
        sc["engine"]["version"] = version
    if engine_kind == row.engine:       # the engine arguments the publication's benchmark sets
        sc["engine"].update(s.get("engine_args", {}))
    d = row.drafter
    if d is not None:
        drafter: dict[str, Any] = {"method": d["method"], "num_speculative_tokens": int(d["k"])}
        if d.get("model"):
            drafter["model"] = d["model"]
        if d.get("tree"):
            drafter.update(tree=True, tree_nodes=int(d["tree"]["nodes"]), tree_branches=int(d["tree"]["branches"]))
        sc["drafter"] = drafter
        sc["acceptance"] = _acceptance(row)
        sc["policy"] = {"kind": "static"}
    return sc


def engine_refusal(scenario: Mapping[str, Any]) -> SpecsightInputError | None:
    """The switch point for every study that runs under a named engine: None when specsight prices
    the scenario's engine.kind (resolve_deployment accepts it), else resolve_deployment's refusal
    (an input error on engine.kind). Any other input error is raised."""
    from simulator.scenario.resolve import resolve_deployment
    from simulator.scenario.scenario import load_scenario
    try:
        resolve_deployment(load_scenario(dict(scenario)))
    except SpecsightInputError as e:
        if e.field != "engine.kind":
            raise
        return e
    return None


def engine_for(row: PublishedRow, datasets: Mapping[str, Mapping[str, Any]]) -> tuple[str, str]:
    """(engine.kind the row runs under, the table's engine column): the row's own engine whenever
    specsight prices it (`engine_refusal`), else `ideal`, labelled 'ideal (engine not modelled)'."""
    if engine_refusal(scenario_for(row, datasets, row.engine)) is not None:
        return "ideal", NOT_MODELLED
    return row.engine, row.engine


# ---- predictions ------------------------------------------------------------------------------
def _tpot_ms(summary: Mapping[str, Any]) -> float:
    return float(summary["tpot_ms_mean"])


def predict(row: PublishedRow, datasets: Mapping[str, Mapping[str, Any]], engine_kind: str,
            adjust: Callable[[dict], dict] | None = None) -> dict[str, float]:
    """Simulate one row: the predicted checked figure and what explains it (TPOTs, tokens/s, AL);
    adjust: a change to the row's scenario first (host.py sets an engine profile)."""
    from simulator.run import simulate
    sc = scenario_for(row, datasets, engine_kind)
    res = simulate(adjust(sc) if adjust is not None else sc, baseline=row.checks == "speedup")
    s = res.summary
    if row.checks == "tokens_per_s":
        return {"predicted": 1000.0 / _tpot_ms(s), "plain_tpot_ms": _tpot_ms(s),
                "plain_tokens_per_s": float(s["output_tokens_per_s"])}
    b = res.baseline.summary
    out = {"plain_tpot_ms": _tpot_ms(b), "spec_tpot_ms": _tpot_ms(s),
           "plain_tokens_per_s": float(b["output_tokens_per_s"]), "spec_tokens_per_s": float(s["output_tokens_per_s"]),
           "accept_length": float(s["mean_accept_length"])}
    out["predicted"] = (out["plain_tpot_ms"] / out["spec_tpot_ms"] if row.basis == "tpot"
                        else out["spec_tokens_per_s"] / out["plain_tokens_per_s"])
    return out


def relative_error(predicted: float, published: float) -> float:
    """|predicted - published| / published."""
    return abs(predicted - published) / published


def side_ok(predicted: float, published: float) -> bool:
    """Whether a predicted speedup lies on the same side of 1 as the published one (1 counts as
    neither faster nor slower: both must be exactly 1)."""
    return bool(np.sign(predicted - 1.0) == np.sign(published - 1.0))


def misses(row: PublishedRow, error: float, side: bool | None) -> bool:
    """A row misses when its own error is past its goal (15 % for either figure; speedups also
    share the 30 % ceiling) or a speedup's side of 1 is wrong outside the 0.95-1.05 band."""
    if row.checks == "tokens_per_s":
        return error > TOKENS_PER_S_MAX_ERROR
    outside = not (SIDE_BAND[0] <= row.figure <= SIDE_BAND[1])
    return error > SPEEDUP_MEDIAN_MAX_ERROR or (outside and side is False)


def _published_tpot_ms(row: PublishedRow, which: str) -> float:
    p = row.published
    if f"{which}_tpot_ms" in p:
        return float(p[f"{which}_tpot_ms"])
    if which == "plain" and "tokens_per_s" in p:
        return 1000.0 / float(p["tokens_per_s"])
    return 1000.0 / float(p[f"{which}_tokens_per_s"]) if f"{which}_tokens_per_s" in p else math.nan


def why(row: PublishedRow, pred: Mapping[str, float], engine_label: str, missed: bool) -> str:
    """A short reason for a miss, from the numbers: which side is off, by how much, and the
    engine's costs left out when it ran as ideal."""
    if not missed:
        return ""
    parts = []
    over = pred["predicted"] > row.figure
    if row.checks == "tokens_per_s":
        parts.append(f"plain TPOT {pred['plain_tpot_ms']:.2f} ms vs {_published_tpot_ms(row, 'plain'):.2f} ms")
    elif row.basis == "tpot":
        parts.append(f"speedup {'over' if over else 'under'}stated: speculative TPOT {pred['spec_tpot_ms']:.2f} ms vs "
                     f"{_published_tpot_ms(row, 'speculative'):.2f} ms, plain {pred['plain_tpot_ms']:.2f} vs "
                     f"{_published_tpot_ms(row, 'plain'):.2f} ms")
    elif "speculative_tokens_per_s" in row.published:
        parts.append(f"speedup {'over' if over else 'under'}stated: {pred['spec_tokens_per_s']:.0f} vs "
                     f"{row.published['speculative_tokens_per_s']:.0f} tok/s speculative, "
                     f"{pred['plain_tokens_per_s']:.0f} vs {row.published['plain_tokens_per_s']:.0f} plain")
    else:       # a published ratio only
        parts.append(f"speedup {'over' if over else 'under'}stated: {pred['spec_tokens_per_s']:.0f} tok/s "
                     f"speculative, {pred['plain_tokens_per_s']:.0f} plain predicted (the source gives the ratio only)")
    if "accept_length" in pred:
        stated = row.published.get("accept_length")
        parts.append(f"AL {pred['accept_length']:.2f}" + (f" vs {stated} stated" if stated else
                                                           f" ({row.acceptance_preset}, assumed)"))
        if stated and row.basis == "tpot":     # the round: TPOT x tokens per round
            parts.append(f"round {pred['spec_tpot_ms'] * pred['accept_length']:.1f} ms vs "
                         f"{_published_tpot_ms(row, 'speculative') * stated:.1f} ms")
    gap = unpriced(row, pred)
    if gap:
        parts.append(gap)
    if engine_label != NOT_MODELLED:
        parts.append(lacks(row))
    if engine_label == NOT_MODELLED and row.checks == "tokens_per_s":
        parts.append(f"the profile's generic host terms and datasheet efficiencies stand in for {row.engine}'s")
    elif engine_label == NOT_MODELLED:
        parts.append(f"{row.engine}'s extra passes, host work and syncs per round not priced")
    return "; ".join(parts)


def lacks(row: PublishedRow) -> str:
    """What the engine model lacks for this row, by what the row runs (docs/validation.md, 'What the
    model lacks', gives the sources); a row's own `lacks` (its source's unknowns) comes first."""
    if row.lacks:
        return f"lacks: {row.lacks}"
    d = row.drafter
    if d is None:
        if row.engine == "sglang":
            return ("lacks: SGLang overlaps plain decoding's host work, so the priced step is the GPU pass: "
                    "GPU time beyond the profile's weight-read efficiency (efficiency.memory 0.8)"
                    + (" and TP all-reduces" if int(row.setup["tp"]) > 1 else "") + " is not priced")
        return "lacks: GPU time beyond the profile's weight-read efficiency, or host work outside H(B)"
    if row.basis == "throughput":
        return "lacks: the accept length of this run (assumed), and the loaded run's host work per iteration"
    if d.get("tree") and int(d["tree"]["branches"]) > 1:
        return ("lacks: the eager tree build and verify bookkeeping between the round's syncs, and tree drafting's "
                "work per draft step beyond the priced passes (the draft extend's eager pass and 7 syncs are priced)")
    if row.engine == "vllm" and d.get("method") == "eagle3":
        return ("lacks: an EAGLE-3 draft step's time beyond EAGLE-1's, which vLLM v0.9.2's code does not show "
                "(both drafters compiled in PIECEWISE graphs; EAGLE-3 adds 4 launches a step)")
    return ("lacks: the propose loop's host time per draft step beyond its kernel launches (attention-metadata "
            "builds, the compiled drafter's dispatch), which no source times outside a profiler")


def unpriced(row: PublishedRow, pred: Mapping[str, float]) -> str:
    """What the model lacks on this row, in ms: the published step or round less the predicted one
    (a plain step; for a stated accept length, the round, and what it lacks beyond the plain step
    per draft token). Positive: time the publication pays that no priced term explains. Throughput
    rows (loaded runs, aggregate tokens/s) state no step time: empty."""
    if row.checks == "speedup" and row.basis == "throughput":
        return ""
    plain = _published_tpot_ms(row, "plain") - pred["plain_tpot_ms"]
    out = f"unpriced: {plain:+.2f} ms a plain step"
    stated = row.published.get("accept_length")
    if row.checks == "speedup" and row.basis == "tpot" and stated:
        rnd = _published_tpot_ms(row, "speculative") * float(stated) - pred["spec_tpot_ms"] * pred["accept_length"]
        k = int(row.drafter["k"]) if row.drafter else 1
        out += f", {rnd:+.2f} ms a round ({(rnd - plain) / k:+.2f} ms per draft token beyond the plain step's)"
    return out


def priced_scenario(row: PublishedRow, datasets: Mapping[str, Mapping[str, Any]]) -> dict | None:
    """The row's scenario under its engine; None where the engine refuses the row's setup."""
    try:
        kind, _ = engine_for(row, datasets)
    except SpecsightInputError:
        return None
    return scenario_for(row, datasets, kind)


def validate_published(path: Path | str | None = None) -> Any:
    """The validation table: one row per published measurement (a pandas DataFrame) with name,
    engine, figure, published, predicted, error, side_ok, acceptance, why, the simulated TPOTs,
    tokens/s and accept length behind the prediction, and the prediction's 80 % interval built
    leave-one-source-out (intervals.py; None where none)."""
    import pandas as pd
    cat = load_published(path)
    out, scenarios = [], []
    for row in cat.rows:
        sc = None                            # the row's scenario under its engine, for its spread
        try:
            kind, label = engine_for(row, cat.datasets)
            sc = scenario_for(row, cat.datasets, kind)
            pred = predict(row, cat.datasets, kind)
        except SpecsightInputError as e:     # an engine that refuses the row's setup: shown, not fatal
            label, pred = row.engine, {"predicted": math.nan}
            reason = f"not run: {e}"
        scenarios.append(sc)
        err = relative_error(pred["predicted"], row.figure)
        ran = math.isfinite(err)
        side = side_ok(pred["predicted"], row.figure) if row.checks == "speedup" and ran else None
        missed = not ran or misses(row, err, side)
        if ran:
            reason = why(row, pred, label, missed)
        out.append({"name": row.name, "ref": row.ref, "engine": label, "published_engine": row.engine,
                    "version": row.version, "figure": row.checks, "basis": row.basis if row.checks == "speedup" else "",
                    "published": row.figure, "predicted": pred["predicted"], "error": err, "side_ok": side,
                    "acceptance": row.acceptance, "ok": not missed, "why": reason,
                    "method": (row.drafter or {}).get("method", ""),
                    **{k: pred.get(k, math.nan) for k in PREDICTION_COLUMNS}, "source": row.source})
    df = pd.DataFrame(out)
    spreads = [row_spread(row, sc) for row, sc in zip(cat.rows, scenarios)]
    df["spread"] = [s.pair for s in spreads]
    df["held_out"] = [not s.left_out for s in spreads]
    df["not_held_out"] = [not_held_out_reason(row, s.left_out) for row, s in zip(cat.rows, spreads)]
    df["interval"] = loso_intervals(residual_rows(df.to_dict("records")))
    return df
