"""Every abort reason, forced between the sweeper's unlock and re-lock, and store faults.

The sweeper's ``after_write`` hook runs exactly there (blobs written, queue unlocked), so
each test changes the queue at that moment and checks that the sweep aborts for the right
reason, deletes its pending blobs, and leaves every message in memory and in order.
"""

from __future__ import annotations

import contextlib
import threading

import pytest

from sweepq.blobstore import BlobStore, FaultyStore
from sweepq.engine import (
    GMO,
    MD,
    OO,
    PMO,
    DurabilitySettings,
    MessageSettings,
    MQError,
    QueueManager,
    Reason,
    SweeperSettings,
    Usage,
)
from sweepq.engine.tiering import Target
from sweepq.sweeper import ManualClock
from sweepq.sweeper.runs import record_ends

from helpers import IO, drain


@pytest.fixture
def sqm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": 10}),
    ) as qm:
        qm.define_queue("Q")
        yield qm


def fill(h, n=40):
    return [h.put(b"%02d" % i) for i in range(n)]


def sweep_with(qm, hook):
    qm.sweeper.after_write = hook
    try:
        return qm.sweeper.run_once().decision("Q")
    finally:
        qm.sweeper.after_write = None


def assert_intact(qm, h, n=40):
    assert qm.blob_store().pending() == []  # the aborted sweep's blobs are gone
    assert drain(h) == [b"%02d" % i for i in range(n)]


def test_abort_removed(sqm):
    h = sqm.connect().open("Q", IO)
    puts = fill(h)
    taken = []
    d = sweep_with(sqm, lambda q, t: taken.append(h.get(msg_id=puts[39].msg_id)))
    assert d.aborts == {"removed": 1}
    # The run is linked blob by blob from its tail; the first blob failed, nothing moved.
    assert d.msgs_swept == 0
    assert taken[0].data == b"39"
    assert sqm.blob_store().pending() == []
    assert drain(h) == [b"%02d" % i for i in range(39)]


def test_abort_removed_midway_keeps_what_was_linked(sqm):
    h = sqm.connect().open("Q", IO)
    puts = fill(h)
    d = sweep_with(sqm, lambda q, t: h.get(msg_id=puts[12].msg_id))
    # Blobs 35..39, 25..34 and 15..24 were linked (from the tail); 5..14 held 12: abort there.
    assert d.aborts == {"removed": 1} and d.msgs_swept == 25
    assert sqm.blob_store().pending() == []
    assert drain(h) == [b"%02d" % i for i in range(40) if i != 12]


def test_abort_gotten_even_if_uncommitted(sqm):
    c = sqm.connect()
    h = c.open("Q", IO)
    puts = fill(h)
    d = sweep_with(sqm, lambda q, t: h.get(GMO.SYNCPOINT, msg_id=puts[39].msg_id))
    assert d.aborts == {"gotten": 1} and d.msgs_swept == 0
    c.backout()
    assert_intact(sqm, h)


def test_abort_gotten_then_backed_out_in_between(sqm):
    c = sqm.connect()
    h = c.open("Q", IO)
    puts = fill(h)

    def get_and_back_out(q, t):
        h.get(GMO.SYNCPOINT, msg_id=puts[39].msg_id)
        c.backout()  # back in place, but its record (backout count) changed

    d = sweep_with(sqm, get_and_back_out)
    assert d.aborts == {"gotten": 1}
    msgs = []
    while True:
        try:
            msgs.append(sqm.connect().open("Q", IO).get())
        except MQError:
            break
    assert [m.data for m in msgs] == [b"%02d" % i for i in range(40)]
    assert msgs[39].backout_count == 1  # the blob's stale copy was not used


def test_abort_batch_changed(sqm):
    sqm.define_queue("X", usage=Usage.TRANSMISSION)
    h = sqm.connect().open("X", IO)
    fill(h)
    batches = []
    sqm.sweeper.after_write = lambda q, t: batches.append(h.assign_batch(40))
    d = sqm.sweeper.run_once().decision("X")
    sqm.sweeper.after_write = None
    assert d.aborts == {"batch_changed": 1} and d.msgs_swept == 0
    batches[0].release()
    assert_intact(sqm, h)


