"""Units of work (seed 000, docs/semantics.md §8): visibility, commit, backout in place, limits."""

from __future__ import annotations

import pytest

from sweepq.engine import GMO, MD, PMO, MessageSettings, MQError, QueueManager, Reason

from helpers import IO, drain


def test_uncommitted_put_is_invisible_until_commit(qm, conn, h):
    other = qm.connect().open("Q", IO)
    h.put(b"x", options=PMO.SYNCPOINT)
    assert h.queue.depth == 1  # it is on the queue...
    with pytest.raises(MQError) as ei:
        other.get()  # ...but nobody can see it, not even its own connection
    assert ei.value.reason == Reason.NO_MSG_AVAILABLE
    with pytest.raises(MQError):
        h.get()
    conn.commit()
    assert other.get().data == b"x"


def test_backout_of_puts_deletes_them(conn, h):
    h.put(b"a", options=PMO.SYNCPOINT)
    h.put(b"b", options=PMO.SYNCPOINT)
    conn.backout()
    assert h.queue.depth == 0
    assert drain(h) == []


def test_get_under_syncpoint_hides_then_commit_deletes(qm, conn, h):
    h.put(b"x")
    assert h.get(GMO.SYNCPOINT).data == b"x"
    other = qm.connect().open("Q", IO)
    with pytest.raises(MQError):
        other.get()
    assert h.queue.depth == 1
    conn.commit()
    assert h.queue.depth == 0


def test_backout_restores_in_place_with_backout_count(conn, h):
    for d in (b"1", b"2", b"3", b"4"):
        h.put(d)
    assert h.get(GMO.SYNCPOINT).data == b"1"
    assert h.get(GMO.SYNCPOINT).data == b"2"
    conn.backout()
    msgs = []
    while True:
        try:
            msgs.append(h.get())
        except MQError:
            break
    assert [m.data for m in msgs] == [b"1", b"2", b"3", b"4"]  # original positions
    assert [m.backout_count for m in msgs] == [1, 1, 0, 0]


def test_backout_count_rises_each_time(conn, h):
    h.put(b"x")
    for expected in range(4):
        m = h.get(GMO.SYNCPOINT)
        assert m.backout_count == expected
        conn.backout()


def test_restored_message_keeps_priority_position(conn, h):
    h.put(b"p5a", MD(priority=5))
    h.put(b"p5b", MD(priority=5))
    h.put(b"p9", MD(priority=9))
    assert h.get(GMO.SYNCPOINT).data == b"p9"
    assert h.get(GMO.SYNCPOINT).data == b"p5a"
    h.put(b"p5c", MD(priority=5))
    conn.backout()
    assert drain(h) == [b"p9", b"p5a", b"p5b", b"p5c"]


def test_unit_of_work_spans_queues(qm, conn):
    qm.define_queue("A")
    qm.define_queue("B")
    a = conn.open("A", IO)
    b = conn.open("B", IO)
    a.put(b"in-a")
    a.get(GMO.SYNCPOINT)
    b.put(b"to-b", options=PMO.SYNCPOINT)
    conn.backout()
    assert drain(b) == [] and drain(a) == [b"in-a"]
    a.put(b"again")
    a.put(b"stays")
    assert a.get(GMO.SYNCPOINT).data == b"again"
    b.put(b"to-b", options=PMO.SYNCPOINT)
    conn.commit()
    assert drain(b) == [b"to-b"] and drain(a) == [b"stays"]


def test_disconnect_backs_out(qm):
    c = qm.connect()
    h = c.open("Q", IO)
    h.put(b"kept")
    h.put(b"dropped", options=PMO.SYNCPOINT)
    h.get(GMO.SYNCPOINT)
    c.disconnect()
    g = qm.connect().open("Q", IO)
    m = g.get()
    assert (m.data, m.backout_count) == (b"kept", 1)
    with pytest.raises(MQError):
        g.get()


def test_syncpoint_limit_2024(clock):
    with QueueManager(clock=clock, messages=MessageSettings(max_uncommitted=3)) as qm:
        qm.define_queue("Q")
        c = qm.connect()
        h = c.open("Q", IO)
        h.put(b"1", options=PMO.SYNCPOINT)
        h.put(b"2", options=PMO.SYNCPOINT)
        h.put(b"plain")
        h.get(GMO.SYNCPOINT)
        with pytest.raises(MQError) as ei:
            h.put(b"3", options=PMO.SYNCPOINT)
        assert ei.value.reason == Reason.SYNCPOINT_LIMIT_REACHED
        with pytest.raises(MQError) as ei:
            h.get(GMO.SYNCPOINT)
        assert ei.value.reason == Reason.SYNCPOINT_LIMIT_REACHED
        h.put(b"no-sync")  # outside a unit of work there is no limit
        c.commit()
        h.put(b"3", options=PMO.SYNCPOINT)


def test_commit_and_backout_with_nothing_to_do(conn):
    conn.commit()
    conn.backout()
    assert conn.uncommitted == 0


def test_calls_after_disconnect_fail(qm):
    c = qm.connect()
    h = c.open("Q", IO)
    c.disconnect()
    with pytest.raises(MQError) as ei:
        c.commit()
    assert ei.value.reason == Reason.HCONN_ERROR
    with pytest.raises(MQError) as ei:
        h.put(b"x")
    assert ei.value.reason == Reason.HCONN_ERROR
