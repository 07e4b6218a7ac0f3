"""The container's compile-cache modes against the scripted engine (``FAKE_COMPILE_KEY`` makes it
write into ``VLLM_CACHE_ROOT`` the way vLLM compiles, and write nothing on a hit): the
cache-making job's command, and a model started with a made, stale, failed or absent cache. A
bad cache is a cold start with a log line, never a failed container. The real engine's make
and hit: ``tests/engine/test_gpu_bench_smoke.py``.

The job's LoRA tuning step runs ``fake_lora_tuner.py`` (the real tuner needs a CUDA GPU), which
writes the real tuner's H200 files; ``test_lora_tuned_configs.py`` has vLLM itself read them
from a loaded cache, and ``test_lora_tuning.py`` the step's own cases."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from serving_contract import compile_cache as contract
from tests.container.conftest import REPO, Serve

KEY = "0123456789abcdef"
FAKE_TUNER = Path(__file__).with_name("fake_lora_tuner.py")


def wait_for_line(server: Serve, fragment: str, timeout_s: float = 15.0) -> str:
    """The first log line holding ``fragment``, from after ``compile cache: ``."""
    return server.log_line(fragment, timeout_s=timeout_s).split("compile cache: ", 1)[-1]


def make_cache(
    tmp: Path, fake_key: str = "graph-a", *, tuning_budget_s: int = 0, fake_tuner: str = ""
) -> tuple[Serve, Path]:
    """Run ``make-compile-cache`` to its exit; return the process and the output folder.

    ``tuning_budget_s`` > 0 adds the LoRA tuning step with the fake tuner (``FAKE_TUNER=fake_tuner``).
    """
    out = tmp / "made"
    env_file = tmp / "environment.json"
    # The model's environment as the job gets it, COMPILE_CACHE_DIR included: make ignores it.
    env_file.write_text(
        json.dumps(
            {contract.COMPILE_CACHE_KEY: KEY, contract.COMPILE_CACHE_DIR: "/opt/ml/model", "FAKE_COMPILE_KEY": fake_key}
        )
    )
    command: tuple[str, ...] = ("make-compile-cache", "--environment-file", str(env_file), "--output-dir", str(out))
    if tuning_budget_s:
        tuner = f"{sys.executable} {FAKE_TUNER}"
        command += (contract.LORA_TUNING_BUDGET_ARG, str(tuning_budget_s), "--tuner-command", tuner)
    server = Serve(
        tmp,
        env={"VLLM_CACHE_ROOT": str(tmp / "job-root"), "FAKE_TUNER": fake_tuner},
        command=command,
    )
    server.proc.wait(timeout=60)
    return server, out


def serve_with(tmp: Path, made: Path | None, key: str = KEY, fake_key: str = "graph-a", pin: str = "") -> Serve:
    env = {"VLLM_CACHE_ROOT": str(tmp / "root"), contract.COMPILE_CACHE_KEY: key, "FAKE_COMPILE_KEY": fake_key}
    if made is not None:
        env[contract.COMPILE_CACHE_DIR] = str(made)
    if pin:
        env[contract.COMPILE_CACHE_MANIFEST_SHA256] = pin
    server = Serve(tmp, env=env)
    server.wait_ready()
    return server


def read_only(out: Path) -> Path:
    """``out`` read-only, as SageMaker's model data is."""
    for path in [out, *out.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)
    return out


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache made by the job's command with its LoRA tuning step, read-only as model data is."""
    server, out = make_cache(tmp_path_factory.mktemp("make"), tuning_budget_s=60)
    assert server.proc.returncode == 0, server.stderr_lines[-5:]
    return read_only(out)


@pytest.fixture(scope="module")
def made_untuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache made with the tuning step off (``serving.compile_cache.lora_tuning`` false)."""
    server, out = make_cache(tmp_path_factory.mktemp("make-untuned"))
    assert server.proc.returncode == 0, server.stderr_lines[-5:]
    return read_only(out)


def test_make_compile_cache_copies_the_engines_cache_and_a_ready_manifest_then_exits_0(made: Path) -> None:
    manifest = contract.Manifest.from_json((made / "manifest.json").read_text())
    assert (manifest.key, manifest.status, manifest.files) == (KEY, "ready", 1)
    assert (made / "vllm-cache" / "torch_compile_cache" / "graph-a" / "graph").read_text() == "compiled"


def test_make_records_the_sha256_of_every_file_it_publishes(made: Path) -> None:
    """Issue 49, finding 2: the job writes the digests the container checks before vLLM reads a file."""
    manifest = contract.Manifest.from_json((made / "manifest.json").read_text())
    published = sorted(str(p.relative_to(made)) for p in made.rglob("*") if p.is_file() and p.name != "manifest.json")
    assert (
        sorted(manifest.digests)
        == published
        == [
            "lora-configs/NVIDIA_H200_EXPAND_TRUE.json",
            "lora-configs/NVIDIA_H200_SHRINK.json",
            "lora-configs/lora-tune.json",
            "vllm-cache/torch_compile_cache/graph-a/graph",
        ]
    )
    for path, digest in manifest.digests.items():
        assert hashlib.sha256((made / path).read_bytes()).hexdigest() == digest


def test_make_then_tunes_the_lora_kernels_into_lora_configs_beside_the_cache(made: Path) -> None:
    """The upload's layout: SageMaker uploads the output folder as compile-cache/<key>/."""
    assert sorted(p.name for p in (made / "lora-configs").iterdir()) == [
        "NVIDIA_H200_EXPAND_TRUE.json",
        "NVIDIA_H200_SHRINK.json",
        "lora-tune.json",
    ]
    manifest = contract.Manifest.from_json((made / "manifest.json").read_text())
    assert manifest.lora_configs == 2
    assert manifest.lora_tuning.startswith("tuned: NVIDIA_H200_EXPAND_TRUE.json, NVIDIA_H200_SHRINK.json in ")


