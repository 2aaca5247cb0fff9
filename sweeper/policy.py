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

import numpy as np

DEFAULT_FACTOR = 2
DEFAULT_EXTRA = 5
DEFAULT_INTERVAL = 5.0

SEED = 0  # the seed's rule, decide(): the default
ADAPTIVE = 1  # decide_adaptive(): does not re-sweep what came back from a blob
RULES = {"seed": SEED, "adaptive": ADAPTIVE}

# decide_adaptive's state per queue, an int64 array of ADAPTIVE_STATE slots owned by the caller:
#   [0] the smoothed service rate, x averaged over intervals, times 16 (fixed point)
ADAPTIVE_STATE = 1


def decide(y: int, x: int, factor: int, extra: int) -> int:
    """THE rule. How many sweepable messages stay in memory, or -1 when the queue is not swept.

    Seed 003: sweep once the in-memory length y is greater than ``factor`` (2) times the
    service rate x; keep a buffer of x + ``extra`` (5). Self-contained integer arithmetic,
    so ``numba.njit(decide)`` compiles this same function for the replay kernel.
    """
    if y > factor * x:
        return x + extra
    return -1


def decide_adaptive(y: int, x: int, back: int, swept: bool, state: np.ndarray, factor: int, extra: int) -> int:
    """The adaptive rule: the seed's, made not to thrash. Returns what :func:`decide` returns
    (messages to keep in memory, or -1 when the queue is not swept).

    Why the seed's rule re-sweeps: on a queue that drains a little slower than it fills, a
    get that finds the front empty brings a whole blob back; at the next interval's end those
    messages count in y and, beyond the buffer of x + extra, are swept again; with one blob
    per run that repeats for the whole backlog. Two changes:

    * what came back from a blob and is still in memory (``back``) is kept: the buffer is at
      least ``back`` (those messages are at the head of their lane, next in get order);
    * while the queue is swept (``swept``: its chain is not empty) it is swept at every
      interval, not only when y > factor * x: new messages go behind the chain and no get
      reaches them before the chain is drained, so keeping them in memory only raises the
      peak. They have never been swept, so this sweeps nothing twice.

    Otherwise the seed's condition, against the smaller of x and its smoothed value (so one
    busy interval does not let the queue grow to twice a rate it does not sustain).

    ``state`` is this queue's ADAPTIVE_STATE int64 slots, zero at the start, updated in place
    at every interval's end (call it for every queue, swept or not). The caller keeps
    ``back``: + the records of each blob a get brings back, - each of those got, - each of
    those swept again. Plain integer code on a numpy array: numba compiles this function.
    """
    xs16 = state[0] + ((x * 16 - state[0]) >> 2)  # exponential average, weight 1/4
    state[0] = xs16
    rate = xs16 >> 4
    if x < rate:
        rate = x
    if swept or y > factor * rate:
        keep = x + extra
        if back > keep:
            keep = back
        if keep >= y:
            return -1  # nothing beyond the buffer: no sweep
        return keep
    return -1


def over_budget(in_memory: int, budget: int) -> int:
    """Bytes to free to get back under a memory ``budget`` (0 when under it, or no budget: <= 0)."""
    if budget <= 0 or in_memory <= budget:
        return 0
    return in_memory - budget


def budget_order(sweepable_bytes: np.ndarray, need: int, chosen: np.ndarray) -> int:
    """The memory budget's choice: the queues to sweep beyond the rule, most sweepable bytes
    first, until their bytes cover ``need``. Writes their indices into ``chosen`` and returns
    how many. ``sweepable_bytes[q]`` is what queue q could move while keeping its x + extra
    buffer and never what the protocol forbids (the caller counts only sweepable messages).
    numba compiles this function."""
    order = np.argsort(-sweepable_bytes)
    n = 0
    freed = 0
    for j in range(len(order)):
        q = order[j]
        if freed >= need or sweepable_bytes[q] <= 0:
            break
        chosen[n] = q
        n += 1
        freed += sweepable_bytes[q]
    return n


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
    """The rule's parameters: seed 003's defaults, each configurable.

    ``rule`` is ``"seed"`` (the default: :func:`decide`) or ``"adaptive"``
    (:func:`decide_adaptive`, which the replay models; the live sweeper calls :meth:`keep`,
    the seed's rule). ``memory_budget`` (bytes, 0 = none) is modelled by the replay."""

    factor: int = DEFAULT_FACTOR
    extra: int = DEFAULT_EXTRA
    interval: float = DEFAULT_INTERVAL
    rule: str = "seed"
    memory_budget: int = 0

    def __post_init__(self) -> None:
        if self.factor < 0 or self.extra < 0:
            raise ValueError("factor and extra must be >= 0")
        if self.interval <= 0:
            raise ValueError("the sweep interval must be > 0 seconds")
        if self.rule not in RULES:
            raise ValueError(f"unknown rule {self.rule!r}; use {' or '.join(RULES)}")
        if self.memory_budget < 0:
            raise ValueError("the memory budget must be >= 0 bytes (0: none)")

    def keep(self, y: int, x: int) -> int | None:
        """Messages to keep in memory if the queue is to be swept, else None."""
        keep = decide(y, x, self.factor, self.extra)
        return None if keep < 0 else keep
