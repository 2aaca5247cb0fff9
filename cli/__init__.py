"""The ``sweepq`` command line (``sweepq`` and ``python -m sweepq``): the top layer.

Each command parses its arguments here and calls the layers below: the memory-pressure demo,
benchmarks and the crash harness in ``sweepq.bench``; the data-directory commands through the
engine's public API; trace, replay and pipeline through ``sweepq.sweeper`` and
``sweepq.pipeline``. Nothing below this package imports it.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
