"""Sweep and unsweep through the engine (seed 003, docs/design.md "One queue" and "The sweeper").

Every test drives the sweeper by hand (``run_once``) on a manual clock, with small blobs so
that short runs still cross many blob boundaries.
"""

from __future__ import annotations

import threading

import pytest

from sweepq.engine import (
    GMO,
    MD,
    MO,
    OO,
    PMO,
    DurabilitySettings,
    MQError,
    QueueManager,
    Reason,
    SweeperSettings,
    Usage,
)
from sweepq.engine.core.flags import LOCKED
from sweepq.engine.core.ref import Ref
from sweepq.sweeper import ManualClock

from helpers import IO, drain

BLOB = 10  # messages per blob in these tests


@pytest.fixture
def sqm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": BLOB}),
    ) as qm:
        qm.define_queue("Q")
        yield qm


@pytest.fixture
def sh(sqm):
    return sqm.connect().open("Q", IO)


def lane_state(qm, name="Q", prio=0):
    q = qm._queue(name)
    lane = q.lanes[prio]
    front = [r[r[0] :] for r in q.lanes._records(lane)]
    rear = [r[r[0] :] for r in q.lanes._records(lane, rear=True)]
    return front, [b.blob_id for b in lane.chain], rear


def test_front_sweep_keeps_the_buffer_and_links_at_the_head(sqm, sh):
    for i in range(50):
        sh.put(b"%02d" % i)
    r = sqm.sweeper.run_once()
    d = r.decision("Q")
    assert (d.y, d.x, d.keep, d.msgs_swept) == (50, 0, 5, 45)
    front, chain, rear = lane_state(sqm)
    assert front == [b"%02d" % i for i in range(5)]  # the buffer: x + 5 = 5
    assert len(chain) == 5 and rear == []
    assert sqm.blob_store().chain(b"Q/0") == chain
    info = sqm.inquire_queue("Q")
    assert (info.current_depth, info.in_memory, info.swept) == (50, 5, 45)


def test_rear_sweep_links_at_the_tail_and_order_holds(sqm, sh):
    for i in range(30):
        sh.put(b"a%02d" % i)
    sqm.sweeper.run_once()
    first_chain = lane_state(sqm)[1]
    for i in range(30):
        sh.put(b"b%02d" % i)  # the lane is swept: these go to the rear list
    assert len(lane_state(sqm)[2]) == 30
    sqm.sweeper.run_once()
    _front, chain, rear = lane_state(sqm)
    assert chain[: len(first_chain)] == first_chain  # the rear run went to the tail
    assert len(chain) == len(first_chain) + 3 and rear == []
    for i in range(5):
        sh.put(b"c%02d" % i)
    assert drain(sh) == [b"a%02d" % i for i in range(30)] + [b"b%02d" % i for i in range(30)] + [
        b"c%02d" % i for i in range(5)
    ]


def test_second_front_sweep_links_before_the_existing_chain(sqm, sh):
    for i in range(40):
        sh.put(b"%02d" % i)
    sqm.sweeper.run_once()  # front 0..4, chain 5..39
    for _ in range(5):
        sh.get()  # the next get brings the first blob (5..14) back into the front list
    sh.get()
    front_before, chain_before, _ = lane_state(sqm)
    assert front_before == [b"%02d" % i for i in range(6, 15)]
    sqm.sweeper.run_once()  # x = 6: keep 11 > 9 in memory: no front run
    assert lane_state(sqm)[1] == chain_before
    sqm.sweeper.run_once()  # x = 0 now: keep 5, sweep 11..14 to the head of the chain
    front, chain, _ = lane_state(sqm)
    assert front == [b"%02d" % i for i in range(6, 11)]
    assert chain[1:] == chain_before and chain[0] not in chain_before
    assert drain(sh) == [b"%02d" % i for i in range(6, 40)]


