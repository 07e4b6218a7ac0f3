"""The one percentile: what every TTFT, latency and e2e p50/p95/p99 that ops and the benchmarks
report is.

Linear interpolation between the closest ranks (Hyndman and Fan's definition 7): numpy's default
(``method="linear"``), and ``statistics.quantiles(..., method="inclusive")``, which computes it
here. The results committed under benchmarks/results/ and docs/ were computed with this
definition (benchmarks/serving_load.py's and ops/load.py's former copies), so they keep their
meaning.
"""

import statistics
from collections.abc import Sequence


def percentile(values: Sequence[float], q: int) -> float | None:
    """The ``q``-th percentile of ``values`` (``q`` a whole number, 1..99), in their unit.

    Empty ``values``: None (no sample, no figure; a caller shows ``-`` or JSON ``null``, never a
    number). One value: that value. Raises ValueError when ``q`` is outside 1..99.
    """
    if not isinstance(q, int) or not 1 <= q <= 99:
        raise ValueError(f"q: {q!r} is outside 1..99")
    if not values:
        return None
    if len(values) == 1:  # statistics.quantiles needs two points before Python 3.13
        return float(values[0])
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]
