"""The README's contract: two commands at the top, CI runs the second, docs merged and links alive."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _top_commands() -> list[str]:
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    return [ln for ln in block.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


def test_readme_opens_with_two_commands_and_ci_runs_the_second():
    commands = _top_commands()
    assert len(commands) == 2, commands
    setup, tests = commands
    assert setup.startswith("bash scripts/setup.sh && ") and "specsight breakeven scenarios/" in setup
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci, f".ci/run does not run the README's test command {tests!r}"
    scenario = re.search(r"(scenarios/\S+\.yaml)", setup).group(1)
    assert (ROOT / scenario).exists(), scenario


def test_readme_is_built_from_the_current_docs():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_readme.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_relative_links_and_images_exist():
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if re.fullmatch(r"[\w./-]+", t) and not re.match(r"[a-z]+://", t)]
    assert local, "no relative links found: the pattern is broken"
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_in_page_links_point_at_headings():
    text = re.sub(r"^```.*?^```", "", README, flags=re.S | re.M)      # headings outside code blocks
    anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
    links = re.findall(r"\]\(#([^)]+)\)", README)
    assert links, "no in-page links found: the pattern is broken"
    assert not [a for a in links if a not in anchors], [a for a in links if a not in anchors]
