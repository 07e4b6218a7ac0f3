#!/usr/bin/env python3
"""CDK entry point: the only place that reads CDK context.

It turns context into one validated ``AppConfig`` and composes the stacks from it. A bad
config value stops the synth here with one line per problem, before any resource is made.
"""

import os
import sys

import aws_cdk as cdk

from app_config import ConfigError, load_config
from devtools.validation_report import format_validation_failure
from stacks.composition import build_app


def main() -> int:
    app = cdk.App()
    try:
        config = load_config(app.node.get_all_context())
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    build_app(app, config)
    try:
        app.synth()
    except RuntimeError as error:
        if "ValidationFailed" not in str(error):
            raise
        print(format_validation_failure(app.outdir), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
    sys.exit(main())