def test_make_with_tuning_off_publishes_the_cache_alone_and_says_so(made_untuned: Path) -> None:
    assert sorted(p.name for p in made_untuned.iterdir()) == ["manifest.json", "vllm-cache"]
    manifest = contract.Manifest.from_json((made_untuned / "manifest.json").read_text())
    assert (manifest.status, manifest.lora_configs) == ("ready", 0)
    assert manifest.lora_tuning == "skipped: off (serving.compile_cache.lora_tuning is false)"


def test_a_failed_tuner_still_publishes_the_cache_exits_0_and_logs_why(tmp_path: Path) -> None:
    server, out = make_cache(tmp_path, tuning_budget_s=60, fake_tuner="fail")
    assert server.proc.returncode == 0, server.stderr_lines[-5:]
    why = "failed: the tuner exited with 1: RuntimeError: Found no NVIDIA driver on your system."
    assert server.log_line("lora tuning: failed").endswith(
        f"lora tuning: {why}; the compile cache is published without tuned configs"
    )
    manifest = contract.Manifest.from_json((out / "manifest.json").read_text())
    assert (manifest.status, manifest.files, manifest.lora_configs, manifest.lora_tuning) == ("ready", 1, 0, why)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "vllm-cache"]


def test_a_made_cache_for_the_models_key_is_loaded_and_hit(tmp_path: Path, made: Path) -> None:
    server = serve_with(tmp_path, made)
    try:
        assert wait_for_line(server, "compile cache: loaded").startswith(f"loaded (key {KEY}, 1 files made on")
        assert "vLLM loaded every graph from it" in wait_for_line(server, "compile cache: hit after")
        copied = tmp_path / "root" / "torch_compile_cache" / "graph-a" / "graph"
        assert copied.read_text() == "compiled" and copied.stat().st_mode & 0o200
    finally:
        server.stop()


def test_a_cache_whose_manifest_the_deploy_pinned_is_loaded(tmp_path: Path, made: Path) -> None:
    pin = contract.manifest_sha256((made / "manifest.json").read_bytes())
    server = serve_with(tmp_path, made, pin=pin)
    try:
        assert wait_for_line(server, "compile cache: loaded").endswith("4 sha256-verified (pinned manifest))")
        wait_for_line(server, "compile cache: hit after")
    finally:
        server.stop()


def tampered(tmp: Path, made: Path, change: Callable[[Path], object]) -> Path:
    """A writable copy of ``made`` with ``change`` applied, read-only again (model data)."""
    copy = tmp / "model-data"
    shutil.copytree(made, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)
    change(copy)
    return read_only(copy)


GRAPH = "vllm-cache/torch_compile_cache/graph-a/graph"


def _rewrite_manifest_to_match(copy: Path) -> None:
    """What a writer of the S3 prefix could do: change a graph and the manifest's digest of it."""
    (copy / GRAPH).write_text("import os  # not what the job compiled")
    manifest = contract.Manifest.from_json((copy / "manifest.json").read_text())
    digests = {**manifest.digests, GRAPH: hashlib.sha256((copy / GRAPH).read_bytes()).hexdigest()}
    (copy / "manifest.json").write_text(dataclasses.replace(manifest, digests=digests).to_json())


TAMPERING: dict[str, tuple[Callable[[Path], object], str]] = {
    "changed graph": (
        lambda copy: (copy / GRAPH).write_text("compiled by someone else"),
        f"{GRAPH} has sha256 {hashlib.sha256(b'compiled by someone else').hexdigest()}, the manifest says ",
    ),
    "extra file": (
        lambda copy: (copy / "vllm-cache" / "torch_compile_cache" / "graph-a" / "extra.py").write_text("x"),
        "vllm-cache/torch_compile_cache/graph-a/extra.py is not in the manifest; a cold start",
    ),
    "missing file": (
        lambda copy: (copy / "lora-configs" / "NVIDIA_H200_SHRINK.json").unlink(),
        "lora-configs/NVIDIA_H200_SHRINK.json is in the manifest but missing; a cold start",
    ),
    "changed lora config": (
        lambda copy: (copy / "lora-configs" / "NVIDIA_H200_SHRINK.json").write_text("{}"),
        "lora-configs/NVIDIA_H200_SHRINK.json has sha256 ",
    ),
    "no digests (an older manifest)": (
        lambda copy: (copy / "manifest.json").write_text(
            json.dumps({k: v for k, v in json.loads((copy / "manifest.json").read_text()).items() if k != "digests"})
        ),
        "the manifest records no file digests (made before they were recorded); a cold start",
    ),
}


