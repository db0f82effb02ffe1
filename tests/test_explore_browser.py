"""`specsight explore` in a real browser (headless Chromium driven by Playwright): the page loads
from 127.0.0.1 alone, a slider move redraws the analytic curve with the closed form's values, a
bad control shows the command line's one-line error, a simulation runs (and is cancelled, and
comes back from the point store), the scenario YAML downloads and loads back, and the shareable
URL restores the settings. One browser and one server for the module; the simulation is tiny
(two batches, 24 requests a point)."""
from __future__ import annotations

import contextlib
import re
import threading
import time

import numpy as np
import pytest

from tests.browser import chromium_path, launch

if chromium_path() is None:
    pytest.skip("no Chromium at /usr/bin/chromium (scripts/setup.sh installs Debian's): the browser tests skip",
                allow_module_level=True)

SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
WAIT_MS = 60_000                  # a generous bound for a busy machine, never a speed check


@pytest.fixture(scope="module")
def explorer(tmp_path_factory):
    from specsight.explore.server import Explorer
    from specsight.studies.shared.overrides import scenario_source
    base = scenario_source(SCENARIO)
    ex = Explorer(base, 0, tmp_path_factory.mktemp("explore"), workers=1)
    t = threading.Thread(target=ex.serve_forever, daemon=True)
    t.start()
    yield ex, base
    ex.close()
    t.join(10)


@pytest.fixture(scope="module")
def page(explorer, tmp_path_factory):
    from playwright.sync_api import sync_playwright
    ex, _ = explorer
    with sync_playwright() as p:
        browser = launch(p, tmp_path_factory.mktemp("chromium"))
        pg = browser.new_page()
        pg.set_default_timeout(WAIT_MS)
        hosts: set[str] = set()
        pg.on("request", lambda r: hosts.add(r.url.split("/")[2]))
        pg.goto(ex.url)
        pg.wait_for_selector("#fig-batch .js-plotly-plot .scatterlayer .trace")
        pg.hosts = hosts
        yield pg
        browser.close()


def figure(pg, graph_id: str) -> list[dict]:
    """The traces plotly.js draws in the graph `graph_id` (name, x, y)."""
    return pg.evaluate("""id => Array.from(document.getElementById(id).querySelector('.js-plotly-plot').data)
                          .map(t => ({name: t.name, x: Array.from(t.x || []), y: Array.from(t.y || [])}))""",
                       graph_id)


def trace(pg, graph_id: str, name: str) -> dict:
    return next(t for t in figure(pg, graph_id) if t["name"] == name)


def wait_trace(pg, graph_id: str, name: str, pred) -> dict:
    deadline = time.monotonic() + WAIT_MS / 1e3
    while time.monotonic() < deadline:
        with contextlib.suppress(StopIteration, Exception):
            t = trace(pg, graph_id, name)
            if pred(t):
                return t
        time.sleep(0.1)
    raise AssertionError(f"{graph_id}: no trace {name!r} as expected; traces {figure(pg, graph_id)}")


def set_text(pg, field: str, value: str) -> None:
    box = pg.locator(f"#{field}")
    box.fill(value)
    box.press("Enter")            # the inputs debounce: Enter (or leaving the box) sends the value


def closed_form(base, settings, batch: float):
    from specsight.explore.priced import Priced, curves
    from specsight.explore.view import checked_source
    return curves(Priced(checked_source(base, settings)), batch)


def test_page_loads_from_localhost_only_and_draws_the_closed_form(page, explorer):
    from specsight.explore.priced import K_AXIS
    from specsight.explore.settings import from_scenario
    _, base = explorer
    host = explorer[0].url.split("/")[2]
    assert page.hosts == {host}, f"assets from elsewhere: {page.hosts - {host}}"
    s = from_scenario(base)
    c = closed_form(base, s, float(s.batch))
    for k in K_AXIS:
        np.testing.assert_allclose(trace(page, "fig-batch", f"K={k}")["y"], c.by_batch[k], rtol=1e-9)
    assert page.inner_text("#error") == ""
    assert "vllm serve" in page.inner_text("#serve")


