"""The drafter axis of a capacity break-even: each value is a drafter, with the acceptance it drafts at.

`breakeven(scenario, axis="drafter", values="ngram,eagle3@minimax-m3-eagle3", metric="capacity")`.
A value is `DRAFTER[@ACCEPTANCE]`:

  DRAFTER     as `specsight breakeven --analytic --drafter` takes it (specsight/studies/shared/drafter_arg.py): a
              method (`ngram`; `eagle3`: the head eagle3-<target> from models/), `method:model`
              (`draft_model:llama-3.2-1b`) or a catalog name (`eagle3-llama-3.1-70b`);
  ACCEPTANCE  an acceptance preset (`minimax-m3-eagle3`: simulator/speculation/acceptance_presets.py, the table
              in docs/reference/acceptance.md) or an i.i.d. alpha in [0, 1] (`0.71`).

What the target keeps depends on what the drafter proposes, so a drafter other than the scenario's
own needs its `@ACCEPTANCE`; the scenario's own drafter (the same method and model) keeps the
scenario's drafter block and acceptance unless `@` gives another. Another drafter gets a block of
its own, {method, model, num_speculative_tokens: the scenario's K}: its method's other options take
their defaults (simulator/speculation/drafters.py DrafterSpec). Each curve then sets K as on every axis.

Plain decoding is the scenario with speculation off: one capacity, shared by every drafter (the
baseline drops the drafter's overrides, as it drops K and acceptance on the k and alpha axes).
The axis is unordered: no break-even is interpolated between two drafters. The verdict gives each
curve's status over the drafters (`pays with every drafter`, `pays with some drafters`, `pays with
no drafter`) and the best static K per drafter.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulator.common.errors import SpecsightInputError, closest_names

from .crossings import BreakevenVerdict, status

if TYPE_CHECKING:
    import pandas as pd

DRAFTER = "drafter"
VALUE_FORM = "DRAFTER[@ACCEPTANCE], e.g. ngram,eagle3@minimax-m3-eagle3,draft_model:llama-3.2-1b@0.71"
STATUS = {"pays throughout": "pays with every drafter", "crosses": "pays with some drafters",
          "never pays": "pays with no drafter", "pays or ties": "pays or ties with every drafter",
          "ties at best": "pays with no drafter (ties at best)", "no data": "no data"}


@dataclass(frozen=True)
class DrafterValue:
    """One point of the drafter axis: the label as given, and the scenario blocks it sets."""
    label: str                      # "eagle3@minimax-m3-eagle3"
    drafter: Mapping[str, Any]      # the scenario's drafter: block at this point
    acceptance: Mapping[str, Any]   # its acceptance: block

    def overrides(self) -> dict[str, Any]:
        return {"drafter": dict(self.drafter), "acceptance": dict(self.acceptance)}


def _acceptance(item: str, text: str) -> dict[str, Any]:
    """`0.71` -> i.i.d. alpha; a preset name -> that preset."""
    from simulator.speculation.acceptance_presets import PRESETS
    try:
        alpha = float(text)
    except ValueError:
        if text not in PRESETS:
            raise SpecsightInputError("--values", item, f"unknown acceptance preset {text!r}; "
                                      + closest_names(text, PRESETS)) from None
        return {"model": "preset", "name": text}
    if not 0.0 <= alpha <= 1.0:
        raise SpecsightInputError("--values", item, "an acceptance alpha lies in [0, 1]")
    return {"model": "iid", "alpha": alpha}


def _presets_for(method: str) -> str:
    from simulator.speculation.acceptance_presets import PRESETS
    names = [p.name for p in PRESETS.values() if p.method == method]
    if not names:
        return f"no preset is measured for {method}: give an alpha"
    return f"presets for {method}: {', '.join(names)}"


def parse_drafters(field: str, text: str | Sequence[str] | None, source: Mapping[str, Any]) -> list[DrafterValue]:
    """The drafter axis's values, in the order given, each once; each checked by loading the
    scenario with it (an unknown drafter, preset or head fails here, before anything runs)."""
    from simulator.scenario.scenario import load_scenario

    from ..shared.drafter_arg import resolve_drafter
    from ..shared.overrides import override_strings
    if text is None:
        raise SpecsightInputError(field, None, f"the drafter axis needs --values: {VALUE_FORM}")
    items = list(dict.fromkeys(p.strip() for p in (text.split(",") if isinstance(text, str) else map(str, text))
                               if p.strip()))
    if not items:
        raise SpecsightInputError(field, text, VALUE_FORM)
    own = dict(source.get("drafter") or {})
    k = int(own.get("num_speculative_tokens", 1)) or 1
    out = []
    for item in items:
        name, at, acc_text = item.partition("@")
        if at and not acc_text.strip():
            raise SpecsightInputError(field, item, f"name an acceptance after @: {VALUE_FORM}")
        try:
            spec = resolve_drafter(name.strip(), str(source.get("model")), k)
        except SpecsightInputError as e:
            raise SpecsightInputError(field, item, f"{e.allowed} ({VALUE_FORM})") from None
        same = spec.method == own.get("method") and (spec.model or None) == (own.get("model") or None)
        block = own if same else {"method": spec.method, **({"model": spec.model} if spec.model else {}),
                                  "num_speculative_tokens": k}
        if at:
            acc = _acceptance(item, acc_text.strip())
        elif same:
            acc = dict(source.get("acceptance") or {})
        else:
            raise SpecsightInputError(field, item, f"a drafter other than the scenario's ({own.get('method')}) needs "
                                      f"its acceptance: {name}@PRESET or {name}@ALPHA; {_presets_for(spec.method)}")
        value = DrafterValue(item, block, acc)
        try:
            load_scenario(source, override_strings(value.overrides()))
        except SpecsightInputError as e:
            raise SpecsightInputError(field, item, f"{e.field}={e.value!r}: {e.allowed}") from None
        out.append(value)
    return out


def drafter_verdict(df: pd.DataFrame) -> BreakevenVerdict:
    """Per curve: no break-even (the axis is unordered) and its status over the drafters; per
    drafter: the static K of the highest speedup (0: none beats plain decoding)."""
    st: dict[str, str] = {}
    for label, g in df.groupby("curve", sort=False):
        st[str(label)] = STATUS[status(g["speedup"].tolist())]
    best: dict[str, int] = {}
    static = df[df["policy"] == "static"].dropna(subset=["speedup"])
    for v, g in static.groupby(DRAFTER, sort=False):
        if g["k"].isna().all():
            continue
        j = g["speedup"].idxmax()
        best[str(v)] = int(g.loc[j, "k"]) if g.loc[j, "speedup"] > 1.0 else 0
    return BreakevenVerdict({c: None for c in st}, {c: [] for c in st}, st, best)


def plot_drafters(df: pd.DataFrame, title: str, ylabel: str, path: str | Path) -> Path:
    """Capacity per GPU within the SLO at each drafter: plain decoding's bar, then one per curve,
    each curve's bar labelled with its speedup over plain decoding."""
    import matplotlib.pyplot as plt

    from ..shared.figure_file import save_figure
    labels = list(dict.fromkeys(df[DRAFTER]))
    curves = list(dict.fromkeys(df["curve"]))
    width = 0.8 / (len(curves) + 1)
    fig, ax = plt.subplots(figsize=(max(7.0, 2.2 * len(labels)), 5.0), dpi=110)
    for i, lab in enumerate(labels):
        g = df[df[DRAFTER] == lab]
        base = g["base_capacity_qps_per_gpu"].iloc[0]
        ax.bar(i - 0.4 + width / 2, _or0(base), width, color="grey", label="plain decoding" if i == 0 else None)
        for j, c in enumerate(curves):
            r = g[g["curve"] == c]
            q = r["spec_capacity_qps_per_gpu"].iloc[0] if len(r) else None
            x = i - 0.4 + width * (j + 1.5)
            ax.bar(x, _or0(q), width, color=f"C{j}", label=c if i == 0 else None)
            s = float(r["speedup"].iloc[0]) if len(r) else math.nan
            ax.annotate(f"{s:.2f}x" if math.isfinite(s) else "none", (x, _or0(q)), textcoords="offset points",
                        xytext=(0, 3), ha="center", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("drafter (@ its acceptance)")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return save_figure(fig, path)


def _or0(q: Any) -> float:
    return float(q) if q is not None and q == q else 0.0
