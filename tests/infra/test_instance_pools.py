"""Instance pools in the template (issue 55): ``-c serving.primary.instance_pools=[...]`` puts every type in the
primary variant's ``InstancePools``, and the synth summary judges each type (the VPC synth carries them:
tests/conftest.py ``POOLS``)."""

from typing import Any

from devtools.synth_summary import summarize
from serving_contract import env
from tests.synth_helpers import Synth


def _primary(synth: Synth) -> dict[str, Any]:
    (config,) = synth.template("Serving").find_resources("AWS::SageMaker::EndpointConfig").values()
    (primary,) = config["Properties"]["ProductionVariants"]
    return dict(primary)


def _models(synth: Synth) -> dict[str, Any]:
    return dict(synth.template("Serving").find_resources("AWS::SageMaker::Model"))


def test_the_primary_lists_both_types_in_priority_order(vpc_single_variant_synth: Synth) -> None:
    primary = _primary(vpc_single_variant_synth)
    # InstancePools replace InstanceType (SageMaker developer guide, "Deploy to multiple instance types with
    # instance pools").
    assert "InstanceType" not in primary
    pools = primary["InstancePools"]
    assert [(p["InstanceType"], p["Priority"]) for p in pools] == [("ml.g6e.xlarge", 1), ("ml.g6e.2xlarge", 2)]
    assert primary["VariantInstanceProvisionTimeoutInSeconds"] == 1800  # serving.primary.instance_provision_timeout_s
    assert "ModelNameOverride" not in pools[0]  # the variant's own model


def test_a_type_with_its_own_compile_cache_gets_its_own_model(vpc_single_variant_synth: Synth) -> None:
    """Same engines (one L40S each), but the compile cache is made per instance type: a model per type."""
    primary = _primary(vpc_single_variant_synth)
    models = _models(vpc_single_variant_synth)
    own = primary["ModelName"]["Fn::GetAtt"][0]
    override = primary["InstancePools"][1]["ModelNameOverride"]["Fn::GetAtt"][0]
    assert {own, override} == set(models)
    caches = vpc_single_variant_synth.template("Serving").find_resources("Custom::CompileCache")
    assert sorted(c["Properties"]["InstanceType"] for c in caches.values()) == ["ml.g6e.2xlarge", "ml.g6e.xlarge"]
    for name in (own, override):
        environment = models[name]["Properties"]["PrimaryContainer"]["Environment"]
        assert environment[env.VARIANT_NAME] == "primary"  # one variant's metrics, whichever type serves
        assert env.ENGINE_DATA_PARALLEL_SIZE not in environment  # one engine on one GPU


def test_the_synth_summary_gives_a_verdict_per_type(vpc_single_variant_synth: Synth) -> None:
    summary = summarize(vpc_single_variant_synth.outdir)
    # The VPC synth is a dev stage (a prebuilt image, issue 53 finding 8): one instance at creation.
    assert "  variant primary    ml.g6e.xlarge > ml.g6e.2xlarge x1   at creation" in summary
    for klass in ("cold", "warm"):
        assert f"slo.{klass}.ttft_p95_ms = 500 ms: variant primary (ml.g6e.xlarge) holds it up to" in summary
        assert f"slo.{klass}.ttft_p95_ms = 500 ms: variant primary (ml.g6e.2xlarge, pool 2) holds it up to" in summary
    assert "  variant primary    ml.g6e.2xlarge (pool 2) 1 x L40S" in summary
