"""WHEN and HOW to sweep: the pure rule, the cycle with its lock / write / re-lock / verify /
abort protocol, and the clock. It works against a small protocol that a queue implements and
never reaches into a queue's lists.

The names below are imported when first used (PEP 562): ``sweepq replay`` imports the rule
and the replay kernel (sweeper/policy.py, sweeper/replay.py), not the cycle and the blob
store it works against."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .clock import Clock, ManualClock, SystemClock
    from .cycle import QueueDecision, Sweeper, SweepReport
    from .policy import SweepPolicy, buffer_size, decide, should_sweep, to_sweep
    from .stats import ABORT_REASONS, LastDecision, SweepStats

# Each module -> the public names it defines: the imports under TYPE_CHECKING, as data.
_NAMES = {
    "clock": ("Clock", "ManualClock", "SystemClock"),
    "cycle": ("QueueDecision", "Sweeper", "SweepReport"),
    "policy": ("SweepPolicy", "buffer_size", "decide", "should_sweep", "to_sweep"),
    "stats": ("ABORT_REASONS", "LastDecision", "SweepStats"),
}
_WHERE = {name: module for module, names in _NAMES.items() for name in names}

__all__ = [
    "ABORT_REASONS",
    "Clock",
    "LastDecision",
    "ManualClock",
    "QueueDecision",
    "SweepPolicy",
    "SweepReport",
    "SweepStats",
    "Sweeper",
    "SystemClock",
    "buffer_size",
    "decide",
    "should_sweep",
    "to_sweep",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module at first use and kept here (PEP 562)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
