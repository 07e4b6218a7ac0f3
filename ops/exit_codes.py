"""Exit codes of every command, so a CI job can tell "the endpoint is bad" from "I was called wrong".

Documented in docs/operations.md; tests assert them.
"""

from enum import IntEnum

from botocore.exceptions import BotoCoreError, ClientError


class ExitCode(IntEnum):
    """Process exit status of ``mangaassist-ops``."""

    OK = 0
    CHECK_FAILED = 1  # smoke: a request failed its check; load: errors above the allowed rate
    USAGE = 2  # bad flags or inputs (argparse also exits 2), missing stack outputs
    NOT_READY = 3  # endpoint or a variant not InService, or did not return to InService in time
    ROLLED_BACK = 4  # promote: an alarm fired, traffic was returned to the primary
    AWS_ERROR = 5  # an AWS call failed (throttling, permissions, rollback could not be applied)
    # preflight: the first class with a problem, in this order (ops.preflight)
    PREFLIGHT_CONFIG = 6  # an artifact pin still holds the placeholder sha256
    PREFLIGHT_ACCOUNT = 7  # CDK bootstrap, region or a SageMaker instance quota
    PREFLIGHT_ARTIFACTS = 8  # a pinned artifact or the prebuilt image is missing or differs
    PREFLIGHT_CONFLICT = 9  # the endpoint name is taken, or the deployed serving mode differs
    NO_AWS = 10  # the command needs an AWS region or credentials it has none of; the line says how to run offline
    INCOMPLETE = 11  # a report: no gate failed, but some could not be computed (offline, or too few data)
    NO_DATA = 12  # a report: nothing to judge (no pairs, no captured answers in the window)


class OpsError(Exception):
    """An error that ends a command with a one-line message and a specific exit code."""

    def __init__(self, message: str, code: ExitCode) -> None:
        super().__init__(message)
        self.code = code


def aws_error(subject: str, error: ClientError | BotoCoreError) -> OpsError:
    """``<subject>: <AWS's own message>`` as an AWS_ERROR, for a failed describe call."""
    if isinstance(error, ClientError):
        message = error.response.get("Error", {}).get("Message", str(error))
    else:
        message = str(error)
    return OpsError(f"{subject}: {message}", ExitCode.AWS_ERROR)
