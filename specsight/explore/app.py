"""The Dash app of `specsight explore`: the controls, the closed-form pictures that redraw as a
control moves (view.py), the simulated study on demand (sim_jobs.py), and the outputs (the
shareable URL, the scenario YAML, the serving command).

Dash serves its JavaScript (React, the renderer, plotly.js) from the installed packages
(`serve_locally=True`): the page needs no network beyond 127.0.0.1.
"""
from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from simulator.common.errors import SpecsightInputError

from . import figures
from .priced import K_MAX
from .settings import ACCEPTANCE_MODES, FIELDS, LOADS, Settings, from_query
from .sim_jobs import SimJobs, SimRequest, check_requests_per_user, parse_batches
from .view import build_view, closed_form_tables, server_curve_figures

SLIDERS = ("k", "alpha")            # the controls the browser redraws the curves for by itself
POLL_MS = 500                       # how often the page asks a running study for its progress
DEFAULT_SIM_BATCHES = "1,4,16,64,256"
SIM_REQUESTS_PER_USER = 4
MAX_UPLOAD_BYTES = 20 * 2 ** 20     # a metrics scrape or a benchmark result is kilobytes
CSS = """
body { font-family: system-ui, sans-serif; margin: 0; font-size: 14px; color: #222; }
#main { display: flex; }
#controls { width: 300px; padding: 10px 14px; background: #f6f6f6; height: 100vh; overflow-y: auto;
            position: sticky; top: 0; box-sizing: border-box; }
#controls label.h { display: block; margin-top: 8px; font-weight: 600; font-size: 12px; }
#controls input[type=text] { width: 100%; box-sizing: border-box; }
#pictures { flex: 1; padding: 8px 14px; min-width: 0; }
.row { display: flex; flex-wrap: wrap; } .row > div { flex: 1; min-width: 360px; }
#error { color: #b00020; font-family: monospace; white-space: pre-wrap; min-height: 1.2em; }
#warnings { color: #8a6d00; font-family: monospace; white-space: pre-wrap; }
pre { background: #f3f3f3; padding: 8px; white-space: pre-wrap; word-break: break-all; font-size: 12px; }
table.capacity { border-collapse: collapse; } table.capacity td, table.capacity th { border: 1px solid #ccc;
  padding: 3px 8px; text-align: right; }
"""


def H(text: str) -> Any:
    """A control's heading."""
    from dash import html
    return html.Label(text, className="h")


def _text(id_: str, value: str, placeholder: str = "") -> Any:
    from dash import dcc
    return dcc.Input(id=id_, type="text", value=value, placeholder=placeholder, debounce=True)


def _dropdown(id_: str, options: list[str], value: str) -> Any:
    from dash import dcc
    opts = options if value in options or not value else [*options, value]
    return dcc.Dropdown(id=id_, options=[{"label": o, "value": o} for o in opts], value=value, clearable=False)


