"""Stacks only wire (issue 37): no stack module builds a resource, grants or acknowledges itself.

A stack composes constructs, passes what one needs from another, and adds outputs and tags. The
resources, the grants between them and the cdk-nag/checkov/cfn-guard acknowledgements sit in the
constructs (cdk_constructs/), next to the resources they concern.
"""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

CORE_ALLOWED = {"CfnOutput"}
"""The only ``aws_cdk.Cfn*`` a stack makes: its outputs."""
CORE_RESOURCES = {"CustomResource"}
"""``aws_cdk`` classes that make a resource without a ``Cfn`` prefix."""
GRANT_CALLS = {"add_to_policy", "add_to_principal_policy", "add_to_resource_policy", "attach_inline_policy"}
ACKNOWLEDGEMENTS = {"acknowledge", "acknowledge_all", "checkov_skip", "guard_suppress"}


def _service_aliases(tree: ast.Module) -> tuple[set[str], set[str], set[str]]:
    """Names bound to ``aws_cdk`` itself, to its ``aws_*`` modules, and to classes imported from those."""
    core, services, classes = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "aws_cdk":
                    core.add(alias.asname or alias.name)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                name = alias.asname or alias.name
                if node.module == "aws_cdk" and alias.name.startswith("aws_"):
                    services.add(name)
                elif node.module == "aws_cdk" and (alias.name.startswith("Cfn") or alias.name in CORE_RESOURCES):
                    if alias.name not in CORE_ALLOWED:
                        classes.add(name)
                elif node.module.startswith("aws_cdk.aws_") and alias.name[:1].isupper():
                    classes.add(name)
    return core, services, classes


def _dotted(node: ast.expr) -> list[str]:
    """``a.b.C`` as ``["a", "b", "C"]``; ``[]`` for anything but names and attributes."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    return [node.id, *parts] if isinstance(node, ast.Name) else []


def builds_itself(source: str) -> list[str]:
    """``line: what`` of each resource, grant or acknowledgement a module makes itself."""
    tree = ast.parse(source)
    core, services, classes = _service_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        path = _dotted(node.func)
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        is_class = name[:1].isupper()
        if (
            (len(path) == 1 and name in classes)
            or (len(path) == 2 and path[0] in services and is_class)
            or (len(path) == 3 and path[0] in core and path[1].startswith("aws_") and is_class)
            or (
                len(path) == 2
                and path[0] in core
                and (name.startswith("Cfn") or name in CORE_RESOURCES)
                and name not in CORE_ALLOWED
            )
        ):
            found.append(f"{node.lineno}: {'.'.join(path)}(...) makes a resource")
        elif isinstance(node.func, ast.Attribute) and (name.startswith("grant") or name in GRANT_CALLS):
            found.append(f"{node.lineno}: .{name}(...) grants")
        elif name in ACKNOWLEDGEMENTS:
            found.append(f"{node.lineno}: {name}(...) acknowledges")
    return found


def stack_modules() -> list[Path]:
    return sorted((REPO / "stacks").rglob("*.py"))


def test_the_walk_finds_the_stacks() -> None:
    # An empty walk proves nothing (issue 37): every deployment unit's module must be in it.
    names = {path.name for path in stack_modules()}
    assert {"serving_stack.py", "image_build_stack.py", "composition.py"} <= names


def test_no_stack_builds_grants_or_acknowledges_itself() -> None:
    offenders = {
        str(path.relative_to(REPO)): found for path in stack_modules() if (found := builds_itself(path.read_text()))
    }
    assert offenders == {}, "move these into a construct under cdk_constructs/ (stacks only wire)"


@pytest.mark.parametrize(
    ("planted", "expected"),
    [
        ("from aws_cdk import aws_s3 as s3\ns3.Bucket(self, 'B')", "2: s3.Bucket(...) makes a resource"),
        (
            "from aws_cdk import aws_s3_assets\naws_s3_assets.Asset(self, 'A', path='.')",
            "2: aws_s3_assets.Asset(...) makes a resource",
        ),
        ("from aws_cdk.aws_sns import Topic\nTopic(self, 'T')", "2: Topic(...) makes a resource"),
        ("import aws_cdk\naws_cdk.aws_sqs.Queue(self, 'Q')", "2: aws_cdk.aws_sqs.Queue(...) makes a resource"),
        ("import aws_cdk as cdk\ncdk.CfnResource(self, 'R', type='X')", "2: cdk.CfnResource(...) makes a resource"),
        ("import aws_cdk as cdk\ncdk.CustomResource(self, 'C')", "2: cdk.CustomResource(...) makes a resource"),
        (
            "from aws_cdk import aws_sagemaker as sm\nsm.CfnEndpoint(self, 'E')",
            "2: sm.CfnEndpoint(...) makes a resource",
        ),
        ("repository.grant_pull(role)", "1: .grant_pull(...) grants"),
        ("log_group.grant(role, 'logs:DescribeLogStreams')", "1: .grant(...) grants"),
        ("role.add_to_policy(statement)", "1: .add_to_policy(...) grants"),
        ("acknowledge(role, 'AwsSolutions-IAM5', 'why')", "1: acknowledge(...) acknowledges"),
        (
            "import aws_cdk as cdk\ncdk.Validations.of(role).acknowledge(ack)",
            "2: acknowledge(...) acknowledges",
        ),
        ("nag.checkov_skip(policy, 'CKV_AWS_111', 'why')", "1: checkov_skip(...) acknowledges"),
    ],
)
def test_a_planted_violation_is_found(planted: str, expected: str) -> None:
    assert builds_itself(planted) == [expected]


def test_wiring_is_not_a_violation() -> None:
    wiring = (
        "import aws_cdk as cdk\n"
        "from aws_cdk import aws_ecr as ecr\n"
        "from aws_cdk import aws_s3 as s3\n"
        "from cdk_constructs.image.serving_images import ServingImages\n"
        "images = ServingImages(self, 'Default', config=config)\n"
        "cdk.CfnOutput(self, 'Name', value=images.image_tags['primary'])\n"
        "cdk.Tags.of(app).add('k', 'v')\n"
        "s3.Bucket.from_bucket_name(self, 'Imported', 'name')\n"  # a reference, not a resource
        "ecr.Repository.from_repository_attributes(self, 'Prebuilt', repository_arn=a, repository_name=n)\n"
        "role.write_to(log_groups)\n"
    )
    assert builds_itself(wiring) == []


# Constructs take narrow typed props (issue 37): the config sections they read, or values resolved from
# them, never the whole AppConfig; validation stays in app_config, so no construct raises ConfigError.


def construct_config_uses(source: str) -> list[str]:
    """``line: what`` of each construct class's method taking an ``AppConfig``, and of each ``ConfigError``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and any(_dotted(base)[-1:] == ["Construct"] for base in node.bases):
            for method in node.body:
                if not isinstance(method, ast.FunctionDef):
                    continue
                arguments = [*method.args.args, *method.args.kwonlyargs]
                found += [
                    f"{method.lineno}: {node.name}.{method.name}({a.arg}: AppConfig)"
                    for a in arguments
                    if a.annotation is not None and "AppConfig" in ast.unparse(a.annotation)
                ]
        elif isinstance(node, ast.Name) and node.id == "ConfigError":
            found.append(f"{node.lineno}: ConfigError")
    return found


