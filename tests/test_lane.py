"""The queue core's lanes in flat arrays: no Python object per queued message, every link and
state kept by one type (engine/core/lanes.py), whose own tests may look inside it."""

from __future__ import annotations

import gc
import os

import pytest

from sweepq.blobstore import BlobStore
from sweepq.engine import GMO, MD, DurabilitySettings, MQError, QueueManager, Reason, SweeperSettings, record
from sweepq.engine.core.flags import AVAILABLE_BELOW, SENTINELS
from sweepq.engine.core.lanes import LaneSet
from sweepq.engine.core.lock import new_lock
from sweepq.sweeper import ManualClock

from helpers import IO, drain


def held_core() -> LaneSet:
    """A core on its own, its lock held by this thread (as its queue's methods hold it)."""
    lock = new_lock()
    lock.acquire()
    return LaneSet(lock)


def test_a_queued_message_is_no_object_the_garbage_collector_tracks(h):
    gc.collect()
    before = len(gc.get_objects())
    for i in range(100_000):
        h.put(b"%06d" % i)
    gc.collect()
    tracked = len(gc.get_objects()) - before
    assert tracked < 100, f"{tracked} new tracked objects for 100,000 queued messages"
    lanes = h.queue.lanes
    # The records are in a few shared blocks, none of which a collection traverses.
    assert len(lanes._arena.blocks) < 100 and not any(gc.is_tracked(b) for b in lanes._arena.blocks)


def test_links_stay_consistent_through_puts_gets_and_reuse():
    ls = held_core()
    lane = ls[0]
    first = [record.encode(i, 0, 0, False, b"r") for i in range(1000)]
    refs = ls.add(lane, first, 0, refs=True)
    for ref in refs[::3]:
        ls.take(ref)
    more = [record.encode(1000 + i, 0, 0, False, b"s") for i in range(500)]
    again = ls.add(lane, more, 0, refs=True)  # reuses freed slots
    assert {r.slot for r in again} & {r.slot for r in refs[::3]}
    kept = [r for k, r in enumerate(first) if k % 3]
    assert ls._records(lane) == kept + more
    order = [ref.slot for ref, _ in ls._messages()]
    # prev is the mirror of next everywhere.
    assert all(ls._prv[ls._nxt[i]] == i for i in [lane.front, *order])
    assert lane.mem == len(order) == lane.ready and sum(x.mem for x in ls.lanes) == len(order)
    assert all(ls._st[i] < AVAILABLE_BELOW for i in order)
    ls.check()


def test_an_emptied_queue_gives_its_arrays_back(qm, h):
    for _ in range(70_000):
        h.put(b"x")
    big = h.queue.lanes._capacity
    assert drain(h) == [b"x"] * 70_000
    qm.sweeper.run_once()  # once an interval, an empty queue's arrays shrink
    assert h.queue.lanes._capacity < big


