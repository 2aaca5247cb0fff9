"""MQPUT: descriptor rules, identifiers, limits and inhibits (docs/semantics.md §4.2, §6.1, §9)."""

from __future__ import annotations

import pytest

from sweepq.engine import (
    CC,
    MD,
    MSGID_NONE,
    OO,
    PMO,
    MessageSettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
)

from helpers import IO


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    assert ei.value.completion_code == CC.FAILED
    return ei.value.reason


def test_priority_above_max_is_a_warning_and_stored_at_nine(h):
    r = h.put(b"x", MD(priority=12))
    assert r.reason == Reason.PRIORITY_EXCEEDS_MAXIMUM
    assert r.completion_code == CC.WARNING
    assert r.md.priority == 9
    assert h.get().priority == 9


def test_priority_below_minus_one_fails(h):
    assert reason_of(lambda: h.put(b"x", MD(priority=-2))) == Reason.PRIORITY_ERROR


@pytest.mark.parametrize("pers", [-1, 3, 7])
def test_bad_persistence(h, pers):
    assert reason_of(lambda: h.put(b"x", MD(persistence=pers))) == Reason.PERSISTENCE_ERROR


def test_persistence_as_queue_default(qm, conn):
    qm.define_queue("PQ", default_persistence=Persistence.PERSISTENT)
    h = conn.open("PQ", IO)
    assert h.put(b"x").md.persistence == Persistence.PERSISTENT
    assert h.put(b"y", MD(persistence=Persistence.NOT_PERSISTENT)).md.persistence == 0


def test_message_too_big_for_queue_and_for_manager(qm, conn):
    qm.define_queue("SMALL", max_msg_length=10)
    h = conn.open("SMALL", IO)
    h.put(b"x" * 10)
    assert reason_of(lambda: h.put(b"x" * 11)) == Reason.MSG_TOO_BIG_FOR_Q
    qm.max_msg_length = 20
    assert reason_of(lambda: h.put(b"x" * 21)) == Reason.MSG_TOO_BIG_FOR_Q_MGR


def test_queue_full_counts_uncommitted_puts(qm, conn):
    qm.define_queue("FULL", max_depth=2)
    h = conn.open("FULL", IO)
    h.put(b"1")
    h.put(b"2", options=PMO.SYNCPOINT)
    assert reason_of(lambda: h.put(b"3")) == Reason.Q_FULL
    h.get()
    h.put(b"3")


def test_put_inhibited(qm, h):
    qm.alter_queue("Q", inhibit_put=True)
    assert reason_of(lambda: h.put(b"x")) == Reason.PUT_INHIBITED
    qm.alter_queue("Q", inhibit_put=False)
    h.put(b"x")


def test_msg_id_generated_unique_and_returned(h):
    ids = {h.put(b"x").msg_id for _ in range(100)}
    assert len(ids) == 100
    assert MSGID_NONE not in ids
    r = h.put(b"y")
    assert h.get(msg_id=r.msg_id).md.msg_id == r.md.msg_id


def test_explicit_msg_id_kept_unless_new_msg_id(h):
    r = h.put(b"x", MD(msg_id=b"mine"))
    assert r.msg_id == b"mine".ljust(24, b"\0")
    r2 = h.put(b"y", MD(msg_id=b"mine"), PMO.NEW_MSG_ID)
    assert r2.msg_id != r.msg_id
    assert r2.msg_id != MSGID_NONE


def test_new_correl_id_is_generated_and_unique(h):
    a = h.put(b"x", MD(), PMO.NEW_CORREL_ID).correl_id
    b = h.put(b"x", MD(), PMO.NEW_CORREL_ID).correl_id
    assert a != b and a != bytes(24)
    assert h.get(correl_id=b).correl_id == b


def test_put_returns_a_token_that_gets_that_message(h):
    from sweepq.engine import MO

    tokens = [h.put(str(i).encode()).msg_token for i in range(5)]
    assert len(set(tokens)) == 5
    assert h.get(match=MO.MATCH_MSG_TOKEN, msg_token=tokens[3]).data == b"3"


