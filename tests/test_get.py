"""MQGET: option rules, handles, matching, truncation and WAIT (docs/semantics.md §3, §4.1, §5.1, §7)."""

from __future__ import annotations

import threading

import pytest

from sweepq.engine import CC, GMO, MD, MO, OO, PMO, MQError, Persistence, Reason

from helpers import IO, drain


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


# -- §4.1: invalid combinations give 2046 ----------------------------------------------------

INVALID = [
    GMO.SYNCPOINT | GMO.NO_SYNCPOINT,  # rule 1
    GMO.SYNCPOINT | GMO.SYNCPOINT_IF_PERSISTENT,
    GMO.NO_SYNCPOINT | GMO.SYNCPOINT_IF_PERSISTENT,
    GMO.BROWSE_FIRST | GMO.BROWSE_NEXT,  # rule 2
    GMO.BROWSE_NEXT | GMO.MSG_UNDER_CURSOR,
    GMO.SYNCPOINT | GMO.BROWSE_FIRST,  # rule 3
    GMO.SYNCPOINT | GMO.LOCK | GMO.BROWSE_NEXT,
    GMO.SYNCPOINT | GMO.UNLOCK,
    GMO.SYNCPOINT_IF_PERSISTENT | GMO.BROWSE_NEXT,  # rule 4
    GMO.SYNCPOINT_IF_PERSISTENT | GMO.COMPLETE_MSG,
    GMO.MARK_SKIP_BACKOUT,  # rule 5
    GMO.MARK_SKIP_BACKOUT | GMO.NO_SYNCPOINT,
    GMO.WAIT | GMO.SET_SIGNAL,  # rule 6
    GMO.LOCK,  # rule 7
    GMO.UNLOCK | GMO.WAIT,  # rule 8
    GMO.UNLOCK | GMO.ACCEPT_TRUNCATED_MSG,
    0x80000000,  # rule 9: undefined bit
    GMO.CONVERT,  # not built: refused, never accepted and ignored
    GMO.SET_SIGNAL,
    GMO.SYNCPOINT | GMO.CONVERT,
]


@pytest.mark.parametrize("opts", INVALID, ids=lambda o: hex(int(o)))
def test_invalid_get_option_combinations(h, opts):
    h.put(b"x")
    with pytest.raises(MQError) as ei:
        h.get(opts)
    assert ei.value.reason == Reason.OPTIONS_ERROR
    assert ei.value.completion_code == CC.FAILED
    assert h.queue.depth == 1  # nothing was taken


VALID = [
    GMO.NO_WAIT,
    GMO.WAIT | GMO.NO_SYNCPOINT,
    GMO.SYNCPOINT | GMO.ACCEPT_TRUNCATED_MSG,
    GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT,
    GMO.SYNCPOINT_IF_PERSISTENT,
    GMO.FAIL_IF_QUIESCING,
]


@pytest.mark.parametrize(("opts", "says"), [(GMO.CONVERT, "conversion"), (GMO.SET_SIGNAL, "signals")])
def test_an_option_not_built_is_refused_and_says_so(h, opts, says):
    with pytest.raises(MQError) as ei:
        h.get(opts)
    assert ei.value.reason == Reason.OPTIONS_ERROR and says in str(ei.value) and "not built" in str(ei.value)


@pytest.mark.parametrize("opts", VALID, ids=lambda o: hex(int(o)))
def test_valid_get_option_combinations(h, conn, opts):
    h.put(b"x")
    assert h.get(opts, wait_interval=0).data == b"x"
    conn.commit()


# -- §7: handles -----------------------------------------------------------------------------


def test_get_needs_input(conn):
    h = conn.open("Q", OO.OUTPUT)
    h.put(b"x")
    assert reason_of(lambda: h.get()) == Reason.NOT_OPEN_FOR_INPUT


def test_browse_needs_browse_option(h):
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST)) == Reason.NOT_OPEN_FOR_BROWSE
    assert reason_of(lambda: h.get(GMO.MSG_UNDER_CURSOR)) == Reason.NOT_OPEN_FOR_BROWSE


def test_closed_handle_gives_2019(h):
    h.close()
    assert reason_of(lambda: h.get()) == Reason.HOBJ_ERROR
    assert reason_of(lambda: h.put(b"x")) == Reason.HOBJ_ERROR


def test_get_inhibited(qm, h):
    h.put(b"x")
    qm.alter_queue("Q", inhibit_get=True)
    assert reason_of(lambda: h.get()) == Reason.GET_INHIBITED


def test_no_message_available(h):
    with pytest.raises(MQError) as ei:
        h.get()
    e = ei.value
    assert e.reason == Reason.NO_MSG_AVAILABLE == 2033
    assert e.completion_code == CC.FAILED
    assert "Q" in str(e)


# -- §5.1: matching --------------------------------------------------------------------------


