"""The optional Bedrock Custom Model Import path (seed 003 §11-12): off unless ``bedrock.enabled``."""

import difflib
import re
from collections.abc import Sequence
from typing import Annotated, Final

from pydantic import AfterValidator, Field, model_validator

from app_config.base import ConfigModel
from app_config.cloudformation_limits import PROVIDER_MAX_WAIT_S
from serving_contract.validation import line

# Regions that offer Custom Model Import (docs/sources.md, "Bedrock Custom Model Import";
# https://docs.aws.amazon.com/bedrock/latest/userguide/model-customization-import-model.html).
CUSTOM_MODEL_IMPORT_REGIONS: Final = ("us-east-1", "us-east-2", "us-west-2", "eu-central-1")

# Bedrock's limit on an imported text model (seed 003 §12 "Bedrock Import Constraints": < 200 GB).
TEXT_MODEL_SIZE_LIMIT_GB: Final = 200

# An import must end inside CloudFormation's wait for its custom resource, less the head room the
# provider needs for the onEvent pre-flight (list + read the prefix, up to handler_timeout_s) and its
# own hops (app_config.cloudformation_limits): 55 minutes.
PROVIDER_MAX_TIMEOUT_MIN: Final = PROVIDER_MAX_WAIT_S // 60

# The imported model's name is "<name>-<10 hex digits>" (a new one per source revision) and
# Bedrock caps importedModelName at 63 characters with the pattern ([0-9a-zA-Z][_-]?)+.
_MODEL_NAME = re.compile(r"^[a-z0-9]([_-]?[a-z0-9])*$")
MODEL_NAME_MAX_LENGTH: Final = 52


def _check_model_name(value: str) -> str:
    if len(value) > MODEL_NAME_MAX_LENGTH or not _MODEL_NAME.match(value):
        raise ValueError(
            f"must be 1-{MODEL_NAME_MAX_LENGTH} lowercase letters and digits, single '-' or '_' between them "
            "(Bedrock importedModelName, less the 11-character revision suffix)"
        )
    return value


# Segments Bedrock accepts in modelDataSource.s3DataSource.s3Uri (botocore service model).
_PREFIX = re.compile(r"^([-!_*'().a-zA-Z0-9]+/)+$")


def _check_prefix(value: str) -> str:
    if not _PREFIX.match(value):
        raise ValueError(
            "must be an S3 key prefix such as 'llama3-domain-v1/': segments of letters, digits and -!_*'(). "
            "each ending in '/', no leading '/'"
        )
    return value


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def _check_bucket(value: str) -> str:
    if not _BUCKET.match(value) or ".." in value:
        raise ValueError("must be an S3 bucket name: 3-63 lowercase letters, digits, '.' and '-'")
    return value


ImportedModelName = Annotated[str, AfterValidator(_check_model_name)]
S3Prefix = Annotated[str, AfterValidator(_check_prefix)]
BucketName = Annotated[str, AfterValidator(_check_bucket)]


class BedrockImportModelConfig(ConfigModel):
    """One fully materialized model (LoRA merged into the bf16 base) to import.

    Source: seed 003 §12 ("promote a fully materialized model version per domain").
    """

    name: ImportedModelName = Field(
        description="Base of the imported model's name; the stack appends a 10-hex-digit revision suffix."
    )
    s3_prefix: S3Prefix = Field(
        description="Key prefix in the artifact bucket that holds the Hugging Face files, ending in '/'."
    )
    revision: str = Field(
        default="1",
        pattern=r"^[A-Za-z0-9._-]{1,32}$",
        description="Change it to import the same prefix again after uploading new weights (a new model version).",
    )
    adapter: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description=(
            "The adapter (model.adapters[].name) or base model (model.name) whose requests this merged model "
            "answers when the endpoint cannot: the stack outputs it as ImportedModelAdapter<PascalCaseName>, and "
            "the client library's config_from_outputs_file makes it that adapter's Bedrock fallback (issue 53, "
            "finding 3). None: no fallback from this model (the client cannot tell which adapter it merges)."
        ),
    )


DEFAULT_IMPORT_MODELS = (BedrockImportModelConfig(name="mangaassist-llama3-domain-v1", s3_prefix="llama3-domain-v1/"),)


