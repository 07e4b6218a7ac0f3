"""The house rules a reader relies on (issue 27), checked on the code itself."""

import ast
import re
import sys
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


CAPABILITIES = {
    "artifacts",
    "bedrock",
    "common",
    "compile_cache",
    "endpoint",
    "image",
    "observability",
    "release",
    "scaling",
}


def test_constructs_are_grouped_by_capability() -> None:
    constructs = REPO / "cdk_constructs"
    assert sorted(path.name for path in constructs.glob("*.py")) == ["__init__.py"]
    assert {path.parent.name for path in constructs.glob("*/__init__.py")} == CAPABILITIES


def test_each_handler_folder_is_named_after_its_capability() -> None:
    """The handlers stay in the top-level lambdas/ folder (lambdas/README.md); the folder a construct
    deploys is named like the construct's package."""
    deployed = [
        (path.relative_to(REPO), folder)
        for path in (REPO / "cdk_constructs").rglob("*.py")
        for folder in re.findall(r'handler_folder="(\w+)"', path.read_text())
    ]
    assert len(deployed) >= 3
    for path, folder in deployed:
        assert folder == path.parent.name, f"{path}: lambdas/{folder} is not named like {path.parent}"
        assert (REPO / "lambdas" / folder / "index.py").is_file(), f"{path}: lambdas/{folder}/index.py is missing"


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


def test_cli_support_needs_only_the_standard_library() -> None:
    """The benchmarks import it from vLLM's environment, which has none of the app's packages."""
    modules = sorted((REPO / "cli_support").glob("*.py"))
    assert len(modules) >= 2  # not an empty glob
    for path in modules:
        outside = _imported_roots(path) - set(sys.stdlib_module_names) - {"cli_support"}
        assert not outside, f"{path.relative_to(REPO)} imports {sorted(outside)}"


PLANNING = REPO / "app_config" / "planning"

SCHEMA_TAKES_FROM_PLANNING = {
    # the instance-type check of every `instance_type` field reads the GPU catalogue
    "base.py": {"gpu_instances"},
    # the checks across sections run the weekly plan, the dated schedule, the memory plan, SLO holds
    "cross_section_checks.py": {"weekly_plan", "dated_schedule", "engine_memory", "gpu_instances", "memory_plan"}
    | {"slo_holds"},
    # the model's shape and the checkpoint size are the memory plan's units
    "llm.py": {"gpu_instances", "memory_plan"},
    # the resolved plan (AppConfig.plan) and the plan's entry points (throughput_of, memory_plan_of, prefix_routing)
    "root.py": {"engine_memory", "gpu_instances", "memory_plan", "prefix_routing", "resolved_plan"}
    | {"throughput_at_slo"},
    # scheduled actions' cron expressions are parsed while validating
    "scaling.py": {"weekly_cron"},
    "scheduled_actions.py": {"weekly_cron"},
    # engines per instance, for the inference components' bounds
    "topology.py": {"gpu_instances"},
}
"""What the schema (app_config/*.py) takes from app_config/planning/ because validation runs it at
load time. Anything else the schema would import from the planning package is a layering error:
planning reads a validated config, the schema does not read the plan."""


def _app_config_imports(path: Path) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            modules.add(node.module)
        elif isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
    return {module for module in modules if module.split(".")[0] == "app_config"}


def test_the_schema_takes_from_planning_only_what_validation_runs() -> None:
    taken = {}
    for path in sorted((REPO / "app_config").glob("*.py")):
        planning = {
            module.removeprefix("app_config.planning.")
            for module in _app_config_imports(path)
            if module.startswith("app_config.planning")
        }
        if planning:
            taken[path.name] = planning
    assert taken == SCHEMA_TAKES_FROM_PLANNING


def test_planning_needs_no_stack_construct_or_tool() -> None:
    """The plan is computed from a validated config: app_config, serving_contract and libraries only."""
    modules = sorted(PLANNING.glob("*.py"))
    assert len(modules) >= 10  # not an empty glob
    forbidden = {"aws_cdk", "constructs", "stacks", "cdk_constructs", "devtools", "ops", "benchmarks", "lambdas"}
    for path in modules:
        reached = _imported_roots(path) & forbidden
        assert not reached, f"{path.relative_to(REPO)} imports {sorted(reached)}"
