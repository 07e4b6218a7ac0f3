"""A handler's code asset names the modules it shares one file at a time (cdk_constructs/common/handler_code.py).

What the bundled asset holds and that it imports on its own: tests/infra/test_compile_cache.py.
"""

import re

import pytest

import serving_contract
from cdk_constructs.common.handler_code import handler_code
from cdk_constructs.compile_cache.compile_cache import RUNTIME


def test_a_shared_package_is_refused_with_one_line() -> None:
    """A package would deploy its ``__init__.py`` and none of what that imports."""
    source = re.escape(str(serving_contract.__file__))
    message = rf"^shared_modules: serving_contract must be one \.py module, not a package, got {source}$"
    with pytest.raises(ValueError, match=message):
        handler_code(RUNTIME, shared_modules=[serving_contract])
