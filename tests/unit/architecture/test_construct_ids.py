"""One helper turns names into construct ids (serving_contract.outputs.pascal_case)."""

import ast
from collections.abc import Iterable
from pathlib import Path

from serving_contract.outputs import pascal_case

REPO = Path(__file__).resolve().parents[3]
ID_BUILDERS = ("app.py", "stacks", "cdk_constructs")
"""Where construct ids are made: the app, the stacks and the constructs (every module below them)."""


def test_pascal_case_keeps_the_existing_ids_of_the_default_names() -> None:
    # Variant, adapter and model names of the default config: their logical ids must not move.
    assert pascal_case("primary") == "Primary"
    assert pascal_case("jp_style_v1") == "JpStyleV1"
    assert pascal_case("mangaassist-llama3-domain-v1") == "MangaassistLlama3DomainV1"


def title_calls(paths: Iterable[Path]) -> list[str]:
    """``file:line`` of every ``<expr>.title()`` call in ``paths``."""
    return [
        f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{node.lineno}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "title"
    ]


def id_builder_modules() -> list[Path]:
    """Every Python module under ``ID_BUILDERS``, sub-packages included."""
    found: list[Path] = []
    for name in ID_BUILDERS:
        root = REPO / name
        found += [root] if root.is_file() else sorted(root.rglob("*.py"))
    return found


def test_the_walk_reaches_every_construct_subpackage() -> None:
    # A glob that finds nothing proves nothing: cdk_constructs/*.py matched only __init__.py once
    # the constructs moved into sub-packages (issue 37).
    walked = {path.parent for path in id_builder_modules()}
    subpackages = {init.parent for init in (REPO / "cdk_constructs").rglob("__init__.py")}
    assert subpackages and subpackages <= walked
    assert REPO / "stacks" / "composition.py" in id_builder_modules()


def test_a_planted_str_title_is_found(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('construct_id = "Model" + name.title()\n')
    assert title_calls([*id_builder_modules(), planted]) == [f"{planted}:1"]


def test_no_construct_builds_ids_with_str_title() -> None:
    # str.title() disagrees with pascal_case after digits ("v2beta" -> "V2Beta") and keeps '_' or '-'.
    offenders = title_calls(id_builder_modules())
    assert offenders == [], f"use serving_contract.outputs.pascal_case instead of str.title(): {offenders}"
