"""The explorer's redraw as a slider moves (not a test; issue 27: under 100 ms a redraw on a
2-core machine). Prints medians and 90th percentiles, asserts nothing.

    (a) server: the page's main callback (specsight.explore.view.build_view: the scenario the
        controls make, checked; the closed-form curves against batch, K and alpha; the round
        timeline; the accepted-length distribution; the capacity table; the serving command;
        the figure dicts) for scenarios/llama8b-h100-eagle3-chat.yaml, each slider stepped
        through its values in turn: K 1..8, alpha 0.50..0.90, batch 1..512; under engine.kind
        ideal and vllm. The first draw of a deployment (profile and model read, rounds priced)
        is timed apart: it happens once per GPU, model, drafter, engine or length change. Then
        the tables the browser redraws the curves from (view.closed_form_tables), made again
        whenever a control other than K and alpha moves (here the batch text), in alpha and
        preset mode.
    (b) browser: headless Chromium (Debian's, via Playwright) on `specsight explore`'s page,
        from a key press on the K slider (the scenario's preset acceptance) and on the alpha
        slider (acceptance: alpha) to plotly's `plotly_afterplot`: of the three closed-form
        figures (redrawn in the browser, assets/closed_form.js; plotly reports the three at
        once) and of all five (the timeline and the accepted-length distribution come from the
        server's callback). plotly.js draws in software (--disable-gpu), with Chromium and the
        server on the same two cores. Timed from Playwright's press (which includes its own
        message to the browser, ~10 ms) and, for the closed-form figures, from the page's
        keydown event. Skipped without /usr/bin/chromium.

Run:
    .venv/bin/python benchmarks/bench_explore.py              # both
    .venv/bin/python benchmarks/bench_explore.py --only server --repeat 5
"""
from __future__ import annotations

import argparse
import platform
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
MOVES = {"k": [str(k) for k in range(1, 9)], "alpha": [f"{a:.2f}" for a in np.arange(0.50, 0.91, 0.05)],
         "batch": [str(b) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)]}
FIGURES = ("fig-batch", "fig-k", "fig-alpha", "fig-timeline", "fig-accepted")
CLOSED_FORM = FIGURES[:3]          # redrawn in the browser (assets/closed_form.js); the other two by the server


def _stats(ms: list[float]) -> str:
    return f"median {np.median(ms):6.1f} ms  p90 {np.percentile(ms, 90):6.1f} ms  (n={len(ms)})"


def server(repeat: int) -> None:
    from specsight.explore import priced
    from specsight.explore.settings import from_scenario
    from specsight.explore.view import build_view, closed_form_tables
    from specsight.studies.shared.overrides import scenario_source
    base = scenario_source(REPO / SCENARIO)
    for engine in ("ideal", "vllm"):
        s0 = from_scenario(base).replace(engine=engine, acceptance="alpha", alpha="0.7")
        priced._deployments.clear()
        t = time.perf_counter()
        build_view(base, s0)
        print(f"(a) {engine:<6} first draw (deployment read and priced): {(time.perf_counter() - t) * 1e3:6.1f} ms")
        for field, values in MOVES.items():
            ms = []
            for _ in range(repeat):
                for v in values:
                    t = time.perf_counter()
                    build_view(base, s0.replace(**{field: v}))
                    ms.append((time.perf_counter() - t) * 1e3)
            print(f"(a) {engine:<6} {field:<6} slider: {_stats(ms)}")
        for acc in ("alpha", "preset"):          # what the page sends the browser when a text control moves
            ms = []
            for _ in range(repeat):
                for b in MOVES["batch"]:
                    t = time.perf_counter()
                    closed_form_tables(base, s0.replace(acceptance=acc, batch=b))
                    ms.append((time.perf_counter() - t) * 1e3)
            print(f"(a) {engine:<6} browser tables ({acc}), batch text moved: {_stats(ms)}")


def _presses(page: Any, slider: str, moves: int) -> dict[str, list[float]]:
    """ms from each key press on `slider` to plotly_afterplot of each figure (the last draw)."""
    page.evaluate("""() => { window.__drawn = {};
        document.addEventListener('keydown', () => { window.__keydown = performance.now(); }, true);
        for (const id of FIGS) document.querySelector('#' + id + ' .js-plotly-plot')
            .on('plotly_afterplot', () => { window.__drawn[id] = performance.now(); }); }""".replace(
        "FIGS", str(list(FIGURES))))
    handle = page.locator(f"#{slider} [role=slider]").first
    out: dict[str, list[float]] = {"closed": [], "every": [], "closed_from_keydown": []}
    for i in range(moves):
        key = "ArrowRight" if (i // 4) % 2 == 0 else "ArrowLeft"      # 4 steps up, 4 back, ...
        t0 = page.evaluate("() => { window.__drawn = {}; return performance.now(); }")
        handle.press(key)
        page.wait_for_function(f"() => Object.keys(window.__drawn).length === {len(FIGURES)}", timeout=60_000)
        time.sleep(0.3)                         # plotly may draw twice; take the last
        drawn, keydown = page.evaluate("() => [window.__drawn, window.__keydown]")
        out["closed"].append(max(drawn[f] for f in CLOSED_FORM) - t0)
        out["every"].append(max(drawn.values()) - t0)
        out["closed_from_keydown"].append(max(drawn[f] for f in CLOSED_FORM) - keydown)
    return out


def browser(moves: int) -> None:
    sys.path.insert(0, str(REPO / "tests"))
    from browser import chromium_path, launch
    if chromium_path() is None:
        print("(b) skipped: no /usr/bin/chromium")
        return
    from playwright.sync_api import sync_playwright

    from specsight.explore.server import Explorer
    from specsight.studies.shared.overrides import scenario_source
    ex = Explorer(scenario_source(REPO / SCENARIO), 0, Path(tempfile.mkdtemp()), workers=1)
    threading.Thread(target=ex.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            ctx = launch(p, Path(tempfile.mkdtemp()))
            page = ctx.new_page()
            for slider, query in (("k", ""), ("alpha", "?acceptance=alpha&alpha=0.7")):
                page.goto(ex.url + query)
                page.wait_for_selector("#fig-batch .js-plotly-plot .scatterlayer .trace", timeout=120_000)
                time.sleep(1.0)
                ms = _presses(page, slider, moves)
                print(f"(b) browser {slider:<5} slider, key press to the 3 closed-form figures drawn: "
                      f"{_stats(ms['closed'])}")
                print(f"(b) browser {slider:<5} slider, key press to all {len(FIGURES)} figures drawn:       "
                      f"{_stats(ms['every'])}")
                print(f"(b) browser {slider:<5} slider, keydown event to the 3 closed-form figures:    "
                      f"{_stats(ms['closed_from_keydown'])}")
            ctx.close()
    finally:
        ex.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=["server", "browser"])
    ap.add_argument("--repeat", type=int, default=3, help="(a): passes over each slider's values")
    ap.add_argument("--moves", type=int, default=24, help="(b): slider key presses")
    args = ap.parse_args()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"load {' '.join(load)}")
    if args.only in (None, "server"):
        server(args.repeat)
    if args.only in (None, "browser"):
        browser(args.moves)
    return 0


if __name__ == "__main__":
    sys.exit(main())
