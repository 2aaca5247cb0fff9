"""Browse cursors (seed 001, docs/semantics.md §3, §5.1-§5.3), in memory and fully swept.

Every test runs twice (the ``env`` fixture): once on the queue in memory, once after the
sweeper has swept everything sweepable (tests/browse_env.py). The expected results are the
same; the swept world also checks that browsing never brings a blob back.
"""

from __future__ import annotations

import pytest
from browse_env import BIO, WORLDS, browse_all, in_thread, make_env, reason_of

from sweepq.engine import CC, GMO, MD, MO, OO, PMO, DeliverySequence, MQError, Reason
from sweepq.engine.cursor import CACHE_BLOBS

from helpers import drain


@pytest.fixture(params=WORLDS)
def env(request):
    with make_env(request.param) as e:
        yield e


def put_all(h, items, name_prio=None):
    for item in items:
        if isinstance(item, tuple):
            data, prio = item
            h.put(data, MD(priority=prio))
        else:
            h.put(item)


# -- seed 001: the cursor ------------------------------------------------------------------------


def test_browse_next_straight_after_open_starts_at_the_first_message(env):
    """Seed 001: the cursor starts before the first message; BROWSE_NEXT needs no FIRST."""
    h = env.handle()
    put_all(h, [b"a", b"b", b"c"])
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT).data == b"a"
    assert b.get(GMO.BROWSE_NEXT).data == b"b"
    assert b.get(GMO.BROWSE_FIRST).data == b"a"


def test_browse_leaves_the_messages_on_the_queue(env):
    h = env.handle()
    put_all(h, [b"%d" % i for i in range(10)])
    env.settle()
    before = env.stats()
    assert browse_all(h) == [b"%d" % i for i in range(10)]
    assert env.qm.inquire_queue("Q").current_depth == 10
    after = env.stats()
    # Browse never unsweeps: the chain and its counters are as they were.
    assert (after.unsweeps, after.msgs_swept, after.msgs_in_memory) == (
        before.unsweeps,
        before.msgs_swept,
        before.msgs_in_memory,
    )
    if env.swept:
        assert after.msgs_swept == 10 and after.msgs_in_memory == 0
    assert drain(h) == [b"%d" % i for i in range(10)]


def test_browse_order_is_get_order_priority_then_arrival(env):
    h = env.handle()
    put_all(h, [(b"p5a", 5), (b"p2", 2), (b"p8", 8), (b"p5b", 5), (b"p0", 0)])
    env.settle()
    assert browse_all(h) == [b"p8", b"p5a", b"p5b", b"p2", b"p0"]


def test_fifo_queue_browse_sees_later_arrivals_and_stays_at_the_end(env):
    """Seed 001, FIFO: messages put while browsing are seen; at the end 2033 and the cursor
    stays, so a later BROWSE_NEXT finds the next arrival."""
    h = env.handle("F")
    put_all(h, [(b"a", 1), (b"b", 9), (b"c", 5)])
    env.settle()
    assert browse_all(h) == [b"a", b"b", b"c"]  # FIFO: priority does not reorder
    assert reason_of(lambda: h.get(GMO.BROWSE_NEXT)) == Reason.NO_MSG_AVAILABLE
    h.put(b"d", MD(priority=9))
    assert h.get(GMO.BROWSE_NEXT).data == b"d"
    assert reason_of(lambda: h.get(GMO.BROWSE_NEXT)) == Reason.NO_MSG_AVAILABLE
    assert h.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"d"  # the cursor stayed on d


def test_priority_queue_higher_arrivals_only_after_browse_first(env):
    """Seed 001, priority: BROWSE_NEXT sees arrivals of priority <= the cursor's message
    (equal ones after it), not higher ones until BROWSE_FIRST."""
    h = env.handle()
    put_all(h, [(b"p7", 7), (b"p5a", 5), (b"p3", 3)])
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT).data == b"p7"
    assert b.get(GMO.BROWSE_NEXT).data == b"p5a"
    put_all(h, [(b"p9", 9), (b"p5b", 5), (b"p1", 1), (b"p6", 6)])
    assert browse_all(b, first=False) == [b"p5b", b"p3", b"p1"]
    assert browse_all(b) == [b"p9", b"p7", b"p6", b"p5a", b"p5b", b"p3", b"p1"]
    c = env.handle()  # a new open: a new cursor, before the (new) first message
    assert c.get(GMO.BROWSE_NEXT).data == b"p9"


