"""The handler under test, imported the way Lambda imports it (its environment set first), and its
clients stubbed."""

import contextlib
import importlib
import os
from collections.abc import Iterator
from types import ModuleType
from unittest import mock

import pytest
from botocore.stub import Stubber

FAKE_AWS = {"AWS_DEFAULT_REGION": "ap-northeast-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
"""A region and credentials, so the handler's boto3 clients build at import; botocore's Stubber
answers every call, so nothing is signed or sent."""


@pytest.fixture(scope="module")
def handler(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """The test module's handler: ``HANDLER_MODULE`` (a dotted name, e.g. ``cdk_constructs.scaling.runtime.index``),
    imported with ``FAKE_AWS`` and the module's ``HANDLER_ENVIRONMENT`` (name -> value; it wins)
    in ``os.environ``, which stay set for the module's tests. The handlers read their environment
    and build their clients at import, as a Lambda cold start does."""
    name = getattr(request.module, "HANDLER_MODULE", None)
    if name is None:
        pytest.fail(f"{request.module.__name__} uses the handler fixture but sets no HANDLER_MODULE")
    environment = {**FAKE_AWS, **getattr(request.module, "HANDLER_ENVIRONMENT", {})}
    with mock.patch.dict(os.environ, environment):
        yield importlib.import_module(name)


@pytest.fixture
def stubs(handler: ModuleType, request: pytest.FixtureRequest) -> Iterator[tuple[Stubber, ...]]:
    """A botocore ``Stubber`` on each of the handler's clients that the test module's ``STUBBED_CLIENTS``
    names (module attributes, e.g. ``("BEDROCK", "S3")``), in that order. The Stubber checks every
    request against the service's model and fails a call with no answer queued; at teardown an
    answer the test queued but the handler never asked for fails too."""
    with contextlib.ExitStack() as stack:
        stubbers = tuple(
            stack.enter_context(Stubber(getattr(handler, name))) for name in request.module.STUBBED_CLIENTS
        )
        yield stubbers
        for stubber in stubbers:
            stubber.assert_no_pending_responses()