def test_slider_move_redraws_the_analytic_curve(page, explorer):
    from specsight.explore.settings import from_scenario
    _, base = explorer
    s = from_scenario(base)
    before = trace(page, "fig-batch", "this batch")["y"][0]
    page.locator("#k [role=slider]").first.press("ArrowRight")          # K 3 -> 4
    after = wait_trace(page, "fig-batch", "this batch", lambda t: t["y"][0] != before)
    want = closed_form(base, s.replace(k="4"), float(s.batch))
    assert after["y"][0] == pytest.approx(want.at_point, rel=1e-9)
    assert "K=4" in page.locator("#fig-batch .gtitle").text_content()
    page.locator("#k [role=slider]").first.press("ArrowLeft")           # back to the scenario's K
    wait_trace(page, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(before, rel=1e-12))


def test_alpha_slider_move_redraws_in_the_browser(page, explorer):
    from specsight.explore.settings import from_scenario
    _, base = explorer
    s = from_scenario(base).replace(acceptance="alpha", alpha="0.7")
    other = page.context.new_page()
    try:            # its own page, at the settings' URL: the shared page's link may still trail its figures
        other.set_default_timeout(WAIT_MS)
        other.goto(explorer[0].url + s.to_query())
        at = closed_form(base, s, float(s.batch)).at_point
        wait_trace(other, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(at, rel=1e-9))
        other.locator("#alpha [role=slider]").first.press("ArrowRight")          # 0.70 -> 0.71
        want = closed_form(base, s.replace(alpha="0.71"), float(s.batch))
        wait_trace(other, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(want.at_point, rel=1e-9))
        np.testing.assert_allclose(trace(other, "fig-k", "speedup")["y"], want.by_k, rtol=1e-9)
        assert "alpha 0.71 at K=3" in other.locator("#fig-batch .gtitle").text_content()
    finally:
        other.close()


def shows_the_cli_error(pg, capsys, override: str, field: str, text: str) -> None:
    """`specsight simulate SCENARIO --set OVERRIDE` fails with one line, and the control `field`
    holding `text` shows that line."""
    from specsight.cli import main
    rc = main(["simulate", SCENARIO, "--set", override])
    cli_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and cli_line.startswith(f"specsight: error: {override}")
    set_text(pg, field, text)
    pg.wait_for_function("document.getElementById('error').innerText.length > 0")
    assert pg.inner_text("#error").strip() == cli_line


def test_bad_input_shows_the_command_lines_error(page, capsys):
    shows_the_cli_error(page, capsys, "hardware.tp=0", "tp", "0")
    set_text(page, "tp", "1")
    page.wait_for_function("document.getElementById('error').innerText.length === 0")


def test_simulation_runs_is_cancellable_and_comes_back_from_the_store(page, explorer):
    from specsight.explore.settings import from_scenario
    from specsight.explore.sim_jobs import SimRequest, run_study, study_keys
    from specsight.explore.view import checked_source
    from specsight.studies.shared.point_store import PointStore
    ex, base = explorer
    set_text(page, "sim-rpu", "10000")                        # 15 s on a quiet machine: still running when
    set_text(page, "sim-batches", "3,5")                      # the cancel lands, however slow the page is
    page.click("#simulate")
    page.wait_for_function("document.getElementById('progress').innerText.startsWith('simulating')")
    page.click("#cancel")
    page.wait_for_function("document.getElementById('progress').innerText.startsWith('cancelled')")

    set_text(page, "sim-rpu", "1")
    set_text(page, "sim-batches", "1,2")
    page.click("#simulate")
    sim = wait_trace(page, "fig-sim", "simulated", lambda t: len(t["y"]) == 2)
    assert page.inner_text("#progress").startswith("simulated 4 points")
    # the page's curve is the study's, read back from the store the page wrote
    req = SimRequest(checked_source(base, from_scenario(base)), (1, 2), 3, 1)
    store = PointStore(ex.jobs.store_path)
    assert all(k in store for k in study_keys(req))
    rows = run_study(req, ex.jobs.store_path, 1)["rows"]
    np.testing.assert_allclose(sim["y"], [r["speedup"] for r in rows], rtol=1e-12)
    # another K, then back: the stored answer shows without pressing Simulate
    page.locator("#k [role=slider]").first.press("ArrowRight")
    page.wait_for_function("document.getElementById('progress').innerText.startsWith('not simulated')")
    page.locator("#k [role=slider]").first.press("ArrowLeft")
    again = wait_trace(page, "fig-sim", "simulated", lambda t: len(t["y"]) == 2)
    assert again["y"] == sim["y"]


