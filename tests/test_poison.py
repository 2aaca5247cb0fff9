"""Poison messages: BOTHRESH / BOQNAME acted on when the manager's backout handling is on."""

from __future__ import annotations

import pytest

from sweepq.engine import GMO, MessageSettings, MQError, QueueManager, Reason

from helpers import IO, drain


@pytest.fixture
def pq(clock):
    with QueueManager(clock=clock, messages=MessageSettings(backout_handling=True)) as qm:
        qm.define_queue("BOQ")
        qm.define_queue("WORK", backout_threshold=2, backout_requeue_q="BOQ")
        yield qm


def _poison(conn, h, times):
    for _ in range(times):
        h.get(GMO.SYNCPOINT)
        conn.backout()


def test_message_at_threshold_moves_to_backout_queue(pq):
    c = pq.connect()
    h = c.open("WORK", IO)
    h.put(b"bad")
    h.put(b"good")
    _poison(c, h, 2)  # backout count of "bad" is now 2
    m = h.get(GMO.SYNCPOINT)
    assert m.data == b"good"  # "bad" was moved, the next message returned
    c.commit()
    boq = c.open("BOQ", IO)
    moved = boq.get()
    assert moved.data == b"bad" and moved.backout_count == 2
    assert pq.inquire_queue("WORK").current_depth == 0


def test_move_is_part_of_the_unit_of_work(pq):
    c = pq.connect()
    h = c.open("WORK", IO)
    boq = c.open("BOQ", IO)
    h.put(b"bad")
    h.put(b"good")
    _poison(c, h, 2)
    h.get(GMO.SYNCPOINT)
    assert drain(boq) == []  # the move is not committed yet
    c.backout()
    # Backed out: "bad" is back on WORK (its count raised again), nothing on BOQ.
    assert pq.inquire_queue("BOQ").current_depth == 0
    assert pq.inquire_queue("WORK").current_depth == 2


def test_without_syncpoint_the_move_is_immediate_and_keeps_msg_id(pq):
    c = pq.connect()
    h = c.open("WORK", IO)
    r = h.put(b"bad")
    _poison(c, h, 2)
    with pytest.raises(MQError) as ei:
        h.get()
    assert ei.value.reason == Reason.NO_MSG_AVAILABLE
    moved = c.open("BOQ", IO).get()
    assert moved.msg_id == r.msg_id


def test_handling_off_by_default(clock):
    with QueueManager(clock=clock) as qm:
        qm.define_queue("BOQ")
        qm.define_queue("WORK", backout_threshold=1, backout_requeue_q="BOQ")
        c = qm.connect()
        h = c.open("WORK", IO)
        h.put(b"bad")
        _poison(c, h, 3)
        assert h.get().backout_count == 3


def test_missing_requeue_queue_delivers_the_message(pq):
    pq.alter_queue("WORK", backout_requeue_q="NOWHERE")
    c = pq.connect()
    h = c.open("WORK", IO)
    h.put(b"bad")
    _poison(c, h, 2)
    assert h.get().data == b"bad"
