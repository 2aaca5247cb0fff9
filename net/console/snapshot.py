"""What the console shows, as plain values: one snapshot of a served queue manager, and the
short history the charts start from.

A snapshot is built from the engine's public views (``Server.status``, ``qm.stats``,
``qm.memory_use``, the sweeper's per-queue ``last`` decision and its policy, the channels'
status) and never from a queue's lists, so building one costs what ``sweepq status`` costs:
each queue's lock held briefly, once. The console builds one per tick and sends the same
JSON to every open page, so the cost does not grow with the pages.
"""

from __future__ import annotations

import collections
import os
import time
from typing import TYPE_CHECKING

import psutil

from sweepq.engine import MQError

if TYPE_CHECKING:
    from ..server import Server

# What the memory budget counts, in the words the page shows (engine/budget.py MemoryBudget.use).
BUDGET_COUNTS = (
    "the records of the messages held in memory plus 64 bytes each (the bytes object and the "
    "lanes' arrays), and the store's memtables and block cache"
)


def _rule(decision) -> dict | None:
    if decision is None:
        return None
    return {
        "y": decision.y,
        "x": decision.x,
        "threshold": decision.threshold,
        "buffer": decision.buffer,
        "outcome": decision.outcome,
        "swept": decision.swept,
        "aborts": {r: n for r, n in decision.aborts.items() if n},
        "budget": decision.budget,
        "says": decision.says(),
        "at": decision.at,
    }


def _acting(budget) -> str:
    """The memory budget's state in words: which of its measures acts now."""
    if budget is None:
        return "no memory budget: the sweeper applies its rule only"
    if budget.over:
        return "at the budget: PAGE queues write new messages out, BLOCK queues wait, FAIL queues refuse (2071)"
    if budget.paging:
        return "paging: PAGE queues write new messages out as they come"
    if budget.pressure > 0 or budget.last_total > budget.high:
        return "over the high mark: the sweeper sweeps beyond its rule"
    return "within the budget: the sweeper applies its rule"


def _budget(server: Server, queues: list[dict]) -> dict:
    qm = server.qm
    use = qm.memory_use()
    b = qm.budget
    policies: dict[str, int] = collections.Counter(q["memory_policy"] for q in queues)
    out = {
        "budget": use.budget,
        "messages": use.messages,
        "store": use.store,
        "total": use.total,
        "rss": psutil.Process(os.getpid()).memory_info().rss,
        "counts": BUDGET_COUNTS,
        "acting": _acting(b),
        "policies": dict(policies),
    }
    if b is not None:
        out.update(
            high=b.high,
            low=b.low,
            page_at=b.page_at,
            pressure=round(b.pressure, 3),
            paging=b.paging,
            over=b.over,
            events=dict(b.counts),
        )
    return out


def _channels(server: Server) -> list[dict]:
    qm = server.qm
    if not qm.distributed.channels:
        return []  # no channel defined: the agents are not even made
    try:
        return [{k: v for k, v in row.items() if not isinstance(v, bytes)} for row in qm.channels.status()]
    except MQError:
        return []  # a channel deleted in between: the next tick shows the rest


def snapshot(server: Server, pages: int = 0) -> dict:
    """Everything the page shows (see the module docstring); ``pages``: pages open now."""
    qm = server.qm
    st = server.status()
    stats = qm.stats()
    sweeper = qm.sweeper
    last = sweeper.last
    obtained = {q.name: q.obtained for q in qm.sweepables()}
    for q in st["queues"]:
        name = q["name"]
        s = stats.get(name)
        local = qm.queue_named(name)
        q["memory_policy"] = local.attrs.memory_policy.name if local is not None else "-"
        q["x_now"] = obtained.get(name)
        q["rule"] = _rule(last.get(name))
        if s is not None:
            q.update(
                blob_bytes=s.bytes_swept_compressed,
                blob_raw_bytes=s.bytes_swept_raw,
                blobs=s.blobs,
                sweeps=s.sweeps,
                msgs_swept_total=s.total_msgs_swept,
                unsweeps=s.unsweeps,
                msgs_unswept=s.msgs_unswept,
            )
    total = stats["*"]
    p = sweeper.policy
    st.update(
        at=time.time(),
        pages=pages,
        policy={"factor": p.factor, "extra": p.extra, "interval": p.interval, "rule": p.rule},
        sweeper={"running": sweeper.running, "cycles": sweeper.cycles},
        totals={
            "msgs_swept": total.total_msgs_swept,
            "msgs_unswept": total.msgs_unswept,
            "sweeps": total.sweeps,
            "unsweeps": total.unsweeps,
            "in_blobs": total.msgs_swept,
            "blob_bytes": total.bytes_swept_compressed,
        },
        budget=_budget(server, st["queues"]),
        channels=_channels(server),
    )
    return st


def point(snap: dict) -> dict:
    """The few figures of a snapshot the charts plot (one point of :class:`History`)."""
    return {
        "t": snap["at"],
        "depth": {q["name"]: q["depth"] for q in snap["queues"]},
        "swept": snap["totals"]["msgs_swept"],
        "unswept": snap["totals"]["msgs_unswept"],
    }


class History:
    """The last ``size`` points, so that a page opened now draws the recent past at once.
    Written by the console's loop only; read there too (no lock)."""

    def __init__(self, size: int = 1200):
        self.points: collections.deque[dict] = collections.deque(maxlen=size)

    def add(self, snap: dict) -> None:
        self.points.append(point(snap))

    def as_list(self) -> list[dict]:
        return list(self.points)
