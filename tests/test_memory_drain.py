"""The resident bound in a fill and in its drain (issue 32 item 5, issue 30's backlog figure):
with ``budget_counts="resident"`` (the default with a budget), a backlog of ten budgets put by
two producers, then got back, keeps the process's peak resident memory within 1.15 x (budget
+ baseline) in both phases, and every item comes back once, in order.

Each case runs in a fresh subprocess (bench/memory.py ``fill_and_drain``: the kernel's
high-water mark is the process's, reset between the phases), with ``MALLOC_ARENA_MAX=1`` as
docs/sweeper.md tells a process whose resident budget must hold. The bound is a property of
memory, not of time: the children wait on nothing but their own threads."""

from __future__ import annotations

import pytest

from sweepq.bench.memory import GOAL_BOUND, fill_and_drain

BUDGET = 24_000_000
BACKLOG = 10 * BUDGET


def _assert_bound(fig: dict) -> None:
    assert fig["every_item_once_in_order"], fig
    for phase in ("fill", "drain"):
        assert fig[phase]["ratio"] <= GOAL_BOUND, (phase, fig)


@pytest.mark.timeout(120)
def test_a_queue_of_objects_keeps_the_bound_through_a_fill_and_a_get_many_drain():
    """``sweepq.Queue`` keeps items as objects: a 1 KiB item's record is its header alone.
    A sweep cut its runs by those lengths, so one piece held 26,000 items and made their
    encodings at once while the items were still held: the fill reached 1.22 to 1.30 x
    budget + baseline. Pieces are now cut by the items' estimates (engine/tiering.py)."""
    _assert_bound(fill_and_drain("queue-bytes", BUDGET, BACKLOG, 5000, one_arena=True))


@pytest.mark.timeout(120)
def test_a_queue_manager_keeps_the_bound_through_a_fill_and_a_get_many_drain():
    """The same through a ``QueueManager`` with its sweeper on the wall clock, drained by
    ``get_many(5000)``: blobs come back while the gets free what they took."""
    _assert_bound(fill_and_drain("manager", BUDGET, BACKLOG, 5000, one_arena=True))