def test_uncommitted_messages_are_skipped_for_good_by_that_pass(env):
    """Seed 001: an uncommitted message is never visible to a browse; once the cursor has
    passed it, it stays behind even after commit, until BROWSE_FIRST."""
    h = env.handle()
    other = env.qm.connect()
    o = other.open("Q", BIO)
    h.put(b"a")
    o.put(b"b", options=PMO.SYNCPOINT)
    h.put(b"c")
    env.settle()
    b = env.handle()
    assert browse_all(b) == [b"a", b"c"]
    other.commit()
    assert reason_of(lambda: b.get(GMO.BROWSE_NEXT)) == Reason.NO_MSG_AVAILABLE
    assert browse_all(b) == [b"a", b"b", b"c"]


def test_uncommitted_message_beyond_the_cursor_is_seen_once_committed(env):
    """sweepq's reading of "skipped": only what the cursor has stepped over. At the end of the
    queue the cursor stays, so a message committed later beyond it is seen."""
    h = env.handle()
    other = env.qm.connect()
    h.put(b"a")
    other.open("Q", BIO).put(b"b", options=PMO.SYNCPOINT)
    env.settle()
    b = env.handle()
    assert browse_all(b) == [b"a"]
    other.commit()
    assert b.get(GMO.BROWSE_NEXT).data == b"b"


def test_a_message_got_under_syncpoint_is_invisible_and_reappears_on_backout(env):
    h = env.handle()
    put_all(h, [b"a", b"b", b"c"])
    env.settle()
    getter = env.qm.connect()
    g = getter.open("Q", BIO)
    assert g.get(GMO.SYNCPOINT).data == b"a"
    b = env.handle()
    assert browse_all(b) == [b"b", b"c"]
    getter.backout()
    assert browse_all(b) == [b"a", b"b", b"c"]


def test_several_handles_have_independent_cursors(env):
    h = env.handle()
    put_all(h, [b"%d" % i for i in range(6)])
    env.settle()
    b1, b2 = env.handle(), env.handle()
    assert b1.get(GMO.BROWSE_NEXT).data == b"0"
    assert b1.get(GMO.BROWSE_NEXT).data == b"1"
    assert b2.get(GMO.BROWSE_NEXT).data == b"0"
    assert b1.get(GMO.BROWSE_NEXT).data == b"2"
    assert b2.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"0"
    assert b1.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"2"


def test_browse_only_handle_browses_but_cannot_get(env):
    h = env.handle()
    h.put(b"x")
    env.settle()
    b = env.handle(options=OO.BROWSE)
    assert b.get(GMO.BROWSE_FIRST).data == b"x"
    assert reason_of(lambda: b.get()) == Reason.NOT_OPEN_FOR_INPUT
    assert reason_of(lambda: b.get(GMO.MSG_UNDER_CURSOR)) == Reason.NOT_OPEN_FOR_INPUT


def test_browse_is_allowed_while_another_handle_holds_exclusive_input(env):
    x = env.qm.connect().open("Q", OO.INPUT_EXCLUSIVE | OO.OUTPUT)
    x.put(b"x")
    env.settle()
    b = env.handle(options=OO.BROWSE)
    assert b.get(GMO.BROWSE_FIRST).data == b"x"


def test_change_to_fifo_keeps_the_order_of_queued_messages(env):
    """Seed 001 "Change to queue sequence": queued messages keep their order; later ones
    take the queue's default priority."""
    h = env.handle()
    put_all(h, [(b"p1", 1), (b"p8", 8)])
    env.settle()
    env.qm.alter_queue("Q", delivery_sequence=DeliverySequence.FIFO)
    put_all(h, [(b"late9", 9)])  # goes to the default priority's lane (0)
    assert browse_all(h) == [b"p8", b"p1", b"late9"]


# -- under the cursor --------------------------------------------------------------------------------


