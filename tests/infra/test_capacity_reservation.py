"""Reserved capacity in the templates (issue 55): the primary's CapacityReservationConfig, and the warning the alarm
topic gets before the reservation ends (the Bedrock synth carries a reservation: tests/conftest.py ``RESERVATION``)."""

from typing import Any

from tests.conftest import RESERVATION
from tests.synth_helpers import Synth


def test_the_primary_runs_on_the_reservation_alone(bedrock_synth: Synth) -> None:
    (config,) = bedrock_synth.template("Serving").find_resources("AWS::SageMaker::EndpointConfig").values()
    variants = {v["VariantName"]: v for v in config["Properties"]["ProductionVariants"]}
    assert variants["primary"]["CapacityReservationConfig"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "MlReservationArn": RESERVATION["ml_reservation_arn"],
    }
    assert variants["primary"]["InstanceType"] == RESERVATION["instance_type"]
    assert "CapacityReservationConfig" not in variants["canary"]  # on demand


def test_the_alarm_topic_is_warned_48_hours_before_the_end(bedrock_synth: Synth) -> None:
    template = bedrock_synth.template("Observability")
    (schedule,) = template.find_resources("AWS::Scheduler::Schedule").values()
    props: dict[str, Any] = schedule["Properties"]
    assert props["ScheduleExpression"] == "at(2030-04-01T00:00:00)"  # ends_at - warn_before_end_h, local time
    assert props["ScheduleExpressionTimezone"] == bedrock_synth.config.scaling.timezone
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    (topic,) = template.find_resources("AWS::SNS::Topic")
    assert props["Target"]["Arn"] == {"Ref": topic}
    message = props["Target"]["Input"]
    assert "serving.primary runs on reserved capacity" in message and "stops serving then" in message
    (key,) = template.find_resources("AWS::KMS::Key")
    assert props["KmsKeyArn"] == {"Fn::GetAtt": [key, "Arn"]}  # the topic's key encrypts the message too
