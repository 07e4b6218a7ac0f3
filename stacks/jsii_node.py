"""Which Node runs aws-cdk-lib's jsii side, decided once for every Python entry point that synthesizes.

Call :func:`prefer_pinned_node` before ``aws_cdk`` is imported (``app.py``, ``tests/conftest.py``):
jsii reads ``JSII_NODE`` when it starts its runtime. The machine's Node 20 is end-of-life and makes
jsii print a banner on every synth; package.json pins Node 22, installed by ``npm ci`` under
``node_modules/.bin/node``. Standard library only, so importing it starts nothing.
"""

import os
from pathlib import Path

PINNED_NODE = Path(__file__).resolve().parent.parent / "node_modules" / ".bin" / "node"


def prefer_pinned_node() -> None:
    """Use the pinned Node when it is installed (a caller's own ``JSII_NODE`` wins), and keep jsii's
    deprecated-Node notice quiet."""
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    if PINNED_NODE.exists():
        os.environ.setdefault("JSII_NODE", str(PINNED_NODE))