def test_browse_first_on_nothing_resets_the_cursor(env):
    conn = env.qm.connect()
    h = conn.open("Q", BIO)
    h.put(b"a")
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT).data == b"a"
    assert h.get().data == b"a"
    assert reason_of(lambda: b.get(GMO.BROWSE_FIRST)) == Reason.NO_MSG_AVAILABLE
    assert reason_of(lambda: b.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    h.put(b"b", options=PMO.SYNCPOINT)
    h.put(b"c")
    assert b.get(GMO.BROWSE_NEXT).data == b"c"
    conn.commit()
    assert reason_of(lambda: b.get(GMO.BROWSE_NEXT)) == Reason.NO_MSG_AVAILABLE  # b: skipped
    assert reason_of(lambda: b.get(GMO.BROWSE_FIRST | GMO.BROWSE_NEXT)) == Reason.OPTIONS_ERROR
    assert b.get(GMO.BROWSE_FIRST).data == b"b"


def test_browse_msg_under_cursor_needs_a_browse_first(env):
    h = env.handle()
    h.put(b"x")
    env.settle()
    b = env.handle()
    assert reason_of(lambda: b.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert reason_of(lambda: b.get(GMO.MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    b.get(GMO.BROWSE_NEXT)
    m = b.get(GMO.BROWSE_MSG_UNDER_CURSOR, match=MO.MATCH_CORREL_ID, correl_id=b"ignored")
    assert m.data == b"x"  # match options are ignored under the cursor


def test_msg_under_cursor_removes_the_browsed_message_and_the_cursor_goes_on(env):
    h = env.handle()
    put_all(h, [b"a", b"b", b"c", b"d"])
    env.settle()
    assert h.get(GMO.BROWSE_FIRST).data == b"a"
    assert h.get(GMO.BROWSE_NEXT).data == b"b"
    m = h.get(GMO.MSG_UNDER_CURSOR, msg_id=b"not-b", correl_id=b"ignored")  # ids ignored (seed 001)
    assert m.data == b"b"
    assert reason_of(lambda: h.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert reason_of(lambda: h.get(GMO.MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert h.get(GMO.BROWSE_NEXT).data == b"c"
    assert drain(h) == [b"a", b"c", b"d"]


def test_browse_and_remove_loop_drains_in_order(env):
    h = env.handle()
    put_all(h, [(b"%02d" % i, i % 3) for i in range(20)])
    env.settle()
    expect = browse_all(env.handle())
    got = []
    while True:
        try:
            h.get(GMO.BROWSE_NEXT)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            break
        got.append(h.get(GMO.MSG_UNDER_CURSOR).data)
    assert got == expect and env.qm.inquire_queue("Q").current_depth == 0


def test_msg_under_cursor_gone_to_another_handle_is_2034(env):
    h = env.handle()
    put_all(h, [b"a", b"b"])
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT).data == b"a"
    assert h.get().data == b"a"  # another program took it (seed 001)
    assert reason_of(lambda: b.get(GMO.MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert reason_of(lambda: b.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert b.get(GMO.BROWSE_NEXT).data == b"b"  # the cursor stays by position


def test_msg_under_cursor_with_syncpoint_commit_and_backout(env):
    conn = env.qm.connect()
    h = conn.open("Q", BIO)
    put_all(h, [b"a", b"b"])
    env.settle()
    h.get(GMO.BROWSE_NEXT)
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT).data == b"a"
    assert conn.uncommitted == 1
    assert browse_all(env.handle()) == [b"b"]
    conn.backout()
    m = env.handle().get(GMO.BROWSE_FIRST)
    assert (m.data, m.backout_count) == (b"a", 1)
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT).data == b"a"  # the cursor is still on it
    conn.commit()
    assert browse_all(env.handle()) == [b"b"]


def test_msg_under_cursor_with_syncpoint_if_persistent(env):
    conn = env.qm.connect()
    h = conn.open("Q", BIO)
    h.put(b"p", MD(persistence=1))
    h.put(b"n", MD(persistence=0))
    env.settle()
    h.get(GMO.BROWSE_NEXT)
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT_IF_PERSISTENT).data == b"p"
    h.get(GMO.BROWSE_NEXT)
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT_IF_PERSISTENT).data == b"n"
    assert conn.uncommitted == 1
    conn.backout()
    assert drain(h) == [b"p"]


# -- the cursor across sweeps and unsweeps -------------------------------------------------------


@pytest.mark.parametrize("kind", ["selector", "correl"])
def test_a_selective_browse_past_more_blobs_than_the_cache_holds_ends(env, kind):
    """A browse whose match skips many blobs (a selector reads every blob it passes) must
    end: it read one blob, the walk began again from the first, and with more passed blobs
    than the cursor's cache holds each read evicted the next one needed, for ever. Run in a
    thread with a deadline, so that a hang fails instead of stopping the suite."""
    h = env.handle()
    for i in range(40):
        h.put(b"%02d" % i, MD(correl_id=b"last" if i >= 38 else b"x", properties={"N": i}))
    env.settle()
    if env.swept:
        assert len(env.qm._queue("Q").lanes.lanes[0].chain) > 3 * CACHE_BLOBS
    if kind == "selector":
        b, kw = env.qm.connect().open("Q", BIO, selector="N >= 38"), {}
    else:
        b, kw = env.handle(), {"correl_id": b"last"}
    t, box = in_thread(lambda: browse_all(b, **kw))
    t.join(30)
    assert not t.is_alive(), "the browse did not end"
    assert box == {"value": [b"38", b"39"]}


def test_cursor_survives_sweep_and_unsweep_around_it(env):
    h = env.handle()
    put_all(h, [b"%02d" % i for i in range(30)])
    b = env.handle()
    got = [b.get(GMO.BROWSE_NEXT).data for _ in range(7)]
    env.qm.sweeper.run_once()  # sweep (in both worlds): the cursor's message goes into a blob
    env.qm.sweeper.run_once()
    got += [b.get(GMO.BROWSE_NEXT).data for _ in range(5)]
    assert b.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"11"
    g = env.handle()
    assert [g.get().data for _ in range(3)] == [b"00", b"01", b"02"]  # unsweeps what it needs
    got += browse_all(b, first=False)
    assert got == [b"%02d" % i for i in range(30)]
    h.put(b"30")
    assert b.get(GMO.BROWSE_NEXT).data == b"30"


def test_browse_of_a_swept_queue_reads_blobs_into_a_bounded_cache(env):
    h = env.handle()
    put_all(h, [b"%02d" % i for i in range(40)])
    env.settle()
    b = env.handle()
    assert browse_all(b) == [b"%02d" % i for i in range(40)]
    assert len(b._s.cursor.cache) <= CACHE_BLOBS
    s = env.stats()
    assert s.unsweeps == 0 and s.msgs_unswept == 0
    if env.swept:
        assert s.msgs_swept == 40 and b._s.cursor.cache  # read for the cursor itself
        assert all(blob.loaded is None for lane in env.qm._queue("Q").lanes for blob in lane.chain)


def test_rear_list_and_chain_and_front_in_one_lane(env):
    h = env.handle()
    put_all(h, [b"a%d" % i for i in range(8)])
    env.settle()
    put_all(h, [b"b%d" % i for i in range(4)])  # swept world: behind the chain (rear list)
    b = env.handle()
    assert browse_all(b) == [b"a%d" % i for i in range(8)] + [b"b%d" % i for i in range(4)]


# -- truncation --------------------------------------------------------------------------------------


def test_zero_buffer_with_accept_truncated_learns_the_length_then_reads_under_cursor(env):
    """Seed 001 "message length unknown": browse with ACCEPT_TRUNCATED_MSG and buffer 0
    (2079, cursor on it), then BROWSE_MSG_UNDER_CURSOR with the length."""
    h = env.handle()
    h.put(b"x" * 100)
    h.put(b"second")
    env.settle()
    m = h.get(GMO.BROWSE_FIRST | GMO.ACCEPT_TRUNCATED_MSG, buffer_length=0)
    assert (m.reason, m.completion_code, m.data, m.data_length) == (Reason.TRUNCATED_MSG_ACCEPTED, CC.WARNING, b"", 100)
    full = h.get(GMO.BROWSE_MSG_UNDER_CURSOR, buffer_length=m.data_length)
    assert full.data == b"x" * 100 and full.reason == Reason.NONE
    assert h.get(GMO.BROWSE_NEXT).data == b"second"


def test_2080_on_browse_next_leaves_the_cursor(env):
    h = env.handle()
    put_all(h, [b"a", b"long message", b"c"])
    env.settle()
    assert h.get(GMO.BROWSE_NEXT).data == b"a"
    m = h.get(GMO.BROWSE_NEXT, buffer_length=4)
    assert (m.reason, m.data, m.data_length) == (Reason.TRUNCATED_MSG_FAILED, b"long", 12)
    assert h.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"a"  # unchanged
    assert h.get(GMO.BROWSE_NEXT).data == b"long message"


def test_2080_on_browse_first_puts_the_cursor_before_the_first_message(env):
    h = env.handle()
    put_all(h, [b"long message", b"b"])
    env.settle()
    h.get(GMO.BROWSE_FIRST)
    h.get(GMO.BROWSE_NEXT)
    m = h.get(GMO.BROWSE_FIRST, buffer_length=1)
    assert m.reason == Reason.TRUNCATED_MSG_FAILED
    assert reason_of(lambda: h.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert h.get(GMO.BROWSE_NEXT).data == b"long message"


def test_truncation_under_the_cursor(env):
    h = env.handle()
    h.put(b"0123456789")
    env.settle()
    h.get(GMO.BROWSE_FIRST)
    m = h.get(GMO.MSG_UNDER_CURSOR, buffer_length=3)
    assert m.reason == Reason.TRUNCATED_MSG_FAILED and env.qm.inquire_queue("Q").current_depth == 1
    m = h.get(GMO.MSG_UNDER_CURSOR | GMO.ACCEPT_TRUNCATED_MSG, buffer_length=0)
    assert (m.reason, m.data, m.data_length) == (Reason.TRUNCATED_MSG_ACCEPTED, b"", 10)
    assert env.qm.inquire_queue("Q").current_depth == 0


# -- matching with browse (seed 002) -------------------------------------------------------------


def test_match_with_browse_next_means_the_next_after_the_cursor(env):
    h = env.handle()
    for i in range(9):
        h.put(b"%d" % i, MD(correl_id=b"even" if i % 2 == 0 else b"odd"))
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_FIRST, correl_id=b"odd").data == b"1"
    assert b.get(GMO.BROWSE_NEXT, correl_id=b"odd").data == b"3"
    assert b.get(GMO.BROWSE_NEXT).data == b"4"
    assert b.get(GMO.BROWSE_NEXT, correl_id=b"even").data == b"6"
    assert b.get(GMO.BROWSE_FIRST, correl_id=b"even").data == b"0"
    # NONE values are wildcards; seed 001's "reset MsgId/CorrelId" is not needed here.
    assert b.get(GMO.BROWSE_NEXT, msg_id=bytes(24), correl_id=bytes(24)).data == b"1"


def test_match_on_msg_id_and_group_fields_with_browse(env):
    h = env.handle()
    r = [h.put(b"%d" % i, MD(group_id=b"G", msg_seq_number=i + 1)) for i in range(5)]
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT, match=MO.MATCH_MSG_ID, msg_id=r[3].msg_id).data == b"3"
    assert reason_of(lambda: b.get(GMO.BROWSE_NEXT, match=MO.MATCH_MSG_ID, msg_id=r[1].msg_id)) == 2033
    both = MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER
    assert b.get(GMO.BROWSE_FIRST, match=both, group_id=b"G", msg_seq_number=2).data == b"1"


def test_msg_token_with_browse_next_only_beyond_the_cursor(env):
    h = env.handle()
    toks = [h.put(b"%d" % i).msg_token for i in range(5)]
    env.settle()
    b = env.handle()
    tok = MO.MATCH_MSG_TOKEN
    assert b.get(GMO.BROWSE_NEXT, match=tok, msg_token=toks[2]).data == b"2"
    assert reason_of(lambda: b.get(GMO.BROWSE_NEXT, match=tok, msg_token=toks[1])) == Reason.NO_MSG_AVAILABLE
    assert b.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"2"  # 2033 left the cursor
    assert b.get(GMO.BROWSE_NEXT, match=tok, msg_token=toks[4]).data == b"4"
    assert b.get(GMO.BROWSE_FIRST, match=tok, msg_token=toks[1]).data == b"1"
    m = b.get(GMO.BROWSE_FIRST, match=tok | MO.MATCH_CORREL_ID, msg_token=toks[0], correl_id=bytes(24))
    assert m.data == b"0"


def test_msg_token_rules_wait_and_stale(env):
    h = env.handle()
    toks = [h.put(b"%d" % i).msg_token for i in range(2)]
    env.settle()
    assert h.get().data == b"0"
    tok = MO.MATCH_MSG_TOKEN
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST, match=tok, msg_token=toks[0])) == Reason.NO_MSG_AVAILABLE
    e = reason_of(lambda: h.get(GMO.BROWSE_FIRST | GMO.WAIT, wait_interval=0, match=tok, msg_token=toks[1]))
    assert e == Reason.MSG_TOKEN_ERROR
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST, match=tok, msg_token=b"short")) == Reason.MSG_TOKEN_ERROR
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST, match=tok, msg_token=bytes(16))) == Reason.NO_MSG_AVAILABLE
    assert h.get(GMO.BROWSE_FIRST, match=tok, msg_token=toks[1]).data == b"1"