class BedrockConfig(ConfigModel):
    """Bedrock Custom Model Import: artifact bucket, KMS key, import role and one import per model.

    Off by default: the SageMaker endpoint is the primary path (seed 003 §11).
    """

    enabled: bool = Field(default=False, description="Add the Bedrock import stack. Source: seed 003 §11 (opt-in).")
    bucket_name: BucketName | None = Field(
        default=None,
        description=(
            "Existing S3 bucket with the model artifacts; None creates an encrypted, TLS-only bucket. "
            "Source: seed 003 §12 (s3://mangaassist-bedrock-import/)."
        ),
    )
    models: tuple[BedrockImportModelConfig, ...] = Field(
        default=DEFAULT_IMPORT_MODELS,
        max_length=20,
        description="Models to import, one per domain. Source: seed 003 §12 (llama3-domain-v1/).",
    )
    retain_imported_models: bool = Field(
        default=False,
        description="Keep imported models when their resource is deleted or replaced (no DeleteImportedModel).",
    )
    max_model_size_gb: int = Field(
        default=TEXT_MODEL_SIZE_LIMIT_GB,
        gt=0,
        le=TEXT_MODEL_SIZE_LIMIT_GB,
        description="Pre-flight limit on the files under a prefix, in GB (10^9 bytes). Source: Bedrock, < 200 GB.",
    )
    import_timeout_min: int = Field(
        default=PROVIDER_MAX_TIMEOUT_MIN,
        ge=30,
        le=PROVIDER_MAX_TIMEOUT_MIN,
        description=(
            "Minutes a deploy waits for one import job (imports take tens of minutes). At most 55: "
            "CloudFormation's custom-resource ServiceTimeout max 3600 s less 5 min head room."
        ),
    )
    poll_interval_s: int = Field(
        default=60,
        ge=10,
        le=600,
        description="Seconds between GetModelImportJob polls.",
    )
    handler_timeout_s: int = Field(
        default=120,
        ge=10,
        le=900,
        description="Timeout of the import handler Lambdas in seconds (pre-flight lists and reads the prefix).",
    )
    handler_memory_mib: int = Field(
        default=256, ge=128, le=10240, description="Memory of the import handler Lambdas in MiB."
    )

    @model_validator(mode="after")
    def _unique_models(self) -> "BedrockConfig":
        names = [m.name for m in self.models]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"models: duplicate model name(s) {', '.join(duplicates)}; each name must be unique")
        return self


def check_imported_adapters(models: Sequence[BedrockImportModelConfig], served: Sequence[str]) -> None:
    """Raise ValueError (one line) unless each ``bedrock.models[].adapter`` is one of ``served`` (the endpoint's
    base model and adapter names) and no two models answer for one adapter."""
    owners: dict[str, int] = {}
    for index, model in enumerate(models):
        if model.adapter is None:
            continue
        key = f"bedrock.models[{index}].adapter"
        if model.adapter not in served:
            near = difflib.get_close_matches(model.adapter, served, n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(
                f"{line(key, model.adapter, 'not a name the endpoint serves')}; allowed: "
                f"{', '.join(sorted(served))}{hint}"
            )
        if model.adapter in owners:
            raise ValueError(
                line(key, model.adapter, f"bedrock.models[{owners[model.adapter]}] answers for it already")
                + "; one imported model per adapter"
            )
        owners[model.adapter] = index


def check_import_region(enabled: bool, region: str | None) -> None:
    """Raise ValueError unless Custom Model Import is available in ``region`` (when enabled).

    An environment-agnostic stack (region None) cannot be checked, so it is rejected too:
    the import would fail at deploy time in an unsupported region.
    """
    if not enabled:
        return
    allowed = ", ".join(CUSTOM_MODEL_IMPORT_REGIONS)
    if region is None:
        raise ValueError(
            "bedrock.enabled = true needs env.region set to a Custom Model Import region "
            f"({allowed}); an environment-agnostic stack cannot be checked"
        )
    if region not in CUSTOM_MODEL_IMPORT_REGIONS:
        raise ValueError(
            f"bedrock.enabled = true but env.region = {region!r} has no Bedrock Custom Model Import; allowed: {allowed}"
        )
