"""The checks of every argument of ``Queue`` and ``AsyncQueue``.

The queues mirror the standard library's, so a bad argument is what the standard library
raises for it: ``TypeError`` for a value of the wrong type, ``ValueError`` for one out of range
(``queue.Queue.get(timeout=-1)``'s own text), raised by the call that was given it and before
anything changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Real

from sweepq.engine import MemoryPolicy, MQError
from sweepq.engine.sizes import MIN_BUDGET, parse_size

from .site import MAX_DEPTH

DELIVERIES = ("at-most-once", "at-least-once")
SYNCS = ("os", "commit", "none")
COUNTS = ("resident", "held")
POLICIES = {"page": MemoryPolicy.PAGE, "block": MemoryPolicy.BLOCK, "fail": MemoryPolicy.FAIL}
_WAIT_MS_MAX = 2**31 - 1  # an MQ wait interval is an MQLONG of milliseconds


def _name_of(value: object) -> str:
    return type(value).__name__


def maxsize(value: object) -> float:
    """``maxsize``: a number; 0 or less is unbounded (``queue.Queue``'s rule)."""
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"maxsize must be a number (0 or less: unbounded), not {_name_of(value)}")
    if float(value) > MAX_DEPTH:
        raise ValueError(f"maxsize {value} is more than a queue holds ({MAX_DEPTH:,}); pass 0 for unbounded")
    return float(value) if not isinstance(value, int) else int(value)


def timeout(value: object) -> float | None:
    """``timeout``: None (wait for ever) or seconds, not negative."""
    if value is None:
        return None
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"timeout must be a number of seconds or None, not {_name_of(value)}")
    if value < 0:
        raise ValueError("'timeout' must be a non-negative number")
    return float(value)