def test_a_damaged_table_file_fails_one_get_with_2101_and_the_rest_flows(tmp_path):
    """Bits flipped in a RocksDB table file: the get that meets them reports OBJECT_DAMAGED
    naming the blob and its messages; the blob leaves the queue and lower lanes flow on."""
    opts = {"max_blob_records": 50, "block_cache_bytes": 0}
    with QueueManager.open(
        tmp_path / "d",
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options=opts),
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        puts = [h.put(os.urandom(2000), MD(priority=5)) for _ in range(300)]
        h.put(b"low", MD(priority=0))  # a lower lane, behind the damaged one
        qm.sweeper.run_once()
        store = qm.blob_store()
        assert isinstance(store, BlobStore)
        store.flush()
        for name in os.listdir(tmp_path / "d"):
            path = tmp_path / "d" / name
            if name.endswith(".sst") and path.stat().st_size > 100_000:
                data = bytearray(path.read_bytes())
                for k in range(len(data) // 3, len(data) // 2, 4096):
                    data[k] ^= 0xFF
                path.write_bytes(bytes(data))
        got, errors = [], []
        while True:
            try:
                got.append(h.get())
            except MQError as e:
                if e.reason == Reason.NO_MSG_AVAILABLE:
                    break
                assert e.reason == Reason.OBJECT_DAMAGED, e
                errors.append(str(e))
        assert errors, "the damage was not detected"
        assert all("blob" in e and "Q/5" in e for e in errors)
        named = [p for p in puts if any(p.msg_id.hex() in e for e in errors)]
        assert named, "the error names no MsgId"
        assert got[-1].data == b"low"  # the rest of the queue flowed
        assert qm.stats()["Q"].damaged_blobs == len(errors)
        assert len(got) == 301 - 50 * len(errors)  # only the damaged blobs' messages are gone
        assert qm.inquire_queue("Q").current_depth == 0


def test_a_commit_whose_store_cleanup_fails_still_commits_everything():
    from sweepq.blobstore import FaultyStore, MemoryStore

    store = FaultyStore(MemoryStore(max_blob_records=5))
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False), store=store) as qm:
        qm.define_queue("Q")
        c = qm.connect()
        h = c.open("Q", IO)
        puts = [h.put(b"%02d" % i, MD(correl_id=b"C")) for i in range(20)]
        qm.sweeper.run_once()
        blob_mates = [puts[k].msg_id for k in range(15, 20)]  # the tail blob
        for mid in blob_mates:
            h.get(GMO.SYNCPOINT, msg_id=mid)
        store.fail("unlink", times=10)
        c.commit()  # empties the blob: its unlink fails, the commit does not
        assert qm.inquire_queue("Q").current_depth == 15
        assert drain(h) == [b"%02d" % i for i in range(15)]
        store.heal()
        qm.sweeper.run_once()  # the owed unlink is retried
        assert store.chains() == {}


def test_a_swept_queue_gives_its_arrays_back_and_keeps_its_order(qm, h):
    """Sweeping exists to return memory: the arrays that held the backlog shrink once it is
    swept, and what stays in memory keeps its order (its slots are renumbered)."""
    h.put_many([b"%06d" % i for i in range(100_000)])
    h.put(b"hi", MD(priority=7))
    q = h.queue
    big = q.lanes._capacity
    qm.sweeper.run_once()  # keeps 5 in memory
    assert q.lanes._capacity == big  # the sweep itself does not renumber
    qm.sweeper.run_once()  # the next interval shrinks
    assert q.lanes._capacity < big // 100
    assert drain(h) == [b"hi"] + [b"%06d" % i for i in range(100_000)]


def test_the_slots_a_sweep_freed_are_handed_over_whole_and_reused(qm, h):
    """The end of a sweep hands the slots it freed over as one list (no push per slot in the
    hold that ends it); puts then take them before the arrays grow, and every invariant of
    the core holds throughout."""
    h.put_many([b"%04d" % i for i in range(1_000)])
    q = h.queue
    big = q.lanes._capacity
    d = qm.sweeper.run_once().decision(h.queue.name)  # keeps 5 in memory
    assert d.msgs_swept == 995
    assert [len(part) for part in q.lanes._spare] == [995] and not q.lanes._deferred
    q.check()
    room = big - SENTINELS - 5  # the free list's slots, then the sweep's
    h.put_many([b"n%04d" % i for i in range(room)])
    assert q.lanes._spare == [] and q.lanes._capacity == big  # every freed slot taken again
    q.check()
    h.put(b"last")
    assert q.lanes._capacity > big  # then the arrays grow
    assert drain(h) == [b"%04d" % i for i in range(1_000)] + [b"n%04d" % i for i in range(room)] + [b"last"]


def test_no_shrink_while_a_unit_of_work_holds_a_slot(qm, conn, h):
    h.put_many([b"%06d" % i for i in range(100_000)])
    m = h.get(GMO.SYNCPOINT)
    qm.sweeper.run_once()
    qm.sweeper.run_once()
    assert h.queue.lanes._capacity > 100_000  # the held slot pins the arrays
    conn.backout()
    assert h.get().data == m.data  # restored in place, found by its old slot