def construct_modules() -> list[Path]:
    return sorted(path for path in (REPO / "cdk_constructs").rglob("*.py") if "runtime" not in path.parts)


def test_constructs_take_narrow_props() -> None:
    assert len(construct_modules()) > 20  # every capability's modules, not an empty glob
    offenders = {
        str(path.relative_to(REPO)): found
        for path in construct_modules()
        if (found := construct_config_uses(path.read_text()))
    }
    assert offenders == {}, "pass the config sections (or values resolved from them); validate in app_config"


@pytest.mark.parametrize(
    ("planted", "expected"),
    [
        (
            "class Pool(Construct):\n    def __init__(self, scope, id, *, config: AppConfig):\n        pass\n",
            "2: Pool.__init__(config: AppConfig)",
        ),
        (
            "class Pool(constructs.Construct):\n    def _build(self, config: 'AppConfig') -> None:\n        pass\n",
            "2: Pool._build(config: AppConfig)",
        ),
        ("def check(x):\n    raise ConfigError(f'bad {x}')\n", "2: ConfigError"),
    ],
)
def test_a_planted_wide_prop_is_found(planted: str, expected: str) -> None:
    assert construct_config_uses(planted) == [expected]


def test_narrow_props_and_config_functions_are_not_flagged() -> None:
    narrow = (
        "class Pool(Construct):\n"
        "    def __init__(self, scope, id, *, components: InferenceComponentsConfig, endpoint_name: str):\n"
        "        pass\n"
        "def container_environment(config: AppConfig) -> dict[str, str]:\n"  # a function the stack calls
        "    return {}\n"
    )
    assert construct_config_uses(narrow) == []