def test_yaml_downloads_and_loads_back(page, explorer, tmp_path):
    from simulator.scenario.scenario import load_scenario
    set_text(page, "prompt", "700")
    page.wait_for_function("document.querySelector('#share').innerText.includes('prompt=700')")
    with page.expect_download() as dl:
        page.click("#yaml-button")
    path = tmp_path / dl.value.suggested_filename
    dl.value.save_as(path)
    sc = load_scenario(path)
    assert sc.source["workload"]["prompt_len"]["median"] == 700 and sc.drafter.num_speculative_tokens == 3
    assert sc.hardware.profile == "h100-sxm" and sc.model == "llama-3.1-8b"
    set_text(page, "prompt", "1020")


def test_shareable_url_restores_the_settings(page, explorer):
    share = page.locator("#share").get_attribute("href")
    url = re.sub(r"k=\d+", "k=5", re.sub(r"output=\d+", "output=300", share))
    other = page.context.new_page()
    other.set_default_timeout(WAIT_MS)
    other.goto(url)
    other.wait_for_function("document.querySelector('#fig-batch .gtitle') && "
                            "document.querySelector('#fig-batch .gtitle').textContent.includes('K=5')")
    assert other.locator("#output").input_value() == "300"
    other.close()


def test_uploaded_vllm_metrics_set_the_acceptance(page, explorer):
    from specsight.explore.settings import from_scenario
    _, base = explorer
    before = trace(page, "fig-accepted", "P")["y"]
    page.set_input_files("#upload input[type=file]", "tests/data/vllm/metrics_spec_decode.txt")
    after = wait_trace(page, "fig-accepted", "P", lambda t: t["y"] != before)
    path = page.locator("#metrics_file").input_value()
    s = from_scenario(base).replace(acceptance="file", metrics_file=path)
    from specsight.explore.priced import Priced
    from specsight.explore.view import checked_source
    np.testing.assert_allclose(after["y"], Priced(checked_source(base, s)).accepted_distribution(), rtol=1e-12)
    page.locator("#acceptance input[value=preset]").check()


