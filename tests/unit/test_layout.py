"""The house rules a reader relies on (issue 27), checked on the code itself."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_app_py_needs_only_the_config_and_the_stacks() -> None:
    assert _imported_roots(REPO / "app.py") == {"sys", "aws_cdk", "app_config", "stacks"}


def test_cdk_json_is_read_in_one_place() -> None:
    readers = sorted(
        str(path.relative_to(REPO))
        for folder in ("app_config", "stacks", "cdk_constructs", "devtools", "ops", "benchmarks")
        for path in (REPO / folder).rglob("*.py")
        if '"cdk.json"' in path.read_text() and "read_text" in path.read_text()
    )
    assert readers == ["app_config/loader.py"]
