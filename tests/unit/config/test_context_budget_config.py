"""``container.context_budget.*``: the parts must fit ``engine.max_model_len`` with a generation
reserve left, and reach the container as the reserve and the summary's share (issue 38)."""

from app_config import load_config
from cdk_constructs.endpoint.container_environment import container_environment
from serving_contract import env
from tests.config_helpers import config_error
from tests.synth_helpers import cdk_json_context


def test_a_part_above_max_model_len_stops_synth_naming_the_key() -> None:
    assert config_error(**{"container.context_budget.retrieval_tokens": "5000"}) == (
        "config error: container.context_budget.retrieval_tokens = 5000: above engine.max_model_len = 4096; "
        "the retrieval share must fit the context window"
    )


def test_parts_that_leave_a_negative_reserve_stop_synth_naming_every_part() -> None:
    assert config_error(**{"container.context_budget.recent_turns_tokens": "3000"}) == (
        "config error: container.context_budget: container.context_budget.system_tokens 400 + "
        "container.context_budget.retrieval_tokens 1,400 + container.context_budget.recent_turns_tokens 3,000 + "
        "container.context_budget.summary_tokens 400 = 5,200 leave a generation reserve of -1,104 tokens of "
        "engine.max_model_len = 4,096; it must be at least 1 (lower a part or raise engine.max_model_len)"
    )


def test_a_negative_part_is_refused_by_its_bound() -> None:
    assert config_error(**{"container.context_budget.summary_tokens": "-1"}) == (
        "config error: container.context_budget.summary_tokens = '-1': must be >= 0"
    )


def test_the_container_gets_the_reserve_derived_from_max_model_len() -> None:
    default = container_environment(load_config(cdk_json_context()))
    assert default[env.CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS] == "696"  # seed 002: 4,096 - 3,400
    assert default[env.CONTEXT_BUDGET_SUMMARY_TOKENS] == "400"
    assert default[env.CONTEXT_BUDGET_ENABLED] == "true"
    assert default[env.CONTEXT_BUDGET_SUMMARIZE] == "false"
    assert default[env.OOM_RETRY_AFTER_S] == "5"
    longer = container_environment(load_config({**cdk_json_context(), "engine.max_model_len": "8192"}))
    assert longer[env.CONTEXT_BUDGET_GENERATION_RESERVE_TOKENS] == "4792"
