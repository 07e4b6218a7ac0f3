"""This config's engine on any instance type: the throughput at the SLOs and the memory plan.

:class:`Planner` holds the sections both depend on (``slo``, ``throughput``, ``traffic``, ``engine``,
``model``, ``memory_plan``) and nothing else, so the recommender can try every instance type and
routing with one (``planning/fleet_planner.py``), and the plan (``planning/plan.py``) sizes its
units with it.
"""

from dataclasses import dataclass

from app_config.engine import EngineConfig
from app_config.llm import ModelConfig
from app_config.memory_plan_config import MemoryPlanConfig
from app_config.root import AppConfig
from app_config.slo import SloConfig
from app_config.throughput_config import ThroughputConfig
from app_config.traffic import TrafficConfig
from planning.engine_memory import plan_for_instance
from planning.memory_plan import MemoryPlan
from planning.throughput_at_slo import throughput_at_slo
from planning.throughput_figure import ThroughputAtSlo
from serving_contract.request_classes import RequestClass


@dataclass(frozen=True)
class Planner:
    """This config's engine on any instance type: throughput at the SLOs and memory plan."""

    slo: SloConfig
    throughput_config: ThroughputConfig
    traffic: TrafficConfig
    engine: EngineConfig
    model: ModelConfig
    memory: MemoryPlanConfig

    @classmethod
    def of(cls, config: AppConfig) -> "Planner":
        """The planner of ``config``'s sections."""
        return cls(config.slo, config.throughput, config.traffic, config.engine, config.model, config.memory_plan)

    def throughput(
        self, instance_type: str, request_class: RequestClass | None = None, *, instances: int | None = None
    ) -> ThroughputAtSlo:
        """One ``instance_type`` instance at both SLOs (``request_class`` None) or one class's
        (:func:`planning.throughput_at_slo.throughput_at_slo`).

        Raises:
            ValueError: the instance type is unknown or the model does not fit its GPU (one line).
        """
        return throughput_at_slo(
            instance_type,
            slo=self.slo,
            throughput_config=self.throughput_config,
            traffic=self.traffic,
            engine=self.engine,
            model=self.model,
            memory=self.memory,
            request_class=request_class,
            instances=instances,
        )

    def memory_plan(self, instance_type: str) -> MemoryPlan:
        """The memory plan of one engine on ``instance_type`` (raises ValueError as the memory plan does)."""
        return plan_for_instance(instance_type, model=self.model, engine=self.engine, memory=self.memory)
