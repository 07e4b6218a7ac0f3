"""Where ``POST /adapters`` may load an adapter from: folders under the model-data root only,
holding exactly the files pinned for that adapter.

SageMaker extracts an adapter inference component's artifact on the instance and passes the
folder as ``src``; nothing else should ever be loaded. The check runs before anything touches
the file system at ``src`` itself, and every refusal outside the root reads the same whether
the path exists or not (no existence oracle for a caller probing the instance).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from serving_app.adapters.protocol import AdapterRequestError
from serving_contract import env
from serving_contract.model_artifacts import artifact_sha256

PATH_MAX: Final = 4096
"""Linux ``PATH_MAX`` (bytes, including the terminating NUL): longer paths fail every syscall."""

NAME_MAX: Final = 255
"""Linux ``NAME_MAX``: a longer path component fails with ENAMETOOLONG (was a 500 on e706d98)."""


def checked_source(src: str, root: Path) -> Path:
    """``src`` resolved (symlinks followed), if it lies inside ``root``.

    Args:
        src: the registration's ``src``: an absolute path.
        root: the model-data root (``ADAPTER_SRC_ROOT``), already resolved.

    Returns:
        The resolved folder path: pass this one to vLLM, so a symlink swapped after the check
        cannot redirect the load.

    Raises:
        AdapterRequestError: one line naming ``src``; the same text for a path outside the root
            whether or not it exists.
    """
    outside = f"src is invalid: must be a folder under {root} (ADAPTER_SRC_ROOT)"
    if "\x00" in src or len(src.encode()) >= PATH_MAX:
        raise AdapterRequestError(f"src is invalid: must be a path shorter than {PATH_MAX} bytes without NUL")
    if any(len(part.encode()) > NAME_MAX for part in src.split("/")):
        raise AdapterRequestError(f"src is invalid: a path component is longer than {NAME_MAX} bytes")
    if not os.path.isabs(src):
        raise AdapterRequestError(f"src is invalid: must be an absolute path under {root}")
    try:
        resolved = Path(os.path.realpath(src))
    except (OSError, ValueError):
        raise AdapterRequestError(outside) from None
    if not resolved.is_relative_to(root) or resolved == root:
        raise AdapterRequestError(outside)
    return resolved


def check_digest(name: str, folder: Path, pinned: Mapping[str, str]) -> None:
    """Refuse ``folder`` unless its artifact digest is the one pinned for ``name``.

    The digest is :func:`serving_contract.model_artifacts.artifact_sha256` (every file's
    sha256 and relative path), so the extracted archive is checked against the pin itself:
    no digest file travels with it that a writer of the archive could replace too.

    Args:
        name: the adapter's registration name (the inference component's name).
        folder: the resolved adapter folder (:func:`checked_source`).
        pinned: ``ADAPTER_SHA256``; empty means no pins (outside SageMaker): nothing is checked.

    Raises:
        AdapterDigestError: ``name`` has no pin, or the folder's digest differs; ``actual``
            carries the computed digest for the log (the response does not).
    """
    if not pinned:
        return
    expected = pinned.get(name)
    if expected is None:
        raise AdapterDigestError(f"adapter {name!r} has no pinned sha256 ({env.ADAPTER_SHA256}); refused", None)
    actual = artifact_sha256(folder)
    if actual != expected:
        raise AdapterDigestError(
            f"adapter {name!r}: the files at src do not match the pinned sha256 ({env.ADAPTER_SHA256}); refused",
            actual,
        )


class AdapterDigestError(AdapterRequestError):
    """An adapter whose files are not the pinned ones; ``actual`` is the computed digest or None."""

    def __init__(self, message: str, actual: str | None) -> None:
        super().__init__(message)
        self.actual = actual