def test_abort_moved_when_a_run_is_no_longer_contiguous(sqm):
    h = sqm.connect().open("Q", IO)
    fill(h, 20)
    q = sqm._queue("Q")
    plan = q.sweep.sweep_begin(5)
    target = plan.targets[0]
    # A run that skips a message in the middle is not a contiguous stretch of the list.
    broken = Target(
        q.lanes, target.lane, target.chain, True, target.slots[:3] + target.slots[4:], q.ident, 0, target.encode
    )
    store = sqm.blob_store()
    ends = record_ends(broken.records, store.max_blob_bytes, store.max_blob_records)
    infos = store.write_pending(broken.chain, broken.records, broken.ids, ends)
    moved, reason = q.sweep.sweep_link(plan, broken, infos, sqm.blob_store())
    q.sweep.sweep_end(plan)
    # Linked from the tail: the last blob (a true tail stretch) moved; the one with the gap
    # failed verification, and everything from there on stayed in memory.
    assert (moved, reason) == (4, "moved")
    assert_intact(sqm, h, 20)


class _ChangedAfterPrecheck:
    """A queue's core whose ``precheck_run`` runs ``change`` right after it first passed a
    run: the moment between the sweep's check without the lock and its hold."""

    def __init__(self, lanes, change):
        self._lanes, self._change, self.changed = lanes, change, []

    def __getattr__(self, name):
        return getattr(self._lanes, name)

    def precheck_run(self, *args):
        ok = self._lanes.precheck_run(*args)
        if ok and not self.changed:
            self.changed.append(self._change())
        return ok


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda h, c, puts: h.get(msg_id=puts[37].msg_id), "removed"),
        (lambda h, c, puts: h.get(GMO.SYNCPOINT, msg_id=puts[37].msg_id), "gotten"),
        (lambda h, c, puts: h.get(GMO.BROWSE_FIRST | GMO.LOCK, msg_id=puts[37].msg_id), "locked"),
    ],
)
def test_a_change_in_the_middle_of_a_run_after_its_lock_free_check_still_aborts(sqm, change, reason):
    """The sweep checks each blob's run without the lock, and its hold takes that answer as
    it is only when nothing in memory changed since the sweep's last hold (LaneSet._epoch): a
    message of the middle of the run taken, hidden or locked between the check and the hold
    must still abort the run, as it does when it happens while the blobs are written."""
    c = sqm.connect()
    h = c.open("Q", IO | OO.BROWSE)
    puts = fill(h)
    q = sqm._queue("Q")
    lanes = q.tier.lanes
    # The first blob linked holds 35..39 (a front run links from its tail): 37 is inside it.
    q.tier.lanes = between = _ChangedAfterPrecheck(lanes, lambda: change(h, c, puts))
    try:
        d = sqm.sweeper.run_once().decision("Q")
    finally:
        q.tier.lanes = lanes
    assert len(between.changed) == 1
    assert d.aborts == {reason: 1} and d.msgs_swept == 0
    assert sqm.blob_store().pending() == []
    c.backout()
    if reason == "locked":
        h.get(GMO.UNLOCK)
    left = [b"%02d" % i for i in range(40) if reason != "removed" or i != 37]
    assert drain(sqm.connect().open("Q", IO)) == left


@pytest.fixture
def faulty():
    return FaultyStore(BlobStore.temporary(max_blob_records=10))


@pytest.fixture
def fqm(faulty):
    """A queue manager whose store is the fault-injecting one."""
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False), store=faulty) as qm:
        qm.define_queue("Q")
        yield qm


def test_failed_write_aborts_and_loses_nothing(fqm, faulty):
    h = fqm.connect().open("Q", IO)
    fill(h)
    faulty.fail("write_pending")
    d = fqm.sweeper.run_once().decision("Q")
    assert d.aborts == {"store_error": 1} and d.msgs_swept == 0
    assert_intact(fqm, h)


def test_failed_link_aborts_and_loses_nothing(fqm, faulty):
    h = fqm.connect().open("Q", IO)
    fill(h)
    faulty.fail("link")
    d = fqm.sweeper.run_once().decision("Q")
    assert d.aborts == {"store_error": 1}
    assert_intact(fqm, h)


