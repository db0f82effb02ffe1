"""The README's contract: two commands at the top, CI runs the second, short enough to read in ten
minutes; every relative link in the README and docs resolves, and cited sources are in the repository."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
README_MAX_LINES = 300
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "results" / "README.md"]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)


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


def test_readme_reads_in_ten_minutes():
    assert len(README.splitlines()) <= README_MAX_LINES


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text())                   # headings outside code blocks
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}


def _links(path: Path) -> list[tuple[Path, str]]:
    """(target file, anchor) of every relative link and image in a Markdown file."""
    out = []
    for target in _LINK.findall(_FENCE.sub("", path.read_text())):
        if re.match(r"[a-z]+:", target) or not re.fullmatch(r"[\w./-]*(#[\w-]*)?", target, re.ASCII):
            continue                                          # a URL, or math that looks like a link
        rel, _, anchor = target.partition("#")
        out.append(((path.parent / rel).resolve() if rel else path, anchor))
    return out


def test_every_relative_link_resolves():
    links = [(doc, target) for doc in DOCS for target, _ in _links(doc)]
    assert len(links) > 20, "too few relative links found: the pattern is broken"
    missing = [f"{doc.relative_to(ROOT)} -> {target}" for doc, target in links if not target.exists()]
    assert not missing, missing


def test_every_anchor_points_at_a_heading():
    anchored = [(doc, target, anchor) for doc in DOCS for target, anchor in _links(doc)
                if anchor and target.suffix == ".md" and target.exists()]
    assert anchored, "no anchored links found: the pattern is broken"
    bad = [f"{doc.relative_to(ROOT)} -> {target.name}#{anchor}" for doc, target, anchor in anchored
           if anchor not in _anchors(target)]
    assert not bad, bad


def test_cited_sources_are_not_paths_on_a_development_machine():
    """Profiles, data READMEs, presets and docs cite public sources or files in the repository."""
    files = [*DOCS, *(ROOT / "hardware_profiles").glob("*.yaml"), *(ROOT / "data").glob("*/README*"),
             *(ROOT / "scenarios").glob("*.yaml"), ROOT / "simulator" / "speculation" / "acceptance_presets.py"]
    bad = [f"{p.relative_to(ROOT)}: {m.group(0)}" for p in files
           for m in re.finditer(r"(?<![\w.])/(?:work|root|home|Users)/\S*", p.read_text())]
    assert not bad, bad
