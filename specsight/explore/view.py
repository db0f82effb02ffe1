"""What the page shows for one set of controls, computed without Dash: the scenario the controls
make (checked as the command line checks it), the closed-form figures, the round timeline, the
accepted-length distribution, the capacity table, the serving command and the shareable URL.
The page's callbacks are `closed_form_tables` (what the browser redraws the curves from as the K
and alpha sliders move), `server_curve_figures` (the curves where those tables do not reach) and
`build_view` (everything else); benchmarks/bench_explore.py times build_view and the browser."""
from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from simulator.common.errors import SpecsightInputError, SpecsightWarning

from ..studies.shared.overrides import scenario_source
from . import figures
from .capacity_table import CapacityRow, capacity_rows
from .closed_form import closed_form_data
from .priced import K_MAX, Curves, Priced, curves
from .settings import Settings, overrides, scenario_yaml
from .timeline import round_timeline


@dataclass(frozen=True)
class View:
    source: dict[str, Any]             # the scenario the controls make (scenario_source form)
    yaml: str
    query: str                         # the settings as a URL query
    warnings: tuple[str, ...]          # SpecsightWarnings, each as the command line prints it
    curves: Curves
    figures: dict[str, Any]            # name -> plotly Figure
    capacity: list[CapacityRow]
    serve: str                         # the chosen engine's serving command, or why it has none


def checked_source(base: Mapping[str, Any], s: Settings) -> dict[str, Any]:
    """The scenario `base` at the settings `s`, checked by load_scenario (SpecsightInputError:
    the command line's one line for the same `--set` values)."""
    drafter = None
    base_drafter = base.get("drafter") or {}
    if s.drafter != (f"{base_drafter.get('method')}:{base_drafter.get('model')}" if base_drafter.get("model")
                     else str(base_drafter.get("method"))):
        from ..studies.shared.drafter_arg import resolve_drafter
        spec = resolve_drafter(s.drafter.strip(), s.model, 1)
        drafter = {"method": spec.method, **({"model": spec.model} if spec.model else {})}
    if s.acceptance == "file" and not s.metrics_file:
        raise SpecsightInputError("acceptance.path", None, "upload a vLLM metrics file (a /metrics scrape or a "
                                  "`vllm bench serve` result JSON), or pick alpha or a preset")
    return scenario_source(dict(base), overrides(base, s, drafter))


def serving_command(source: Mapping[str, Any]) -> str:
    """The serving command of the scenario's engine (vLLM for `ideal`), with the files it reads."""
    from ..studies.deploy.study import deployment
    kind = (source.get("engine") or {}).get("kind", "ideal")
    engine = "vllm" if kind == "ideal" else kind
    try:
        cmd = deployment(source)[engine]
    except SpecsightInputError as e:
        return f"no serving command: {e}"
    if not cmd.supported:
        return f"{engine}: not deployable: {cmd.unsupported}"
    lines = [cmd.command or ""]
    for name, text in cmd.files:
        lines += ["", f"# {name}", text.rstrip()]
    lines += [f"# {n}" for n in cmd.notes]
    head = "# engine.kind ideal: vLLM's command shown\n" if kind == "ideal" else ""
    return head + "\n".join(lines)


def analytic_curves(base: Mapping[str, Any], s: Settings) -> tuple[dict[str, Any], Priced, Curves, float]:
    """The scenario the controls make, priced, and its closed-form curves at the chosen batch."""
    source = checked_source(base, s)
    pr = Priced(source)
    batch = _batch(s, pr)
    return source, pr, curves(pr, batch, float(s.alpha) if s.acceptance == "alpha" else None), batch


def curve_figures(c: Curves) -> dict[str, Any]:
    """The closed-form curves' figures: speedup against batch, K and alpha."""
    return {"batch": figures.batch_figure(c), "k": figures.k_figure(c), "alpha": figures.alpha_figure(c)}


def closed_form_tables(base: Mapping[str, Any], s: Settings) -> dict[str, Any]:
    """What the browser redraws the curves from as the K and alpha sliders move (closed_form.py),
    for the other controls of `s` (its K held within the slider's range)."""
    k = min(max(int(s.k), 1), K_MAX) if s.k.strip().lstrip("-").isdigit() else 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecsightWarning)        # build_view reports them
        source = checked_source(base, s.replace(k=k))
        pr = Priced(source)
        return closed_form_data(pr, _batch(s, pr), s.acceptance == "alpha")


def server_curve_figures(base: Mapping[str, Any], s: Settings) -> dict[str, Any]:
    """curve_figures at the settings `s`, drawn here where the browser's tables do not hold them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpecsightWarning)
        return curve_figures(analytic_curves(base, s)[2])


def build_view(base: Mapping[str, Any], s: Settings, *, with_serve: bool = True) -> View:
    """Everything the page draws for settings `s` (SpecsightInputError for a bad control)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SpecsightWarning)
        source, pr, c, batch = analytic_curves(base, s)
        bars = round_timeline(pr, int(round(batch)), c.alpha)
        tpot = pr.scenario.slo.tpot_ms_p99
        rate = pr.scenario.workload.qps if s.load == "rate" else None
        cap = capacity_rows(pr, c.alpha, tpot, rate)
    said = tuple(dict.fromkeys(" ".join(str(w.message).split()) for w in caught
                               if issubclass(w.category, SpecsightWarning)))
    figs = {**curve_figures(c),
            "timeline": figures.timeline_figure(bars, int(round(batch)), pr.expected_tokens(pr.k, c.alpha),
                                                source.get("engine", {}).get("kind", "ideal")),
            "accepted": figures.accepted_figure(pr.accepted_distribution(), pr.k)}
    return View(source, scenario_yaml(source), s.to_query(), said, c, figs, cap,
                serving_command(source) if with_serve else "")


def _batch(s: Settings, pr: Priced) -> float:
    """The batch the pictures are drawn at: the users of a closed loop, or for a Poisson rate the
    sequences decoding at once by Little's law (rate x output length x plain TPOT, at least 1)."""
    wl = pr.scenario.workload
    if wl.arrival == "closed_loop":
        return float(wl.concurrency)
    rate = float(wl.qps)
    b = 1.0
    for _ in range(20):          # fixed point: the batch sets the step time, which sets the batch
        b = max(1.0, rate * pr.model.mean_output * float(pr.plain_s([b])[0]))
    return b
