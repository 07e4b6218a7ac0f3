"""One snapshot per stack of the default synth, asset hashes masked.

Update after an intended change with ``pytest tests/infra/test_snapshots.py --snapshot-update``
and review the diff like any other code change.
"""

import re
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.synth_helpers import Synth

_ASSET_HASH = re.compile(r"[0-9a-f]{64}")


def mask_asset_hashes(node: Any) -> Any:
    """Replace content hashes (asset keys, image tags) so snapshots survive source edits."""
    if isinstance(node, dict):
        return {key: mask_asset_hashes(value) for key, value in node.items()}
    if isinstance(node, list):
        return [mask_asset_hashes(value) for value in node]
    if isinstance(node, str):
        return _ASSET_HASH.sub("<asset-hash>", node)
    return node


@pytest.fixture
def json_snapshot(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize(
    "unit", ["ImageRepository", "ModelArtifacts", "ImageBuild", "Serving", "Observability", "ModelRelease"]
)
def test_stack_snapshot(default_synth: Synth, json_snapshot: SnapshotAssertion, unit: str) -> None:
    assert mask_asset_hashes(default_synth.template_json(unit)) == json_snapshot


@pytest.mark.parametrize("unit", ["ImageBuild", "Serving", "Observability"])
def test_inference_components_stack_snapshot(
    components_synth: Synth, json_snapshot: SnapshotAssertion, unit: str
) -> None:
    assert mask_asset_hashes(components_synth.template_json(unit)) == json_snapshot


def test_inference_components_dev_serving_snapshot(
    dev_components_synth: Synth, json_snapshot: SnapshotAssertion
) -> None:
    assert mask_asset_hashes(dev_components_synth.template_json("Serving")) == json_snapshot


@pytest.mark.parametrize("unit", ["ImageBuild", "Serving", "Observability"])
def test_shadow_stack_snapshot(shadow_synth: Synth, json_snapshot: SnapshotAssertion, unit: str) -> None:
    assert mask_asset_hashes(shadow_synth.template_json(unit)) == json_snapshot


def test_migration_stack_snapshot(bedrock_synth: Synth, json_snapshot: SnapshotAssertion) -> None:
    """The Migration stack (issue 54) as the Bedrock synth enables it (tests/conftest.py BEDROCK_OVERRIDES)."""
    assert mask_asset_hashes(bedrock_synth.template_json("Migration")) == json_snapshot


def test_masking_replaces_hashes_only() -> None:
    digest = "a" * 64
    assert mask_asset_hashes({"k": [f"{digest}.zip", "plain"]}) == {"k": ["<asset-hash>.zip", "plain"]}
