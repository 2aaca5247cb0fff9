"""The sweep rule of seed 003, as pure functions: the one source of truth for *when* to sweep.

A queue is swept when the committed, not-gotten messages it holds in memory (y) exceed
``factor`` times the messages obtained from it in the last interval (x): y > 2·x with
the seed's factor. After a sweep, ``x + extra`` messages stay in memory (x + 5 in the
seed) so the next gets are served without bringing anything back.

The live sweeper and the trace-replay kernel both call these functions, and they are
written for numba: plain integer arithmetic, no Python objects, so
``numba.njit(should_sweep)`` compiles the very same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_FACTOR = 2
DEFAULT_EXTRA = 5
DEFAULT_INTERVAL = 5.0


def should_sweep(y: int, x: int, factor: int) -> bool:
    """Seed 003: sweep once the in-memory length is greater than ``factor`` x the service rate."""
    return y > factor * x


def buffer_size(x: int, extra: int) -> int:
    """How many sweepable messages stay in memory after a sweep: the service rate plus ``extra``."""
    return x + extra


def to_sweep(y: int, x: int, factor: int, extra: int) -> int:
    """How many of the y messages the rule moves out of memory (0 when it does not sweep)."""
    if not should_sweep(y, x, factor):
        return 0
    keep = buffer_size(x, extra)
    return y - keep if y > keep else 0


@dataclass(frozen=True)
class SweepPolicy:
    """The rule's parameters: seed 003's defaults, each configurable."""

    factor: int = DEFAULT_FACTOR
    extra: int = DEFAULT_EXTRA
    interval: float = DEFAULT_INTERVAL

    def __post_init__(self) -> None:
        if self.factor < 0 or self.extra < 0:
            raise ValueError("factor and extra must be >= 0")
        if self.interval <= 0:
            raise ValueError("the sweep interval must be > 0 seconds")

    def keep(self, y: int, x: int) -> int | None:
        """Messages to keep in memory if the queue is to be swept, else None."""
        if not should_sweep(y, x, self.factor):
            return None
        return buffer_size(x, self.extra)
