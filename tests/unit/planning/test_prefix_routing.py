"""throughput.routing = prefix_aware: PrefixLength from the prompt layout, ConcurrencyThreshold from capacity."""

import pytest

from app_config.loader import load_cli_config
from app_config.traffic import RequestShapeConfig
from planning import prefix_routing
from planning.make_plan import make_plan
from planning.scaling_sim import __main__ as cli
from tests.synth_helpers import SEEDS_G5_ARGS, SEEDS_G5_FLAGS

MEASURED_G5 = '{"ml.g5.xlarge": {"concurrency": 6, "requests_per_minute": 150, "ttft_p50_ms": 90}}'


def test_prefix_length_covers_the_system_prompt_and_the_start_of_the_conversation() -> None:
    # 64 bytes of JSON before the system prompt, 600 system + 64 conversation tokens at 4 bytes each.
    assert prefix_routing.prefix_length_bytes(RequestShapeConfig()) == 64 + (600 + 64) * 4 == 2720
    # It stays inside what every turn repeats: 64 + (600 + 1,400) x 4 = 8,064 bytes.
    assert prefix_routing.prefix_length_bytes(RequestShapeConfig()) < 8064
    # A short system prompt still gets SageMaker's minimum of 1,024 bytes.
    assert prefix_routing.prefix_length_bytes(RequestShapeConfig(system_prefix_tokens=50)) == 1024


def test_a_layout_that_repeats_too_little_is_refused_in_one_line() -> None:
    with pytest.raises(ValueError) as error:
        prefix_routing.prefix_length_bytes(RequestShapeConfig(system_prefix_tokens=50, conversation_tokens=100))
    assert str(error.value) == (
        "traffic.request_shape: PrefixLength 1024 bytes reaches past the 664 bytes every turn repeats (system prompt "
        "+ conversation context); prefix_aware routing needs more repeated context"
    )


def test_the_threshold_is_the_instances_capacity_at_the_slo() -> None:
    assert prefix_routing.concurrency_threshold(0) == 1
    assert prefix_routing.concurrency_threshold(9000) == 1024
    config = load_cli_config([*SEEDS_G5_ARGS, "throughput.routing=prefix_aware", f"throughput.measured={MEASURED_G5}"])
    derived = make_plan(config).prefix_routing
    assert derived == prefix_routing.PrefixRouting(prefix_length_bytes=2720, concurrency_threshold=6)
    assert make_plan(load_cli_config(["throughput.routing=least_outstanding"])).prefix_routing is None
    assert make_plan(load_cli_config([])).prefix_routing is not None  # the default fleet routes by prefix (make plan)


def test_the_simulation_says_how_turns_are_routed(capsys: pytest.CaptureFixture[str]) -> None:

    flags = [*SEEDS_G5_FLAGS, "-c", "throughput.routing=prefix_aware", "-c", f"throughput.measured={MEASURED_G5}"]
    assert cli.main(flags) == 0
    assert (
        "routing: prefix_aware (throughput.routing; the engine model's residency: planning/engine_model.py): "
        "RoutingStrategy PREFIX_AWARE, PrefixLength 2720 bytes, ConcurrencyThreshold 6" in capsys.readouterr().out
    )
