"""Batch put and get: one lock and one validation for many messages, the same rules as
put and get message by message."""

from __future__ import annotations

import threading

import pytest

from sweepq.engine import (
    GMO,
    MD,
    OO,
    PMO,
    DurabilitySettings,
    MessageSettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.sweeper import ManualClock

from helpers import IO, drain


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


def test_put_many_keeps_order_and_gives_each_message_its_own_ids(h):
    res = h.put_many([b"%03d" % i for i in range(300)])
    assert len(res) == 300
    assert len({r.msg_id for r in res}) == 300 and len({r.msg_token for r in res}) == 300
    assert [m.msg_id for m in (h.get() for _ in range(300))] == [r.msg_id for r in res]


def test_put_many_applies_the_descriptor_to_every_message(h):
    h.put(b"low")
    h.put_many([b"a", b"b"], MD(priority=7, correl_id=b"C", persistence=Persistence.PERSISTENT))
    a, b, low = h.get(), h.get(), h.get()
    assert (a.data, b.data, low.data) == (b"a", b"b", b"low")
    assert a.priority == b.priority == 7 and a.correl_id.rstrip(b"\0") == b"C" and b.persistent


def test_put_many_is_all_or_nothing_at_max_depth(qm, conn):
    qm.define_queue("SMALL", max_depth=5)
    s = conn.open("SMALL", IO)
    s.put_many([b"1", b"2", b"3"])
    assert reason_of(lambda: s.put_many([b"4", b"5", b"6"])) == Reason.Q_FULL
    assert drain(s) == [b"1", b"2", b"3"]


def test_put_many_under_syncpoint_is_one_unit_of_work(conn, h):
    h.put_many([b"x", b"y"], options=PMO.SYNCPOINT)
    assert h.get_many(10) == []
    conn.commit()
    assert [m.data for m in h.get_many(10)] == [b"x", b"y"]
    h.put_many([b"z"] * 3, options=PMO.SYNCPOINT)
    conn.backout()
    assert h.get_many(10) == [] and h.queue.depth == 0


def test_put_many_respects_max_uncommitted(clock):
    with QueueManager(clock=clock, messages=MessageSettings(max_uncommitted=3)) as qm:
        qm.define_queue("Q")
        c = qm.connect()
        h = c.open("Q", IO)
        assert reason_of(lambda: h.put_many([b"1"] * 4, options=PMO.SYNCPOINT)) == Reason.SYNCPOINT_LIMIT_REACHED
        assert h.queue.depth == 0


@pytest.mark.parametrize("bad", [b"not a list", "text", 42, None, [b"ok", "text"], [b"ok", 3]])
def test_put_many_refuses_what_is_not_a_list_of_bytes(h, bad):
    with pytest.raises(MQError):
        h.put_many(bad)
    assert h.queue.depth == 0


def test_get_many_follows_priority_then_fifo_like_get(h):
    h.put_many([b"p0-%d" % i for i in range(3)])
    h.put_many([b"p5-%d" % i for i in range(3)], MD(priority=5))
    got = [m.data for m in h.get_many(4)]
    assert got == [b"p5-0", b"p5-1", b"p5-2", b"p0-0"]
    assert [m.data for m in h.get_many(100)] == [b"p0-1", b"p0-2"]
    assert h.get_many(100) == []  # empty is a result, not an error


def test_get_many_equals_gets_across_swept_blobs():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": 7}),
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        h.put_many([b"%03d" % i for i in range(200)])
        qm.sweeper.run_once()
        assert qm.stats()["Q"].msgs_swept == 195
        out = []
        while batch := h.get_many(13):
            out += [m.data for m in batch]
        assert out == [b"%03d" % i for i in range(200)]
        assert qm.stats()["Q"].msgs_swept == 0 and qm.blob_store().chains() == {}


def test_get_many_under_syncpoint_backs_out_in_place(conn, h):
    h.put_many([b"a", b"b", b"c"])
    assert [m.data for m in h.get_many(2, GMO.SYNCPOINT)] == [b"a", b"b"]
    assert [m.data for m in h.get_many(5)] == [b"c"]
    conn.backout()
    again = h.get_many(5)
    assert [(m.data, m.backout_count) for m in again] == [(b"a", 1), (b"b", 1)]


def test_get_many_syncpoint_if_persistent_decides_per_message(conn, h):
    h.put(b"p1", MD(persistence=Persistence.PERSISTENT))
    h.put(b"n1", MD(persistence=Persistence.NOT_PERSISTENT))
    h.put(b"p2", MD(persistence=Persistence.PERSISTENT))
    assert [m.data for m in h.get_many(3, GMO.SYNCPOINT_IF_PERSISTENT)] == [b"p1", b"n1", b"p2"]
    assert conn.uncommitted == 2
    conn.backout()
    assert drain(h) == [b"p1", b"p2"]


def test_get_many_waits_for_the_first_message_on_the_virtual_clock(qm, clock, h):
    box = {}
    g = qm.connect().open("Q", IO)
    t = threading.Thread(target=lambda: box.update(r=g.get_many(10, GMO.WAIT, 5000)), daemon=True)
    t.start()
    assert clock.wait_for_waiters(1)
    h.put_many([b"1", b"2"])
    t.join(10)
    assert [m.data for m in box["r"]] == [b"1", b"2"]
    t = threading.Thread(target=lambda: box.update(r=g.get_many(10, GMO.WAIT, 5000)), daemon=True)
    t.start()
    assert clock.wait_for_waiters(1)
    clock.advance(5.001)
    t.join(10)
    assert box["r"] == []


def test_get_many_drops_expired_messages(qm, clock, h):
    h.put(b"short", MD(expiry=10))
    h.put(b"long")
    clock.advance(2)
    assert [m.data for m in h.get_many(10)] == [b"long"]
    assert h.queue.expired == 1


@pytest.mark.parametrize(
    "options",
    [GMO.BROWSE_FIRST, GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT, GMO.LOCK, GMO.SYNCPOINT | GMO.NO_SYNCPOINT],
)
def test_get_many_refuses_options_that_belong_to_get(h, options):
    h.put(b"x")
    assert reason_of(lambda: h.get_many(5, options)) == Reason.OPTIONS_ERROR
    assert h.queue.depth == 1


@pytest.mark.parametrize("bad", [0, -1, 2.5, "10", None, True])
def test_get_many_refuses_a_bad_count(h, bad):
    assert reason_of(lambda: h.get_many(bad)) == Reason.PARM_VALUE_ERROR


def test_get_many_needs_input_and_allowed_gets(qm, conn):
    out = conn.open("Q", OO.OUTPUT)
    assert reason_of(lambda: out.get_many(5)) == Reason.NOT_OPEN_FOR_INPUT
    qm.alter_queue("Q", inhibit_get=True)
    assert reason_of(lambda: conn.open("Q", IO).get_many(5)) == Reason.GET_INHIBITED


def test_get_many_on_a_poison_queue_moves_poison_like_get(clock):
    with QueueManager(clock=clock, messages=MessageSettings(backout_handling=True)) as qm:
        qm.define_queue("BOQ")
        qm.define_queue("W", backout_threshold=1, backout_requeue_q="BOQ")
        c = qm.connect()
        h = c.open("W", IO)
        h.put_many([b"a", b"b"])
        h.get(GMO.SYNCPOINT)
        c.backout()  # a: backout count 1, over the threshold
        assert [m.data for m in h.get_many(5)] == [b"b"]
        assert c.open("BOQ", IO).get().data == b"a"


# -- the batch's hot path (issue 30): records written from their fields, a run taken in one
# step, results made when read. What it returns must be what the whole way returns.


def test_put_many_results_read_as_the_list_of_results_they_stand_for(h):
    datas = [b"%d" % i * (i + 1) for i in range(150)]  # records of 22..~500 bytes: 1- and 2-byte lengths
    res = h.put_many(datas)
    assert len(res) == 150 and bool(res)
    made = list(res)
    assert res[0] is made[0] and res[-1] is made[-1] and res[10:12] == made[10:12]
    assert res == made and made == res and res + [None] == [*made, None] and [None] + res == [None, *made]  # noqa: RUF005
    assert made[3] in res and res.index(made[3]) == 3 and res != made[1:]
    got = h.get_many(150)
    # Each result's record is the record the queue held, made again from its fields (over a
    # client, a put's result holds its header only).
    assert all(m.record.startswith(r.record) and len(r.record) >= 21 for r, m in zip(res, got, strict=True))
    assert [r.msg_id for r in res] == [m.msg_id for m in got] and len({r.msg_id for r in res}) == 150
    assert [m.data for m in got] == datas and all(r.reason == 0 and not r.persistent for r in res)


def test_get_many_results_read_as_the_list_of_messages_they_stand_for(h):
    h.put_many([b"a", b"bb", b"ccc"])
    got = h.get_many(5)
    assert len(got) == 3 and got[0] is got[0] and got[-1].data == b"ccc"
    assert [m.data for m in got[1:]] == [b"bb", b"ccc"] and [m.data for m in reversed(got)] == [b"ccc", b"bb", b"a"]
    assert got == list(got) and got.index(got[1]) == 1
    assert [m.data_length for m in got] == [1, 2, 3] and got[0].md.priority == got[0].priority
    empty = h.get_many(5)
    assert empty == [] and not empty and len(empty) == 0 and list(empty) == []


def test_a_batch_get_takes_the_same_messages_in_the_same_order_as_gets_do(qm, conn):
    """Priorities, a message put alone, and a batch: get_many's runs across lanes and its
    plain gets return exactly what gets one by one return."""
    qm.define_queue("A")
    qm.define_queue("B")
    a, b = conn.open("A", IO), conn.open("B", IO)
    for h in (a, b):
        h.put_many([b"p1-%d" % i for i in range(40)], MD(priority=1))
        h.put_many([b"p0-%d" % i for i in range(70)])
        h.put(b"alone", MD(priority=7))
        h.put_many([b"p7-%d" % i for i in range(30)], MD(priority=7))
    one_by_one = [a.get().record for _ in range(141)]
    batched = [m.record for m in b.get_many(60)] + [m.record for m in b.get_many(100)]
    # The records differ in their arrival numbers and put times only.
    assert [(r[1], r[21:]) for r in batched] == [(r[1], r[21:]) for r in one_by_one]


def test_a_run_stops_before_a_message_with_an_expiry_and_the_expired_one_is_dropped(qm, clock, h):
    h.put_many([b"a", b"b"])
    h.put(b"short", MD(expiry=10))
    h.put_many([b"c", b"d"])
    clock.advance(2)
    assert [m.data for m in h.get_many(10)] == [b"a", b"b", b"c", b"d"]
    assert h.queue.expired == 1 and h.queue.depth == 0


def test_a_batch_get_returns_the_items_kept_as_objects(h):
    h.keep_items(lambda item: repr(item).encode())
    first, second = {"order": 1}, [2]
    h.put_item(first)
    h.put(b"bytes")
    h.put_items([second, None])
    got = h.get_many(10)
    assert [m.has_item for m in got] == [True, False, True, True]
    assert got[0].item is first and got[1].data == b"bytes" and got[2].item is second and got[3].item is None