def test_a_failed_link_blob_by_blob_keeps_what_was_linked_and_loses_nothing(fqm, faulty):
    """A get of a buffer message while the blobs are written changes the queue (not the
    run): each blob is verified in full under the lock, and the second link fails: the
    first blob (35..39) stays linked, the rest of the run in memory."""
    h = fqm.connect().open("Q", IO)
    fill(h)
    faulty.fail("link", at=2)
    got = []
    fqm.sweeper.after_write = lambda q, t: got.append(h.get().data)
    d = fqm.sweeper.run_once().decision("Q")
    fqm.sweeper.after_write = None
    assert got == [b"00"] and faulty.failures["link"] == 1
    assert d.aborts == {"store_error": 1} and d.msgs_swept == 5
    assert fqm.blob_store().pending() == []
    assert drain(h) == [b"%02d" % i for i in range(1, 40)]


def test_failed_read_fails_the_get_and_a_retry_succeeds(fqm, faulty):
    h = fqm.connect().open("Q", IO)
    fqm._queue("Q").tier.readahead_low = 0  # no read-ahead: the get itself must read
    fill(h)
    fqm.sweeper.run_once()
    assert [h.get().data for _ in range(5)] == [b"%02d" % i for i in range(5)]
    faulty.fail("read")
    with pytest.raises(MQError) as ei:
        h.get()
    assert ei.value.reason == Reason.RESOURCE_PROBLEM
    assert drain(h) == [b"%02d" % i for i in range(5, 40)]


def test_slow_write_does_not_hold_the_queue_lock(fqm, faulty):
    """While the sweeper is stuck writing, puts and gets go on (the lock is released)."""
    sqm = fqm
    h = sqm.connect().open("Q", IO)
    fill(h)
    faulty.gate = threading.Event()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=sqm.sweeper.run_once()))
    t.start()
    assert faulty.entered.wait(30)
    h.put(b"during", MD(priority=3))  # a higher lane: unaffected by the sweep's runs
    assert h.get().data == b"during"
    assert h.get().data == b"00"  # a buffer message: the run itself stays intact
    faulty.gate.set()
    t.join(30)
    assert result["r"].decision("Q").msgs_swept == 35
    assert drain(h) == [b"%02d" % i for i in range(1, 40)]


def test_corrupt_blob_names_its_messages_and_the_queue_stays_usable(sqm):
    h = sqm.connect().open("Q", IO)
    puts = fill(h)
    sqm.sweeper.run_once()
    store = sqm.blob_store()
    chain = store.chain(b"Q/0")
    # chain[1]: the blob of messages 15..24
    value = bytearray(store.raw_blob(chain[1]))
    value[-3] ^= 0x01
    store.replace_raw_blob(chain[1], bytes(value))
    got = [h.get().data for _ in range(15)]
    assert got == [b"%02d" % i for i in range(15)]
    with pytest.raises(MQError) as ei:
        h.get()
    e = ei.value
    assert e.reason == Reason.OBJECT_DAMAGED
    assert f"blob {chain[1]}" in str(e) and "Q/0" in str(e) and puts[15].msg_id.hex() in str(e)
    assert drain(h) == [b"%02d" % i for i in range(25, 40)]  # every other blob still reads
    assert sqm.stats()["Q"].damaged_blobs == 1


def test_a_damaged_blob_names_only_the_messages_it_took_not_those_consumed_before(tmp_path):
    """A false loss the damage fuzz saw once: a blob's 2101 named every record its manifest
    lists, also one consumed from it before the restart (its position REMOVED by its mark)."""
    opts = {"max_blob_records": 10}
    with QueueManager(
        path=tmp_path,
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options=opts),
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        puts = [h.put(b"%02d" % i, MD(persistence=1)) for i in range(40)]
        qm.sweeper.run_once()
        chain = qm.blob_store().chain(b"Q/0")  # chain[1]: the blob of messages 15..24
        assert h.get(msg_id=puts[17].msg_id).data == b"17"  # consumed from the swept blob
    with QueueManager(
        path=tmp_path,
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options=opts),
    ) as qm:
        store = qm.blob_store()
        value = bytearray(store.raw_blob(chain[1]))
        value[-3] ^= 0x01
        store.replace_raw_blob(chain[1], bytes(value))
        h = qm.connect().open("Q", IO)
        assert [h.get().data for _ in range(15)] == [b"%02d" % i for i in range(15)]
        with pytest.raises(MQError) as ei:
            h.get()
        assert ei.value.reason == Reason.OBJECT_DAMAGED
        assert set(ei.value.msg_ids) == {puts[i].msg_id for i in range(15, 25) if i != 17}
        assert drain(h) == [b"%02d" % i for i in range(25, 40)]


