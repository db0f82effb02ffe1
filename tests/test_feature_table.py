"""docs/features.md names, for every feature, the tests that check it as `tests/FILE.py::test_NAME`:
each named file must exist and define that test function, so the table cannot name a test that was
renamed or removed."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "features.md"
CITED = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
SECTIONS = ("## Drafter families", "## Attention types", "## Weight formats", "## Parallelism", "## Engines")


def _cited(text: str) -> list[tuple[str, str]]:
    return CITED.findall(text)


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test_")}


def test_every_cited_test_exists():
    text = TABLE.read_text(encoding="utf-8")
    cited = _cited(text)
    assert len(cited) >= 40                      # the table is parsed, not skipped (it cites over 40)
    defined = {file: _test_functions(ROOT / file) if (ROOT / file).is_file() else set()
               for file in {f for f, _ in cited}}            # each cited file parsed once
    missing = [f"{file}::{name}" for file, name in cited if name not in defined[file]]
    assert not missing, f"docs/features.md cites tests that do not exist: {missing}"


def test_the_parser_catches_a_missing_test(tmp_path):
    """The check fails on a name that is not there (so the test above can fail)."""
    (tmp_path / "test_x.py").write_text("def test_here():\n    pass\n")
    assert _test_functions(tmp_path / "test_x.py") == {"test_here"}
    assert _cited("| `tests/test_x.py::test_gone` |") == [("tests/test_x.py", "test_gone")]


def test_every_row_names_a_test_or_says_it_is_not_modelled():
    """Each table row of each section cites a test, or has the dash that says nothing is modelled."""
    text = TABLE.read_text(encoding="utf-8")
    for title in SECTIONS:
        assert title in text, title
        body = text.split(title, 1)[1].split("\n## ", 1)[0]
        rows = [r for r in body.splitlines() if r.startswith("| ") and not r.startswith("| family")
                and "---" not in r and not re.match(r"\| (attention|format|parallelism|engine) ", r)]
        assert rows, title
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert _cited(row) or "—" in cells, row


def test_the_docs_link_to_the_table():
    assert "docs/features.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    assert "features.md" in (ROOT / "docs" / "cost_model.md").read_text(encoding="utf-8")
