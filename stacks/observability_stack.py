"""Deployment unit: alarms, the alarm topic and the SLO dashboard of the endpoint."""

from typing import Any

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from constructs import Construct

from app_config import AppConfig, dated_events
from cdk_constructs.observability.alarm_topic import AlarmTopic
from cdk_constructs.observability.endpoint_alarms import EndpointAlarms
from cdk_constructs.observability.endpoint_dashboard import BoundsLine, EndpointDashboard
from cdk_constructs.observability.endpoint_metrics import EndpointMetrics
from cdk_constructs.observability.reservation_expiry import ReservationExpiryWarning, construct_id_for
from cdk_constructs.observability.shadow_comparison import ShadowAlarms, comparison_row
from planning.topology import ServingTopology
from serving_contract import alarms as alarm_names
from serving_contract import outputs


class ObservabilityStack(cdk.Stack):
    """Everything operators watch, apart from the deployment-guardrail alarms.

    A stack of its own because its lifecycle differs from the endpoint's: thresholds,
    subscriptions and graphs are tuned often, and a Serving stack update can sit in
    UPDATE_IN_PROGRESS for hours while a blue/green deployment bakes; tuning an alarm must
    not wait behind that, nor risk an endpoint update. It references the endpoint only
    through names known at synth (config), so no cross-stack exports tie the two together;
    the composite alarm names the serving stack's guardrail alarms, which must exist first,
    so ``composition.py`` orders this stack after Serving.

    Attributes:
        topic: the alarm topic (KMS-encrypted, TLS-only).
        alarms: the :class:`EndpointAlarms`.
        dashboard: the :class:`EndpointDashboard`.
        shadow_alarms: the shadow variant's :class:`ShadowAlarms` (``serving.shadow.enabled``; they page nobody),
            or None.
        reservation_warnings: by variant key, the warning before its reserved capacity ends
            (``serving.<variant>.capacity_reservation``).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        config: AppConfig,
        topology: ServingTopology,
        guardrail_alarm_names: list[str],
        **kwargs: Any,
    ) -> None:
        """
        Args:
            config: the app's config (monitoring, the alarm topic's subscribers, the dashboard).
            topology: what the plan's units look like to monitoring (the serving stack's, planning/topology.py).
            guardrail_alarm_names: the serving stack's rollback alarms, which the composite alarm names.
        """
        super().__init__(scope, construct_id, **kwargs)
        monitoring = config.monitoring
        endpoint = config.endpoint_name
        adapters = [adapter.name for adapter in config.model.adapters]
        metrics = EndpointMetrics(
            endpoint_name=endpoint,
            variant_names=topology.variant_names,
            namespace=config.observability.metrics_namespace,
            components=topology.components,
            adapter_dimensions=topology.adapter_dimensions,
        )
        alarm_topic = AlarmTopic(
            self,
            "AlarmTopic",
            alarm_name_prefix=alarm_names.alarm_name_prefix(endpoint),
            emails=monitoring.notifications.emails,
            https_endpoints=monitoring.notifications.https_endpoints,
        )
        self.topic = alarm_topic.topic
        self.reservation_warnings = self._reservation_warnings(config, alarm_topic)
        self.alarms = EndpointAlarms(
            self,
            "Alarms",
            metrics=metrics,
            config=monitoring,
            slo=config.slo,
            adapters=adapters,
            gpus_per_instance=topology.gpu_memory_scale,
            topic=self.topic,
            guardrail_alarm_names=guardrail_alarm_names,
            idle_may_be_silent=topology.may_scale_to_zero,
        )
        self.shadow_alarms: ShadowAlarms | None = None
        shadow_row: list[cloudwatch.IWidget] = []
        if config.serving.shadow.enabled:
            shadow = config.serving.shadow.variant_name
            self.shadow_alarms = ShadowAlarms(
                self, "ShadowAlarms", metrics=metrics, shadow_variant=shadow, slo=config.slo, monitoring=monitoring
            )
            shadow_row = comparison_row(
                metrics,
                primary=config.serving.primary.variant_name,
                shadow=shadow,
                slo=config.slo,
                period_s=monitoring.dashboard_period_s,
            )
        self.dashboard = EndpointDashboard(
            self,
            "Dashboard",
            metrics=metrics,
            config=monitoring,
            slo=config.slo,
            adapters=adapters,
            fleet_bounds=[
                BoundsLine(
                    variant_name=c.variant,
                    min_capacity=c.min_capacity,
                    max_capacity=c.max_capacity,
                    label=c.label,
                    unit=c.unit,
                )
                for c in topology.fleet_bounds
            ],
            gpus_per_instance=topology.gpu_memory_scale,
            alarms=[
                *self.alarms.alarms.values(),
                self.alarms.critical_composite,
                self.alarms.guardrail_composite,
                *(self.shadow_alarms.alarms.values() if self.shadow_alarms else ()),
            ],
            shadow_row=shadow_row,
        )
        cdk.CfnOutput(self, outputs.ALARM_TOPIC_ARN, value=self.topic.topic_arn)
        cdk.CfnOutput(self, outputs.DASHBOARD_NAME, value=self.dashboard.dashboard.dashboard_name)
        # The client library (client/mangaassist_client) writes its metrics here, for the client-fallback-rate alarm.
        cdk.CfnOutput(self, outputs.METRICS_NAMESPACE, value=config.observability.metrics_namespace)

    def _reservation_warnings(self, config: AppConfig, alarm_topic: AlarmTopic) -> dict[str, ReservationExpiryWarning]:
        """A warning on the alarm topic before each reserving variant's reservation ends; a synth warning
        instead when that time has passed (the schedule would never fire)."""
        warnings = {}
        timezone = config.scaling.timezone
        now = dated_events.clock(timezone)
        for key, reservation in config.serving.reservations().items():
            if reservation.warn_at <= now:
                cdk.Annotations.of(self).add_warning_v2(
                    "Observability:ReservationEndsSoon",
                    f"serving.{key}.capacity_reservation ends {reservation.ends_at:%Y-%m-%d %H:%M} {timezone}, within "
                    f"its warn_before_end_h = {reservation.warn_before_end_h}: no warning is scheduled; the variant "
                    "stops serving then unless it is deployed off the reservation",
                )
                continue
            warnings[key] = ReservationExpiryWarning(
                self,
                construct_id_for(key),
                endpoint_name=config.endpoint_name,
                variant_key=key,
                reservation=reservation,
                timezone=timezone,
                topic=alarm_topic.topic,
                key=alarm_topic.key,
            )
        return warnings
