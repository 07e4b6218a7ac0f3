"""What the repo's command-line clients share: ``ops/``, ``devtools/`` and ``benchmarks/``.

One declaration of each small utility they all need, so they cannot drift apart (issue 37):

- :mod:`cli_support.sse`: decoding the ``text/event-stream`` bodies the container and vLLM stream;
- :mod:`cli_support.percentiles`: the percentile that every TTFT/latency p50/p95/p99 is;
- :mod:`cli_support.argtypes`: argparse value types that refuse ``nan``/``inf`` and out-of-range
  numbers with one line.

Standard library only (tests/unit/architecture/test_layout.py holds it to that): the benchmarks import it from
vLLM's environment, which has none of the app's packages.
"""