@pytest.mark.parametrize("n", [1, 1024, 5000])
def test_a_blob_comes_back_in_bulk_in_order(n):
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        h.put_many([b"%05d" % i for i in range(n + 5)])
        qm.sweeper.run_once()
        q = qm._queue("Q")
        assert q.sweep.unsweep_all() >= 1
        assert qm.stats()["Q"].msgs_swept == 0
        assert drain(h) == [b"%05d" % i for i in range(n + 5)]


# -- the lane's invariants, checked after every step of random operations -----------------------------

from hypothesis import settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule  # noqa: E402

from sweepq.engine.core.flags import GOTTEN, UNCOMMITTED  # noqa: E402


class LaneMachine(RuleBasedStateMachine):
    """LaneSet against a model (a list per lane of [ref, record, state]); after every step
    LaneSet.check() holds and the lists read as the model says."""

    def __init__(self):
        super().__init__()
        self.ls = held_core()
        self.model: dict[int, list[list]] = {p: [] for p in range(10)}
        self.n = 0

    def _all(self):
        return [(p, e) for p, es in self.model.items() for e in es]

    @rule(p=st.integers(0, 9), uncommitted=st.booleans(), k=st.integers(1, 40))
    def put(self, p, uncommitted, k):
        state = p | (UNCOMMITTED if uncommitted else 0)
        recs = [record.encode(self.n + j, 0, p, False, b"r") for j in range(k)]
        self.n += k
        refs = self.ls.add(self.ls[p], recs, state, refs=True)
        self.model[p] += [[r, rec, state] for r, rec in zip(refs, recs, strict=True)]

    @precondition(lambda self: self._all())
    @rule(data=st.data())
    def remove(self, data):
        p, e = data.draw(st.sampled_from(self._all()))
        assert self.ls.take(e[0]) is self.ls[p]
        self.model[p].remove(e)

    @precondition(lambda self: any(e[2] < AVAILABLE_BELOW for _, e in self._all()))
    @rule(data=st.data())
    def hide_and_maybe_restore(self, data):
        _, e = data.draw(st.sampled_from([(p, e) for p, e in self._all() if e[2] < AVAILABLE_BELOW]))
        self.ls.mark(e[0], GOTTEN)
        e[2] |= GOTTEN
        if data.draw(st.booleans()):
            backout = data.draw(st.booleans())
            rec, in_memory = self.ls.restore(e[0], backout)
            assert in_memory and rec == (record.with_backout(e[1], record.backout_of(e[1]) + 1) if backout else e[1])
            e[1], e[2] = rec, e[2] & ~GOTTEN

    @precondition(lambda self: any(e[2] & UNCOMMITTED for _, e in self._all()))
    @rule(data=st.data())
    def commit_put(self, data):
        _, e = data.draw(st.sampled_from([(p, e) for p, e in self._all() if e[2] & UNCOMMITTED]))
        self.ls.unmark(e[0], UNCOMMITTED)
        e[2] &= ~UNCOMMITTED

    @rule()
    def shrink(self):
        if self.ls.shrink():  # slots renumbered (no ref was held): read them back in order
            now = [ref for ref, _ in self.ls._messages()]  # lanes 9..0, in order
            for p in range(9, -1, -1):
                for e in self.model[p]:
                    e[0] = now.pop(0)

    @invariant()
    def holds(self):
        self.ls.check()
        for p, es in self.model.items():
            assert self.ls._records(self.ls[p]) == [e[1] for e in es]


LaneMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=30, deadline=None)
TestLaneMachine = LaneMachine.TestCase