def test_poison_move_of_a_swept_message(sqm):
    """A get that finds a message in a blob and moves it to the backout queue (hit path)."""
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False), messages=MessageSettings(backout_handling=True)
    ) as qm:
        qm.define_queue("BOQ")
        qm.define_queue("W", backout_threshold=1, backout_requeue_q="BOQ")
        c = qm.connect()
        h = c.open("W", IO)
        puts = [h.put(b"%02d" % i, MD(correl_id=b"C")) for i in range(20)]
        h.get(GMO.SYNCPOINT)
        c.backout()  # 00 now has backout count 1
        qm.sweeper.run_once()
        h.put(b"late", options=PMO.NO_SYNCPOINT)
        assert h.get(correl_id=b"C").data == b"01"  # 00 was moved to BOQ on the way
        assert c.open("BOQ", IO).get().msg_id == puts[0].msg_id


@contextlib.contextmanager
def _twelve_on_blobs_of_four():
    """(store, manager, handle, queue): 12 messages m00..m11 on Q, a store cutting blobs of 4 records,
    a sweep rule that keeps no extra, and no sweeper thread (the test drives the sweep)."""
    from sweepq.blobstore import MemoryStore
    from sweepq.engine import OO, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock, SweepPolicy

    store = MemoryStore(max_blob_records=4)
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)), store=store
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED)
        for i in range(12):
            h.put(b"m%02d" % i)
        yield store, qm, h, qm._queue("Q")


def test_a_run_emptied_before_its_records_are_read_aborts_as_removed():
    """The sweep reads a chosen run's records without the lock; a get that took one of them
    first leaves an empty record. The run must abort as 'removed' (found by the threaded
    test: building the blob's index crashed on it), its pending blobs deleted."""
    from sweepq.sweeper.runs import record_ends

    with _twelve_on_blobs_of_four() as (store, _, h, q):
        plan = q.sweep.sweep_begin(0)
        target = plan.targets[0]
        # Gets take the run's first blob's worth before its records are read.
        assert [h.get().data for _ in range(4)] == [b"m00", b"m01", b"m02", b"m03"]
        assert target.records[:4] == [b""] * 4
        ends = record_ends(target.records, store.max_blob_bytes, store.max_blob_records)
        written = store.write_pending(target.chain, target.records, target.ids, ends, b"Q")
        moved, reason = q.sweep.sweep_link(plan, target, written, store)
        q.sweep.sweep_end(plan)
        # A front run links from its tail end: the blobs after the emptied slot moved; the
        # one holding it aborted.
        assert (moved, reason) == (8, "removed")
        assert store.pending() == [] and q.sweep.stats().aborts["removed"] == 1
        assert [h.get().data for _ in range(8)] == [b"m%02d" % i for i in range(4, 12)]


def test_the_sweeper_writes_no_blob_for_a_run_a_get_emptied():
    """Through the sweeper: a get takes a chosen run's messages before the run's records are
    read; the sweeper aborts that run as 'removed' before writing anything (it used to write
    a blob of empty records and abort only at verification)."""
    with _twelve_on_blobs_of_four() as (store, qm, h, q):
        begin = q.sweep.sweep_begin

        def begin_then_get(keep):
            plan = begin(keep)
            for _ in range(12):
                h.get()  # every chosen message leaves before its record is read
            return plan

        q.sweep.sweep_begin = begin_then_get
        writes = []
        write = store.write_pending
        store.write_pending = lambda *a, **k: writes.append(a) or write(*a, **k)
        d = qm.sweeper.run_once().decision("Q")
        assert writes == [] and d.aborts == {"removed": 1} and d.msgs_swept == 0
        assert store.pending() == [] and qm.inquire_queue("Q").current_depth == 0
