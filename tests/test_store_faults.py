"""A store failure at every call site: nothing lost, nothing duplicated, order kept.

One scenario exercises every way the engine and the sweeper touch the store: sweeps of the
front and the rear (write, link, and the delete of an aborted sweep's blobs), gets by id
inside blobs (read, and the unlink of a blob they empty), gets under syncpoint of swept
messages with commit and backout, and a drain that brings every blob back (read, unlink).
It runs once on a clean store to learn how often each store method is called and from
where; then once per call of every method with that one call failing. Each faulty run
must return exactly what the clean run returned (a get that fails with 2102 is simply
tried again, as an application would), and leave the store clean.

Failures are replayable: a run is named by its method and call number (TigerBeetle's
simulator is the model: inject, then check against a reference).
"""

from __future__ import annotations

import pytest

from sweepq.blobstore import FaultyStore, MemoryStore
from sweepq.engine import GMO, MD, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock

from helpers import IO

RETRIES = 5


def _retry(fn):
    """Call ``fn``; a transient store failure (2102) is tried again, as an application would."""
    for _ in range(RETRIES):
        try:
            return fn()
        except MQError as e:
            if e.reason != Reason.RESOURCE_PROBLEM:
                raise
    raise AssertionError("a transient fault did not go away")


def scenario(store: FaultyStore) -> tuple[list, dict]:
    """Run the scenario; return what the application saw, and the final state."""
    seen: list = []
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False, readahead_low_water=0), store=store
    ) as qm:
        qm.define_queue("Q")
        c = qm.connect()
        h = c.open("Q", IO)
        ids = {}
        for i in range(48):
            ids[f"a{i:02d}"] = h.put(b"a%02d" % i, MD(correl_id=b"C" if i % 7 == 3 else b"")).msg_id
        for i in range(10):
            ids[f"b{i:02d}"] = h.put(b"b%02d" % i, MD(priority=5)).msg_id
        qm.sweeper.run_once()  # front runs into blobs of 8
        # Gets by id inside the chain: sixteen in a row empty at least one whole blob.
        for i in range(6, 22):
            seen.append(_retry(lambda i=i: h.get(msg_id=ids[f"a{i:02d}"])).data)
        seen.append(_retry(lambda: h.get(correl_id=b"C")).data)
        # Swept messages under syncpoint: one backed out in place, one committed.
        m = _retry(lambda: h.get(GMO.SYNCPOINT, msg_id=ids["a30"]))
        seen.append(m.data)
        c.backout()
        m = _retry(lambda: h.get(GMO.SYNCPOINT, msg_id=ids["a33"]))
        seen.append(m.data)
        c.commit()
        for i in range(10):
            h.put(b"c%02d" % i)  # the lane is swept: these go to the rear list
        qm.sweeper.run_once()  # this interval served 19 gets: x = 19, no sweep
        qm.sweeper.run_once()  # x = 0: the rear run joins the tail of the chain
        # Drain: half by get, half by get_many, bringing every blob back.
        for _ in range(15):
            m = _retry(h.get)
            seen.append((m.data, m.backout_count))
        while True:
            batch = _retry(lambda: h.get_many(6))
            if not batch:
                break
            seen += [(m.data, m.backout_count) for m in batch]
        qm.sweeper.run_once()  # retries any store cleanup still owed
        stats = qm.stats()["Q"]
        state = {
            "depth": qm.inquire_queue("Q").current_depth,
            "in_memory": stats.msgs_in_memory,
            "swept": stats.msgs_swept,
            "chains": store.chains(),
            "pending": store.inner.pending(),
        }
    return seen, state


def reference() -> tuple[list, dict, dict, dict]:
    store = FaultyStore(MemoryStore(max_blob_records=8), track_sites=True)
    seen, state = scenario(store)
    return seen, state, dict(store.calls), store.sites


REF = reference()


