"""Delivery order (seed 000, docs/semantics.md §2.1): priority lanes, FIFO, the sequence switch."""

from __future__ import annotations

from sweepq.engine import MD, PMO, DeliverySequence

from helpers import IO, drain


def test_priority_oracle_fifo_within_priority(h):
    # mq-golang-jms20 TestPriorityOrdering: put 5,2,8,2,4,5,2,2,4,1 -> 8,5,5,4,4,2,2,2,2,1.
    prios = [5, 2, 8, 2, 4, 5, 2, 2, 4, 1]
    for i, p in enumerate(prios):
        h.put(f"{p}:{i}".encode(), MD(priority=p))
    got = [d.decode() for d in drain(h)]
    assert [int(g.split(":")[0]) for g in got] == sorted(prios, reverse=True)
    # FIFO within each priority: the put index rises inside a priority.
    for p in set(prios):
        idx = [int(g.split(":")[1]) for g in got if g.startswith(f"{p}:")]
        assert idx == sorted(idx)


def test_inserted_after_last_message_of_same_priority(h):
    # "When a message arrives on a queue, it is inserted immediately following the last
    # message that has the same priority."
    h.put(b"a5", MD(priority=5))
    h.put(b"b3", MD(priority=3))
    h.put(b"c5", MD(priority=5))  # goes after a5, before b3
    h.put(b"d3", MD(priority=3))
    h.put(b"e7", MD(priority=7))
    assert drain(h) == [b"e7", b"a5", b"c5", b"b3", b"d3"]


def test_default_priority_used_for_minus_one(qm, conn):
    qm.define_queue("P", default_priority=6)
    h = conn.open("P", IO)
    h.put(b"low", MD(priority=2))
    r = h.put(b"def", MD(priority=-1))
    assert r.md.priority == 6
    assert drain(h) == [b"def", b"low"]


def test_fifo_queue_ignores_priority_for_order_but_keeps_it_in_md(qm, conn):
    qm.define_queue("F", delivery_sequence=DeliverySequence.FIFO, default_priority=4)
    h = conn.open("F", IO)
    for i, p in enumerate([1, 9, 4, 0, 7]):
        h.put(str(i).encode(), MD(priority=p))
    msgs = [h.get() for _ in range(5)]
    assert [m.data for m in msgs] == [b"0", b"1", b"2", b"3", b"4"]
    assert [m.priority for m in msgs] == [1, 9, 4, 0, 7]


def test_switch_priority_to_fifo_keeps_queued_order(qm, conn):
    # Seed 001: "If the message delivery sequence is changed from priority to FIFO while there
    # are messages on the queue, the order of the messages that are already queued is not
    # changed. Messages added to the queue subsequently take the default priority."
    qm.define_queue("S", default_priority=5)
    h = conn.open("S", IO)
    h.put(b"p2", MD(priority=2))
    h.put(b"p8", MD(priority=8))
    h.put(b"p5", MD(priority=5))
    qm.alter_queue("S", delivery_sequence=DeliverySequence.FIFO)
    h.put(b"n9", MD(priority=9))  # enqueued as if priority 5: after p5, before p2
    h.put(b"n0", MD(priority=0))  # likewise
    assert drain(h) == [b"p8", b"p5", b"n9", b"n0", b"p2"]


def test_switch_fifo_to_priority_never_reorders(qm, conn):
    qm.define_queue("S2", delivery_sequence=DeliverySequence.FIFO, default_priority=0)
    h = conn.open("S2", IO)
    for i, p in enumerate([3, 9, 1]):
        h.put(f"old{i}".encode(), MD(priority=p))
    qm.alter_queue("S2", delivery_sequence=DeliverySequence.PRIORITY)
    h.put(b"new9", MD(priority=9))
    h.put(b"new0", MD(priority=0))
    # Old messages keep their FIFO order in the default lane; new ones take their priority.
    assert drain(h) == [b"new9", b"old0", b"old1", b"old2", b"new0"]


def test_order_of_arrival_not_of_commit(qm, conn):
    # "Messages of equal priority are stored in a queue in order of arrival, not the order in
    # which they are committed."
    other = qm.connect()
    h1 = conn.open("Q", IO)
    h2 = other.open("Q", IO)
    h1.put(b"first", options=PMO.SYNCPOINT)
    h2.put(b"second", options=PMO.SYNCPOINT)
    other.commit()
    conn.commit()
    assert drain(h1) == [b"first", b"second"]


def test_three_conditions_same_priority_same_uow_local(qm, conn):
    # Seed 000: put order is kept when (a) same priority, (b) all in one unit of work or all
    # outside one, (c) the queue is local. All three hold here, for both cases of (b).
    h = conn.open("Q", IO)
    for i in range(50):
        h.put(b"in%02d" % i, options=PMO.SYNCPOINT)
    conn.commit()
    for i in range(50):
        h.put(b"out%02d" % i)
    got = drain(h)
    assert got == [b"in%02d" % i for i in range(50)] + [b"out%02d" % i for i in range(50)]


def test_condition_b_broken_mixing_uow_and_plain_puts_can_reorder(qm, conn):
    # When condition (b) does not hold the order seen by a getter can differ from the put
    # order: a plain put made after a syncpoint put is visible first.
    h = conn.open("Q", IO)
    h.put(b"A", options=PMO.SYNCPOINT)
    h.put(b"B")
    assert h.get().data == b"B"
    conn.commit()
    assert h.get().data == b"A"
