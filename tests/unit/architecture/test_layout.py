"""The house rules a reader relies on (issue 27), checked on the code itself."""

import ast
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_app_py_needs_only_the_config_its_plan_and_the_stacks() -> None:
    assert _imported_roots(REPO / "app.py") == {"sys", "aws_cdk", "app_config", "planning", "stacks"}


def test_cdk_json_is_read_in_one_place() -> None:
    readers = sorted(
        str(path.relative_to(REPO))
        for folder in ("app_config", "stacks", "cdk_constructs", "devtools", "ops", "benchmarks")
        for path in (REPO / folder).rglob("*.py")
        if '"cdk.json"' in path.read_text() and "read_text" in path.read_text()
    )
    assert readers == ["app_config/loader.py"]


CAPABILITIES = {
    "approval",
    "artifacts",
    "bedrock",
    "capacity_job",
    "common",
    "compile_cache",
    "endpoint",
    "image",
    "migration",
    "observability",
    "release",
    "scaling",
}


def test_constructs_are_grouped_by_capability() -> None:
    constructs = REPO / "cdk_constructs"
    assert sorted(path.name for path in constructs.glob("*.py")) == ["__init__.py"]
    assert {path.parent.name for path in constructs.glob("*/__init__.py")} == CAPABILITIES


def _handler_dirs() -> list[tuple[Path, str]]:
    """(construct module, the ``handler_dir=`` expression it passes) for each custom-resource provider."""
    return [
        (path.relative_to(REPO), expression)
        for path in (REPO / "cdk_constructs").rglob("*.py")
        for expression in re.findall(r"handler_dir=([^,\n]+),", path.read_text())
    ]


def test_each_handler_sits_beside_its_construct() -> None:
    """A capability is one folder (aws-samples/aws-cdk-project-structure-python: ``runtime/`` beside the
    construct); the last handlers left in a top-level ``lambdas/`` moved there in issue 55."""
    deployed = _handler_dirs()
    assert len(deployed) >= 6  # image, bedrock, scaling, compile_cache, approval, common: not an empty search
    for path, expression in deployed:
        capability = path.parts[1]  # cdk_constructs/<capability>/...
        assert expression == "RUNTIME", f"{path}: {expression} is not its capability's runtime/"
        assert 'RUNTIME = Path(__file__).resolve().parent / "runtime"' in (REPO / path).read_text(), path
        runtime = REPO / "cdk_constructs" / capability / "runtime"
        assert (runtime / "index.py").is_file(), f"{path}: {runtime.relative_to(REPO)}/index.py is missing"
    assert not (REPO / "lambdas").exists()


def test_stacks_holds_stacks_and_their_wiring() -> None:
    modules = {path.name for path in (REPO / "stacks").glob("*.py")}
    assert {name for name in modules if not name.endswith("_stack.py")} == {
        "__init__.py",
        "composition.py",  # wires the stacks
        "jsii_node.py",  # the Node that app.py starts aws-cdk-lib with
    }


def test_serving_mode_is_decided_in_one_place() -> None:
    """``serving.hosts_inference_components`` reads the mode; everything else asks it (issue 27)."""
    readers = sorted(
        f"{path.relative_to(REPO)}:{number}"
        for folder in ("app_config", "stacks", "cdk_constructs")
        for path in (REPO / folder).rglob("*.py")
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if "mode ==" in line or "mode !=" in line
    )
    assert len(readers) == 1 and readers[0].startswith("app_config/serving.py:")


def test_the_plan_decides_which_units_are_deployed() -> None:
    """In planning/ and stacks/, only planning/units.py asks the serving mode; the rest walk ``Plan.units``
    (issue 55). The config's own checks (app_config/) validate each mode's keys, and read it there."""
    readers = sorted(
        str(path.relative_to(REPO))
        for folder in ("planning", "stacks")
        for path in (REPO / folder).rglob("*.py")
        if "hosts_inference_components" in path.read_text() or "serving.mode ==" in path.read_text()
    )
    assert readers == ["planning/units.py"]


def test_cli_support_needs_only_the_standard_library() -> None:
    """The benchmarks import it from vLLM's environment, which has none of the app's packages."""
    modules = sorted((REPO / "cli_support").glob("*.py"))
    assert len(modules) >= 2  # not an empty glob
    for path in modules:
        outside = _imported_roots(path) - set(sys.stdlib_module_names) - {"cli_support"}
        assert not outside, f"{path.relative_to(REPO)} imports {sorted(outside)}"


PRODUCT_FOLDERS = (
    "app_config",
    "benchmarks",
    "cdk_constructs",
    "cli_support",
    "client",
    "container",
    "devtools",
    "ops",
    "serving_contract",
    "stacks",
)
"""The repo's product code: what the app, the image, the Lambdas, the tools and the client library are made of."""

KNOWN_LINKS = {
    "cdk_constructs/release/runtime/model_artifacts.py": "../../../serving_contract/model_artifacts.py",
    "cdk_constructs/release/runtime/quality_gates.py": "../../../serving_contract/quality_gates.py",
}
"""Links not yet replaced: the release steps' code zip follows them (model_release_pipeline.py,
``follow_symlinks``). The list may only shrink: a new link fails, and so does a removed one left listed."""


def links_under(root: Path, folders: tuple[str, ...]) -> dict[str, str]:
    """``{path relative to root: link target}`` of every symbolic link (file or folder) under ``folders``;
    linked folders are reported, not entered."""
    links = {}
    for folder in folders:
        for directory, subdirs, files in os.walk(root / folder):
            for name in subdirs + files:
                path = Path(directory) / name
                if path.is_symlink():
                    links[str(path.relative_to(root))] = os.readlink(path)
    return links


