"""container/requirements.lock fixes every transitive version of the serving image with the sha256
of its files, agrees with container/requirements.txt, and is what the Dockerfile installs, in
hash-checking mode (issue 49, finding 5)."""

from __future__ import annotations

import re
from pathlib import Path

CONTAINER = Path(__file__).resolve().parents[3] / "container"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#\\]+)(?: \\)?$")
HASH = re.compile(r"^--hash=sha256:[0-9a-f]{64}(?: \\)?$")


def normalize(name: str) -> str:
    """PEP 503 name normalization (prometheus_client == prometheus-client)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    return {name: version for name, (version, _) in hashed_pins(path).items()}


def hashed_pins(path: Path) -> dict[str, tuple[str, list[str]]]:
    """Name -> (version, its ``--hash`` lines) of a requirements file (hash lines continue a pin)."""
    found: dict[str, tuple[str, list[str]]] = {}
    name = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash"):
            assert name and HASH.match(line), f"{path.name}: not a sha256 of the pin above: {line!r}"
            found[name][1].append(line)
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: not an exact pin: {line!r}"
        name = normalize(match.group(1))
        assert name not in found, f"{path.name}: {name} pinned twice"
        found[name] = (match.group(2), [])
    return found


def test_lock_pins_the_engine_versions() -> None:
    lock = pins(CONTAINER / "requirements.lock")
    assert lock["vllm"] == "0.26.0"
    assert lock["torch"] == "2.11.0"
    assert len(lock) > 100  # the whole resolution, not just the top level


def test_lock_agrees_with_every_top_level_pin() -> None:
    lock = pins(CONTAINER / "requirements.lock")
    for name, version in pins(CONTAINER / "requirements.txt").items():
        assert lock.get(name) == version, f"requirements.lock: {name}=={lock.get(name)}, requirements.txt: {version}"


def test_every_locked_package_carries_the_sha256_of_its_files() -> None:
    locked = hashed_pins(CONTAINER / "requirements.lock")
    assert [name for name, (_, hashes) in locked.items() if not hashes] == []
    # torch's CUDA wheels for each CPython, not one platform's.
    assert len(locked["torch"][1]) >= 5


def test_dockerfile_installs_only_the_lock_in_hash_checking_mode() -> None:
    dockerfile = (CONTAINER / "Dockerfile").read_text()
    assert "uv pip install --no-cache --require-hashes -r /tmp/requirements.lock" in dockerfile
    installs = [line for line in dockerfile.splitlines() if "pip install" in line and not line.lstrip().startswith("#")]
    assert len(installs) == 1  # nothing else resolves fresh at build time
    assert "COPY container/requirements.txt" not in dockerfile
    assert "!container/requirements.lock" in (CONTAINER.parent / ".dockerignore").read_text().splitlines()