def test_the_reference_run_touches_every_call_site():
    seen, state, calls, sites = REF
    assert state == {"depth": 0, "in_memory": 0, "swept": 0, "chains": {}, "pending": []}
    names = [x if isinstance(x, bytes) else x[0] for x in seen]
    expected = [b"a%02d" % i for i in range(48)] + [b"b%02d" % i for i in range(10)] + [b"c%02d" % i for i in range(10)]
    # Every message once, but a30, which was backed out once and so came twice.
    assert sorted(names) == sorted([*expected, b"a30"])
    assert (b"a30", 1) in seen  # redelivered with its backout count raised
    # Every place the engine and the sweeper call the store, as this scenario reaches it.
    assert {"sweep"} <= sites["write_pending"]
    assert {"link"} <= sites["link"]  # QueueTier._link_one's link(), the core's move_run calls it per blob
    assert {"read"} <= sites["read"]  # QueueTier.read: every blob read of a get or browse
    assert {"run_cleanup"} <= sites["unlink"]
    assert calls["write_pending"] >= 3 and calls["link"] >= 8 and calls["read"] >= 8 and calls["unlink"] >= 8


CASES = [(m, k) for m in ("write_pending", "link", "read", "unlink") for k in range(1, REF[2][m] + 1)]


@pytest.mark.parametrize(("method", "call"), CASES, ids=[f"{m}-{k}" for m, k in CASES])
def test_a_failure_at_this_call_loses_and_duplicates_nothing(method, call):
    store = FaultyStore(MemoryStore(max_blob_records=8))
    store.fail(method, at=call)
    seen, state = scenario(store)
    assert store.failures[method] == 1  # the fault did fire
    assert seen == REF[0]
    assert state == REF[1]


@pytest.mark.parametrize("method", ["link", "unlink", "write_pending"])
def test_a_failure_that_persists_for_a_while_is_survived_too(method):
    store = FaultyStore(MemoryStore(max_blob_records=8))
    store.fail(method, at=2, times=4)
    seen, state = scenario(store)
    assert store.failures[method] >= 2  # an aborted sweep makes fewer calls after it
    assert seen == REF[0] and state == REF[1]


def test_a_failed_delete_of_an_aborted_sweeps_blobs_is_retried_not_raised():
    store = FaultyStore(MemoryStore(max_blob_records=8))
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False), store=store) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        for i in range(40):
            h.put(b"%02d" % i)
        store.fail("link")
        store.fail("delete_pending", times=2)  # the delete, and its retry at the end of the cycle
        d = qm.sweeper.run_once().decision("Q")  # must not raise
        assert d.aborts == {"store_error": 1}
        assert store.inner.pending()  # the blobs are still there, owed a delete
        assert qm.stats()["Q"].store_retries == 2
        pending = set(store.inner.pending())
        qm.sweeper.run_once()  # the next cycle retries the delete first (then sweeps again)
        assert not pending & set(store.inner.pending())
        assert [h.get().data for _ in range(40)] == [b"%02d" % i for i in range(40)]


def test_a_failed_drop_keeps_the_queue_defined():
    store = FaultyStore(MemoryStore(max_blob_records=8))
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False), store=store) as qm:
        qm.define_queue("Q")
        with qm.connect() as c:
            h = c.open("Q", IO)
            for i in range(40):
                h.put(b"%02d" % i)
        qm.sweeper.run_once()
        store.fail("drop_chain")
        with pytest.raises(MQError) as ei:
            qm.delete_queue("Q", purge=True)
        assert ei.value.reason == Reason.RESOURCE_PROBLEM
        assert qm.inquire_queue("Q").current_depth == 40
        qm.delete_queue("Q", purge=True)
        assert store.chains() == {}


def test_a_damaged_blob_costs_its_own_messages_only():
    """A read that finds damage (2101): that blob's messages are reported and gone; every
    other message still arrives once, in order."""
    store = FaultyStore(MemoryStore(max_blob_records=8))
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False, readahead_low_water=0), store=store
    ) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        for i in range(40):
            h.put(b"%02d" % i)
        qm.sweeper.run_once()
        store.fail("read", at=2, corrupt=True)
        got, damaged = [], []
        while True:
            try:
                got.append(h.get().data)
            except MQError as e:
                if e.reason == Reason.NO_MSG_AVAILABLE:
                    break
                assert e.reason == Reason.OBJECT_DAMAGED
                damaged.append(str(e))
        assert len(damaged) == 1 and "instance numbers" in damaged[0]
        lost = 40 - len(got)
        assert lost == 8 and got == sorted(got) and len(set(got)) == len(got)
        assert qm.stats()["Q"].damaged_blobs == 1 and qm.inquire_queue("Q").current_depth == 0
