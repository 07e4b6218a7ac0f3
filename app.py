#!/usr/bin/env python3
"""CDK entry point: the only place that reads CDK context.

It turns context into one validated ``AppConfig`` and its plan (``planning.make_plan.make_plan``: the
derived targets, the throughput at the SLOs, the checks that need them), and composes the stacks
from both. A bad config value stops the synth here with one line per problem, before any
resource is made.
"""

import sys

from stacks.jsii_node import prefer_pinned_node

prefer_pinned_node()  # before aws_cdk starts the jsii runtime

import aws_cdk as cdk  # noqa: E402

from app_config import ConfigError, load_config  # noqa: E402
from planning import memory_report  # noqa: E402
from planning.make_plan import make_plan  # noqa: E402
from stacks.composition import build_app, synthesize  # noqa: E402


def main() -> int:
    app = cdk.App()
    try:
        config = load_config(app.node.get_all_context())
        plan = make_plan(config)
        build_app(app, config, plan)  # refuses what only a stack can judge, e.g. unpinned adapters
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    failure = synthesize(app)
    if failure is not None:
        print(failure, file=sys.stderr)
        return 1
    # Beside the templates, for `make synth`'s summary (devtools.synth_summary).
    memory_report.write(memory_report.build(config, plan), app.outdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
