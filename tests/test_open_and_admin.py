"""MQOPEN rules (§4.3, §7) and queue definitions (define / alter / delete / inquire)."""

from __future__ import annotations

import pytest

from sweepq.engine import OO, DeliverySequence, MQError, QueueManager, Reason


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


@pytest.mark.parametrize(
    "opts",
    [
        0,
        OO.FAIL_IF_QUIESCING,
        OO.INPUT_SHARED | OO.INPUT_EXCLUSIVE,
        OO.INPUT_AS_Q_DEF | OO.INPUT_SHARED,
        OO.SAVE_ALL_CONTEXT | OO.OUTPUT,
        OO.SET_ALL_CONTEXT | OO.INPUT_SHARED,
        OO.CO_OP | OO.INPUT_SHARED,
        OO.READ_AHEAD | OO.NO_READ_AHEAD | OO.INPUT_SHARED,
        0x40000000 | OO.OUTPUT,
        OO.SAVE_ALL_CONTEXT | OO.INPUT_SHARED,  # not built: refused, never accepted and ignored
        OO.SET_ALL_CONTEXT | OO.OUTPUT,
        OO.CO_OP | OO.BROWSE,
        OO.ALTERNATE_USER_AUTHORITY | OO.OUTPUT,
    ],
)
def test_invalid_open_options(conn, opts):
    assert reason_of(lambda: conn.open("Q", opts)) == Reason.OPTIONS_ERROR


def test_unknown_queue(conn):
    with pytest.raises(MQError) as ei:
        conn.open("NOPE", OO.OUTPUT)
    e = ei.value
    assert e.reason == Reason.UNKNOWN_OBJECT_NAME and "define_queue" in str(e)


def test_exclusive_input_conflicts(qm, conn):
    c2 = qm.connect()
    ex = conn.open("Q", OO.INPUT_EXCLUSIVE)
    assert reason_of(lambda: c2.open("Q", OO.INPUT_SHARED)) == Reason.OBJECT_IN_USE
    assert reason_of(lambda: c2.open("Q", OO.INPUT_EXCLUSIVE)) == Reason.OBJECT_IN_USE
    c2.open("Q", OO.OUTPUT)  # output and browse are not input
    c2.open("Q", OO.BROWSE)
    ex.close()
    sh = c2.open("Q", OO.INPUT_SHARED)
    assert reason_of(lambda: conn.open("Q", OO.INPUT_EXCLUSIVE)) == Reason.OBJECT_IN_USE
    conn.open("Q", OO.INPUT_SHARED)
    sh.close()


def test_not_shareable_turns_shared_into_exclusive(qm, conn):
    qm.define_queue("NS", shareable=False)
    h = conn.open("NS", OO.INPUT_SHARED)
    assert h.options & OO.INPUT_EXCLUSIVE
    assert reason_of(lambda: qm.connect().open("NS", OO.INPUT_SHARED)) == Reason.OBJECT_IN_USE


def test_input_as_q_def_uses_default_input(qm, conn):
    qm.define_queue("DX", default_input=OO.INPUT_EXCLUSIVE)
    h = conn.open("DX", OO.INPUT_AS_Q_DEF)
    assert h.options & OO.INPUT_EXCLUSIVE
    assert reason_of(lambda: qm.connect().open("DX", OO.INPUT_AS_Q_DEF)) == Reason.OBJECT_IN_USE


def test_define_twice_and_bad_attributes(qm):
    assert reason_of(lambda: qm.define_queue("Q")) == Reason.OBJECT_ALREADY_EXISTS
    assert reason_of(lambda: qm.define_queue("X", default_priority=10)) == Reason.PARM_VALUE_ERROR
    assert reason_of(lambda: qm.define_queue("X", max_depth=-1)) == Reason.PARM_VALUE_ERROR
    assert reason_of(lambda: qm.define_queue("X", colour="red")) == Reason.PARM_VALUE_ERROR
    assert reason_of(lambda: qm.define_queue("bad name!")) == Reason.PARM_VALUE_ERROR
    assert reason_of(lambda: qm.define_queue("X", delivery_sequence=7)) == Reason.PARM_VALUE_ERROR
    assert "X" not in qm.queue_names()


def test_inquire_reports_attributes_and_depth(qm, conn):
    h = conn.open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    h.put(b"abc")
    info = qm.inquire_queue("Q")
    assert info.current_depth == 1 and info.in_memory == 1 and info.ready == 1
    assert info.open_input_count == 1 and info.open_output_count == 1
    assert info.attributes.delivery_sequence == DeliverySequence.PRIORITY
    qm.alter_queue("Q", delivery_sequence=DeliverySequence.FIFO, max_depth=10)
    assert qm.inquire_queue("Q").attributes.max_depth == 10


def test_delete_rules(qm, conn):
    qm.define_queue("D")
    h = conn.open("D", OO.OUTPUT)
    h.put(b"x")
    assert reason_of(lambda: qm.delete_queue("D")) == Reason.OBJECT_IN_USE
    h.close()
    assert reason_of(lambda: qm.delete_queue("D")) == Reason.Q_NOT_EMPTY
    qm.delete_queue("D", purge=True)
    assert "D" not in qm.queue_names()
    assert reason_of(lambda: qm.delete_queue("D")) == Reason.UNKNOWN_OBJECT_NAME


def test_delete_refused_with_uncommitted_work(qm, conn):
    from sweepq.engine import PMO

    qm.define_queue("U")
    h = conn.open("U", OO.OUTPUT)
    h.put(b"x", options=PMO.SYNCPOINT)
    h.close()
    assert reason_of(lambda: qm.delete_queue("U", purge=True)) == Reason.OBJECT_IN_USE
    conn.backout()
    qm.delete_queue("U")


def test_closed_manager_refuses_connections():
    qm = QueueManager()
    qm.close()
    assert reason_of(qm.connect) == Reason.CONNECTION_BROKEN