# -- waiting -------------------------------------------------------------------------------------------


def test_browse_wait_is_satisfied_by_a_put_and_times_out_on_the_clock(env):
    h = env.handle()
    h.put(b"a")
    env.settle()
    b = env.handle()
    assert b.get(GMO.BROWSE_NEXT).data == b"a"
    t, box = in_thread(lambda: b.get(GMO.BROWSE_NEXT | GMO.WAIT, wait_interval=-1))
    assert env.clock.wait_for_waiters(1)
    h.put(b"b")
    t.join(10)
    assert box["value"].data == b"b"
    t, box = in_thread(lambda: b.get(GMO.BROWSE_NEXT | GMO.WAIT, wait_interval=2000))
    assert env.clock.wait_for_waiters(1)
    env.clock.advance(2.5)
    t.join(10)
    assert box["error"].reason == Reason.NO_MSG_AVAILABLE


def test_every_browse_waiter_is_woken_by_one_put(env):
    """docs/semantics.md §3: browse waiters are all activated by a new message."""
    h = env.handle()
    env.settle()
    browsers = [env.handle() for _ in range(3)]
    tb = [in_thread(lambda b=b: b.get(GMO.BROWSE_NEXT | GMO.WAIT, wait_interval=60_000)) for b in browsers]
    assert env.clock.wait_for_waiters(3)
    h.put(b"one")
    for t, _box in tb:
        t.join(10)
    assert [box["value"].data for _t, box in tb] == [b"one"] * 3