def test_buffer_is_counted_across_lanes_in_get_order(sqm, sh):
    for i in range(3):
        sh.put(b"p9-%d" % i, MD(priority=9))
    for i in range(100):
        sh.put(b"p5-%03d" % i, MD(priority=5))
    for i in range(20):
        sh.put(b"p1-%02d" % i, MD(priority=1))
    for _ in range(10):
        sh.put(b"serve", MD(priority=0))
    for _ in range(10):  # service rate x = 10, so the buffer is 15
        sh.get()
    q = sqm._queue("Q")
    r = sqm.sweeper.run_once().decision("Q")
    assert r.keep == 15
    mem = {p: q.lanes[p].mem for p in (9, 5, 1, 0)}
    # 10 gets took p9 x3 and p5-000..006; the buffer then holds the next 15 in get order:
    # p5-007..021. Everything after it in every lane was swept.
    assert mem == {9: 0, 5: 15, 1: 0, 0: 0}
    assert q.lanes[1].swept == 20 and q.lanes[0].swept == 10
    got = drain(sh)
    assert got == [b"p5-%03d" % i for i in range(7, 100)] + [b"p1-%02d" % i for i in range(20)] + [b"serve"] * 10


def test_uncommitted_put_and_syncpoint_get_split_the_run(sqm, sh):
    c2 = sqm.connect()
    h2 = c2.open("Q", IO)
    for i in range(10):
        sh.put(b"a%d" % i)
    h2.put(b"uncommitted", options=PMO.SYNCPOINT)
    for i in range(10):
        sh.put(b"b%d" % i)
    r = sqm.sweeper.run_once().decision("Q")
    # Only the all-sweepable stretch at the tail after the uncommitted put can move.
    assert r.msgs_swept == 10
    front, _chain, _ = lane_state(sqm)
    assert front == [b"a%d" % i for i in range(10)] + [b"uncommitted"]
    c2.commit()
    assert sh.get(GMO.SYNCPOINT).data == b"a0"  # a syncpoint get inside the candidate run
    r = sqm.sweeper.run_once().decision("Q")
    sh.connection.backout()
    assert drain(sh) == [b"a%d" % i for i in range(10)] + [b"uncommitted"] + [b"b%d" % i for i in range(10)]


def test_get_by_id_finds_a_swept_message_without_unsweeping(sqm, sh):
    puts = [sh.put(b"%02d" % i, MD(correl_id=b"C%d" % (i % 4))) for i in range(60)]
    sqm.sweeper.run_once()
    stats = sqm.stats()["Q"]
    assert stats.msgs_swept == 55 and stats.unsweeps == 0
    m = sh.get(msg_id=puts[42].msg_id)
    assert m.data == b"42"
    assert sh.get(correl_id=b"C3").data == b"03"  # still in memory
    assert sh.get(match=MO.MATCH_MSG_TOKEN, msg_token=puts[50].msg_token).data == b"50"
    assert sqm.stats()["Q"].unsweeps == 0
    assert sqm.inquire_queue("Q").current_depth == 57
    rest = drain(sh)
    assert b"42" not in rest and b"50" not in rest and len(rest) == 57


def test_swept_get_under_syncpoint_backs_out_in_place_with_count(sqm, sh):
    puts = [sh.put(b"%02d" % i) for i in range(40)]
    sqm.sweeper.run_once()
    conn = sh.connection
    assert sh.get(GMO.SYNCPOINT, msg_id=puts[30].msg_id).data == b"30"
    with pytest.raises(MQError):
        sh.get(msg_id=puts[30].msg_id)  # hidden while the unit of work holds it
    conn.backout()
    msgs = []
    while True:
        try:
            msgs.append(sh.get())
        except MQError:
            break
    assert [m.data for m in msgs] == [b"%02d" % i for i in range(40)]
    assert msgs[30].backout_count == 1 and msgs[29].backout_count == 0


def test_swept_get_under_syncpoint_commits_after_its_blob_came_back(sqm, sh):
    puts = [sh.put(b"%02d" % i) for i in range(40)]
    sqm.sweeper.run_once()
    conn = sh.connection
    other = sqm.connect().open("Q", IO)
    assert sh.get(GMO.SYNCPOINT, msg_id=puts[7].msg_id).data == b"07"
    first = [other.get().data for _ in range(10)]  # brings 5..14 back; 07 comes back hidden
    assert b"07" not in first
    conn.commit()
    assert b"07" not in drain(other)
    assert sqm.inquire_queue("Q").current_depth == 0


