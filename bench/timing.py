"""Timing helpers for benchmarks on shared, noisy machines.

Contenders are run in interleaved rounds (A, B, C, A, B, C, ...) and each keeps its best
round, so a burst of noise hurts one round of each rather than all of one contender; the
report is a ratio against a baseline measured in the same run.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Result:
    name: str
    ops: int
    best_seconds: float

    @property
    def rate(self) -> float:
        return self.ops / self.best_seconds


def interleaved(
    contenders: dict[str, Callable[[], None]],
    ops: int,
    rounds: int = 7,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Result]:
    """Time each contender ``rounds`` times, interleaved; keep each one's best round."""
    best = {name: float("inf") for name in contenders}
    for r in range(rounds):
        for name, fn in contenders.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            dt = time.perf_counter() - t0
            best[name] = min(best[name], dt)
        if progress:
            progress(f"round {r + 1}/{rounds}")
    return {name: Result(name, ops, best[name]) for name in contenders}