def test_a_lock_browse_waits_like_a_getter(env):
    """A LOCK browse counts as a non-browse waiter: one message activates one of them, and
    the message it locks is invisible to the other, which keeps waiting."""
    h = env.handle()
    env.settle()
    lockers = [env.handle() for _ in range(2)]
    ts = [in_thread(lambda b=b: b.get(GMO.BROWSE_NEXT | GMO.WAIT | GMO.LOCK, wait_interval=60_000)) for b in lockers]
    assert env.clock.wait_for_waiters(2)
    h.put(b"one")
    for _ in range(200):  # until the woken one has returned (joins, no clock)
        if any(not t.join(0.05) and not t.is_alive() for t, _ in ts):
            break
    assert env.clock.wait_for_waiters(1)
    assert sum(t.is_alive() for t, _ in ts) == 1
    h.put(b"two")
    for t, _ in ts:
        t.join(10)
    assert sorted(box["value"].data for _, box in ts) == [b"one", b"two"]
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST)) == Reason.NO_MSG_AVAILABLE  # both locked


def test_a_lock_browse_waiter_is_woken_only_for_a_message_beyond_its_cursor(env):
    """Two LOCK browses wait; a new message of higher priority than A's cursor is not one A
    can browse, so it must wake B (who waits with a fresh cursor), not A."""
    h = env.handle()
    h.put(b"low", MD(priority=1))
    env.settle()
    a, b = env.handle(), env.handle()
    assert a.get(GMO.BROWSE_NEXT).data == b"low"
    ta, abox = in_thread(lambda: a.get(GMO.BROWSE_NEXT | GMO.WAIT | GMO.LOCK, wait_interval=60_000))
    assert env.clock.wait_for_waiters(1)
    b.get(GMO.BROWSE_NEXT | GMO.LOCK)  # b locks "low" ...
    b.get(GMO.UNLOCK)  # ... and lets it go: its cursor is on "low" too
    tb, bbox = in_thread(lambda: b.get(GMO.BROWSE_FIRST | GMO.WAIT | GMO.LOCK, wait_interval=60_000))
    tb.join(10)
    assert bbox["value"].data == b"low"  # BROWSE_FIRST found it at once
    tb, bbox = in_thread(
        lambda: b.get(GMO.BROWSE_FIRST | GMO.WAIT | GMO.LOCK, match=MO.MATCH_CORREL_ID, correl_id=b"hi")
    )
    assert env.clock.wait_for_waiters(2)
    h.put(b"high", MD(priority=7, correl_id=b"hi"))  # before A's cursor; B can browse it
    tb.join(10)
    assert bbox["value"].data == b"high"
    assert ta.is_alive()
    h.put(b"lower", MD(priority=0))
    ta.join(10)
    assert abox["value"].data == b"lower"


