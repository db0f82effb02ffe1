"""The import order of the three packages (docs/layout.md), read from the source with `ast`.

Every import counts: at module level, inside a function, and under `if TYPE_CHECKING:`. A
sub-package imports only the layers below it (LAYERS, top first); the two of one layer do not
import each other; `simulator` never imports `calibrate` or `specsight`, and `calibrate` never
imports `specsight`. Modules do not import each other in a circle (imports that run: module and
function level), and inside `simulator` an import sits inside a function only where it defers a
heavy dependency (FUNCTION_LEVEL, each with its reason), never to dodge a circle.
"""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import simulator

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("simulator", "calibrate", "specsight")

# top first; a unit imports only units of later rows (a row of two: they do not import each other)
LAYERS = [
    ("specsight", "specsight.cli"),
    ("specsight.explore",),
    ("specsight.studies",),
    ("specsight.studies.breakeven",),
    ("specsight.studies.fleet_day",),
    ("specsight.studies.deploy",),
    ("specsight.studies.plan",),
    ("specsight.studies.published",),
    ("specsight.studies.sweep",),
    ("specsight.studies.shared",),
    ("specsight.studies.moved", "specsight.kernel_source"),
    ("calibrate",),
    ("simulator", "simulator.run"),
    ("simulator.scenario",),
    ("simulator.serving",),
    ("simulator.engines",),
    ("simulator.speculation", "simulator.workload"),
    ("simulator.costs",),
    ("simulator.models",),
    ("simulator.hardware",),
    ("simulator.common",),
]

# the only imports inside functions in simulator/: (importer, imported) -> why it waits
FUNCTION_LEVEL = {
    ("simulator.serving.compiled_rounds", "simulator.serving.decode_kernel"):
        "numba compiles the decode kernel: only a run that uses compiled rounds pays for it",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    return {module_name(p): p for top in PACKAGES for p in sorted((ROOT / top).rglob("*.py"))}


def imports(modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(importer, imported, where) for every import of a project module; where is module,
    function or type_checking."""
    out = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        out += [(name, target, where) for node, where in _import_nodes(ast.parse(path.read_text(encoding="utf-8")))
                for target in resolve(node, package, modules) if target != name]
    return out


def _import_nodes(node: ast.AST, where: str = "module") -> list[tuple[ast.Import | ast.ImportFrom, str]]:
    found = []
    for child in ast.iter_child_nodes(node):
        w = where
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            w = "function"
        elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            w = "type_checking"
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            found.append((child, w))
        found += _import_nodes(child, w)
    return found


def resolve(node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        stems = [a.name for a in node.names]
    else:
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        stems = [f"{stem}.{a.name}" if f"{stem}.{a.name}" in modules else stem for a in node.names]
    found = set()
    for s in stems:
        while s and s not in modules:
            s = s.rpartition(".")[0]
        if s:
            found.add(s)
    return found


def unit(name: str) -> str:
    """The LAYERS entry a module belongs to: the deepest listed prefix (calibrate: all of it)."""
    parts = name.split(".")
    for depth in range(len(parts), 0, -1):
        if ".".join(parts[:depth]) in RANK:
            return ".".join(parts[:depth])
    return name


RANK = {u: i for i, row in enumerate(LAYERS) for u in row}
MODULES = project_modules()
EDGES = imports(MODULES)


def test_every_module_sits_in_a_layer():
    unplaced = sorted({unit(m) for m in MODULES} - set(RANK))
    assert not unplaced, f"place these in LAYERS (and docs/layout.md): {unplaced}"


def test_imports_run_down_the_layers():
    against = sorted(f"{a} -> {b} ({where})" for a, b, where in EDGES
                     if unit(a) != unit(b) and RANK[unit(b)] <= RANK[unit(a)])
    assert not against, "imports against the layer order (docs/layout.md):\n" + "\n".join(against)


def test_top_packages_run_one_way():
    allowed = {("specsight", "calibrate"), ("specsight", "simulator"), ("calibrate", "simulator")}
    back = sorted(f"{a} -> {b}" for a, b, _ in EDGES
                  if a.split(".")[0] != b.split(".")[0] and (a.split(".")[0], b.split(".")[0]) not in allowed)
    assert not back, "\n".join(back)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_in_a_circle():
    graph = defaultdict(set)
    for a, b, where in EDGES:
        if where != "type_checking":
            graph[a].add(b)
    assert circles(graph) == []


def test_no_sub_packages_import_each_other_in_a_circle():
    graph = defaultdict(set)
    for a, b, _ in EDGES:
        if unit(a) != unit(b):
            graph[unit(a)].add(unit(b))
    assert circles(graph) == []


def test_simulator_imports_inside_functions_only_to_defer_a_heavy_dependency():
    inside = {(a, b) for a, b, where in EDGES if where == "function" and a.startswith("simulator")}
    assert inside == set(FUNCTION_LEVEL), sorted(inside ^ set(FUNCTION_LEVEL))


def test_the_simulator_docstring_lists_its_sub_packages_in_the_layer_order():
    listed = re.findall(r"^    (\w+)(?:/|\.py)\s", simulator.__doc__, flags=re.M)
    order = [u.split(".")[1] for row in LAYERS for u in row if u.startswith("simulator.")]
    assert listed == order


def test_the_top_of_simulator_holds_only_its_entry_points():
    assert sorted(p.name for p in (ROOT / "simulator").glob("*.py")) == ["__init__.py"]
    assert (ROOT / "simulator" / "run" / "__init__.py").is_file()      # simulate(): the run/ package
