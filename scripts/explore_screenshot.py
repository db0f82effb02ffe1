"""docs/img/explore.png: `specsight explore`'s page on scenarios/llama8b-h100-eagle3-chat.yaml
after a simulated study (batches 1,4,16,64,256, one request per user),
in headless Chromium (Debian's, via Playwright, as the browser tests run it).

    .venv/bin/python scripts/explore_screenshot.py [--out docs/img/explore.png]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

SCENARIO = "scenarios/llama8b-h100-eagle3-chat.yaml"
WAIT_MS = 600_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "img" / "explore.png"))
    args = ap.parse_args()
    from browser import chromium_path, launch
    from playwright.sync_api import sync_playwright

    from specsight.explore.server import Explorer
    from specsight.studies.shared.overrides import scenario_source
    if chromium_path() is None:
        print("no /usr/bin/chromium", file=sys.stderr)
        return 1
    ex = Explorer(scenario_source(REPO / SCENARIO), 0, Path(tempfile.mkdtemp()), workers=1)
    threading.Thread(target=ex.serve_forever, daemon=True).start()
    try:
        with sync_playwright() as p:
            ctx = launch(p, Path(tempfile.mkdtemp()), {"width": 1500, "height": 1000})
            page = ctx.new_page()
            page.set_default_timeout(WAIT_MS)
            page.goto(ex.url)
            page.wait_for_selector("#fig-batch .js-plotly-plot .scatterlayer .trace")
            for field, value in (("sim-rpu", "1"), ("sim-batches", "1,4,16,64,256")):
                page.locator(f"#{field}").fill(value)
                page.locator(f"#{field}").press("Enter")
            page.click("#simulate")
            page.wait_for_function("document.getElementById('progress').innerText.startsWith('simulated')")
            page.wait_for_timeout(1000)
            page.screenshot(path=args.out, full_page=True)
            ctx.close()
    finally:
        ex.close()
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
