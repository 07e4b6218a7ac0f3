"""container/requirements.lock fixes every transitive version of the serving image and
agrees with container/requirements.txt (the Dockerfile installs ``-r requirements.txt -c
requirements.lock``)."""

from __future__ import annotations

import re
from pathlib import Path

CONTAINER = Path(__file__).resolve().parents[3] / "container"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)$")


def normalize(name: str) -> str:
    """PEP 503 name normalization (prometheus_client == prometheus-client)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"{path.name}: not an exact pin: {line!r}"
        name = normalize(match.group(1))
        assert name not in found, f"{path.name}: {name} pinned twice"
        found[name] = match.group(2)
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


def test_dockerfile_installs_with_the_lock_as_constraints() -> None:
    dockerfile = (CONTAINER / "Dockerfile").read_text()
    assert "-r /tmp/requirements.txt -c /tmp/requirements.lock" in dockerfile
    assert "!container/requirements.lock" in (CONTAINER.parent / ".dockerignore").read_text().splitlines()
