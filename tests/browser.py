"""Headless Chromium for the browser tests, driven by Playwright: Debian's /usr/bin/chromium
(never a browser Playwright downloads), started with the flags a closed network needs and a new
profile folder. `chromium_path()` is None where no Chromium is installed: the browser tests then
skip with one line."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync")
CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser")


def chromium_path() -> str | None:
    """Debian's Chromium (SPECSIGHT_CHROMIUM overrides), or None."""
    given = os.environ.get("SPECSIGHT_CHROMIUM")
    for c in ((given,) if given else CANDIDATES):
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    found = shutil.which("chromium")
    return found if not given else None


def launch(playwright, user_data_dir: Path, viewport: dict[str, int] | None = None):
    """A persistent browser context on a fresh profile folder."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=chromium_path(), args=list(CHROMIUM_FLAGS), headless=True,
        accept_downloads=True, viewport=viewport or {"width": 1400, "height": 1600})