def test_identifier_too_long_or_wrong_type(h):
    assert reason_of(lambda: h.put(b"x", MD(msg_id=b"x" * 25))) == Reason.MD_ERROR
    assert reason_of(lambda: h.put(b"x", MD(correl_id="text"))) == Reason.MD_ERROR


@pytest.mark.parametrize(
    "md,reason",
    [
        (MD(expiry=0), Reason.EXPIRY_ERROR),
        (MD(expiry=-5), Reason.EXPIRY_ERROR),
        (MD(msg_flags=0x100), Reason.MSG_FLAGS_ERROR),
        (MD(msg_seq_number=0), Reason.MSG_SEQ_NUMBER_ERROR),
        (MD(offset=-1), Reason.OFFSET_ERROR),
    ],
)
def test_descriptor_field_errors(h, md, reason):
    assert reason_of(lambda: h.put(b"x", md)) == reason


@pytest.mark.parametrize(
    "opts",
    [
        PMO.SYNCPOINT | PMO.NO_SYNCPOINT,
        PMO.DEFAULT_CONTEXT | PMO.NO_CONTEXT,
        0x10000000,
        PMO.SET_ALL_CONTEXT,  # not built: refused, never accepted and ignored
        PMO.PASS_IDENTITY_CONTEXT,
        PMO.ALTERNATE_USER_AUTHORITY,
    ],
)
def test_put_option_errors(h, opts):
    assert reason_of(lambda: h.put(b"x", options=opts)) == Reason.OPTIONS_ERROR


def test_data_must_be_bytes_like(h):
    h.put(bytearray(b"ba"))
    h.put(memoryview(b"mv"))
    with pytest.raises(MQError) as ei:
        h.put("text")
    assert "encode" in str(ei.value)


def test_put_on_handle_not_open_for_output(conn):
    h = conn.open("Q", OO.INPUT_SHARED)
    assert reason_of(lambda: h.put(b"x")) == Reason.NOT_OPEN_FOR_OUTPUT


def test_group_fields_round_trip(h):
    from sweepq.engine import MF, GroupStatus

    r = h.put(b"x", MD(group_id=b"G1", msg_seq_number=3, offset=0, msg_flags=MF.LAST_MSG_IN_GROUP))
    m = h.get()
    assert m.md.group_id == b"G1".ljust(24, b"\0")
    assert m.md.msg_seq_number == 3
    assert m.group_status == GroupStatus.LAST_MSG_IN_GROUP
    # docs/semantics.md §6.2: LAST_MSG_IN_GROUP makes the stored copy also carry MSG_IN_GROUP.
    assert r.md.msg_flags == MF.LAST_MSG_IN_GROUP | MF.MSG_IN_GROUP


def test_expiry_counts_down_and_expired_messages_are_discarded(h, clock):
    h.put(b"short", MD(expiry=10))  # one second
    clock.advance(0.5)
    m = h.get()
    assert m.data == b"short"
    assert m.md.expiry == 5  # what remains, in tenths of a second
    h.put(b"dies", MD(expiry=10))
    h.put(b"lives", MD(expiry=1000))
    clock.advance(2.0)
    assert h.get().data == b"lives"  # "dies" expired and was discarded on the way
    assert h.queue.expired == 1
    assert h.queue.depth == 0


def test_the_queue_managers_max_msg_length_holds_below_the_queues():
    """MAXMSGL of the manager below the queue's: the manager's limit applies (2031)."""
    with QueueManager(sweeping=SweeperSettings(run=False), messages=MessageSettings(max_msg_length=100)) as qm:
        qm.define_queue("Q", max_msg_length=1000)
        h = qm.connect().open("Q", OO.OUTPUT)
        for put in (lambda: h.put(b"x" * 101), lambda: h.put_many([b"x", b"y" * 101])):
            with pytest.raises(MQError) as ei:
                put()
            assert ei.value.reason == Reason.MSG_TOO_BIG_FOR_Q_MGR
        h.put(b"x" * 100)