def test_browse_wait_ignores_an_uncommitted_put_until_commit(env):
    conn = env.qm.connect()
    p = conn.open("Q", BIO)
    env.settle()
    b = env.handle()
    t, box = in_thread(lambda: b.get(GMO.BROWSE_FIRST | GMO.WAIT, wait_interval=-1))
    assert env.clock.wait_for_waiters(1)
    p.put(b"x", options=PMO.SYNCPOINT)
    assert env.clock.wait_for_waiters(1) and t.is_alive()
    conn.commit()
    t.join(10)
    assert box["value"].data == b"x"


def test_inhibit_get_refuses_browse_and_ends_browse_waits(env):
    h = env.handle()
    env.settle()
    t, box = in_thread(lambda: h.get(GMO.BROWSE_NEXT | GMO.WAIT, wait_interval=-1))
    assert env.clock.wait_for_waiters(1)
    env.qm.alter_queue("Q", inhibit_get=True)
    t.join(10)
    assert box["error"].reason == Reason.GET_INHIBITED
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST)) == Reason.GET_INHIBITED


# -- expiry -----------------------------------------------------------------------------------------


def test_browse_discards_expired_messages(env):
    h = env.handle()
    h.put(b"short", MD(expiry=10))
    h.put(b"long", MD(expiry=10_000))
    env.settle()
    env.clock.advance(2)
    b = env.handle()
    m = b.get(GMO.BROWSE_FIRST)
    assert m.data == b"long" and 0 < m.md.expiry < 10_000
    assert env.qm.inquire_queue("Q").current_depth == 1


