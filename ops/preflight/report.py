"""What each preflight check found, how it prints, and which exit code it leads to.

Every check returns :class:`Finding` lines; all checks run and all lines print, and the exit
code is that of the first class with a problem, in the order of :data:`CLASS_ORDER` (config,
account, artifacts, conflict). A check that could not run because an AWS call failed is an
``error`` line; it decides the exit code (AWS_ERROR) only when no check found a problem.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from botocore.exceptions import BotoCoreError, ClientError

from ops.exit_codes import ExitCode

Status = Literal["ok", "FAIL", "skip", "error"]

CLASS_ORDER: Final = (
    ExitCode.PREFLIGHT_CONFIG,
    ExitCode.PREFLIGHT_ACCOUNT,
    ExitCode.PREFLIGHT_ARTIFACTS,
    ExitCode.PREFLIGHT_CONFLICT,
)
CLASS_NAMES: Final = {
    ExitCode.PREFLIGHT_CONFIG: "config",
    ExitCode.PREFLIGHT_ACCOUNT: "account",
    ExitCode.PREFLIGHT_ARTIFACTS: "artifacts",
    ExitCode.PREFLIGHT_CONFLICT: "conflict",
}


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``<status> <check>: <message>``.

    ``code`` is the problem's class for FAIL lines, AWS_ERROR for error lines, None otherwise.
    """

    status: Status
    check: str
    message: str
    code: ExitCode | None = None

    @property
    def line(self) -> str:
        return f"{self.status:<5} {self.check}: {self.message}"


def ok(check: str, message: str) -> Finding:
    return Finding("ok", check, message)


def skip(check: str, message: str) -> Finding:
    return Finding("skip", check, message)


def fail(check: str, message: str, code: ExitCode) -> Finding:
    return Finding("FAIL", check, message, code)


def error(check: str, subject: str, exc: ClientError | BotoCoreError) -> Finding:
    """``<subject>: <AWS's own message>``: the check could not run (permissions, throttling, network)."""
    if isinstance(exc, ClientError):
        details = exc.response.get("Error", {})
        message = f"{details.get('Code', 'Error')}: {details.get('Message', str(exc))}"
    else:
        message = str(exc)
    return Finding("error", check, f"{subject}: {message}", ExitCode.AWS_ERROR)


def exit_code(findings: Iterable[Finding]) -> ExitCode:
    """The first problem class in :data:`CLASS_ORDER`, else AWS_ERROR when a check could not run, else OK."""
    codes = {f.code for f in findings if f.code is not None}
    for code in CLASS_ORDER:
        if code in codes:
            return code
    return ExitCode.AWS_ERROR if ExitCode.AWS_ERROR in codes else ExitCode.OK


def summary(findings: Sequence[Finding]) -> str:
    """The last line: counts per class and the exit code."""
    code = exit_code(findings)
    problems = [f for f in findings if f.status == "FAIL"]
    errors = sum(f.status == "error" for f in findings)
    if not problems and not errors:
        return f"preflight passed: {sum(f.status == 'ok' for f in findings)} ok, {len(findings)} line(s); exit 0"
    if not problems:
        return f"preflight incomplete: {errors} check(s) could not run; exit {int(code)} ({code.name})"
    parts = [f"{CLASS_NAMES[c]} {n}" for c in CLASS_ORDER if (n := sum(f.code == c for f in problems))]
    text = f"preflight failed: {len(problems)} problem(s) ({', '.join(parts)})"
    if errors:
        text += f", {errors} check(s) could not run"
    return f"{text}; exit {int(code)} ({code.name})"