def wait_ms(seconds: float | None) -> int:
    """An MQ wait interval for ``seconds``: -1 unlimited, else milliseconds rounded up (a
    timeout of 10 µs still waits), capped at MQ's largest interval (24.8 days)."""
    if seconds is None:
        return -1
    ms = -int(-seconds * 1000 // 1)
    return _WAIT_MS_MAX if ms > _WAIT_MS_MAX else ms


def priority(value: object) -> int:
    """``priority=`` of a put, when given: 0..9, higher first (None, the default, is the
    queue's default priority, 0, and never comes here)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"priority must be an int from 0 to 9 (higher first), not {_name_of(value)}")
    if not 0 <= value <= 9:
        raise ValueError(f"priority {value} is outside 0..9 (higher first)")
    return value


def count(value: object, what: str) -> int:
    """A positive number of items (``get_many``'s ``max_items``)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{what} must be an int of at least 1, not {_name_of(value)}")
    if value < 1:
        raise ValueError(f"{what} must be at least 1, not {value}")
    return value


@dataclass(frozen=True)
class Where:
    """Where a queue lives and how it behaves, as the constructor's keywords said."""

    name: str
    path: str | None
    url: str | None
    memory_budget: int
    policy: MemoryPolicy
    delivery: str
    sync: str
    token: str | None
    admin_token: str | None
    budget_counts: str  # what the memory budget counts: "resident" or "held" (engine/budget.py)


def where(
    name: object,
    path: object,
    url: object,
    memory_budget: object,
    memory_policy: object,
    delivery: object,
    sync: object,
    token: object,
    admin_token: object,
    budget_counts: object = None,
) -> Where:
    """The constructor's keywords, checked together (some exclude others)."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, not {_name_of(name)}")
    if path is not None and not isinstance(path, str | os.PathLike):
        raise TypeError(f"path must be a str or os.PathLike, not {_name_of(path)}")
    if url is not None and not isinstance(url, str):
        raise TypeError(f"url must be a str such as 'unix:///path/sweepq.sock', not {_name_of(url)}")
    if path is not None and url is not None:
        raise ValueError("pass path= (a data directory of this process) or url= (a served queue manager), not both")
    budget = _budget(memory_budget)
    if budget_counts is not None:
        if not isinstance(budget_counts, str):
            raise TypeError(f"budget_counts must be 'resident' or 'held', not {_name_of(budget_counts)}")
        if budget_counts not in COUNTS:
            raise ValueError(f"budget_counts {budget_counts!r} is not 'resident' or 'held'")
        if not budget:
            raise ValueError("budget_counts= says what memory_budget= counts: give a memory_budget too")
    if url is not None and budget:
        raise ValueError("memory_budget= is the queue manager's: a served queue manager has its own")
    if not isinstance(memory_policy, str):
        raise TypeError(f"memory_policy must be one of {', '.join(map(repr, POLICIES))}, not {_name_of(memory_policy)}")
    policy = POLICIES.get(memory_policy.lower())
    if policy is None:
        raise ValueError(f"memory_policy {memory_policy!r} is not one of {', '.join(map(repr, POLICIES))}")
    if not isinstance(delivery, str):
        raise TypeError(f"delivery must be one of {', '.join(map(repr, DELIVERIES))}, not {_name_of(delivery)}")
    if delivery not in DELIVERIES:
        raise ValueError(f"delivery {delivery!r} is not one of {', '.join(map(repr, DELIVERIES))}")
    if sync is not None:
        if not isinstance(sync, str):
            raise TypeError(f"sync must be one of {', '.join(map(repr, SYNCS))}, not {_name_of(sync)}")
        if sync not in SYNCS:
            raise ValueError(f"sync {sync!r} is not one of {', '.join(map(repr, SYNCS))}")
        if path is None:
            raise ValueError("sync= says when a put or get is on disk: it needs path= (a data directory)")
    for what, value in (("token", token), ("admin_token", admin_token)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{what} must be a str, not {_name_of(value)}")
        if value is not None and url is None:
            raise ValueError(f"{what}= is a served queue manager's: it goes with url=")
    return Where(
        name,
        None if path is None else os.fspath(path),
        url,
        budget,
        policy,
        delivery,
        sync or "os",
        token,  # type: ignore[arg-type]
        admin_token,  # type: ignore[arg-type]
        budget_counts or "resident",
    )


def _budget(value: object) -> int:
    if value is None:
        return 0
    if not isinstance(value, int | str) or isinstance(value, bool):
        raise TypeError(f"memory_budget must be a size such as '100MB' or an int of bytes, not {_name_of(value)}")
    try:
        # The queue manager's floor, checked here on the value as written: it gets bytes, and
        # would ask whether "1KB" (1000 bytes) meant 1000 MB.
        return parse_size(value, "memory_budget", MIN_BUDGET, hint=" (0: no budget)")
    except MQError as e:
        raise ValueError(e.text) from None


# What to use instead of each option of ``Queue`` that a queue holding its items in this
# process (queues/ordered.py) cannot take: each needs the queue manager.
_ENGINE_OPTIONS = {
    "path": "sweepq.Queue(path=...) keeps items on disk",
    "url": "sweepq.Queue(url=...) shares a queue between processes",
    "memory_budget": "sweepq.Queue(memory_budget=...) sweeps a backlog to disk",
    "memory_policy": "it goes with memory_budget=, which only sweepq.Queue takes",
    "budget_counts": "it goes with memory_budget=, which only sweepq.Queue takes",
    "sync": "it goes with path=, which only sweepq.Queue takes",
    "token": "it goes with url=, which only sweepq.Queue takes",
    "admin_token": "it goes with url=, which only sweepq.Queue takes",
    "serializer": "its items never leave this process, so nothing is serialized",
    "delivery": "sweepq.Queue(delivery='at-least-once') holds a got item until task_done()",
}


def held_only(cls: str, options: dict[str, object]) -> None:
    """``options``, the keywords beyond ``maxsize`` and ``name`` given to ``cls``, a queue that
    holds its items in this process (``LifoQueue``, ``PriorityQueue`` and their asyncio
    forms): there must be none. A keyword ``Queue`` takes says why it is not taken here and
    what to use instead; any other is Python's own unexpected-keyword ``TypeError``."""
    for key in options:
        why = _ENGINE_OPTIONS.get(key)
        if why is None:
            raise TypeError(f"{cls}() got an unexpected keyword argument {key!r}")
        raise TypeError(
            f"{cls}() got an unexpected keyword argument {key!r}: a {cls} holds its items in this "
            f"process, in an order the queue manager's FIFO lanes cannot keep; {why}"
        )


def simple_only(options: dict[str, object]) -> None:
    """``SimpleQueue``'s keywords: ``Queue``'s, but no ``maxsize`` (it is unbounded, as
    ``queue.SimpleQueue`` is) and no at-least-once delivery (it has no ``task_done()`` to end
    one)."""
    if "maxsize" in options:
        raise TypeError(
            "SimpleQueue() got an unexpected keyword argument 'maxsize': a SimpleQueue is unbounded, "
            "as queue.SimpleQueue is; sweepq.Queue(maxsize) has a bound"
        )
    if options.get("delivery") == "at-least-once":
        raise ValueError(
            "delivery 'at-least-once' holds a got item until task_done(), which a SimpleQueue does not "
            "have: use sweepq.Queue(delivery='at-least-once')"
        )