def test_unsweep_splices_the_rear_when_the_last_blob_returns(sqm, sh):
    for i in range(20):
        sh.put(b"a%02d" % i)
    sqm.sweeper.run_once()
    for i in range(3):
        sh.put(b"r%d" % i)
    assert len(lane_state(sqm)[2]) == 3
    got = [sh.get().data for _ in range(20)]
    assert got == [b"a%02d" % i for i in range(20)]
    front, chain, rear = lane_state(sqm)
    assert chain == [] and rear == [] and front == [b"r0", b"r1", b"r2"]
    assert sqm.blob_store().chains() == {}


def test_readahead_serves_the_next_blob_from_memory(sqm, sh):
    q = sqm._queue("Q")
    q.tier.readahead_low = 3
    for i in range(40):
        sh.put(b"%02d" % i)
    sqm.sweeper.run_once()
    for _ in range(3):
        sh.get()  # front drops to 2 < 3: the next blob is read in the background
    blob = q.lanes[0].chain[0]
    assert blob.prefetch is not None
    blob.prefetch.result(timeout=30)  # wait for the read itself, not for time to pass
    hits = q.tier.counters.readahead_hits
    sh.get()
    sh.get()
    sh.get()  # this get needs the next blob: it is already decoded
    assert q.tier.counters.readahead_hits == hits + 1


def test_many_sweep_unsweep_cycles_keep_priority_and_fifo_order(sqm, sh):
    import random

    rng = random.Random(7)
    expected: dict[int, list[bytes]] = {p: [] for p in range(10)}
    got: list[tuple[int, bytes]] = []
    n = 0
    for _cycle in range(40):
        for _ in range(rng.randrange(0, 60)):
            p = rng.randrange(10)
            data = b"%d:%05d" % (p, n)
            n += 1
            sh.put(data, MD(priority=p))
            expected[p].append(data)
        for _ in range(rng.randrange(0, 40)):
            try:
                m = sh.get()
            except MQError:
                break
            got.append((m.priority, m.data))
        sqm.sweeper.run_once()
    while True:
        try:
            m = sh.get()
        except MQError:
            break
        got.append((m.priority, m.data))
    stats = sqm.stats()["Q"]
    assert stats.sweeps >= 10 and stats.unsweeps >= 10 and stats.blobs == 0
    for p in range(10):
        assert [d for prio, d in got if prio == p] == expected[p]  # FIFO within each priority
    assert len(got) == n


def test_transmission_batches_are_never_swept(sqm):
    sqm.define_queue("XMIT", usage=Usage.TRANSMISSION)
    h = sqm.connect().open("XMIT", IO)
    for i in range(40):
        h.put(b"%02d" % i)
    batch = h.assign_batch(20)
    assert [m.data for m in batch.messages] == [b"%02d" % i for i in range(20)]
    q = sqm._queue("XMIT")
    y, x = q.sweep.sweep_counts()[:2]
    assert (y, x) == (20, 20)  # batched messages are not counted; the channel serviced 20
    q.obtained = 0
    sqm.sweeper.run_once()
    assert q.lanes[0].mem == 25 and q.lanes[0].swept == 15  # 20 batched + 5 buffer stay
    batch.release()
    assert drain(h)[:20] == [b"%02d" % i for i in range(20)]


def test_batch_on_a_normal_queue_is_refused(sqh=None):
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("N")
        h = qm.connect().open("N", IO)
        with pytest.raises(MQError) as ei:
            h.assign_batch(5)
        assert ei.value.reason == Reason.Q_TYPE_ERROR


def test_background_sweeper_runs_every_interval_of_virtual_time():
    clock = ManualClock()
    with QueueManager(clock=clock, durability=DurabilitySettings(store_options={"max_blob_records": BLOB})) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        for i in range(30):
            h.put(b"%02d" % i)
        assert qm.sweeper.running
        assert clock.wait_for_background(1)
        clock.advance(4.9)
        assert clock.wait_for_background(1)
        assert qm.sweeper.reports == []  # not yet: 5 s have not passed
        clock.advance(0.2)
        done = threading.Event()
        while not qm.sweeper.reports:  # the cycle runs on the sweeper thread
            clock.wait_for_background(1)
            done.wait(0.01)
        assert qm.sweeper.reports[0].decision("Q").msgs_swept == 25