def controls(s: Settings) -> list[Any]:
    """The control panel, at the settings `s`; each control's id is its Settings field."""
    from dash import dcc, html

    from simulator.engines import ENGINES
    from simulator.hardware.hardware import available_profiles
    from simulator.models.catalog import available_models
    from simulator.speculation.acceptance_presets import PRESETS
    versions = [""] + sorted({v for e in ENGINES.values() for v in e.versions})
    return [
        html.H3("specsight explore", style={"margin": "4px 0"}),
        H("GPU (hardware profile)"), _dropdown("gpu", available_profiles(), s.gpu),
        H("tensor parallel (GPUs)"), _text("tp", s.tp),
        H("model"), _dropdown("model", available_models(), s.model),
        H("drafter (eagle3, draft_model:NAME, ngram, a catalog name)"), _text("drafter", s.drafter),
        H("K (drafts per round)"),
        dcc.Slider(id="k", min=1, max=K_MAX, step=1, value=_int(s.k, 3), marks=None, allow_direct_input=True,
                   updatemode="drag"),
        H("tree (tree: true, tree_nodes: N, tree_branches: B; empty: a chain)"),
        _text("tree", s.tree, "a chain"),
        H("acceptance"),
        dcc.RadioItems(id="acceptance", options=list(ACCEPTANCE_MODES), value=s.acceptance, inline=True),
        H("alpha (i.i.d. per-draft acceptance)"),
        dcc.Slider(id="alpha", min=0.0, max=0.99, step=0.01, value=_float(s.alpha, 0.7), marks=None,
                   allow_direct_input=True, updatemode="drag"),
        H("preset"), _dropdown("preset", sorted(PRESETS), s.preset),
        H("vLLM metrics file (/metrics scrape or bench JSON)"),
        dcc.Upload(id="upload", children=html.Div(["drop or ", html.A("choose a file")]), max_size=MAX_UPLOAD_BYTES,
                   style={"border": "1px dashed #999", "padding": "6px", "textAlign": "center"}),
        dcc.Input(id="metrics_file", type="text", value=s.metrics_file, readOnly=True, style={"fontSize": "11px"}),
        H("engine"), _dropdown("engine", ["ideal", *ENGINES], s.engine),
        H("engine version (empty: its default)"), _dropdown("version", versions, s.version),
        H("load"), dcc.RadioItems(id="load", options=list(LOADS), value=s.load, inline=True),
        H("batch (closed-loop users)"), _text("batch", s.batch),
        H("request rate (per second, Poisson)"), _text("rate", s.rate),
        H("prompt tokens (median)"), _text("prompt", s.prompt),
        H("output tokens (median)"), _text("output", s.output),
        H("SLO: TPOT p99 (ms, empty: none)"), _text("tpot_ms", s.tpot_ms),
        H("SLO: TTFT p99 (ms, empty: none)"), _text("ttft_ms", s.ttft_ms),
    ]


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except ValueError:
        return default


def _float(text: str, default: float) -> float:
    try:
        return float(text)
    except ValueError:
        return default


def _graph(id_: str) -> Any:
    from dash import dcc
    return dcc.Graph(id=id_, config={"displaylogo": False}, figure={"data": [], "layout": {"height": 320}})


def layout(s: Settings) -> Any:
    from dash import dcc, html
    return html.Div([
        dcc.Location(id="url", refresh=False),
        dcc.Store(id="scenario"),
        dcc.Store(id="closed"), dcc.Store(id="closed-miss"),
        dcc.Download(id="download"),
        dcc.Interval(id="poll", interval=POLL_MS, disabled=True),
        html.Div(id="main", children=[
            html.Div(id="controls", children=controls(s)),
            html.Div(id="pictures", children=[
                html.Div(id="error"), html.Div(id="warnings"),
                html.Div(className="row", children=[_graph("fig-batch"), _graph("fig-k"), _graph("fig-alpha")]),
                html.H4("why: one round against the plain step"), _graph("fig-timeline"),
                html.Div(className="row", children=[html.Div([_graph("fig-accepted")]),
                                                    html.Div([html.H4("capacity and cost (closed form)"),
                                                              html.Div(id="capacity")])]),
                html.H4("simulated break-even (discrete-event study, on demand)"),
                html.Div([H("batches "), _text("sim-batches", DEFAULT_SIM_BATCHES),
                          H(" requests per user "), _text("sim-rpu", str(SIM_REQUESTS_PER_USER)),
                          html.Button("Simulate", id="simulate", n_clicks=0),
                          html.Button("Cancel", id="cancel", n_clicks=0, disabled=True)],
                         style={"display": "flex", "gap": "8px", "alignItems": "center"}),
                html.Div(id="progress"), _graph("fig-sim"),
                html.H4("out"),
                html.Div(["shareable URL: ", html.A(id="share", href="", children="")]),
                html.Button("Download scenario YAML", id="yaml-button", n_clicks=0),
                html.H4("serving command"), html.Pre(id="serve"),
            ]),
        ]),
    ])


