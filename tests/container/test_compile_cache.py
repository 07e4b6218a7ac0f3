"""The container's compile-cache modes against the scripted engine (``FAKE_COMPILE_KEY`` makes it
write into ``VLLM_CACHE_ROOT`` the way vLLM compiles, and write nothing on a hit): the
cache-making job's command, and a model started with a made, stale, failed or absent cache. A
bad cache is a cold start with a log line, never a failed container. The real engine's make
and hit: ``tests/engine/test_real_compile_cache.py``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from serving_contract import compile_cache as contract
from tests.container.conftest import REPO, Serve

KEY = "0123456789abcdef"


def wait_for_line(server: Serve, fragment: str, timeout_s: float = 15.0) -> str:
    """The first log line holding ``fragment``, from after ``compile cache: ``."""
    return server.log_line(fragment, timeout_s=timeout_s).split("compile cache: ", 1)[-1]


def make_cache(tmp: Path, fake_key: str = "graph-a") -> tuple[Serve, Path]:
    """Run ``make-compile-cache`` to its exit; return the process and the output folder."""
    out = tmp / "made"
    env_file = tmp / "environment.json"
    # The model's environment as the job gets it, COMPILE_CACHE_DIR included: make ignores it.
    env_file.write_text(
        json.dumps(
            {contract.COMPILE_CACHE_KEY: KEY, contract.COMPILE_CACHE_DIR: "/opt/ml/model", "FAKE_COMPILE_KEY": fake_key}
        )
    )
    server = Serve(
        tmp,
        env={"VLLM_CACHE_ROOT": str(tmp / "job-root")},
        command=("make-compile-cache", "--environment-file", str(env_file), "--output-dir", str(out)),
    )
    server.proc.wait(timeout=30)
    return server, out


def serve_with(tmp: Path, made: Path | None, key: str = KEY, fake_key: str = "graph-a") -> Serve:
    env = {"VLLM_CACHE_ROOT": str(tmp / "root"), contract.COMPILE_CACHE_KEY: key, "FAKE_COMPILE_KEY": fake_key}
    if made is not None:
        env[contract.COMPILE_CACHE_DIR] = str(made)
    server = Serve(tmp, env=env)
    server.wait_ready()
    return server


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache made by the job's command, read-only as SageMaker's model data is."""
    server, out = make_cache(tmp_path_factory.mktemp("make"))
    assert server.proc.returncode == 0, server.stderr_lines[-5:]
    for path in [out, *out.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return out


def test_make_compile_cache_copies_the_engines_cache_and_a_ready_manifest_then_exits_0(made: Path) -> None:
    manifest = contract.Manifest.from_json((made / "manifest.json").read_text())
    assert (manifest.key, manifest.status, manifest.files) == (KEY, "ready", 1)
    assert (made / "vllm-cache" / "torch_compile_cache" / "graph-a" / "graph").read_text() == "compiled"


def test_a_made_cache_for_the_models_key_is_loaded_and_hit(tmp_path: Path, made: Path) -> None:
    server = serve_with(tmp_path, made)
    try:
        assert wait_for_line(server, "compile cache: loaded").startswith(f"loaded (key {KEY}, 1 files made on")
        assert "vLLM loaded every graph from it" in wait_for_line(server, "compile cache: hit after")
        copied = tmp_path / "root" / "torch_compile_cache" / "graph-a" / "graph"
        assert copied.read_text() == "compiled" and copied.stat().st_mode & 0o200
    finally:
        server.stop()


def test_a_cache_vllm_does_not_accept_is_a_miss_that_compiles_into_the_writable_copy(
    tmp_path: Path, made: Path
) -> None:
    server = serve_with(tmp_path, made, fake_key="graph-b")
    try:
        assert "vLLM compiled anyway (1 new files: its own key differs)" in wait_for_line(server, "compile cache: miss")
        assert (tmp_path / "root" / "torch_compile_cache" / "graph-b" / "graph").exists()
    finally:
        server.stop()


def test_a_cache_made_for_another_key_is_stale_and_a_cold_start(tmp_path: Path, made: Path) -> None:
    server = serve_with(tmp_path, made, key="fedcba9876543210")
    try:
        line = wait_for_line(server, "compile cache: stale")
        assert line == (
            f"stale (made for key {KEY}, this model's COMPILE_CACHE_KEY is 'fedcba9876543210'; a cold start)"
        )
        assert wait_for_line(server, "compile cache: cold after").endswith("stale: " + line[7:-1])
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("manifest", "expected"),
    [
        (
            contract.Manifest(key=KEY, status="failed", detail="job j failed: ResourceLimitExceeded"),
            "absent (the cache-making job's status is failed: job j failed: ResourceLimitExceeded; a cold start)",
        ),
        (None, "absent (no {made}/manifest.json: a cold start)"),
    ],
)
def test_a_failed_or_missing_cache_is_a_cold_start_with_its_reason(
    tmp_path: Path, manifest: contract.Manifest | None, expected: str
) -> None:
    made = tmp_path / "model-data"
    made.mkdir()
    if manifest is not None:
        (made / "manifest.json").write_text(manifest.to_json())
    server = serve_with(tmp_path, made)
    try:
        assert wait_for_line(server, "compile cache: absent") == expected.format(made=made)
        wait_for_line(server, "compile cache: cold after")
    finally:
        server.stop()


def test_make_fails_with_exit_1_and_a_reason_when_the_engine_compiled_nothing(tmp_path: Path) -> None:
    server, out = make_cache(tmp_path, fake_key="")
    assert server.proc.returncode == 1
    root = tmp_path / "job-root"
    assert wait_for_line(server, "compile cache: not made") == (
        f"not made: VLLM_CACHE_ROOT={root} holds no file after the start: nothing was compiled"
    )
    assert not (out / "manifest.json").exists()


def test_make_needs_its_environment_file_and_output_dir() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "serving_app", "make-compile-cache"],
        env={"PYTHONPATH": f"{REPO}:{REPO / 'container'}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "serve: error: make-compile-cache needs --environment-file and --output-dir"
    )


def test_an_environment_file_that_is_not_an_object_of_strings_exits_2_with_one_line(tmp_path: Path) -> None:
    env_file = tmp_path / "environment.json"
    env_file.write_text(json.dumps({"ENGINE_MAX_MODEL_LEN": 4096}))
    server = Serve(
        tmp_path,
        command=("make-compile-cache", "--environment-file", str(env_file), "--output-dir", str(tmp_path / "o")),
    )
    assert server.proc.wait(timeout=30) == 2
    message = f"serve: configuration error: --environment-file {env_file}: must be a JSON object of strings to strings"
    assert server.log_line(message) == message
    assert server.stderr_lines[-1] == message  # the last line: nothing after the error
