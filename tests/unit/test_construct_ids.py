"""One helper turns names into construct ids (serving_contract.outputs.pascal_case)."""

import ast
from pathlib import Path

from serving_contract.outputs import pascal_case

CONSTRUCTS = Path(__file__).resolve().parents[2] / "cdk_constructs"


def test_pascal_case_keeps_the_existing_ids_of_the_default_names() -> None:
    # Variant, adapter and model names of the default config: their logical ids must not move.
    assert pascal_case("primary") == "Primary"
    assert pascal_case("jp_style_v1") == "JpStyleV1"
    assert pascal_case("mangaassist-llama3-domain-v1") == "MangaassistLlama3DomainV1"


def test_no_construct_builds_ids_with_str_title() -> None:
    # str.title() disagrees with pascal_case after digits ("v2beta" -> "V2Beta") and keeps '_' or '-'.
    offenders = [
        f"{path.name}:{node.lineno}"
        for path in sorted(CONSTRUCTS.glob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "title"
    ]
    assert offenders == [], f"use serving_contract.outputs.pascal_case instead of str.title(): {offenders}"
