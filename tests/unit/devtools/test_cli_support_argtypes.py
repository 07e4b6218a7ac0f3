"""cli_support.argtypes: every message, through a real argparse parser (what a user sees)."""

import argparse
from collections.abc import Callable
from typing import Any

import pytest

from cli_support.argtypes import cpu_set, finite_float, int_in, int_list, non_negative_float, positive_float


def _parse(value_type: Callable[[str], Any], text: str) -> Any:
    parser = argparse.ArgumentParser(prog="tool")
    parser.add_argument("--x", type=value_type)
    return parser.parse_args([f"--x={text}"]).x


def _error(value_type: Callable[[str], Any], text: str, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        _parse(value_type, text)
    assert exited.value.code == 2
    return capsys.readouterr().err.splitlines()[-1].removeprefix("tool: error: argument --x: ")


@pytest.mark.parametrize(
    ("value_type", "text", "message"),
    [
        (finite_float, "ten", "'ten' is not a number"),
        (finite_float, "nan", "'nan' is not a finite number"),
        (finite_float, "NaN", "'NaN' is not a finite number"),
        (finite_float, "inf", "'inf' is not a finite number"),
        (finite_float, "-Infinity", "'-Infinity' is not a finite number"),
        (positive_float, "nan", "'nan' is not a finite number"),
        (positive_float, "0", "0 must be > 0"),
        (positive_float, "-2.5", "-2.5 must be > 0"),
        (non_negative_float, "nan", "'nan' is not a finite number"),
        (non_negative_float, "-0.5", "-0.5 must be >= 0"),
        (int_in(1, 64), "1.5", "'1.5' is not an integer"),
        (int_in(1, 64), "0", "0 is outside 1..64"),
        (int_in(1, 64), "65", "65 is outside 1..64"),
        (int_in(0), "-1", "-1 must be >= 0"),
        (int_list(1, 64), "1,x", "'1,x': expected comma-separated integers, e.g. 1,8,32"),
        (int_list(1, 64), "1,100", "'1,100': each value must be within 1..64"),
        (int_list(1), "0,8", "'0,8': each value must be >= 1"),
        (int_list(1, increasing=True), "8,1", "'8,1': values must be strictly increasing"),
        (int_list(1, increasing=True), "8,8", "'8,8': values must be strictly increasing"),
        (cpu_set, "4-x", "'4-x': expected CPU numbers and ranges such as 4-15 or 0,2,4-7"),
        (cpu_set, "7-4", "'7-4': names no CPU"),
    ],
)
def test_a_bad_value_is_one_line_naming_it_and_what_is_allowed(
    value_type: Callable[[str], Any], text: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _error(value_type, text, capsys) == message


@pytest.mark.parametrize(
    ("value_type", "text", "value"),
    [
        (finite_float, "-1.5", -1.5),
        (positive_float, "1e-3", 0.001),
        (non_negative_float, "0", 0.0),
        (int_in(1, 64), "64", 64),
        (int_in(0), "0", 0),
        (int_list(1, 64), "32,1,4", (32, 1, 4)),
        (int_list(1, increasing=True), "1,8,32", (1, 8, 32)),
        (cpu_set, "0,2,4-7", frozenset({0, 2, 4, 5, 6, 7})),
    ],
)
def test_a_good_value_is_parsed(value_type: Callable[[str], Any], text: str, value: Any) -> None:
    assert _parse(value_type, text) == value