def test_match_table_of_seed_002(h):
    h.put(b"1", MD(msg_id=b"M1", correl_id=b"C1"))
    h.put(b"2", MD(msg_id=b"M2", correl_id=b"C2"))
    h.put(b"3", MD(msg_id=b"M1", correl_id=b"C2"))
    h.put(b"4", MD(msg_id=b"M2", correl_id=b"C1"))
    assert h.get(msg_id=b"M2").data == b"2"  # (X, NONE): first with that MsgId
    assert h.get(correl_id=b"C1").data == b"1"  # (NONE, Y): first with that CorrelId
    assert h.get(msg_id=b"M2", correl_id=b"C1").data == b"4"  # (X, Y): both
    assert h.get(msg_id=bytes(24), correl_id=bytes(24)).data == b"3"  # NONE, NONE: first


def test_match_options_select_which_fields_count(h):
    h.put(b"a", MD(msg_id=b"M1", correl_id=b"C1"))
    h.put(b"b", MD(msg_id=b"M2", correl_id=b"C2"))
    # MsgId given but MATCH_MSG_ID not set: only the CorrelId counts.
    assert h.get(match=MO.MATCH_CORREL_ID, msg_id=b"M1", correl_id=b"C2").data == b"b"
    # MO.NONE: any message, whatever the fields say.
    assert h.get(match=MO.NONE, msg_id=b"nope").data == b"a"


def test_undefined_match_bit(h):
    h.put(b"x")
    assert reason_of(lambda: h.get(match=0x400)) == Reason.MATCH_OPTIONS_ERROR


def test_no_match_is_2033_and_leaves_messages(h):
    h.put(b"x", MD(correl_id=b"C"))
    assert reason_of(lambda: h.get(correl_id=b"other")) == Reason.NO_MSG_AVAILABLE
    assert drain(h) == [b"x"]


def test_match_by_group_seq_and_offset(h):
    h.put(b"s1", MD(group_id=b"G", msg_seq_number=1))
    h.put(b"s2", MD(group_id=b"G", msg_seq_number=2))
    h.put(b"o", MD(group_id=b"H", msg_seq_number=2, offset=10))
    assert h.get(match=MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER, group_id=b"G", msg_seq_number=2).data == b"s2"
    assert h.get(match=MO.MATCH_OFFSET, offset=10).data == b"o"


def test_stale_or_foreign_token_matches_nothing(h):
    t = h.put(b"x").msg_token
    assert h.get(match=MO.MATCH_MSG_TOKEN, msg_token=t).data == b"x"
    h.put(b"y")
    assert reason_of(lambda: h.get(match=MO.MATCH_MSG_TOKEN, msg_token=t)) == Reason.NO_MSG_AVAILABLE
    assert reason_of(lambda: h.get(match=MO.MATCH_MSG_TOKEN, msg_token=b"\1" * 16)) == Reason.NO_MSG_AVAILABLE


def test_token_with_wait_is_2331(h):
    t = h.put(b"x").msg_token
    assert reason_of(lambda: h.get(GMO.WAIT, match=MO.MATCH_MSG_TOKEN, msg_token=t)) == Reason.MSG_TOKEN_ERROR


# -- §3: truncation ----------------------------------------------------------------------------


def test_truncated_failed_keeps_the_message(h):
    h.put(b"hello")
    m = h.get(buffer_length=3)
    assert m.reason == Reason.TRUNCATED_MSG_FAILED == 2080
    assert m.completion_code == CC.WARNING
    assert m.data_length == 5 and m.data == b"hel"
    assert h.get().data == b"hello"  # still there


def test_truncated_accepted_removes_the_message(h):
    h.put(b"hello")
    h.put(b"next")
    m = h.get(GMO.ACCEPT_TRUNCATED_MSG, buffer_length=3)
    assert m.reason == Reason.TRUNCATED_MSG_ACCEPTED == 2079
    assert (m.data, m.data_length) == (b"hel", 5)
    assert drain(h) == [b"next"]


def test_zero_buffer_with_accept_discards_data(h):
    h.put(b"hello")
    m = h.get(GMO.ACCEPT_TRUNCATED_MSG, buffer_length=0)
    assert (m.data, m.data_length, m.reason) == (b"", 5, Reason.TRUNCATED_MSG_ACCEPTED)
    assert h.queue.depth == 0


def test_buffer_big_enough_is_ok(h):
    h.put(b"hello")
    m = h.get(buffer_length=5)
    assert m.reason == Reason.NONE and m.completion_code == CC.OK


def test_negative_buffer_length(h):
    h.put(b"x")
    assert reason_of(lambda: h.get(buffer_length=-1)) == Reason.BUFFER_LENGTH_ERROR


# -- syncpoint options -----------------------------------------------------------------------------