def assert_same_figure(got, want, where: str = "figure") -> None:
    """The browser's figure dict is Python's: the same keys and strings, numbers to 1e-9 relative."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: keys {sorted(got)} != {sorted(want)}"
        for k in want:
            assert_same_figure(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, list) and len(got) == len(want), f"{where}: {got} != {want}"
        for i, (g, w) in enumerate(zip(got, want)):
            assert_same_figure(g, w, f"{where}[{i}]")
    elif isinstance(want, bool) or want is None or isinstance(want, str):
        assert got == want, f"{where}: {got!r} != {want!r}"
    else:
        assert got == pytest.approx(float(want), rel=1e-9, abs=0.0), f"{where}: {got} != {want}"


@pytest.mark.parametrize("engine,acceptance,tree", [
    ("ideal", "alpha", ""), ("vllm", "alpha", ""), ("ideal", "preset", ""),
    ("ideal", "alpha", "tree: true, tree_nodes: 59, tree_branches: 4"), ("sglang", "preset", "")])
def test_browser_redraw_is_the_python_closed_form(page, explorer, engine, acceptance, tree):
    """assets/closed_form.js, from the tables the server sends, draws Python's three figures
    (figures.py on priced.curves) at every K and alpha the sliders reach that we try; an alpha
    outside the tables is left to the server (null) where the alpha control sets the alpha."""
    from specsight.explore.settings import from_scenario
    from specsight.explore.view import closed_form_tables, server_curve_figures
    _, base = explorer
    s = from_scenario(base).replace(engine=engine, acceptance=acceptance, tree=tree,
                                    preset="eagle3-llama-3.1-8b-mtbench", batch="24")
    tables = closed_form_tables(base, s)
    for k, alpha in ((3, 0.7), (1, 0.0), (8, 0.99), (12, 0.55), (16, 0.3)):
        got = page.evaluate("([d, k, a]) => window.dash_clientside.specsight.figures(d, k, a)", [tables, k, alpha])
        want = server_curve_figures(base, s.replace(k=k, alpha=alpha))
        for name in ("batch", "k", "alpha"):
            assert_same_figure(got[name], want[name], f"{engine} {acceptance} K={k} alpha={alpha} {name}")
    off_grid = page.evaluate("d => window.dash_clientside.specsight.figures(d, 3, 0.705)", tables)
    assert (off_grid is None) == (acceptance == "alpha" and tables["alphas"] is not None)   # preset: alpha unused


def test_an_alpha_outside_the_browsers_tables_is_drawn_by_the_server(page, explorer):
    from specsight.explore.settings import from_scenario
    _, base = explorer
    s = from_scenario(base).replace(acceptance="alpha", alpha="0.705")     # the slider's step is 0.01
    want = closed_form(base, s, float(s.batch))
    share = page.locator("#share").get_attribute("href")
    other = page.context.new_page()
    other.set_default_timeout(WAIT_MS)
    other.goto(re.sub(r"acceptance=\w+", "acceptance=alpha", re.sub(r"alpha=[0-9.]+", "alpha=0.705", share)))
    wait_trace(other, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(want.at_point, rel=1e-9))
    np.testing.assert_allclose(trace(other, "fig-alpha", "speedup")["y"], want.by_alpha, rtol=1e-9)
    other.close()


def test_a_bad_tree_shows_the_command_lines_error(page, explorer, capsys):
    _, base = explorer
    shows_the_cli_error(page, capsys, "drafter.tree_branches=0", "tree", "tree: true, tree_branches: 0")
    set_text(page, "tree", "tree: true, nodes: 59")
    page.wait_for_function("document.getElementById('error').innerText.includes(\"tree='nodes'\")")
    assert page.inner_text("#error").strip() == ("specsight: error: tree='nodes': a drafter tree key: tree, "
                                                 "tree_nodes, tree_branches")
    before = trace(page, "fig-batch", "this batch")["y"][0]
    set_text(page, "tree", "tree: true, tree_nodes: 59, tree_branches: 4")          # a good tree redraws
    page.wait_for_function("document.getElementById('error').innerText.length === 0")
    from specsight.explore.settings import from_scenario
    s = from_scenario(base).replace(tree="tree: true, tree_nodes: 59, tree_branches: 4")
    want = closed_form(base, s, float(s.batch)).at_point
    wait_trace(page, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(want, rel=1e-9))
    assert want != pytest.approx(before, rel=1e-3)
    set_text(page, "tree", "")
    wait_trace(page, "fig-batch", "this batch", lambda t: t["y"][0] == pytest.approx(before, rel=1e-12))


def test_a_simulation_under_a_real_engine_draws_its_interval_band(page, explorer):
    """Under engine.kind vllm the simulated study's rows carry the published table's 80 %
    interval; the page draws it as a band around the simulated curve (ideal has none)."""
    ex, _ = explorer
    assert not any(t["name"] == "interval" for t in figure(page, "fig-sim"))      # ideal: no band
    share = page.locator("#share").get_attribute("href")
    assert "engine=ideal" in share
    other = page.context.new_page()
    other.set_default_timeout(WAIT_MS)
    other.goto(share.replace("engine=ideal", "engine=vllm"))
    other.wait_for_selector("#fig-batch .js-plotly-plot .scatterlayer .trace")
    set_text(other, "sim-rpu", "1")
    set_text(other, "sim-batches", "1,2")
    other.click("#simulate")
    sim = wait_trace(other, "fig-sim", "simulated", lambda t: len(t["y"]) == 2)
    band = trace(other, "fig-sim", "interval")
    high, low = band["y"][:2], band["y"][2:][::-1]          # the polygon: high edge out, low edge back
    assert all(lo < s < hi for lo, s, hi in zip(low, sim["y"], high))
    other.close()
