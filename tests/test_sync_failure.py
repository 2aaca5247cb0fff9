"""A failed sync is never a silent loss or a silent duplicate (issue 16, B5).

With ``sync="commit"`` a change is written to the store's log under the queue's lock, then
synced. When the write succeeds and the sync keeps failing, the change is made and cannot be
undone: every call reports it with the WARNING OUTCOME_PENDING (2124) on its result and
never raises, so a get outside syncpoint hands the message over (it used to be lost: 2102
was raised after the record was deleted) and a put is not repeated by a caller told it
failed (it used to be duplicated). A failed *write* is different: nothing changed, 2102.

Every call site of the get and put paths is driven here, both ways.
"""

from __future__ import annotations

import pytest

from sweepq.blobstore import FaultyStore, MemoryStore
from sweepq.blobstore.kv import MemoryKV
from sweepq.engine import (
    CC,
    GMO,
    MD,
    MF,
    OO,
    PMO,
    DurabilitySettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.sweeper import ManualClock

P = Persistence.PERSISTENT
IO = OO.INPUT_SHARED | OO.OUTPUT | OO.BROWSE
PENDING = Reason.OUTCOME_PENDING


@pytest.fixture
def env():
    kv = MemoryKV()
    store = FaultyStore(MemoryStore(kv=kv))
    qm = QueueManager(
        store=store,
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(durable=True, sync="commit"),
        clock=ManualClock(),
    )
    qm.define_queue("Q", default_persistence=P)
    conn = qm.connect()
    yield qm, store, conn, conn.open("Q", IO)
    qm.close()


def keep_failing(store) -> None:
    store.fail("sync", times=1000)  # more than the sync's retries: the caller must hear of it


def depth(qm) -> int:
    return qm.inquire_queue("Q").current_depth


def test_a_put_whose_sync_fails_is_made_and_says_so(env):
    qm, store, _, h = env
    keep_failing(store)
    r = h.put(b"a")
    assert r.reason == PENDING == 2124 and r.completion_code == CC.WARNING
    assert depth(qm) == 1  # made: a caller must not put it again
    store.heal()
    assert h.put(b"b").reason == Reason.NONE  # the next sync covers both
    assert qm.journal.harden() and not qm.journal.owed


def test_put_many_whose_sync_fails_marks_every_result(env):
    qm, store, _, h = env
    keep_failing(store)
    results = h.put_many([b"a", b"b", b"c"])
    assert [r.reason for r in results] == [PENDING] * 3
    assert depth(qm) == 3


def test_a_get_outside_syncpoint_whose_sync_fails_returns_the_message(env):
    qm, store, _, h = env
    h.put(b"a")
    keep_failing(store)
    m = h.get()
    assert m.data == b"a" and m.reason == PENDING  # handed over, never lost
    assert depth(qm) == 0


def test_get_many_whose_sync_fails_returns_every_message(env):
    qm, store, _, h = env
    h.put_many([b"a", b"b"])
    keep_failing(store)
    got = h.get_many(10)
    assert [m.data for m in got] == [b"a", b"b"] and {m.reason for m in got} == {PENDING}
    assert depth(qm) == 0


def test_a_commit_whose_sync_fails_is_made_and_says_so(env):
    qm, store, conn, h = env
    h.put(b"a", options=PMO.SYNCPOINT)
    keep_failing(store)
    assert conn.commit() == PENDING
    assert depth(qm) == 1 and h.get(GMO.BROWSE_FIRST).data == b"a"  # committed: visible


def test_a_get_under_the_cursor_whose_sync_fails_returns_the_message(env):
    qm, store, _, h = env
    h.put(b"a")
    assert h.get(GMO.BROWSE_FIRST).data == b"a"
    keep_failing(store)
    m = h.get(GMO.MSG_UNDER_CURSOR)
    assert m.data == b"a" and m.reason == PENDING and depth(qm) == 0


def test_a_group_put_and_a_logical_order_get_whose_sync_fails(env):
    qm, store, _, h = env
    keep_failing(store)
    r = h.put(b"g1", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    assert r.reason == PENDING
    h.put(b"g2", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    m = h.get(GMO.LOGICAL_ORDER)
    assert m.data == b"g1" and m.reason == PENDING
    assert h.get(GMO.LOGICAL_ORDER).data == b"g2" and depth(qm) == 0


def test_complete_msg_under_the_cursor_whose_sync_fails(env):
    qm, store, _, h = env
    h.put(b"ab", MD(msg_flags=MF.SEGMENT), PMO.LOGICAL_ORDER)
    h.put(b"cd", MD(msg_flags=MF.LAST_SEGMENT), PMO.LOGICAL_ORDER)
    h.get(GMO.BROWSE_FIRST)
    keep_failing(store)
    m = h.get(GMO.MSG_UNDER_CURSOR | GMO.COMPLETE_MSG)
    assert m.data == b"abcd" and m.reason == PENDING and depth(qm) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda h: h.put(b"x"),
        lambda h: h.put_many([b"x", b"y"]),
        lambda h: h.put(b"x", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER),
    ],
    ids=["put", "put_many", "group put"],
)
def test_a_put_whose_write_fails_changes_nothing(env, call):
    qm, store, _, h = env
    store.fail("write_messages")
    with pytest.raises(MQError) as ei:
        call(h)
    assert ei.value.reason == Reason.RESOURCE_PROBLEM and depth(qm) == 0


@pytest.mark.parametrize(
    "call",
    [
        lambda h: h.get(),
        lambda h: h.get_many(5),
        lambda h: h.get(GMO.LOGICAL_ORDER),
    ],
    ids=["get", "get_many", "logical-order get"],
)
def test_a_get_whose_write_fails_leaves_the_message(env, call):
    qm, store, _, h = env
    h.put(b"a")
    store.fail("write_messages")
    with pytest.raises(MQError) as ei:
        call(h)
    assert ei.value.reason == Reason.RESOURCE_PROBLEM
    assert depth(qm) == 1 and h.get().data == b"a"  # still there, in place
