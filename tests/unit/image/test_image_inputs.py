"""Image tag derivation: same inputs, same tag; any changed input, a new tag."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app_config.image_build import ArtifactSetConfig
from cdk_constructs.image import image_inputs

HEX64 = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
CUDA = "nvidia/cuda:12.4.1-base-ubuntu22.04@sha256:"
UV = "ghcr.io/astral-sh/uv:0.13.8@sha256:"
VERSION = st.from_regex(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,15}$", fullmatch=True)
PIN = st.builds(lambda v, h: f"{v}/{h}", VERSION, HEX64)
ADAPTER = st.from_regex(r"^[a-z][a-z0-9_]{0,15}$", fullmatch=True)


@st.composite
def inputs(draw: st.DrawFn) -> dict[str, object]:
    return {
        "sources_sha256": draw(HEX64),
        "base_model_name": draw(st.sampled_from(["llama-3-8b-instruct-awq", "llama-3.1-8b-awq"])),
        "artifacts": ArtifactSetConfig(
            base_model=draw(PIN), adapters=draw(st.dictionaries(ADAPTER, PIN, min_size=1, max_size=4))
        ),
        "build_args": {
            "LORA_ADAPTERS": draw(st.text(max_size=20)),
            "MAX_LORA_RANK": str(draw(st.sampled_from([8, 16]))),
        },
        "base_images": {"CUDA_BASE": CUDA + draw(HEX64), "UV_IMAGE": UV + draw(HEX64)},
    }


@settings(max_examples=25, deadline=None)
@given(inputs())
def test_same_inputs_same_tag_and_a_valid_ecr_tag(args: dict[str, object]) -> None:
    tag = image_inputs.image_tag(**args)  # type: ignore[arg-type]
    assert tag == image_inputs.image_tag(**args)  # type: ignore[arg-type]
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)


@settings(max_examples=25, deadline=None)
@given(inputs(), inputs())
def test_different_inputs_different_tags(a: dict[str, object], b: dict[str, object]) -> None:
    same = image_inputs.image_tag(**a) == image_inputs.image_tag(**b)  # type: ignore[arg-type]
    assert same == (a == b)


@settings(max_examples=25, deadline=None)
@given(inputs(), PIN, HEX64)
def test_each_single_changed_input_changes_the_tag(args: dict[str, object], new_pin: str, new_sources: str) -> None:
    base_images = args["base_images"]
    assert isinstance(base_images, dict)
    tag = image_inputs.image_tag(**args)  # type: ignore[arg-type]
    artifacts = args["artifacts"]
    assert isinstance(artifacts, ArtifactSetConfig)
    name = sorted(artifacts.adapters)[0]
    variants = [
        {**args, "sources_sha256": new_sources},
        {**args, "artifacts": artifacts.model_copy(update={"base_model": new_pin})},
        {**args, "artifacts": artifacts.model_copy(update={"adapters": {**artifacts.adapters, name: new_pin}})},
        {**args, "build_args": {**args["build_args"], "MAX_LORA_RANK": "32"}},  # type: ignore[dict-item]
        {**args, "base_model_name": "another-model"},
        # Issue 22 item 6: a new base-image digest (same tag) is a new image, so a new image tag.
        {**args, "base_images": {**base_images, "CUDA_BASE": CUDA + new_sources}},
        {**args, "base_images": {**base_images, "UV_IMAGE": UV + new_sources}},
    ]
    for changed in variants:
        if changed != args:
            assert image_inputs.image_tag(**changed) != tag  # type: ignore[arg-type]


def test_adapter_order_does_not_matter() -> None:
    pins = {"a": "v1/" + "1" * 64, "b": "v2/" + "2" * 64}
    one = ArtifactSetConfig(base_model="v1/" + "3" * 64, adapters=pins)
    two = ArtifactSetConfig(base_model="v1/" + "3" * 64, adapters=dict(reversed(pins.items())))
    common = {"sources_sha256": "0" * 64, "base_model_name": "m", "build_args": {}, "base_images": {}}
    assert image_inputs.image_tag(artifacts=one, **common) == image_inputs.image_tag(artifacts=two, **common)  # type: ignore[arg-type]


def _tree(root: Path) -> Path:
    (root / "container" / "serving_app").mkdir(parents=True)
    (root / "container" / "Dockerfile").write_text("FROM scratch\n")
    (root / "container" / "serving_app" / "app.py").write_text("print('hi')\n")
    (root / "serving_contract").mkdir()
    (root / "serving_contract" / "env.py").write_text("X = 1\n")
    (root / ".dockerignore").write_text("*\n!container/\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("")
    return root


def test_sources_hash_covers_content_and_paths_but_not_caches(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = image_inputs.sources_sha256(root)
    (root / "container" / "serving_app" / "__pycache__").mkdir()
    (root / "container" / "serving_app" / "__pycache__" / "app.cpython-312.pyc").write_bytes(b"\0")
    (root / "container" / ".venv-vllm").mkdir()
    (root / "container" / ".venv-vllm" / "big").write_bytes(b"\0")
    (root / "tests" / "test_y.py").write_text("")  # outside the build context
    assert image_inputs.sources_sha256(root) == before
    (root / "container" / "serving_app" / "app.py").write_text("print('bye')\n")
    changed_content = image_inputs.sources_sha256(root)
    assert changed_content != before
    (root / "container" / "serving_app" / "app.py").rename(root / "container" / "serving_app" / "main.py")
    assert image_inputs.sources_sha256(root) != changed_content


def test_staged_sources_are_exactly_what_the_hash_covers(tmp_path: Path) -> None:
    root = _tree(tmp_path / "repo")
    (root / "container" / "__pycache__").mkdir()
    (root / "container" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    staged = image_inputs.stage_sources(root, tmp_path / "staged")
    files = sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file())
    assert files == [".dockerignore", "container/Dockerfile", "container/serving_app/app.py", "serving_contract/env.py"]
    assert image_inputs.sources_sha256(staged) == image_inputs.sources_sha256(root)


@pytest.mark.skipif(shutil.which("sha256sum") is None, reason="needs coreutils")
def test_sources_hash_matches_the_documented_shell_pipeline(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    shell = subprocess.run(
        "find container serving_contract .dockerignore -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum "
        "| sha256sum",
        shell=True,
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[0]
    assert image_inputs.sources_sha256(root) == shell


def test_dockerfile_base_image_defaults_equal_the_config_defaults() -> None:
    # One pin, two places: a local `docker build` without --build-arg pulls what the deploy pulls.
    from app_config.image_build import ImageBuildConfig

    dockerfile = (Path(__file__).resolve().parents[3] / image_inputs.DOCKERFILE).read_text()
    defaults = dict(re.findall(r"^ARG (CUDA_BASE|UV_IMAGE)=(\S+)$", dockerfile, re.MULTILINE))
    config = ImageBuildConfig()
    assert defaults == {
        image_inputs.CUDA_BASE_ARG: config.cuda_base_image,
        image_inputs.UV_IMAGE_ARG: config.uv_image,
    }


def test_a_changed_base_digest_in_config_changes_the_tag() -> None:
    from app_config import load_config
    from tests.synth_helpers import cdk_json_context

    def tag(overrides: dict[str, str]) -> str:
        config = load_config({**cdk_json_context(), **overrides})
        return image_inputs.image_tag(
            sources_sha256="0" * 64,
            base_model_name=config.model.name,
            artifacts=config.image.build.primary,
            build_args=image_inputs.docker_build_args(config),
            base_images=image_inputs.base_images(config.image),
        )

    default = tag({})
    assert tag({"image.build.cuda_base_image": CUDA + "e" * 64}) != default
    assert tag({"image.build.uv_image": UV + "e" * 64}) != default
