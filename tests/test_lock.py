"""Browse locks (docs/semantics.md §3 LOCK / UNLOCK, §5.4), in memory and fully swept.

Every test runs twice (tests/browse_env.py): on the queue in memory, and after the sweeper
swept everything sweepable, so a lock is taken on a message inside a blob as well as on a
message in memory.
"""

from __future__ import annotations

import pytest
from browse_env import BIO, WORLDS, browse_all, in_thread, make_env, reason_of

from sweepq.engine import CC, GMO, PMO, Reason

from helpers import drain


@pytest.fixture(params=WORLDS)
def env(request):
    with make_env(request.param) as e:
        yield e


def setup(env, n=5):
    h = env.handle()
    for i in range(n):
        h.put(b"%d" % i)
    env.settle()
    return h


def test_a_locked_message_is_invisible_to_other_handles(env):
    setup(env)
    holder, other = env.handle(), env.handle()
    assert other.get(GMO.BROWSE_NEXT).data == b"0"
    assert holder.get(GMO.BROWSE_FIRST | GMO.LOCK).data == b"0"
    assert browse_all(env.handle()) == [b"1", b"2", b"3", b"4"]
    assert reason_of(lambda: other.get(GMO.BROWSE_MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert reason_of(lambda: other.get(GMO.MSG_UNDER_CURSOR)) == Reason.NO_MSG_UNDER_CURSOR
    assert other.get().data == b"1"
    assert [m.data for m in other.get_many(10)] == [b"2", b"3", b"4"]
    assert reason_of(lambda: other.get()) == Reason.NO_MSG_AVAILABLE
    assert env.qm.inquire_queue("Q").current_depth == 1
    # The holder still sees it.
    assert holder.get(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.LOCK).data == b"0"
    assert browse_all(holder) == [b"0"]  # 2033 at the end released the lock
    assert other.get().data == b"0"


def test_unlock_and_the_2209_warning(env):
    setup(env, 2)
    h, other = env.handle(), env.handle()
    s = h.get(GMO.UNLOCK)
    assert (s.reason, s.completion_code) == (Reason.NO_MSG_LOCKED, CC.WARNING)  # never browsed
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)
    assert other.get(GMO.BROWSE_FIRST).data == b"1"
    s = h.get(GMO.UNLOCK | GMO.NO_SYNCPOINT)
    assert (s.reason, s.completion_code) == (Reason.NONE, CC.OK)
    assert other.get(GMO.BROWSE_FIRST).data == b"0"
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED
    assert h.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"0"  # UNLOCK does not move the cursor


def test_unlock_checks_its_match_arguments_and_keeps_the_lock_when_they_are_wrong(env):
    """MQ reads no descriptor with UNLOCK but checks the GMO: wrong match options are 2247,
    and the lock they came to release is still held (found by tests/test_api_fuzz.py)."""
    setup(env, 2)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)
    assert reason_of(lambda: h.get(GMO.UNLOCK, match=None)) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: h.get(GMO.UNLOCK, match="all")) == Reason.MATCH_OPTIONS_ERROR
    assert other.get(GMO.BROWSE_FIRST).data == b"1"  # still locked
    assert h.get(GMO.UNLOCK).reason == Reason.NONE


def test_one_lock_per_handle_moving_the_cursor_moves_or_releases_it(env):
    setup(env)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # 0
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # 1; 0 is free again
    assert browse_all(other) == [b"0", b"2", b"3", b"4"]
    h.get(GMO.BROWSE_NEXT)  # 2, without LOCK: 1 is released
    assert browse_all(other) == [b"0", b"1", b"2", b"3", b"4"]
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)  # 0
    h.get(GMO.BROWSE_FIRST)  # BROWSE_FIRST releases too
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED


def test_browse_msg_under_cursor_locks_or_releases(env):
    setup(env, 2)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_NEXT)
    h.get(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.LOCK)
    assert other.get(GMO.BROWSE_FIRST).data == b"1"
    h.get(GMO.BROWSE_MSG_UNDER_CURSOR)  # without LOCK: released
    assert other.get(GMO.BROWSE_FIRST).data == b"0"


def test_2033_releases_the_lock_and_2080_keeps_it(env):
    setup(env, 2)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_NEXT)
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # 1
    m = h.get(GMO.BROWSE_FIRST | GMO.LOCK, buffer_length=0)
    assert m.reason == Reason.TRUNCATED_MSG_FAILED
    assert browse_all(other) == [b"0"]  # 1 is still locked, 0 was not locked by the 2080
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # after BROWSE_FIRST's 2080 the cursor is before 0
    assert browse_all(other) == [b"1"]
    h.get(GMO.BROWSE_NEXT)  # 1 (moves; releases 0)
    assert reason_of(lambda: h.get(GMO.BROWSE_NEXT | GMO.LOCK)) == Reason.NO_MSG_AVAILABLE
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED


