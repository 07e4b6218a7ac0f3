"""Names shared by the serving container and the CDK stacks.

This package is the one source of truth for every name that crosses the boundary
between infrastructure and the container: environment variable names the stacks set
and the container reads, and the CloudWatch namespace, metric names, units and
dimensions the container emits and the alarms, dashboards and scaling policies use.

It has no dependencies beyond the standard library so the container image can copy
it in as-is (see ``container/Dockerfile``).
"""

from serving_contract import alarms, env, metrics, outputs

__all__ = ["alarms", "env", "metrics", "outputs"]