def capacity_html(rows: list[Any], tpot: Any, rate: bool) -> Any:
    from dash import html
    head = ["", "batch", "limited by", "TPOT ms", "output tok/s", "replicas" if rate else None, "$/M output tokens"]
    head = [h for h in head if h is not None]
    body = []
    for r in rows:
        cells = [r.label, r.batch or "none", r.limited_by, f"{r.tpot_ms:.2f}", f"{r.tokens_per_s:,.0f}"]
        if rate:
            cells.append("-" if r.replicas is None else r.replicas)
        cells.append("-" if r.usd_per_m_tokens is None else f"{r.usd_per_m_tokens:.4f}")
        body.append(html.Tr([html.Td(c) for c in cells]))
    note = (f"largest batch with TPOT <= {tpot:g} ms" if tpot is not None else "largest batch in memory") + \
        " (every sequence alike; TTFT is not in the closed form: simulate or `specsight plan`)"
    return html.Div([html.Table([html.Tr([html.Th(h) for h in head]), *body], className="capacity"),
                     html.Div(note, style={"fontSize": "12px"})])


def create_app(base: Mapping[str, Any], default: Settings, work_dir: Path, jobs: SimJobs) -> Any:
    """The Dash app for scenario `base` (a checked mapping) starting at `default`; uploads go
    under `work_dir`, simulations through `jobs`."""
    import dash
    from dash import ClientsideFunction, Input, Output, State, ctx, dcc, html, no_update

    app = dash.Dash(__name__, serve_locally=True, title="specsight explore", update_title=None,
                    index_string=_index_string())
    app.layout = layout(default)
    control_inputs = [Input(f, "value") for f in FIELDS]

    @app.callback([Output(f, "value", allow_duplicate=True) for f in FIELDS], Input("url", "search"),
                  prevent_initial_call="initial_duplicate")
    def from_url(search: str | None) -> list[Any]:
        if not search:
            return [no_update] * len(FIELDS)
        s = from_query(search, default)
        return [_control_value(f, getattr(s, f)) for f in FIELDS]

    # the closed-form curves: the server prices the other controls' setting once (closed_form.py),
    # the browser redraws from it as K and alpha move (assets/closed_form.js), and the server
    # draws the curves where the browser's tables do not reach (the browser asks on closed-miss)
    @app.callback(Output("closed", "data"), [Input(f, "value") for f in FIELDS if f not in SLIDERS],
                  [State(f, "value") for f in SLIDERS])
    def closed_tables(*vals: Any) -> Any:
        s = _settings(dict(zip([f for f in FIELDS if f not in SLIDERS] + list(SLIDERS), vals)))
        try:
            return closed_form_tables(base, s)
        except SpecsightInputError:                 # redraw shows it
            return None

    app.clientside_callback(ClientsideFunction("specsight", "redraw"),
                            [Output("fig-batch", "figure"), Output("fig-k", "figure"), Output("fig-alpha", "figure"),
                             Output("closed-miss", "data")],
                            [Input("closed", "data"), Input("k", "value"), Input("alpha", "value")])

    @app.callback([Output("fig-batch", "figure", allow_duplicate=True), Output("fig-k", "figure", allow_duplicate=True),
                   Output("fig-alpha", "figure", allow_duplicate=True)],
                  Input("closed-miss", "data"), [State(f, "value") for f in FIELDS], prevent_initial_call=True)
    def redraw_curves(miss: Any, *vals: Any) -> tuple:
        try:
            figs = server_curve_figures(base, _settings(dict(zip(FIELDS, vals))))
        except SpecsightInputError:                 # redraw shows it
            return no_update, no_update, no_update
        return figs["batch"], figs["k"], figs["alpha"]

    @app.callback([Output("error", "children"), Output("warnings", "children"),
                   Output("fig-timeline", "figure"), Output("fig-accepted", "figure"), Output("capacity", "children"),
                   Output("serve", "children"), Output("share", "href"), Output("share", "children"),
                   Output("scenario", "data")],
                  control_inputs, State("url", "href"))
    def redraw(*values: Any) -> tuple:
        *vals, href = values
        s = _settings(dict(zip(FIELDS, vals)))
        try:
            v = build_view(base, s)
        except SpecsightInputError as e:
            return (f"specsight: error: {e}", *[no_update] * 8)
        url = (re.sub(r"\?.*$", "", href or "") or "/") + v.query
        warns = "\n".join(f"specsight: warning: {w}" for w in v.warnings)
        return ("", warns, v.figures["timeline"], v.figures["accepted"],
                capacity_html(v.capacity, v.source.get("slo", {}).get("tpot_ms_p99"), s.load == "rate"),
                v.serve, url, url, {"source": v.source, "yaml": v.yaml, "k": int(s.k), "query": v.query})

    @app.callback([Output("metrics_file", "value", allow_duplicate=True), Output("acceptance", "value",
                                                                                 allow_duplicate=True)],
                  Input("upload", "contents"),
                  State("upload", "filename"), prevent_initial_call=True)
    def upload(contents: str | None, filename: str | None) -> tuple:
        if not contents:
            return no_update, no_update
        data = base64.b64decode(contents.partition(",")[2])
        name = re.sub(r"[^\w.-]+", "_", filename or "metrics.txt")[-80:]
        path = work_dir / "uploads" / f"{hashlib.sha256(data).hexdigest()[:12]}-{name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return str(path), "file"

    @app.callback(Output("download", "data"), Input("yaml-button", "n_clicks"), State("scenario", "data"),
                  prevent_initial_call=True)
    def download(_: int, data: Mapping[str, Any] | None) -> Any:
        if not data:
            return no_update
        return dcc.send_string(data["yaml"], f"{data['source'].get('name', 'scenario')}.yaml")

    @app.callback([Output("fig-sim", "figure"), Output("progress", "children"), Output("poll", "disabled"),
                   Output("cancel", "disabled")],
                  [Input("scenario", "data"), Input("simulate", "n_clicks"), Input("cancel", "n_clicks"),
                   Input("poll", "n_intervals")], [State("sim-batches", "value"), State("sim-rpu", "value")])
    def simulate(data: Mapping[str, Any] | None, _s: int, _c: int, _p: int, batches: str, rpu: str) -> tuple:
        if not data:
            return no_update, "", True, True
        try:
            req = SimRequest(data["source"], parse_batches(batches or ""), int(data["k"]),
                             check_requests_per_user(rpu))
            if ctx.triggered_id == "cancel":
                jobs.cancel()
            if ctx.triggered_id == "simulate":
                jobs.forget(req)
                st = jobs.start(req)
            else:
                st = jobs.cached(req)
        except SpecsightInputError as e:
            return no_update, html.Span(f"specsight: error: {e}", style={"color": "#b00020"}), True, True
        if st.state == "running":
            return no_update, f"simulating: {st.done} of {st.total} points ({st.elapsed_s:.0f} s)", False, False
        if st.state == "done":
            from .priced import Priced, curves
            try:
                c = curves(Priced(data["source"]), 1.0, None)
            except SpecsightInputError:
                c = None
            be = (st.verdict.get("breakeven") or {}).get(f"K={req.k}")
            status = (st.verdict.get("status") or {}).get(f"K={req.k}", "")
            return (figures.simulated_figure(c, st.rows, req.k, be),
                    f"simulated {st.total} points in {st.elapsed_s:.1f} s: {status}" +
                    ("" if be is None else f", break-even at batch {be:.3g}") +
                    " (hollow: saturated; x: KV-limited)", True, True)
        if st.state in ("error", "cancelled"):
            return no_update, f"{st.message} ({st.done} of {st.total} points stored)", True, True
        return {"data": [], "layout": {"height": 320}}, "not simulated yet: press Simulate", True, True

    return app


def _settings(values: Mapping[str, Any]) -> Settings:
    """The controls' values (by field) as Settings, each as its text."""
    return Settings(**{f: "" if values.get(f) is None else str(values[f]) for f in FIELDS})


def _control_value(field: str, text: str) -> Any:
    if field == "k":
        return _int(text, 3)
    if field == "alpha":
        return _float(text, 0.7)
    return text


def _index_string() -> str:
    return ("<!DOCTYPE html><html><head>{%metas%}<title>{%title%}</title>{%favicon%}{%css%}<style>" + CSS +
            "</style></head><body>{%app_entry%}<footer>{%config%}{%scripts%}{%renderer%}</footer></body></html>")