# -- wrong options, wrong handles, wrong types ---------------------------------------------------


@pytest.mark.parametrize(
    "opts",
    [
        GMO.BROWSE_FIRST | GMO.BROWSE_NEXT,
        GMO.BROWSE_NEXT | GMO.MSG_UNDER_CURSOR,
        GMO.BROWSE_MSG_UNDER_CURSOR | GMO.BROWSE_FIRST,
        GMO.BROWSE_FIRST | GMO.SYNCPOINT,
        GMO.BROWSE_NEXT | GMO.SYNCPOINT_IF_PERSISTENT,
        GMO.LOCK,
        GMO.LOCK | GMO.SYNCPOINT | GMO.BROWSE_FIRST,
        GMO.UNLOCK | GMO.WAIT,
        GMO.UNLOCK | GMO.LOCK | GMO.BROWSE_FIRST,
        GMO.UNLOCK | GMO.SYNCPOINT,
        GMO.BROWSE_FIRST | GMO.MARK_SKIP_BACKOUT,
        1 << 30,
    ],
)
def test_invalid_browse_option_combinations_are_2046(env, opts):
    h = env.handle()
    h.put(b"x")
    env.settle()
    assert reason_of(lambda: h.get(opts)) == Reason.OPTIONS_ERROR


@pytest.mark.parametrize("opts", [GMO.BROWSE_FIRST, GMO.BROWSE_NEXT, GMO.BROWSE_MSG_UNDER_CURSOR, GMO.MSG_UNDER_CURSOR])
def test_cursor_options_without_oo_browse_are_2036(env, opts):
    h = env.handle(options=OO.INPUT_SHARED | OO.OUTPUT)
    h.put(b"x")
    env.settle()
    assert reason_of(lambda: h.get(opts)) == Reason.NOT_OPEN_FOR_BROWSE
    assert reason_of(lambda: h.get(opts | GMO.LOCK)) in (Reason.NOT_OPEN_FOR_BROWSE, Reason.OPTIONS_ERROR)


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"options": "BROWSE"}, Reason.OPTIONS_ERROR),
        ({"options": 16.0}, Reason.OPTIONS_ERROR),
        ({"options": GMO.BROWSE_FIRST, "buffer_length": "10"}, Reason.BUFFER_LENGTH_ERROR),
        ({"options": GMO.BROWSE_FIRST, "buffer_length": -1}, Reason.BUFFER_LENGTH_ERROR),
        ({"options": GMO.BROWSE_FIRST | GMO.WAIT, "wait_interval": -2}, Reason.WAIT_INTERVAL_ERROR),
        ({"options": GMO.BROWSE_FIRST | GMO.WAIT, "wait_interval": "5"}, Reason.WAIT_INTERVAL_ERROR),
        ({"options": GMO.BROWSE_FIRST, "match": "x"}, Reason.MATCH_OPTIONS_ERROR),
        ({"options": GMO.BROWSE_FIRST, "match": 1 << 20}, Reason.MATCH_OPTIONS_ERROR),
        ({"options": GMO.BROWSE_NEXT, "msg_id": 42}, None),
        ({"options": GMO.BROWSE_NEXT, "correl_id": "text"}, None),
        ({"options": GMO.BROWSE_NEXT, "match": MO.MATCH_MSG_TOKEN, "msg_token": 7}, Reason.MSG_TOKEN_ERROR),
        ({"options": GMO.BROWSE_NEXT, "match": MO.MATCH_OFFSET, "offset": "0"}, Reason.OFFSET_ERROR),
    ],
)
def test_wrong_types_are_mq_errors_with_a_reason(env, kwargs, reason):
    h = env.handle()
    h.put(b"x")
    env.settle()
    try:
        h.get(**kwargs)
    except MQError as e:
        assert reason is None or e.reason == reason, e
    else:
        raise AssertionError("no MQError")


