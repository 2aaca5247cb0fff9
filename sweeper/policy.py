"""The sweep rule of seed 003, as pure functions: the one source of truth for *when* to sweep.

A queue is swept when the committed, not-gotten messages it holds in memory (y) exceed
``factor`` times the messages obtained from it in the last interval (x): y > 2·x with
the seed's factor. After a sweep, ``x + extra`` messages stay in memory (x + 5 in the
seed) so the next gets are served without bringing anything back.

The live sweeper and the trace-replay kernel both call :func:`decide`, written for numba:
plain integer arithmetic, no Python objects, no calls, so ``numba.njit(decide)`` compiles
the very same rule. The other functions are conveniences built on it.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_FACTOR = 2
DEFAULT_EXTRA = 5
DEFAULT_INTERVAL = 5.0


def decide(y: int, x: int, factor: int, extra: int) -> int:
    """THE rule. How many sweepable messages stay in memory, or -1 when the queue is not swept.

    Seed 003: sweep once the in-memory length y is greater than ``factor`` (2) times the
    service rate x; keep a buffer of x + ``extra`` (5). Self-contained integer arithmetic,
    so ``numba.njit(decide)`` compiles this same function for the replay kernel.
    """
    if y > factor * x:
        return x + extra
    return -1


def should_sweep(y: int, x: int, factor: int) -> bool:
    return decide(y, x, factor, 0) >= 0


def buffer_size(x: int, extra: int) -> int:
    """The buffer the rule keeps when it sweeps (factor 0 makes any non-empty queue sweep)."""
    return decide(1, x, 0, extra)


def to_sweep(y: int, x: int, factor: int, extra: int) -> int:
    """How many of the y messages the rule moves out of memory (0 when it does not sweep)."""
    keep = decide(y, x, factor, extra)
    return y - keep if 0 <= keep < y else 0


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
        keep = decide(y, x, self.factor, self.extra)
        return None if keep < 0 else keep