def test_a_2079_browse_locks(env):
    setup(env, 1)
    h, other = env.handle(), env.handle()
    m = h.get(GMO.BROWSE_FIRST | GMO.LOCK | GMO.ACCEPT_TRUNCATED_MSG, buffer_length=0)
    assert m.reason == Reason.TRUNCATED_MSG_ACCEPTED
    assert reason_of(lambda: other.get()) == Reason.NO_MSG_AVAILABLE


def test_close_and_disconnect_release_the_lock(env):
    setup(env, 2)
    other = env.handle()
    h = env.handle()
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)
    h.close()
    assert other.get(GMO.BROWSE_FIRST).data == b"0"
    conn = env.qm.connect()
    g = conn.open("Q", BIO)
    g.get(GMO.BROWSE_FIRST | GMO.LOCK)
    assert other.get(GMO.BROWSE_FIRST).data == b"1"
    conn.disconnect()
    assert other.get(GMO.BROWSE_FIRST).data == b"0"


def test_removal_by_the_holder_releases_the_lock(env):
    setup(env, 3)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)
    assert h.get(GMO.MSG_UNDER_CURSOR).data == b"0"
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # 1
    assert h.get().data == b"1"  # a plain get by the holder takes its locked message first
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED
    assert drain(other) == [b"2"]


def test_the_holder_s_plain_get_respects_get_order_and_2080_keeps_the_lock(env):
    setup(env, 3)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_NEXT)
    h.get(GMO.BROWSE_NEXT | GMO.LOCK)  # 1 locked; 0 comes first in get order
    assert h.get().data == b"0"
    m = h.get(buffer_length=0)  # the locked 1, too long: 2080, it stays and stays locked
    assert m.reason == Reason.TRUNCATED_MSG_FAILED and m.data_length == 1
    assert other.get().data == b"2"
    assert [x.data for x in h.get_many(5)] == [b"1"]


def test_syncpoint_removal_of_the_locked_message_then_backout_leaves_it_unlocked(env):
    setup(env, 2)
    conn = env.qm.connect()
    h = conn.open("Q", BIO)
    other = env.handle()
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT).data == b"0"
    conn.backout()
    assert other.get().data == b"0"


def test_with_wait_the_lock_is_released_before_the_wait(env):
    setup(env, 1)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)
    t, box = in_thread(lambda: h.get(GMO.BROWSE_NEXT | GMO.WAIT | GMO.LOCK, wait_interval=5000))
    assert env.clock.wait_for_waiters(1)
    assert other.get().data == b"0"  # released while h waits
    env.qm.connect().open("Q", BIO).put(b"new")
    t.join(10)
    assert box["value"].data == b"new"
    assert reason_of(lambda: other.get()) == Reason.NO_MSG_AVAILABLE  # new is locked


def test_locked_message_is_never_swept_and_keeps_its_lock_across_unsweep(env):
    h = setup(env, 12)
    holder, other = env.handle(), env.handle()
    for _ in range(4):
        holder.get(GMO.BROWSE_NEXT)
    holder.get(GMO.BROWSE_NEXT | GMO.LOCK)  # "4"
    for _ in range(3):
        env.qm.sweeper.run_once()
    q = env.qm._queue("Q")
    info = env.qm.inquire_queue("Q")
    if env.swept:
        assert (info.in_memory, info.swept) == (0, 12)  # locked inside its blob, in place
    else:
        # Never moved: a front run is the stretch after the last unsweepable message.
        assert (info.in_memory, info.swept) == (5, 7)
    assert drain(other) == [b"%d" % i for i in range(12) if i != 4]  # unsweeps; 4 stays locked
    assert q.sweep.stats().unsweeps > 0
    assert holder.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"4"  # releases the lock
    assert drain(other) == [b"4"]
    h.put(b"x")
    assert holder.get(GMO.BROWSE_NEXT | GMO.LOCK).data == b"x"
    env.qm.sweeper.run_once()
    env.qm.sweeper.run_once()
    assert env.in_memory() == 1 and env.qm.inquire_queue("Q").swept == 0


