"""cli_support.percentiles: the one percentile of ops load and the benchmarks."""

import numpy
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli_support.percentiles import percentile


def test_linear_interpolation_between_closest_ranks() -> None:
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert percentile(values, 50) == pytest.approx(0.55)
    assert percentile(values, 95) == pytest.approx(0.955)
    assert percentile(list(reversed(values)), 95) == pytest.approx(0.955)  # order does not matter


@given(
    st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=200),
    st.integers(min_value=1, max_value=99),
)
def test_it_is_numpys_default_percentile(values: list[float], q: int) -> None:
    """numpy's ``linear`` method: the definition the committed benchmark results were made with."""
    assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)), rel=1e-12, abs=1e-9)


def test_one_value_is_every_percentile() -> None:
    assert [percentile([3.0], q) for q in (1, 50, 99)] == [3.0, 3.0, 3.0]


def test_no_value_has_no_percentile() -> None:
    assert percentile([], 95) is None


@pytest.mark.parametrize("q", [0, 100, -5, 95.5])
def test_q_outside_1_to_99_is_refused(q: float) -> None:
    with pytest.raises(ValueError) as info:
        percentile([1.0, 2.0], q)  # type: ignore[arg-type]
    assert str(info.value) == f"q: {q!r} is outside 1..99"
