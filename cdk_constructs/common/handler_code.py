"""A custom-resource handler's code asset: its folder, plus the repository modules it imports.

A handler whose folder holds all it imports (``lambdas/<capability>/``) is a plain directory asset.
One that imports a module shared with other parties (the compile cache's handler imports
``serving_contract/compile_cache.py``, which the container imports too) gets that module copied
into the asset at its package path by CDK's local bundling (``cdk.ILocalBundling``: no Docker),
so ``from serving_contract import compile_cache`` reads the same in the Lambda as in the repo,
with no link and no import fallback.
"""

import shutil
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

LAMBDAS_DIR = Path(__file__).resolve().parents[2] / "lambdas"
"""The handlers not yet beside their constructs: ``lambdas/<capability>/index.py`` (lambdas/README.md)."""

HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14
"""Newest Python runtime in aws-cdk-lib 2.275: cdk-nag 3.0.2's AwsSolutions-L1 accepts only the newest
runtime of a family that the CDK in use knows (rules/lambda/LambdaLatestVersion). The handlers import
only the standard library, what the runtime bundles (boto3, botocore and its dateutil) and the
``shared_modules`` bundled with them."""

NOT_DEPLOYED = ("__pycache__", "*.pyc")
"""What a handler folder holds that the Lambda does not need (Python's bytecode caches)."""


def handler_code(folder: Path, *, shared_modules: Sequence[ModuleType] = ()) -> lambda_.Code:
    """The asset of the handler in ``folder`` (its ``index.py`` and what sits beside it).

    Args:
        folder: the handler's folder; its contents become the asset's root, so the Lambda handler is
            ``index.<function>``.
        shared_modules: modules of this repository the handler imports, each a single standard-library-only
            file; each is copied to ``<package path>.py`` in the asset, e.g. ``serving_contract.compile_cache``
            to ``serving_contract/compile_cache.py``. The package gets no ``__init__.py`` (a namespace
            package, PEP 420): only the named modules are deployed, not the package's other imports.

    The asset hash is that of the bundled files (``AssetHashType.OUTPUT``): a change to a shared module
    is a new asset, though ``folder`` did not change.

    Raises:
        ValueError: a shared module that is a package, or has no source file.
    """
    if not shared_modules:
        return lambda_.Code.from_asset(str(folder), exclude=list(NOT_DEPLOYED))
    for module in shared_modules:
        source = module.__file__
        if source is None or Path(source).name == "__init__.py" or not source.endswith(".py"):
            raise ValueError(f"shared_modules: {module.__name__} must be one .py module, not a package, got {source}")
    return lambda_.Code.from_asset(
        str(folder),
        asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(
            # Never run: the local bundler always succeeds. CDK requires an image; this is the one it
            # would use to build a Python Lambda.
            image=HANDLER_RUNTIME.bundling_image,
            local=_CopyFiles(folder, shared_modules),
        ),
    )


@jsii.implements(cdk.ILocalBundling)
class _CopyFiles:
    """Copies the handler folder and each shared module into the bundling output directory."""

    def __init__(self, folder: Path, shared_modules: Sequence[ModuleType]) -> None:
        self._folder = folder
        self._modules = {module.__name__: Path(str(module.__file__)) for module in shared_modules}

    def try_bundle(self, output_dir: str, *_args: Any, **_options: Any) -> bool:
        output = Path(output_dir)
        shutil.copytree(self._folder, output, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*NOT_DEPLOYED))
        for name, source in self._modules.items():
            target = output.joinpath(*name.split(".")).with_suffix(".py")
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        return True
