"""WHEN and HOW to sweep: the pure rule, the cycle with its lock / write / re-lock / verify /
abort protocol, and the clock. It works against a small protocol that a queue implements and
never reaches into a queue's lists."""

from .clock import Clock, ManualClock, SystemClock
from .cycle import QueueDecision, Sweeper, SweepReport
from .policy import SweepPolicy, buffer_size, decide, should_sweep, to_sweep
from .stats import ABORT_REASONS, LastDecision, SweepStats

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