def test_closed_handle_is_2019_for_browse(env):
    h = env.handle()
    h.close()
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST)) == Reason.HOBJ_ERROR
    assert reason_of(lambda: h.get(GMO.UNLOCK)) == Reason.HOBJ_ERROR


# -- store faults while browsing a swept queue ---------------------------------------------------


def test_a_failed_blob_read_is_2102_and_the_browse_can_be_retried():
    from sweepq.blobstore import FaultyStore, MemoryStore
    from sweepq.engine import QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock, SweepPolicy

    store = FaultyStore(MemoryStore(max_blob_records=3))
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)), store=store
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", BIO)
        for i in range(9):
            h.put(b"%d" % i)
        qm.sweeper.run_once()
        assert [h.get(GMO.BROWSE_NEXT).data for _ in range(3)] == [b"0", b"1", b"2"]  # blob 1
        store.fail("read", at=1, times=1)
        assert reason_of(lambda: h.get(GMO.BROWSE_NEXT)) == Reason.RESOURCE_PROBLEM  # blob 2
        assert h.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"2"  # nothing moved
        assert browse_all(h, first=False) == [b"%d" % i for i in range(3, 9)]
        assert qm._queue("Q").sweep.stats().unsweeps == 0


def test_a_damaged_blob_met_by_a_browse_is_2101_and_the_browse_goes_on_past_it():
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock, SweepPolicy

    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", BIO)
        for i in range(9):
            h.put(b"%d" % i)
        qm.sweeper.run_once()
        store = qm.blob_store()
        chain = store.chain(b"Q/0")
        value = bytearray(store.raw_blob(chain[1]))  # messages 3, 4, 5
        value[-3] ^= 0x01
        store.replace_raw_blob(chain[1], bytes(value))
        assert [h.get(GMO.BROWSE_NEXT).data for _ in range(3)] == [b"0", b"1", b"2"]
        assert reason_of(lambda: h.get(GMO.BROWSE_NEXT)) == Reason.OBJECT_DAMAGED
        assert browse_all(h, first=False) == [b"6", b"7", b"8"]
        assert qm.inquire_queue("Q").current_depth == 6


@pytest.mark.parametrize("opts", [GMO.UNLOCK, GMO.BROWSE_FIRST, GMO.MSG_UNDER_CURSOR, GMO.BROWSE_NEXT | GMO.LOCK])
def test_get_many_refuses_cursor_options(env, opts):
    h = env.handle()
    h.put(b"x")
    env.settle()
    assert reason_of(lambda: h.get_many(5, opts)) == Reason.OPTIONS_ERROR
    assert env.qm.inquire_queue("Q").current_depth == 1


def test_the_locking_handle_in_a_group_still_gets_its_locked_message(env):
    """A plain get that took a message of an unfinished group leaves its handle "in a group"
    (engine/groups/), and that handle's later gets go the group way; the message it holds a
    browse lock on is still its own to get there, as on the plain path. (Found by the browse
    model: the group way's walk skipped every locked message, the handle's own too.)"""
    from sweepq.engine import MF

    h = env.handle()
    h.put(b"g1-1", MD(group_id=b"g1", msg_seq_number=1, msg_flags=MF.MSG_IN_GROUP))
    h.put(b"plain")
    env.settle()
    assert h.get().data == b"g1-1"  # the group's last message is not seen: the handle is in g1
    assert h.get(GMO.BROWSE_FIRST | GMO.LOCK).data == b"plain"
    assert h.get().data == b"plain"
    assert reason_of(lambda: h.get()) == Reason.NO_MSG_AVAILABLE
