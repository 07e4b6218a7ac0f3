"""No function runs past MAX_FUNCTION_LINES (issue 37): a method one cannot hold in mind is split.

ruff's gates count branches (C901) and statements (PLR0915), and neither sees a construct's
``__init__`` built from a few large expressions: EndpointDashboard.__init__ ran 278 lines with
17 statements and a complexity of 6. ruff has no rule on lines, hence this one.
"""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
PRODUCT = (
    "app.py",
    "app_config",
    "benchmarks",
    "cdk_constructs",
    "client",
    "container",
    "devtools",
    "ops",
    "serving_contract",
    "stacks",
)

MAX_FUNCTION_LINES = 120
"""From ``def`` to the last line, docstring included. Measured when it was set: the longest product
function was 118 lines (stacks/composition.py ``build_app``), 8 were over 90."""


def long_functions(source: str, name: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``name:line function (N lines)`` of every function or method in ``source`` longer than ``limit``."""
    return [
        f"{name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def product_modules() -> list[Path]:
    found: list[Path] = []
    for name in PRODUCT:
        root = REPO / name
        found += [root] if root.is_file() else sorted(root.rglob("*.py"))
    return found


def test_the_walk_reaches_every_product_folder() -> None:
    walked = {path.relative_to(REPO).parts[0] for path in product_modules()}
    assert walked == set(PRODUCT)


def test_a_planted_long_function_is_found() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES - 1))
    at_limit = f"def fits():\n{body}"
    over = (
        f"class C:\n    def too_long(self):\n{''.join('    ' + line for line in body.splitlines(True))}        pass\n"
    )
    assert long_functions(at_limit, "planted.py") == []
    assert long_functions(over, "planted.py") == [f"planted.py:2 too_long ({MAX_FUNCTION_LINES + 1} lines)"]


def test_no_function_is_too_long() -> None:
    offenders = [
        found for path in product_modules() for found in long_functions(path.read_text(), str(path.relative_to(REPO)))
    ]
    assert offenders == [], f"split into _build_* methods or helpers (max {MAX_FUNCTION_LINES} lines): {offenders}"
