"""No runtime import cycle in any package of the repo (issue 55).

A cycle broken by an import inside a function still is a cycle: the two modules cannot be read, tested or
moved apart, and which one loads first decides whether the program starts. So every import counts here,
at module level or inside a function, except those under ``if TYPE_CHECKING:``, which never run.
"""

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

SOURCE_ROOTS = (".", "container", "benchmarks", "client")
"""Where imports resolve from: the repo root and pytest's ``pythonpath`` (pyproject.toml), the same folders
the image (``container/``), the benchmarks and the client library import their own modules from."""

SKIPPED = {"node_modules", "cdk.out", "__pycache__", ".git"}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(tree: ast.Module, package: str) -> Iterator[str]:
    """Every module name an import statement of ``tree`` may load when it runs: module-level and
    function-level, ``from a import b`` as both ``a.b`` and ``a``; the body of ``if TYPE_CHECKING:`` is left
    out (its ``else:`` is not). ``package`` resolves relative imports."""

    def visit(nodes: Iterable[ast.stmt]) -> Iterator[str]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                yield from (alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parent = package.split(".")[: len(package.split(".")) - node.level + 1] if package else []
                    base = ".".join([*parent, *([node.module] if node.module else [])])
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names)
            # Inside functions, classes, branches, loops, with-blocks and handlers alike.
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                yield from visit(getattr(node, field, []))

    yield from visit(tree.body)


def module_files(repo: Path, roots: Iterable[str] = SOURCE_ROOTS) -> dict[str, Path]:
    """``{module name: file}`` for every Python file under ``roots`` (a file may have a name under each root
    that holds it: ``container/serving_app/app.py`` is ``serving_app.app`` too)."""
    modules: dict[str, Path] = {}
    for root in roots:
        base = (repo / root).resolve()
        for path in base.rglob("*.py"):
            parts = path.relative_to(base).with_suffix("").parts
            if any(part in SKIPPED or part.startswith(".") for part in parts):
                continue
            names = parts[:-1] if parts[-1] == "__init__" else parts
            if names:
                modules.setdefault(".".join(names), path)
    return modules


def _module_of(imported: str, modules: dict[str, Path]) -> str:
    """The longest prefix of ``imported`` that is a repo module (``a.b.name`` may be a name in ``a.b``), or ""."""
    while imported and imported not in modules:
        imported = imported.rpartition(".")[0]
    return imported


def import_graph(modules: dict[str, Path]) -> dict[Path, set[Path]]:
    """File -> the repo's files its runtime imports name (:func:`runtime_imports`); imports of libraries drop out."""
    graph: dict[Path, set[Path]] = {}
    for name, path in modules.items():
        if path in graph:
            continue
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = {
            modules[found]
            for imported in runtime_imports(ast.parse(path.read_text()), package)
            if (found := _module_of(imported, modules)) and modules[found] != path
        }
        graph[path] = targets
    return graph


def cycles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected components of more than one file (Tarjan, iterative), each sorted."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []
    for start, children_of_start in graph.items():
        if start in index:
            continue
        work = [(start, iter(sorted(children_of_start)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    # planning/plan.py and planning/checks.py before issue 55: the import that closes the loop ran in a function.
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/plan.py": "def make():\n    from pkg.checks import check\n    return check\n",
            "pkg/checks.py": "from pkg import plan\n\ndef check():\n    return plan\n",
            "pkg/leaf.py": "import json\n",
        },
    )
    found = cycles(import_graph(module_files(tmp_path, (".",))))
    assert [[p.name for p in cycle] for cycle in found] == [["checks.py", "plan.py"]]


def test_type_checking_imports_and_relative_imports(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.b import B\n",
            "pkg/b.py": "from . import a\n",
            "pkg/c.py": "from .d import x\n",
            "pkg/d.py": "import typing\nif typing.TYPE_CHECKING:\n    pass\nelse:\n    from pkg import c\nx = 1\n",
        },
    )
    found = cycles(import_graph(module_files(tmp_path, (".",))))
    # a -> b only for the type checker: no cycle; c -> d -> c through the else branch, which runs.
    assert [[p.name for p in cycle] for cycle in found] == [["c.py", "d.py"]]


def test_no_package_of_the_repo_has_a_runtime_import_cycle() -> None:
    modules = module_files(REPO)
    assert len({path for path in modules.values()}) > 400  # the whole repo, not an empty glob
    assert "planning.make_plan" in modules and "serving_app.app" in modules and "mangaassist_client.client" in modules
    found = [[str(path.relative_to(REPO)) for path in cycle] for cycle in cycles(import_graph(modules))]
    assert found == []
