"""The handler under test, imported the way Lambda imports it: its environment set first."""

import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from unittest import mock

import pytest

FAKE_AWS = {"AWS_DEFAULT_REGION": "ap-northeast-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
"""A region and credentials, so the handler's boto3 clients build at import; botocore's Stubber
answers every call, so nothing is signed or sent."""


@pytest.fixture(scope="module")
def handler(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """The test module's handler: ``HANDLER_MODULE`` (a dotted name, e.g. ``lambdas.scaling.index``),
    imported with ``FAKE_AWS`` and the module's ``HANDLER_ENVIRONMENT`` (name -> value; it wins)
    in ``os.environ``, which stay set for the module's tests. The handlers read their environment
    and build their clients at import, as a Lambda cold start does."""
    name = getattr(request.module, "HANDLER_MODULE", None)
    if name is None:
        pytest.fail(f"{request.module.__name__} uses the handler fixture but sets no HANDLER_MODULE")
    environment = {**FAKE_AWS, **getattr(request.module, "HANDLER_ENVIRONMENT", {})}
    with mock.patch.dict(os.environ, environment):
        yield importlib.import_module(name)