def test_a_lock_taken_during_a_sweep_aborts_it_with_reason_locked(env):
    env.settle()
    h = env.handle()
    for i in range(12):
        h.put(b"%02d" % i)
    holder = env.handle()
    calls = []

    def lock_first(queue, target):
        if not calls:
            calls.append(holder.get(GMO.BROWSE_FIRST | GMO.LOCK).data)

    env.qm.sweeper.after_write = lock_first
    d = env.qm.sweeper.run_once().decision("Q")
    assert calls == [b"00"]
    assert d.aborts == {"locked": 1}
    assert env.stats().aborts["locked"] == 1
    assert env.in_memory() >= 1 and env.qm.blob_store().pending() == []
    env.qm.sweeper.after_write = None
    env.qm.sweeper.run_once()
    env.qm.sweeper.run_once()
    assert env.in_memory() == 1  # the locked one stays in memory
    holder.get(GMO.UNLOCK)
    assert drain(h) == [b"%02d" % i for i in range(12)]


def test_matching_get_by_another_handle_skips_a_locked_swept_message(env):
    h = env.handle()
    for i in range(6):
        h.put(b"%d" % i, correl_id_md(i))
    env.settle()
    holder = env.handle()
    assert holder.get(GMO.BROWSE_FIRST | GMO.LOCK, correl_id=b"c").data == b"0"
    assert env.handle().get(correl_id=b"c").data == b"3"
    assert holder.get(GMO.MSG_UNDER_CURSOR | GMO.SYNCPOINT).data == b"0"


def correl_id_md(i):
    from sweepq.engine import MD

    return MD(correl_id=b"c" if i % 3 == 0 else b"d")


def test_put_under_syncpoint_cannot_be_locked(env):
    conn = env.qm.connect()
    conn.open("Q", BIO).put(b"u", options=PMO.SYNCPOINT)
    env.settle()
    h = env.handle()
    assert reason_of(lambda: h.get(GMO.BROWSE_FIRST | GMO.LOCK)) == Reason.NO_MSG_AVAILABLE
    conn.commit()
    assert h.get(GMO.BROWSE_FIRST | GMO.LOCK).data == b"u"


def test_durable_queue_browse_remove_under_cursor_and_a_lock_do_not_outlive_a_restart():
    """On a durable queue a browse reads persistent messages where they are (memory or blob),
    MSG_UNDER_CURSOR removes one for good, and a lock is not durable: after a crash and
    recovery the locked message is there, unlocked."""
    from sweepq.blobstore import MemoryStore
    from sweepq.blobstore.kv import MemoryKV
    from sweepq.engine import MD, DurabilitySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock

    kv = MemoryKV()

    def manager(kv):
        store = MemoryStore(kv=kv, max_blob_records=3)
        return QueueManager(
            store=store,
            sweeping=SweeperSettings(run=False, readahead_low_water=0),
            durability=DurabilitySettings(durable=True),
            clock=ManualClock(),
        )

    qm = manager(kv)
    qm.define_queue("Q")
    h = qm.connect().open("Q", BIO)
    for i in range(8):
        h.put(b"%d" % i, MD(persistence=1))
    qm.sweeper.run_once()
    assert qm.inquire_queue("Q").swept > 0
    b = qm.connect().open("Q", BIO)
    assert browse_all(b) == [b"%d" % i for i in range(8)]
    b.get(GMO.BROWSE_FIRST)
    assert b.get(GMO.MSG_UNDER_CURSOR).data == b"0"
    assert b.get(GMO.BROWSE_NEXT | GMO.LOCK).data == b"1"
    assert qm._queue("Q").sweep.stats().unsweeps == 0
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}  # a crash: the store as it stands
    qm2 = manager(copy)
    assert drain(qm2.connect().open("Q", BIO)) == [b"%d" % i for i in range(1, 8)]
    qm2.close()
    qm.close()


def test_a_2080_get_by_a_browsing_handle_without_a_lock_locks_nothing(env):
    setup(env, 1)
    h, other = env.handle(), env.handle()
    h.get(GMO.BROWSE_FIRST)
    assert h.get(buffer_length=0).reason == Reason.TRUNCATED_MSG_FAILED
    assert other.get().data == b"0"


def test_the_holder_s_syncpoint_get_ends_the_lock_and_a_backout_brings_it_back_unlocked(env):
    setup(env, 2)
    conn = env.qm.connect()
    h = conn.open("Q", BIO)
    other = env.handle()
    h.get(GMO.BROWSE_FIRST | GMO.LOCK)
    assert h.get(GMO.SYNCPOINT).data == b"0"  # its own locked message, in the unit of work
    assert h.get(GMO.UNLOCK).reason == Reason.NO_MSG_LOCKED
    conn.backout()
    assert other.get(GMO.BROWSE_FIRST).data == b"0"
    assert [m.data for m in other.get_many(5)] == [b"0", b"1"]