def test_delete_with_purge_drops_the_chains(sqm, sh):
    sqm.define_queue("P")
    h = sqm.connect().open("P", IO)
    for _i in range(30):
        h.put(b"x")
    sqm.sweeper.run_once()
    assert sqm.blob_store().chain(b"P/0")
    h.close()
    sqm.delete_queue("P", purge=True)
    assert sqm.blob_store().chain(b"P/0") == []
    assert sqm.blob_store().pending() == []


def test_browse_lock_state_aborts_verification(sqm, sh):
    """LOCKED (set by browse locks, a later issue) is one of verify's abort reasons; the flag
    is set directly here to show the check works."""
    for i in range(30):
        sh.put(b"%02d" % i)
    q = sqm._queue("Q")

    def lock_one(queue, target):
        assert queue is q.sweep  # the sweeper's hook gets the queue's Sweepable
        with q.mutex:
            q.lanes.mark(Ref(target.slots[-1]), LOCKED)

    sqm.sweeper.after_write = lock_one
    d = sqm.sweeper.run_once().decision("Q")
    assert d.aborts == {"locked": 1} and d.msgs_swept == 0
    assert q.lanes[0].mem == 30 and sqm.blob_store().pending() == []


def test_opened_with_path_keeps_store_there(tmp_path):
    with QueueManager.open(tmp_path / "data", clock=ManualClock(), sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT)
        for _i in range(20):
            h.put(b"x")
        qm.sweeper.run_once()
        assert qm.blob_store().path == str(tmp_path / "data")
    assert (tmp_path / "data" / "CURRENT").exists()
    assert (tmp_path / "data" / "sweepq-stats.json").exists()


def test_the_rear_that_joins_behind_a_last_blob_of_held_messages_is_found():
    """Found by the state machine: the last blob comes back holding only a message a unit of
    work has; the rear list joins the front behind it, and the get must look there too."""
    from sweepq.engine import DeliverySequence
    from sweepq.sweeper import SweepPolicy

    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=1)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
    ) as qm:
        qm.define_queue("F", delivery_sequence=DeliverySequence.FIFO, default_priority=3)
        c = qm.connect()
        h = c.open("F", IO)
        for i in range(4):
            h.put(b"m%d" % i, MD(priority=0))
        h.put(b"m4", MD(correl_id=b"c1"))
        qm.sweeper.run_once()  # m0 stays; [m1 m2 m3] [m4] are swept
        assert h.get(GMO.SYNCPOINT, correl_id=b"c1").data == b"m4"  # held inside its blob
        h.put(b"m5")  # behind the chain: the rear list
        assert drain(h) == [b"m0", b"m1", b"m2", b"m3", b"m5"]
        c.backout()
        assert drain(h) == [b"m4"]


def test_a_sweep_yields_the_cpu_before_each_blob_hold_and_counts_the_holds_cpu(sqm, sh, monkeypatch):
    """A sweep starts each blob's hold of the queue lock on a fresh turn of the CPU and the
    GIL (engine/tiering.py ``yield_before_hold``), so that a loaded machine preempts it less
    often inside the hold; each hold's own CPU time is counted beside its wall time."""
    import os

    yields: list[int] = []
    real = os.sched_yield
    monkeypatch.setattr(os, "sched_yield", lambda: (yields.append(1), real())[1])
    for i in range(50):
        sh.put(b"%02d" % i)
    sqm.sweeper.run_once()
    assert len(yields) == len(sqm.blob_store().chain(b"Q/0")) == 5  # one per blob, none else
    s = sqm.stats()["Q"]
    assert s.lock_hold_cpu_p99_ms > 0
    assert s.lock_hold_cpu_p99_ms <= s.lock_hold_max_ms + 0.05  # the two clocks are read a few instructions apart
