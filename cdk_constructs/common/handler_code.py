"""A custom-resource handler's code asset: its folder, plus the repository modules it imports.

A handler whose folder holds all it imports (``cdk_constructs/<capability>/runtime/``) is a plain directory asset.
One that imports a module shared with other parties (the compile cache's handler imports
``serving_contract/compile_cache.py``, which the container imports too) gets that module copied
into the asset at its package path (:func:`cdk_constructs.common.bundled_code.bundled_folder`, which the
capacity job's code zip is bundled with too).
"""

from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from aws_cdk import aws_lambda as lambda_

from cdk_constructs.common.bundled_code import NOT_DEPLOYED, bundled_folder

HANDLER_RUNTIME = lambda_.Runtime.PYTHON_3_14
"""Newest Python runtime in aws-cdk-lib 2.275: cdk-nag 3.0.2's AwsSolutions-L1 accepts only the newest
runtime of a family that the CDK in use knows (rules/lambda/LambdaLatestVersion). The handlers import
only the standard library, what the runtime bundles (boto3, botocore and its dateutil) and the
``shared_modules`` bundled with them."""


def handler_code(folder: Path, *, shared_modules: Sequence[ModuleType] = ()) -> lambda_.Code:
    """The asset of the handler in ``folder`` (its ``index.py`` and what sits beside it).

    Args:
        folder: the handler's folder; its contents become the asset's root, so the Lambda handler is
            ``index.<function>``.
        shared_modules: modules of this repository the handler imports, each a single standard-library-only
            file; each is copied to ``<package path>.py`` in the asset, e.g. ``serving_contract.compile_cache``
            to ``serving_contract/compile_cache.py`` (a namespace package: see ``bundled_folder``).

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
    bundled = bundled_folder(folder, modules={module.__name__: Path(str(module.__file__)) for module in shared_modules})
    return lambda_.Code.from_asset(bundled.path, bundling=bundled.bundling, asset_hash_type=bundled.asset_hash_type)
