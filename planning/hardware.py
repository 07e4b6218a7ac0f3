"""What a unit runs on: its instance types in priority order, and this config's engine on each.

A production variant runs on one instance type, or on an ordered list of them
(``serving.<variant>.instance_pools``: SageMaker's ``InstancePools``, the first type tried first and
the next ones when it is short of capacity). Each :class:`Pool` carries what the engine does on its
type: engines per instance, the memory plan of one engine, and one instance's throughput at the SLOs.
:class:`Hardware` holds them in priority order and says which figure holds for all of them.

A variant whose instances may be of any of its types at once scales on one metric averaged over
them. What holds for every member (docs/scaling.md, "Instance pools"):

* the concurrency target is requests in flight per instance, and SageMaker's routing spreads requests
  by outstanding requests, not by what an instance holds: the target must be the weakest member's,
  :attr:`Hardware.concurrency`, or the weaker instances run past their SLO while the average looks fine;
* the KV-cache target is a share of each instance's own cache, so it already scales with the type: the
  lowest member's share at its own SLO rate, :attr:`Hardware.kv_cache_usage`, holds for all;
* floors and fleet sizes count instances, which may all be of the weakest type:
  :attr:`Hardware.requests_per_minute`, the lowest arrival rate per instance.
"""

from dataclasses import dataclass
from typing import Literal

from app_config.serving import VariantShape
from planning.gpu_instances import engines_per_instance, instance_gpus
from planning.memory_plan import MemoryPlan
from planning.planner import Planner
from planning.throughput_figure import ThroughputAtSlo

HardwareKey = Literal["primary", "canary", "shadow"]
"""The config key of a variant that has hardware of its own: ``serving.<key>``."""


@dataclass(frozen=True)
class Pool:
    """One instance type of a unit, at its priority, with this config's engine on it.

    Attributes:
        instance_type: e.g. ``ml.g6e.xlarge``.
        priority: 1 (the variant's ``instance_type``) to 5, SageMaker's ``InstancePool.Priority``.
        config_key: the key that names it, e.g. ``serving.primary.instance_type`` or
            ``serving.primary.instance_pools[1]``: what an error message names.
        engines: vLLM engines per instance, one per ``engine.tensor_parallel_size`` GPUs (the container's
            ``--data-parallel-size``).
        memory: one engine's memory plan on this type's GPU.
        throughput: one instance (all its engines) at both classes' SLOs.
    """

    instance_type: str
    priority: int
    config_key: str
    engines: int
    memory: MemoryPlan
    throughput: ThroughputAtSlo

    @property
    def gpu_name(self) -> str:
        return instance_gpus(self.instance_type).gpu.name


@dataclass(frozen=True)
class Hardware:
    """A unit's instance types in priority order (module docstring: which figure holds for all).

    Attributes:
        pools: priority 1 first; one pool for a variant without ``instance_pools``.
    """

    pools: tuple[Pool, ...]

    @property
    def own(self) -> Pool:
        """The priority-1 pool: the variant's ``instance_type``."""
        return self.pools[0]

    @property
    def instance_types(self) -> tuple[str, ...]:
        return tuple(pool.instance_type for pool in self.pools)

    @property
    def is_mixed(self) -> bool:
        """Whether the unit lists more than one instance type (``instance_pools``)."""
        return len(self.pools) > 1

    @property
    def concurrency(self) -> int:
        """Requests in flight per instance that every member holds at its SLOs: the weakest member's."""
        return min(pool.throughput.concurrency for pool in self.pools)

    @property
    def requests_per_minute(self) -> float:
        """Arrival rate per instance that every member holds at its SLOs: the weakest member's."""
        return min(pool.throughput.requests_per_minute for pool in self.pools)

    @property
    def kv_cache_usage(self) -> float | None:
        """The lowest share (0-1) of its own KV cache a member uses at its SLO rate; None when no member's
        figure says (a measurement)."""
        usages = [pool.throughput.kv_cache_usage for pool in self.pools if pool.throughput.kv_cache_usage is not None]
        return min(usages) if usages else None

    @property
    def weakest(self) -> Pool:
        """The member with the lowest arrival rate at its SLOs (the first of equals): what sizes the fleet."""
        return min(self.pools, key=lambda pool: pool.throughput.requests_per_minute)

    @property
    def weakest_in_flight(self) -> Pool:
        """The member with the fewest requests in flight at its SLOs (the first of equals): what sets the
        concurrency target and the scale-in threshold (module docstring)."""
        return min(self.pools, key=lambda pool: pool.throughput.concurrency)


def hardware_of(planner: Planner, shape: VariantShape, key: str) -> Hardware:
    """The :class:`Hardware` of the variant ``serving.<key>`` (``shape``): each of its instance types with
    this config's engine on it.

    Raises:
        ValueError: an instance type's GPU has no throughput figure, or the model does not fit it (one line).
    """
    tensor_parallel_size = planner.engine.tensor_parallel_size
    return Hardware(
        tuple(
            Pool(
                instance_type=instance_type,
                priority=priority,
                config_key=f"serving.{key}.{shape.instance_type_field(priority)}",
                engines=engines_per_instance(instance_type, tensor_parallel_size),
                memory=planner.memory_plan(instance_type),
                throughput=planner.throughput(instance_type),
            )
            for priority, instance_type in enumerate(shape.instance_types, start=1)
        )
    )
