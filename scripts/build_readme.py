"""Rebuild README.md's reference part from docs/*.md.

README.md = its hand-written head (everything up to the DOCS marker) + the marker + each file of
DOCS in order, its headings shifted so that its title is a level-2 heading, with a link to the file.
Run after editing a doc: `python scripts/build_readme.py`; `--check` exits 1 if README.md is stale
(tests/test_readme.py runs it).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- DOCS: generated from docs/*.md by scripts/build_readme.py; edit the docs, not below -->"
DOCS = ["docs/scenarios.md", "docs/simulator.md", "docs/simulator_models.md", "docs/sampling.md",
        "docs/calibration.md"]
_HEADING = re.compile(r"^(#+) ", re.M)


def _shifted(text: str) -> str:
    """Headings moved so the document's shallowest one is level 2 (fenced code left alone)."""
    levels = [len(m.group(1)) for m in _HEADING.finditer(_strip_fences(text))]
    shift = 2 - min(levels) if levels else 0
    out, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else _HEADING.match(line)
        out.append("#" * (len(m.group(1)) + shift) + line[len(m.group(1)):] if m else line)
    return "\n".join(out)


def _strip_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def build(readme: str) -> str:
    head = readme.split(MARKER)[0].rstrip() + "\n\n"
    parts = [head + MARKER + "\n"]
    for rel in DOCS:
        path = ROOT / rel
        if not path.exists():
            continue
        body = _shifted(path.read_text().strip())
        first, _, rest = body.partition("\n")
        parts.append(f"\n{first}\n\n(Source: [{rel}]({rel}).)\n{rest}\n")
    return "".join(parts)


def main(argv: list[str]) -> int:
    readme_path = ROOT / "README.md"
    current = readme_path.read_text()
    if MARKER not in current:
        print(f"build_readme: {readme_path} lacks the marker line {MARKER!r}", file=sys.stderr)
        return 2
    new = build(current)
    if "--check" in argv:
        if new != current:
            print("README.md is stale: run python scripts/build_readme.py", file=sys.stderr)
            return 1
        return 0
    readme_path.write_text(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