def test_links_under_finds_a_planted_link(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "shared.py").write_text("")
    (tmp_path / "pkg" / "sub" / "copy.py").symlink_to("../../shared.py")
    (tmp_path / "pkg" / "linked").symlink_to("sub")
    assert links_under(tmp_path, ("pkg",)) == {"pkg/sub/copy.py": "../../shared.py", "pkg/linked": "sub"}


def test_product_folders_hold_no_links() -> None:
    """A link makes one file look like two, and an asset or image that copies the folder may get a dangling
    link or a stale copy; share a module by importing it (and bundling it: cdk_constructs/common/handler_code.py)."""
    missing = [folder for folder in PRODUCT_FOLDERS if not (REPO / folder).is_dir()]
    assert not missing, f"gone from the repo: {missing}"
    assert links_under(REPO, PRODUCT_FOLDERS) == KNOWN_LINKS


IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def fallback_imports(source: str, name: str) -> list[str]:
    """``name:line`` of each ``except ImportError`` (or ``ModuleNotFoundError``) handler that imports
    something else instead: code that runs with one of two modules depending on where it is."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
        if not any(isinstance(c, ast.Name) and c.id in IMPORT_ERRORS for c in caught):
            continue
        if any(isinstance(inner, ast.Import | ast.ImportFrom) for stmt in node.body for inner in ast.walk(stmt)):
            found.append(f"{name}:{node.lineno}")
    return found


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        # What lambdas/compile_cache/index.py did before the compile cache became one folder.
        ("try:\n    import a as c\nexcept ImportError:\n    from b import a as c\n", ["m.py:3"]),
        ("try:\n    import a\nexcept (OSError, ModuleNotFoundError):\n    import b as a\n", ["m.py:3"]),
        # An optional speed-up or a clear error is not a second module.
        ("try:\n    import uvloop\nexcept ImportError:\n    run()\n", []),
        ("try:\n    import a\nexcept ImportError as exc:\n    raise SystemExit('needs a') from exc\n", []),
    ],
)
def test_fallback_imports_finds_a_planted_one(source: str, expected: list[str]) -> None:
    assert fallback_imports(source, "m.py") == expected


def test_product_code_has_no_fallback_imports() -> None:
    modules = [REPO / "app.py"] + [path for folder in PRODUCT_FOLDERS for path in (REPO / folder).rglob("*.py")]
    assert len(modules) > 100  # not an empty glob
    found = [hit for path in modules for hit in fallback_imports(path.read_text(), str(path.relative_to(REPO)))]
    assert found == []


PLANNING = REPO / "planning"

SCHEMA_TAKES_FROM_PLANNING = {
    # the instance-type check of every `instance_type` field reads the GPU catalogue
    "base.py": {"gpu_instances"},
    # the kernels' compute capability per variant GPU
    "cross_section_checks.py": {"gpu_instances"},
    # the model's shape and the checkpoint size are the memory plan's units
    "llm.py": {"gpu_instances", "memory_plan"},
    # scheduled actions' cron expressions are parsed while validating
    "scaling.py": {"weekly_cron"},
    # the shadow's instance type must hold the engine, as every variant's
    "shadow.py": {"gpu_instances"},
    "scheduled_actions.py": {"weekly_cron"},
}
"""What the schema (app_config/*.py) takes from planning/: the catalogue and the parsers a value is
validated against, leaves that import nothing of the config. The config is plain data: what
follows from it (derived targets, throughput, memory plans, the checks that need them) is
``planning.make_plan.make_plan``'s, which app.py runs after loading (issue 45 item 6)."""

PLANNING_LEAVES = {"gpu_instances", "memory_plan", "weekly_cron"}


def _imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
    return modules


def test_the_schema_takes_from_planning_only_its_leaves() -> None:
    taken = {}
    for path in sorted((REPO / "app_config").glob("*.py")):
        planning = {m.removeprefix("planning.") for m in _imports(path) if m.split(".")[0] == "planning"}
        if planning:
            taken[path.name] = planning
    assert taken == SCHEMA_TAKES_FROM_PLANNING
    for leaf in PLANNING_LEAVES:
        reached = {m for m in _imports(PLANNING / f"{leaf}.py") if m.split(".")[0] in {"app_config", "planning"}}
        assert reached <= {f"planning.{other}" for other in PLANNING_LEAVES}, f"planning/{leaf}.py imports {reached}"


def test_the_config_is_plain_data() -> None:
    """``AppConfig`` holds sections and names; no planning method (issue 45: plan, throughput_of,
    prefix_routing and memory_plan_of made the config the planner and tied six modules in a circle)."""
    from app_config.root import AppConfig

    methods = {name for name, value in vars(AppConfig).items() if callable(value) and not name.startswith("_")}
    assert methods <= {"stack_name"}, methods


def test_planning_needs_no_stack_construct_or_tool() -> None:
    """The plan is computed from a validated config: app_config, serving_contract, cli_support and libraries only."""
    modules = sorted(PLANNING.rglob("*.py"))
    assert len(modules) >= 20  # not an empty glob
    forbidden = {"aws_cdk", "constructs", "stacks", "cdk_constructs", "devtools", "ops", "benchmarks", "lambdas"}
    for path in modules:
        reached = _imported_roots(path) & forbidden
        assert not reached, f"{path.relative_to(REPO)} imports {sorted(reached)}"