@pytest.mark.parametrize("change", TAMPERING.values(), ids=TAMPERING.keys())
def test_a_cache_whose_files_differ_from_the_manifest_is_rejected_and_a_cold_start(
    tmp_path: Path, made: Path, change: tuple[Callable[[Path], object], str]
) -> None:
    """Issue 49, finding 2: vLLM runs code from the cache; a changed, extra or missing file is refused,
    logged as a warning, and the container starts cold: nothing from the cache reaches the engine."""
    alter, reason = change
    server = serve_with(tmp_path, tampered(tmp_path, made, alter))
    try:
        line = server.log_line("compile cache: rejected")
        assert " WARNING " in line or "WARNING" in line.split("compile cache:")[0]
        assert reason in line
        assert wait_for_line(server, "compile cache: cold after").startswith("cold after")
        assert not (tmp_path / "root" / "torch_compile_cache" / "graph-a" / "extra.py").exists()
        assert server.engine_state()["tuned_config_folder"] is None
    finally:
        server.stop()


def test_a_manifest_rewritten_after_the_deploy_is_rejected_by_its_pin(tmp_path: Path, made: Path) -> None:
    """A writer of the prefix can make the digests match its own files; the manifest's sha256, pinned on
    the model by the deploy (COMPILE_CACHE_MANIFEST_SHA256), cannot be changed from S3."""
    pin = contract.manifest_sha256((made / "manifest.json").read_bytes())
    copy = tampered(tmp_path, made, _rewrite_manifest_to_match)
    (tmp_path / "unpinned").mkdir()
    unpinned = serve_with(tmp_path / "unpinned", copy)
    try:  # without the pin the digests alone are consistent: only the pin tells the rewrite apart
        assert "sha256-verified (manifest not pinned" in wait_for_line(unpinned, "compile cache: loaded")
    finally:
        unpinned.stop()
    server = serve_with(tmp_path, copy, pin=pin)
    try:
        line = wait_for_line(server, "compile cache: rejected")
        assert line.endswith(
            f"not the COMPILE_CACHE_MANIFEST_SHA256 {pin} the deploy pinned (written after it); a cold start)"
        )
        wait_for_line(server, "compile cache: cold after")
    finally:
        server.stop()


def test_a_loaded_cache_with_tuned_configs_passes_their_folder_to_the_engine(tmp_path: Path, made: Path) -> None:
    server = serve_with(tmp_path, made)
    try:
        assert server.engine_state()["tuned_config_folder"] == str(made / "lora-configs")
        assert server.log_line("lora configs: VLLM_TUNED_CONFIG_FOLDER=").endswith(
            f"lora configs: VLLM_TUNED_CONFIG_FOLDER={made / 'lora-configs'} "
            "(NVIDIA_H200_EXPAND_TRUE.json, NVIDIA_H200_SHRINK.json)"
        )
    finally:
        server.stop()


def test_a_loaded_cache_without_tuned_configs_leaves_vllms_defaults(tmp_path: Path, made_untuned: Path) -> None:
    server = serve_with(tmp_path, made_untuned)
    try:
        assert server.engine_state()["tuned_config_folder"] is None
        assert server.log_line("lora configs: none").endswith(
            "lora configs: none in the cache (skipped: off (serving.compile_cache.lora_tuning is false)); "
            "vLLM's default kernel configs"
        )
    finally:
        server.stop()


def test_an_explicit_tuned_folder_wins_over_the_caches(tmp_path: Path, made: Path) -> None:
    own = tmp_path / "own-configs"
    own.mkdir()
    env = {"VLLM_CACHE_ROOT": str(tmp_path / "root"), contract.COMPILE_CACHE_KEY: KEY, "FAKE_COMPILE_KEY": "graph-a"}
    env |= {contract.COMPILE_CACHE_DIR: str(made), "LORA_TUNED_CONFIG_DIR": str(own)}
    server = Serve(tmp_path, env=env)
    try:
        server.wait_ready()
        assert server.engine_state()["tuned_config_folder"] == str(own)
    finally:
        server.stop()


def test_a_stale_cache_does_not_pass_its_tuned_configs(tmp_path: Path, made: Path) -> None:
    """Another key may be another instance type: its files could be for another GPU."""
    server = serve_with(tmp_path, made, key="fedcba9876543210")
    try:
        assert server.engine_state()["tuned_config_folder"] is None
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


def test_a_negative_tuning_budget_is_refused_in_one_line() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "serving_app",
            "make-compile-cache",
            "--environment-file",
            "e",
            "--output-dir",
            "o",
            contract.LORA_TUNING_BUDGET_ARG,
            "-5",
        ],
        env={"PYTHONPATH": f"{REPO}:{REPO / 'container'}"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert (
        result.stderr.strip().splitlines()[-1] == "serve: error: --lora-tuning-budget-s -5: must be >= 0 (0: no tuning)"
    )
