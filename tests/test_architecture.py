"""The shape of the house, checked on the source: no import cycles, no hand-written module over 600 lines or
function over 80, every package opening with a docstring that says its job, and the layering between packages.

The import graph counts every ``import`` in a module, including those inside functions (deferred for start-up
time, they are still dependencies), and ``TYPE_CHECKING`` blocks, which hold names for annotations only, are left
out. A module's import of its own package's ``__init__`` counts as an edge to that package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import piece_by_piece_serialize

PACKAGE = Path(piece_by_piece_serialize.__file__).resolve().parent
NAME = "piece_by_piece_serialize"
GENERATED = PACKAGE / "_lalr" / "_generated"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if GENERATED in path.parents:
            continue
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join([NAME, *parts])] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def _imports(module: str, path: Path) -> set[str]:
    """The library modules that ``module`` imports, resolved to the longest known module name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            skipped.update(id(n) for child in node.body for n in ast.walk(child))
    targets: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                head = ".".join(base + ([node.module] if node.module else []))
            else:
                head = node.module or ""
            submodules = [f"{head}.{alias.name}" for alias in node.names if f"{head}.{alias.name}" in MODULES]
            # ``from . import _x`` depends on the submodule only (every submodule import initialises its
            # parents, which is not a dependency anybody chose); names that are not submodules come from ``head``
            names = submodules + ([head] if len(submodules) < len(node.names) else [])
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                targets.add(name)
    return targets


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _cycles() -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(GRAPH[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_the_scan_sees_the_package() -> None:
    # a negative control for the scans below: they must be looking at real modules and real edges
    assert len(MODULES) > 30
    assert f"{NAME}.schema._choice" in GRAPH[f"{NAME}.schema"]
    assert f"{NAME}.schema._transform" in GRAPH[f"{NAME}.schema._choice"]
    assert f"{NAME}._lalr.choice" in GRAPH[f"{NAME}.schema._transform"]


def test_no_import_cycles() -> None:
    assert _cycles() == []


# The layers, bottom up: what each top-level part of the package may import besides itself. The engine knows no
# language; the languages know the engine and the errors; the serializer knows the languages; the custom operators
# know the serializer; the export knows the operators; the CLI, on top, may use everything. Each package's docstring says the same in words.
ALLOWED = {
    "errors": {"_diagnostics"},
    "_diagnostics": set(),
    "_lalr": set(),
    "_optional": set(),
    "schema": {"_lalr", "errors", "_diagnostics"},
    "treespec_name": {"_lalr", "errors", "_diagnostics", "_optional"},
    "type_info": {"_lalr", "errors", "_diagnostics", "treespec_name"},
    "sym_expr": {"_lalr", "errors", "_diagnostics"},
    "domains": set(),
    "_closeness": set(),
    "serialize": {"errors", "schema", "treespec_name", "type_info", "_optional"},
    "caches": {"serialize", "type_info"},
    "custom_op": {"errors", "schema", "serialize", "treespec_name", "type_info"},
    "artifact": {"_optional", "errors", "schema", "serialize", "treespec_name", "type_info", "sym_expr", "domains", "custom_op"},
    "onnx_export": {"serialize", "custom_op", "domains", "_closeness"},
    "export": {"_closeness", "_optional", "errors", "schema", "serialize", "treespec_name", "type_info", "sym_expr", "domains", "custom_op", "artifact", "onnx_export"},
    "cli": {"_closeness", "_lalr", "errors", "_diagnostics", "_optional", "schema", "treespec_name", "type_info", "sym_expr", "domains", "serialize", "custom_op", "artifact", "onnx_export", "export", ""},
    "__main__": {"cli"},
    "": {"errors"},  # the package itself: everything else is loaded lazily, on first attribute access
}


def _part(module: str) -> str:
    return module[len(NAME) + 1 :].partition(".")[0] if module != NAME else ""


def test_every_part_has_a_layer() -> None:
    assert {_part(m) for m in MODULES} == set(ALLOWED)


def test_each_part_imports_only_the_layers_below_it() -> None:
    wrong = {}
    for module, targets in GRAPH.items():
        part = _part(module)
        bad = sorted(t for t in targets if _part(t) != part and _part(t) not in ALLOWED[part])
        if bad:
            wrong[module] = bad
    assert wrong == {}


def test_no_module_over_600_lines() -> None:
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in MODULES.items()}
    assert {m: n for m, n in sizes.items() if n > MAX_MODULE_LINES} == {}


def test_no_function_over_80_lines() -> None:
    long = {}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{module}.{node.name}"] = length
    assert long == {}


def test_every_module_opens_with_a_docstring() -> None:
    missing = [m for m, path in MODULES.items() if not ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))]
    assert missing == []


# docs/layout.md, the newcomer's map: every module has a row in its tables (but the package's own entry points and the engine
# package's docstring-only __init__), and everything on it exists.
_UNLISTED = {"__init__.py", "__main__.py", "_lalr/__init__.py"}


def test_the_layout_page_names_every_module_and_nothing_else() -> None:
    import re

    page = (PACKAGE.parents[1] / "docs" / "layout.md").read_text(encoding="utf-8")
    # the first cell of each table row names a module
    named = set(re.findall(r"^\| `([\w/]+\.py)` \|", page, re.M))
    modules = {path.relative_to(PACKAGE).as_posix() for path in MODULES.values()} - _UNLISTED
    assert sorted(named - modules) == [] and sorted(modules - named) == []