def test_syncpoint_if_persistent(qm, conn, h):
    h.put(b"np", MD(persistence=Persistence.NOT_PERSISTENT))
    h.put(b"p", MD(persistence=Persistence.PERSISTENT))
    assert h.get(GMO.SYNCPOINT_IF_PERSISTENT).data == b"np"  # outside the unit of work
    assert h.get(GMO.SYNCPOINT_IF_PERSISTENT).data == b"p"  # inside it
    assert conn.uncommitted == 1
    conn.backout()
    assert drain(h) == [b"p"]


def test_default_get_is_outside_a_unit_of_work(h, conn):
    h.put(b"x")
    h.get()
    conn.backout()
    assert h.queue.depth == 0


# -- WAIT, driven by the manual clock -----------------------------------------------------------


class Finished:
    """Counts finished helper threads; a test waits on it instead of sleeping."""

    def __init__(self):
        self.n = 0
        self.cond = threading.Condition()

    def add(self):
        with self.cond:
            self.n += 1
            self.cond.notify_all()

    def wait_for(self, n, timeout=10.0):
        with self.cond:
            return self.cond.wait_for(lambda: self.n >= n, timeout)


def _in_thread(fn, finished: Finished | None = None):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e
        finally:
            if finished is not None:
                finished.add()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_wait_times_out_with_2033_on_the_virtual_clock(qm, clock):
    c = qm.connect()
    h = c.open("Q", IO)
    t, box = _in_thread(lambda: h.get(GMO.WAIT, wait_interval=5000))
    assert clock.wait_for_waiters(1)
    clock.advance(4.999)
    assert clock.wait_for_waiters(1)  # still waiting
    assert t.is_alive()
    clock.advance(0.002)
    t.join(10)
    assert not t.is_alive()
    assert box["error"].reason == Reason.NO_MSG_AVAILABLE


def test_wait_is_satisfied_by_a_put(qm, clock, h):
    c = qm.connect()
    g = c.open("Q", IO)
    t, box = _in_thread(lambda: g.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1)
    h.put(b"arrived")
    t.join(10)
    assert box["value"].data == b"arrived"


def test_wait_is_satisfied_by_a_commit_not_by_the_uncommitted_put(qm, conn, clock, h):
    c = qm.connect()
    g = c.open("Q", IO)
    t, box = _in_thread(lambda: g.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1)
    h.put(b"later", options=PMO.SYNCPOINT)
    assert clock.wait_for_waiters(1) and t.is_alive()
    conn.commit()
    t.join(10)
    assert box["value"].data == b"later"


def test_specific_waiter_is_preferred_and_only_one_general_waiter_woken(qm, clock, h):
    conns = [qm.connect() for _ in range(3)]
    general = [conns[i].open("Q", IO) for i in range(2)]
    specific = conns[2].open("Q", IO)
    fin = Finished()
    tg = [_in_thread(lambda g=g: g.get(GMO.WAIT, wait_interval=10_000), fin) for g in general]
    ts, sbox = _in_thread(lambda: specific.get(GMO.WAIT, wait_interval=10_000, correl_id=b"ME"))
    assert clock.wait_for_waiters(3)
    h.put(b"for-me", MD(correl_id=b"ME"))
    ts.join(10)
    assert sbox["value"].data == b"for-me"
    h.put(b"one")
    # Exactly one general waiter gets it; the other keeps waiting until its interval ends.
    assert fin.wait_for(1)
    assert sum("value" in b for _, b in tg) == 1
    assert clock.wait_for_waiters(1) and clock.waiters == 1
    clock.advance(11)
    for t, _ in tg:
        t.join(10)
    results = sorted("value" in b for _, b in tg)
    assert results == [False, True]


def test_inhibit_get_fails_waiters_with_2016(qm, clock):
    g = qm.connect().open("Q", IO)
    t, box = _in_thread(lambda: g.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1)
    qm.alter_queue("Q", inhibit_get=True)
    t.join(10)
    assert box["error"].reason == Reason.GET_INHIBITED


def test_closing_the_manager_breaks_waits(qm, clock):
    g = qm.connect().open("Q", IO)
    t, box = _in_thread(lambda: g.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1)
    qm.close()
    t.join(10)
    assert box["error"].reason == Reason.CONNECTION_BROKEN


def test_bad_wait_interval(h):
    assert reason_of(lambda: h.get(GMO.WAIT, wait_interval=-2)) == Reason.WAIT_INTERVAL_ERROR


def test_wait_zero_does_not_block(h):
    assert reason_of(lambda: h.get(GMO.WAIT, wait_interval=0)) == Reason.NO_MSG_AVAILABLE


def test_put_in_syncpoint_and_get_with_wait_no_polling(qm, clock, conn, h):
    """A waiter is woken by notify, not by polling: with the clock stopped it still gets it."""
    g = qm.connect().open("Q", IO)
    t, box = _in_thread(lambda: g.get(GMO.WAIT, wait_interval=1000))
    assert clock.wait_for_waiters(1)
    h.put(b"x", options=PMO.NO_SYNCPOINT)
    t.join(10)
    assert box["value"].data == b"x"