@pytest.mark.parametrize(
    "damage",
    [
        lambda ls, s: ls._prv.__setitem__(s[5], s[3]),  # a link that disagrees with its mirror
        lambda ls, s: setattr(ls[0], "ready", ls[0].ready + 1),  # a counter off by one
        lambda ls, s: ls._nxt.__setitem__(ls._free_head, s[2]),  # linked slots also free
        lambda ls, s: ls._st.__setitem__(ls._free_head, 0),  # a free slot not removed
        lambda ls, s: ls._st.__setitem__(s[4], 3),  # a slot that names another lane
        lambda ls, s: ls._low.__setitem__(s[6], ls._low[s[7]]),  # the bytes of the records
    ],
    ids=["link", "counter", "free-and-linked", "free-not-removed", "lane-bits", "bytes"],
)
def test_check_catches_a_broken_lane(damage):
    """LaneSet.check is not vacuous: each kind of damage is caught."""
    ls = held_core()
    recs = [record.encode(i, 0, 0, False, b"r" * (i + 1)) for i in range(10)]  # lengths differ
    slots = [r.slot for r in ls.add(ls[0], recs, 0, refs=True)]
    ls.check()
    damage(ls, slots)
    with pytest.raises(AssertionError):
        ls.check()


@pytest.mark.parametrize("size", [0, 100, 106, 107, 20_000])  # lengths of 1, 1, 1, 2 and 3 bytes
def test_a_record_written_from_its_fields_is_the_record_plain_makes(size):
    from array import array

    from sweepq.engine.core.arena import Arena

    arena = Arena()
    payload = bytes(range(256)) * (size // 256) + b"p" * (size % 256)
    loc = arena.store_plain(2**40 + 7, 1_700_000_000_123_456, 7, record.PERSISTENT, payload)
    assert arena.read(loc) == record.plain(2**40 + 7, 1_700_000_000_123_456, 7, True, payload)
    assert arena.read(arena.store(b"next")) == b"next"  # the length before it was counted right
    # A core placing such records (a batch put) holds what PlainRecords makes again.
    ls = held_core()
    recs = record.PlainRecords(array("Q", [5, 6]), 99, 3, False, [payload, b"x"])
    ls.add(ls.lanes[3], recs, 3)
    assert ls.lanes[3].mem == 2 and ls.mem_bytes == sum(map(len, recs))
    buf, ends, items, lane = ls.take(10)
    assert bytes(buf) == recs[0] + recs[1] and list(ends) == [len(recs[0]), len(buf)] and items is None
    assert lane is ls.lanes[3] and lane.mem == 0 and ls.mem_bytes == 0 and ls.take(10) is None
    ls.check()


def test_a_get_takes_a_plain_head_in_one_step_and_leaves_any_other_head_alone():
    """LaneSet.head with a miss, the get hot path in one step: a plain record at the head is
    taken for good and returned (``record``), an item as its item; a head with an expiry or
    a group section, or an item asked for as a record, answers the miss and changes nothing."""
    miss = object()
    ls = held_core()
    lane = ls.lanes[4]
    assert ls.head(miss, True) is miss  # empty
    expiring = record.encode(1, 0, 4, False, b"e", expiry=50)
    grouped = record.encode(2, 0, 4, False, b"g", group=(b"G" * 24, 1, 0, 0x10))
    plain = record.plain(3, 0, 4, False, b"plain")
    ls.add(lane, [expiring], 4)
    assert ls.head(miss, True) is miss and ls.head(miss) is miss and lane.mem == 1
    ls.take(ls.head())
    ls.add(lane, [grouped], 4)
    assert ls.head(miss, True) is miss and lane.mem == 1
    ls.take(ls.head())
    ls.add(lane, [plain], 4)
    ls.add(lane, [record.item_head(4, 0, 4)], 4, items=["the item"])
    assert ls.head(miss) is miss  # the head is no item
    assert ls.head(miss, True) == plain and lane.mem == 1 and ls.mem_bytes == record.HEAD_LEN
    assert ls.head(miss, True) is miss  # an item, not a record
    assert ls.head(miss) == "the item" and lane.mem == 0 and ls.mem_bytes == 0
    ls.check()
