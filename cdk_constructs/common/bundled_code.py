"""A code asset made of one folder plus single-file modules of this repository, bundled without Docker.

A Lambda handler (``handler_code.py``) and a processing job's code zip (``cdk_constructs/capacity_job``)
both import modules shared with other parties (``serving_contract/compile_cache.py``, the container's too;
``cli_support/open_loop.py``, the ops CLI's too). CDK's local bundling (``cdk.ILocalBundling``: no Docker)
copies each such module into the asset at its package path, so ``from serving_contract import compile_cache``
reads the same in the asset as in the repo, with no link and no import fallback.

:func:`bundled_folder` returns what both ``lambda_.Code.from_asset`` and ``s3_assets.Asset`` take.
"""

import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The repository's root: a module ``a.b`` of this repository is ``<root>/a/b.py``."""

NOT_DEPLOYED = ("__pycache__", "*.pyc")
"""What a code folder holds that no runtime needs (Python's bytecode caches)."""

_NEVER_RUN_IMAGE = lambda_.Runtime.PYTHON_3_14.bundling_image
"""CDK requires a bundling image even when the local bundler always succeeds, which it does here; this one
(the image CDK would build a Python Lambda in) is never pulled."""


def module_file(name: str, *, root: Path = REPO_ROOT) -> Path:
    """The source file of module ``name`` of this repository (``a.b`` -> ``<root>/a/b.py``), found without
    importing it (a module written in parallel, or one importing what the synth lacks, still bundles).

    Raises:
        ValueError: no such file (a package, a typo, a module not written yet), in one line.
    """
    path = root.joinpath(*name.split(".")).with_suffix(".py")
    if not path.is_file():
        relative = path.relative_to(root) if path.is_relative_to(root) else path
        raise ValueError(
            f"shared_modules: {name} has no file {relative}; each must be one .py module of this repository"
        )
    return path


def module_files(names: Iterable[str], *, root: Path = REPO_ROOT) -> dict[str, Path]:
    """:func:`module_file` of each of ``names``, by name."""
    return {name: module_file(name, root=root) for name in names}


@dataclass(frozen=True)
class BundledFolder:
    """The asset properties of a bundled folder: pass them to ``lambda_.Code.from_asset(path, ...)`` or
    ``s3_assets.Asset(scope, id, path=path, ...)`` alike.

    ``asset_hash_type`` is ``OUTPUT``: the hash is that of the bundled files, so a change to a shared module
    is a new asset though the folder did not change.
    """

    path: str
    bundling: cdk.BundlingOptions
    asset_hash_type: cdk.AssetHashType = cdk.AssetHashType.OUTPUT


def bundled_folder(folder: Path, *, modules: Mapping[str, Path], folder_at: str = "") -> BundledFolder:
    """``folder`` (at ``folder_at`` inside the asset, its root by default) plus each of ``modules``.

    Args:
        folder: the code's folder; ``__pycache__`` and ``*.pyc`` are left out.
        modules: module name -> its source file; each is copied to ``<package path>.py``, e.g.
            ``serving_contract.compile_cache`` to ``serving_contract/compile_cache.py``. The package gets no
            ``__init__.py`` (a namespace package, PEP 420): only the named modules are deployed, not what the
            package's ``__init__`` imports.
        folder_at: where ``folder``'s contents go inside the asset: ``""`` for a Lambda (its ``index.py`` at the
            root), ``runtime`` for a job started as ``python -m runtime.<module>``.
    """
    return BundledFolder(
        path=str(folder),
        bundling=cdk.BundlingOptions(image=_NEVER_RUN_IMAGE, local=_CopyFiles(folder, folder_at, modules)),
    )


@jsii.implements(cdk.ILocalBundling)
class _CopyFiles:
    """Copies the folder and each shared module into the bundling output directory."""

    def __init__(self, folder: Path, folder_at: str, modules: Mapping[str, Path]) -> None:
        self._folder = folder
        self._folder_at = folder_at
        self._modules = dict(modules)

    def try_bundle(self, output_dir: str, *_args: Any, **_options: Any) -> bool:
        output = Path(output_dir)
        shutil.copytree(
            self._folder, output / self._folder_at, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*NOT_DEPLOYED)
        )
        for name, source in self._modules.items():
            target = output.joinpath(*name.split(".")).with_suffix(".py")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return True
