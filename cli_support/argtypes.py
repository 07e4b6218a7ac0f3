"""argparse value types of every command-line tool in the repo (ops, devtools, benchmarks).

Each refuses a bad value with one line that argparse prints after the flag
(``argument --demand-scale: 'nan' is not a finite number``). Floats refuse ``nan`` and ``inf``
first: ``nan`` compares False with every bound, so a bare ``value <= 0`` check lets it through.
"""

import argparse
import math
from collections.abc import Callable


def finite_float(text: str) -> float:
    """A float that is neither ``nan`` nor infinite."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def positive_float(text: str) -> float:
    """A finite float > 0."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{value:g} must be > 0")
    return value


def non_negative_float(text: str) -> float:
    """A finite float >= 0."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value:g} must be >= 0")
    return value


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None


def _bounds(low: int, high: int | None) -> str:
    return f">= {low}" if high is None else f"within {low}..{high}"


def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer type for ``low <= value <= high`` (``high`` None: no upper bound)."""

    def parse(text: str) -> int:
        value = _integer(text)
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(
                f"{value} must be >= {low}" if high is None else f"{value} is outside {low}..{high}"
            )
        return value

    return parse


def int_list(low: int, high: int | None = None, *, increasing: bool = False) -> Callable[[str], tuple[int, ...]]:
    """A type for comma-separated integers (``1,8,32``), each ``low <= value <= high``; with
    ``increasing``, in strictly increasing order."""

    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(part) for part in text.split(","))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers, e.g. 1,8,32") from None
        if any(value < low or (high is not None and value > high) for value in values):
            raise argparse.ArgumentTypeError(f"{text!r}: each value must be {_bounds(low, high)}")
        if increasing and list(values) != sorted(set(values)):
            raise argparse.ArgumentTypeError(f"{text!r}: values must be strictly increasing")
        return values

    return parse


def positive_float_list(*, increasing: bool = False) -> Callable[[str], tuple[float, ...]]:
    """A type for comma-separated finite floats > 0 (``240,320,400``); with ``increasing``, in
    strictly increasing order."""

    def parse(text: str) -> tuple[float, ...]:
        try:
            values = tuple(positive_float(part) for part in text.split(","))
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}; expected comma-separated numbers > 0") from None
        if increasing and list(values) != sorted(set(values)):
            raise argparse.ArgumentTypeError(f"{text!r}: values must be strictly increasing")
        return values

    return parse


def cpu_set(text: str) -> frozenset[int]:
    """CPU numbers in taskset's list syntax (``4-15``, ``0,2,4-7``), for ``os.sched_setaffinity``."""
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.partition("-")
            cpus.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected CPU numbers and ranges such as 4-15 or 0,2,4-7") from None
    if not cpus:
        raise argparse.ArgumentTypeError(f"{text!r}: names no CPU")
    return frozenset(cpus)
