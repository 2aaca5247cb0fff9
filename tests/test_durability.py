"""Durability (issue 10): what survives a restart and a crash, one durable home per message,
every store call failing in turn, the sync policy and group commit, read-only inspection.

Crashes are simulated in-process on a store over dicts: the dicts are copied as a killed
process leaves them and a new queue manager recovers from the copy. The RocksDB tests
reopen a real data directory. The kill -9 harness (tests/test_crash.py) does it for real.
"""

from __future__ import annotations

import os
import struct
import threading

import pytest

from sweepq.blobstore import BlobStore, FaultyStore, MemoryStore
from sweepq.blobstore.kv import MemoryKV
from sweepq.blobstore.rocks import RocksKV
from sweepq.engine import (
    CC,
    GMO,
    MD,
    OO,
    PMO,
    DeliverySequence,
    DurabilitySettings,
    MessageSettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.engine.durable import GroupSync
from sweepq.sweeper import ManualClock

from helpers import IO, drain

P = Persistence.PERSISTENT
NP = Persistence.NOT_PERSISTENT
BLOB = 4  # messages per blob: short runs cross many blob boundaries


def manager(kv: MemoryKV, store=None, sync: str = "commit", messages: MessageSettings | None = None) -> QueueManager:
    store = store or MemoryStore(kv=kv, max_blob_records=BLOB)
    return QueueManager(
        store=store,
        sweeping=SweeperSettings(run=False, readahead_low_water=0),
        durability=DurabilitySettings(durable=True, sync=sync),
        clock=ManualClock(),
        messages=messages,
    )


def crash(kv: MemoryKV) -> MemoryKV:
    """What a killed process leaves: the store as it stands (the old manager is abandoned)."""
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}
    return copy


def contents(qm: QueueManager, name: str = "Q") -> list[tuple[bytes, int, int]]:
    """(data, priority, backout count) of every message, in get order (drains the queue)."""
    h = qm.connect().open(name, OO.INPUT_SHARED)
    out = []
    while True:
        try:
            m = h.get()
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            return out
        out.append((m.data, m.md.priority, m.backout_count))


def test_definitions_and_persistent_messages_survive_a_restart_in_order(tmp_path):
    small = {"max_blob_records": BLOB}
    with QueueManager.open(
        tmp_path / "d",
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options=small),
        clock=ManualClock(),
    ) as qm:
        qm.define_queue("Q", default_persistence=P, max_depth=500, default_priority=4)
        qm.define_queue("F", delivery_sequence=DeliverySequence.FIFO, default_priority=2)
        h = qm.connect().open("Q", IO)
        ids = [h.put(b"m%02d" % i, MD(priority=i % 3)).msg_id for i in range(30)]
        h.put(b"np", MD(persistence=NP, priority=9))
        qm.sweeper.run_once()  # most of them go to blobs
        assert qm.stats()["Q"].msgs_swept > 10
        h.put(b"late", MD(priority=1))  # behind the chain: the rear list
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm:
        info = qm.inquire_queue("Q")
        assert (info.attributes.max_depth, info.attributes.default_priority) == (500, 4)
        assert qm.inquire_queue("F").attributes.delivery_sequence == DeliverySequence.FIFO
        assert qm.recovery.queues == 2 and qm.recovery.swept > 10
        h = qm.connect().open("Q", IO)
        got = []
        while True:
            try:
                m = h.get()
            except MQError:
                break
            got.append((m.data, m.msg_id))
    expect = [b"m%02d" % i for p in (2, 1, 0) for i in range(30) if i % 3 == p]
    expect.insert(expect.index(b"m01") + 10, b"late")  # last of priority 1
    assert [d for d, _ in got] == expect  # the non-persistent one did not survive
    assert {d: i for d, i in got}[b"m07"] == ids[7]  # a generated MsgId is kept


def test_a_crash_keeps_committed_work_and_backs_out_uncommitted_work():
    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=P)
    a, b = qm.connect(), qm.connect()
    ha, hb = a.open("Q", IO), b.open("Q", IO)
    for i in range(6):
        ha.put(b"c%d" % i)  # outside a unit of work: durable at once
    ha.put(b"u1", options=PMO.SYNCPOINT)  # never committed
    hb.put(b"k1", options=PMO.SYNCPOINT)
    b.commit()
    assert ha.get().data == b"c0"  # gone for good
    assert ha.get(GMO.SYNCPOINT).data == b"c1"  # uncommitted get: restored by the crash
    assert hb.get(GMO.SYNCPOINT).data == b"c2"
    b.commit()  # committed get: gone
    after = manager(crash(kv))
    assert [d for d, _, _ in contents(after)] == [b"c1", b"c3", b"c4", b"c5", b"k1"]


def test_backout_counts_survive_in_memory_and_inside_blobs():
    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=P)
    c = qm.connect()
    h = c.open("Q", IO)
    ids = [h.put(b"m%d" % i).msg_id for i in range(12)]
    for _ in range(2):
        h.get(GMO.SYNCPOINT)  # the first message, in memory
        c.backout()
    qm.sweeper.run_once()
    assert qm.stats()["Q"].msgs_swept
    m = h.get(GMO.SYNCPOINT, msg_id=ids[9])  # inside a blob: found in place
    assert qm.stats()["Q"].unsweeps == 0
    c.backout()
    after = manager(crash(kv))
    counts = {d: n for d, _, n in contents(after)}
    assert counts[b"m0"] == 2 and counts[m.data] == 1 and counts[b"m5"] == 0


def test_each_message_has_one_durable_home_through_sweep_get_by_id_and_unsweep():
    kv = MemoryKV()
    store = MemoryStore(kv=kv, max_blob_records=BLOB)
    qm = manager(kv, store)
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    ids = [h.put(b"m%02d" % i).msg_id for i in range(20)]

    def homes():
        own = {r[0][-8:] for r in store.messages(b"Q\x00")}
        in_blobs = sum(len(store.read(b)) - len(store.marks(b)) for ids in store.chains().values() for b in ids)
        return len(own), in_blobs

    assert homes() == (20, 0)
    qm.sweeper.run_once()
    swept = qm.stats()["Q"].msgs_swept
    assert swept and homes() == (20 - swept, swept)  # the link moved them
    h.get(msg_id=ids[15])  # from inside a blob: marked removed there
    assert homes() == (20 - swept, swept - 1)
    drained = drain(h)  # every blob comes back: records written back as each blob goes
    assert len(drained) == 19 and homes() == (0, 0)
    assert manager(crash(kv)).inquire_queue("Q").current_depth == 0


def test_non_persistent_messages_cost_no_durable_write():
    store = FaultyStore(MemoryStore(max_blob_records=BLOB))
    qm = QueueManager(
        store=store,
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(durable=True),
        clock=ManualClock(),
    )
    qm.define_queue("Q")  # a definition is durable: written and synced once
    base = dict(store.calls)
    c = qm.connect()
    h = c.open("Q", IO)
    for i in range(10):
        h.put(b"n%d" % i)
    h.put_many([b"x", b"y"], options=PMO.SYNCPOINT)
    c.commit()
    h.get()
    h.get_many(3)
    h.get(GMO.SYNCPOINT)
    c.commit()
    assert store.calls["write_messages"] == base["write_messages"] == 0
    assert store.calls["sync"] == base["sync"]


def scenario(store, kv) -> tuple[list, QueueManager]:
    """Every durable call site: put in and out of units of work, put_many, sweep (link),
    get by id inside a blob (mark), backout (counts), commit, unsweep (unlink with records),
    get_many, queue definition, alter and delete, the queue manager's name at the first open.
    A call that fails with 2102 is retried as
    an application would; a commit that fails (2003) is redone."""
    seen = []

    def retry(fn):
        for _ in range(4):
            try:
                return fn()
            except MQError as e:
                if e.reason not in (Reason.RESOURCE_PROBLEM,):
                    raise
        raise AssertionError("a single fault did not go away")

    qm = retry(lambda: manager(kv, store))  # the first open writes the queue manager's name

    retry(lambda: qm.define_queue("Q", default_persistence=P))
    retry(lambda: qm.define_queue("GONE"))
    retry(lambda: qm.alter_queue("Q", max_depth=1000))
    retry(lambda: qm.delete_queue("GONE"))
    c = qm.connect()
    h = c.open("Q", IO)
    ids = [retry(lambda i=i: h.put(b"a%02d" % i, MD(priority=i % 2))).msg_id for i in range(14)]

    def unit(fn):
        """``fn`` under syncpoint, then commit; a commit backed out (2003) is redone."""
        for _ in range(4):
            out = fn()
            try:
                c.commit()
                return out
            except MQError as e:
                assert e.reason == Reason.BACKED_OUT
        raise AssertionError("a single fault did not go away")

    unit(lambda: h.put_many([b"b0", b"b1", b"b2"], MD(priority=1), PMO.SYNCPOINT))
    retry(lambda: h.put_many([b"c0", b"c1"]))
    qm.sweeper.run_once()
    seen.append(retry(lambda: h.get(msg_id=ids[9])).data)
    m = retry(lambda: h.get(GMO.SYNCPOINT, msg_id=ids[11]))
    c.backout()
    seen.append(m.data)
    seen.append(unit(lambda: retry(lambda: h.get(GMO.SYNCPOINT, msg_id=ids[3])).data))
    for _ in range(4):
        seen.append(retry(lambda: h.get()).data)
    seen += [m.data for m in retry(lambda: h.get_many(3))]
    return seen, qm


def test_a_store_failure_at_every_durable_call_site_loses_and_duplicates_nothing():
    """Run once to count the store calls; then once per call of every durable method with
    that call failing. Each run must see what the clean run saw, and a crash at its end must
    recover exactly what the running manager holds (store and memory never disagree)."""
    methods = ("write_messages", "link", "unlink", "put_object", "sync")
    clean_kv = MemoryKV()
    clean = FaultyStore(MemoryStore(kv=clean_kv, max_blob_records=BLOB))
    expect_seen, qm = scenario(clean, clean_kv)
    calls = dict(clean.calls)  # the scenario's own calls, before the checks below
    expect_left = contents(manager(crash(clean_kv)))
    assert contents(qm) == expect_left and len(expect_left) > 5
    runs = 0
    for method in methods:
        for k in range(1, calls[method] + 1):
            kv = MemoryKV()
            store = FaultyStore(MemoryStore(kv=kv, max_blob_records=BLOB))
            store.fail(method, at=k)
            seen, qm = scenario(store, kv)
            where = f"{method} call {k}"
            assert store.failures[method] == 1, where
            assert seen == expect_seen, where
            recovered = contents(manager(crash(kv)))
            assert recovered == contents(qm) == expect_left, where
            runs += 1
    assert runs >= 25  # every method is called, most of them several times


def test_a_commit_that_cannot_be_written_backs_out_with_2003():
    kv = MemoryKV()
    store = FaultyStore(MemoryStore(kv=kv))
    qm = manager(kv, store)
    qm.define_queue("Q", default_persistence=P)
    c = qm.connect()
    h = c.open("Q", IO)
    h.put(b"old")
    assert h.get(GMO.SYNCPOINT).data == b"old"
    h.put(b"new", options=PMO.SYNCPOINT)
    store.fail("write_messages")
    with pytest.raises(MQError) as ei:
        c.commit()
    assert ei.value.reason == Reason.BACKED_OUT
    assert c.uncommitted == 0
    assert contents(manager(crash(kv))) == [(b"old", 0, 0)]  # the get did not happen durably
    assert [(d, n) for d, _, n in contents(qm)] == [(b"old", 1)]  # backed out in memory too


def test_a_failed_put_or_get_changes_nothing():
    kv = MemoryKV()
    store = FaultyStore(MemoryStore(kv=kv))
    qm = manager(kv, store)
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    h.put(b"a")
    store.fail("write_messages")
    with pytest.raises(MQError) as ei:
        h.put(b"b")
    assert ei.value.reason == Reason.RESOURCE_PROBLEM
    store.fail("write_messages")
    with pytest.raises(MQError):
        h.get()
    assert qm.inquire_queue("Q").current_depth == 1
    assert contents(manager(crash(kv))) == [(b"a", 0, 0)]


def test_poison_requeue_moves_the_durable_record():
    kv = MemoryKV()
    qm = manager(kv, messages=MessageSettings(backout_handling=True))
    qm.define_queue("BO", default_persistence=P)
    qm.define_queue("Q", default_persistence=P, backout_threshold=1, backout_requeue_q="BO")
    c = qm.connect()
    h = c.open("Q", IO)
    h.put(b"poison")
    h.get(GMO.SYNCPOINT)
    c.backout()
    with pytest.raises(MQError):
        h.get()  # moved to BO instead of returned
    after = manager(crash(kv))
    assert contents(after, "Q") == [] and [d for d, _, _ in contents(after, "BO")] == [b"poison"]


def test_deleting_a_queue_deletes_what_it_held_durably():
    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    for i in range(10):
        h.put(b"m%d" % i)
    qm.sweeper.run_once()
    h.close()
    qm.delete_queue("Q", purge=True)
    after = manager(crash(kv))
    assert after.queue_names() == []
    assert after._storage.store().messages() == [] and after._storage.store().chains() == {}


@pytest.mark.parametrize("sync", ["commit", "os", "none"])
def test_every_sync_policy_keeps_messages_across_a_clean_restart(tmp_path, sync):
    with QueueManager.open(
        tmp_path / "d", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync)
    ) as qm:
        qm.define_queue("Q", default_persistence=P)
        h = qm.connect().open("Q", IO)
        for i in range(5):
            h.put(b"m%d" % i)
        syncs = qm.journal.group.syncs if qm.journal.group else 0
    assert (syncs >= 5) == (sync == "commit")  # only "commit" syncs, once per returned put
    with QueueManager.open(
        tmp_path / "d", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync)
    ) as qm:
        assert [d for d, _, _ in contents(qm)] == [b"m%d" % i for i in range(5)]


@pytest.mark.parametrize("bad", ["always", "", None, 1, True])
def test_a_bad_sync_policy_is_refused(bad):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=bad))
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and "commit" in str(ei.value)


@pytest.mark.parametrize("bad", ["yes", 1, 0.0])
def test_a_bad_durable_flag_is_refused(bad):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeping=SweeperSettings(run=False), durability=DurabilitySettings(durable=bad))
    assert ei.value.reason == Reason.PARM_VALUE_ERROR


def test_group_sync_covers_every_writer_waiting_with_one_fsync():
    """While one sync runs, writers that arrive wait for the next; one sync then covers all."""
    entered = threading.Event()
    release = threading.Event()
    calls = []

    def slow_sync():
        calls.append(1)
        if len(calls) == 1:
            entered.set()
            release.wait(10)

    group = GroupSync(slow_sync)
    first = threading.Thread(target=group.wait)
    first.start()
    assert entered.wait(10)
    others = [threading.Thread(target=group.wait) for _ in range(6)]
    for t in others:
        t.start()
    while sum(t.is_alive() for t in others) < 6:
        pass
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert group.syncs == 2 and len(calls) == 2  # seven waiters, two fsyncs


def test_a_failed_sync_is_reported_to_the_caller_as_a_warning():
    """A sync that keeps failing after the write was made: the put is made (never to be
    repeated), so it returns with the warning OUTCOME_PENDING (tests/test_sync_failure.py
    covers every call)."""
    kv = MemoryKV()
    store = FaultyStore(MemoryStore(kv=kv))
    qm = manager(kv, store, sync="commit")
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    store.fail("sync")  # once: tried again, the put returns
    assert h.put(b"a").reason == Reason.NONE
    store.fail("sync", times=3)  # it keeps failing: the caller hears of it
    r = h.put(b"b")
    assert r.reason == Reason.OUTCOME_PENDING == 2124 and r.completion_code == CC.WARNING
    assert qm.inquire_queue("Q").current_depth == 2


def test_a_store_of_a_newer_format_is_refused_at_open(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)):
        pass
    kv = RocksKV(str(tmp_path / "d"))  # a later sweepq's write, below the store
    kv.write([("meta", b"format", struct.pack("<I", 99))])
    kv.close()
    with pytest.raises(MQError) as ei:
        QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False))
    assert "newer" in str(ei.value) and "upgrade" in str(ei.value)


def test_inspection_opens_read_only_and_writes_nothing_into_the_directory(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q", default_persistence=P)
        qm.connect().open("Q", IO).put(b"x")
    os.remove(tmp_path / "d" / "rocksdict-config.json")
    before = {n: os.stat(tmp_path / "d" / n).st_mtime_ns for n in os.listdir(tmp_path / "d")}
    s = BlobStore(tmp_path / "d", read_only=True)
    assert list(s.objects()) == [b"\x00QMGR", b"Q"] and len(s.messages()) == 1  # the queue manager's name, Q
    s.close()
    after = {n: os.stat(tmp_path / "d" / n).st_mtime_ns for n in os.listdir(tmp_path / "d")}
    assert after == before


def _flip_a_bit_in_the_largest_table_file(path, where: float = 0.4) -> None:
    tables = sorted((f for f in os.listdir(path) if f.endswith(".sst")), key=lambda f: os.path.getsize(path / f))
    data = bytearray((path / tables[-1]).read_bytes())
    data[int(len(data) * where)] ^= 0x10
    (path / tables[-1]).write_bytes(bytes(data))


@pytest.mark.parametrize("where", [0.3, 0.6])
def test_a_bit_flip_in_the_message_records_is_reported_and_the_rest_comes_back(tmp_path, where):
    d = tmp_path / "d"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os")) as qm:
        qm.define_queue("Q", default_persistence=P)
        h = qm.connect().open("Q", IO)
        for i in range(2000):
            h.put(b'{"n": %04d, "pad": "%s"}' % (i, b"x" * 200))
        qm._storage.store().flush()  # into a table file
    _flip_a_bit_in_the_largest_table_file(d, where)
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        report = qm.recovery
        got = [m for m, _, _ in contents(qm)]
    assert any("queue 'Q'" in line and "message number" in line for line in report.damaged)  # named
    assert 1900 <= len(got) < 2000  # only the damaged block's records are missing
    assert got == sorted(got)  # and the rest come back in order


def test_a_truncated_table_file_is_refused_then_repaired_on_request(tmp_path):
    d = tmp_path / "d"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os")) as qm:
        qm.define_queue("Q", default_persistence=P)
        qm.define_queue("KEEP", default_persistence=P)
        h = qm.connect().open("Q", IO)
        for i in range(500):
            h.put(b"q%03d" % i)
        qm._storage.store().flush()  # Q's records into a table file
        k = qm.connect().open("KEEP", IO)
        for i in range(5):
            k.put(b"k%d" % i)  # only in the log
    tables = sorted((f for f in os.listdir(d) if f.endswith(".sst")), key=lambda f: os.path.getsize(d / f))
    data = (d / tables[-1]).read_bytes()
    (d / tables[-1]).write_bytes(data[: len(data) // 2])
    with pytest.raises(MQError) as ei:
        QueueManager.open(d, sweeping=SweeperSettings(run=False))
    assert "repair=True" in str(ei.value)
    with QueueManager.open(d, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(repair=True)) as qm:
        assert any(tables[-1] in line and "lost/" in line for line in qm.recovery.damaged)
        assert [m for m, _, _ in contents(qm, "KEEP")] == [b"k%d" % i for i in range(5)]
    assert (d / "lost" / tables[-1]).exists()


def test_a_damaged_first_blob_keeps_the_lane_in_order_and_names_its_messages():
    """The first blob of a chain is damaged at recovery: its messages are named by the get
    that reaches it (2101), and the lane's records stay on their side of the chain."""
    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    for i in range(20):
        h.put(b"m%02d" % i)
    qm.sweeper.run_once()  # most of them into blobs of four
    h.put(b"late")  # the rear list
    kv2 = crash(kv)
    store = MemoryStore(kv=kv2, max_blob_records=BLOB)
    first = store.chain(b"Q/0")[0]
    raw = bytearray(store.raw_blob(first))
    raw[-3] ^= 0xFF
    store.replace_raw_blob(first, bytes(raw))
    after = manager(kv2, store)
    assert after.recovery.damaged  # found at open
    h2 = after.connect().open("Q", IO)
    got, errors = [], []
    while True:
        try:
            got.append(h2.get().data)
        except MQError as e:
            if e.reason == Reason.NO_MSG_AVAILABLE:
                break
            errors.append(e)
    assert len(errors) == 1 and errors[0].reason == Reason.OBJECT_DAMAGED
    assert "53575120" in str(errors[0])  # the MsgIds it held, "SWQ ..." in hex
    assert got[-1] == b"late" and got == [*sorted(got[:-1]), b"late"]
    assert len(got) == 21 - 4  # the damaged blob's four messages are the only loss


_KILLED_WRITER = (
    "import os, sys\n"
    "from sweepq.engine import DurabilitySettings, QueueManager, OO, Persistence, SweeperSettings\n"
    "qm = QueueManager.open(\n"
    "    sys.argv[1], sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sys.argv[3])\n"
    ")\n"
    "qm.define_queue('Q', default_persistence=Persistence.PERSISTENT)\n"
    "h = qm.connect().open('Q', OO.OUTPUT)\n"
    "for i in range(int(sys.argv[2])):\n"
    "    h.put(b'm%03d' % i)\n"
    "os._exit(0)\n"  # no close: the messages are only in the log
)


def killed_writer(d, n: int, sync: str = "os") -> None:
    """A process that puts ``n`` persistent messages (b"m000", ...) on queue Q of the data
    directory ``d``, then dies without closing: they are only in the logs (RocksDB's, or under
    sync="os" the redo log)."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(d), str(n), sync], check=True, timeout=60)


def _flip_in_the_write_ahead_log(d) -> None:
    import glob

    _flip_in(max(glob.glob(str(d / "*.log")), key=os.path.getsize))


def _flip_in(log) -> None:
    """A bit flipped in the middle of what the file ``log`` holds (a side log kept in place has
    zeros after its records: those are not it)."""
    with open(log, "rb") as f:
        data = bytearray(f.read())
    data[len(data.rstrip(b"\0")) // 2] ^= 0x40
    with open(log, "wb") as f:
        f.write(bytes(data))


def test_damage_in_the_log_is_reported_and_the_change_log_makes_its_writes_again(tmp_path):
    """A bit flip in the write-ahead log: the writes after it cannot be trusted, and RocksDB
    drops them. The open says so (qm.recovery.damaged), and makes them again from the change
    log, which holds each put whole under sync="commit": every message is back, in order,
    each once."""
    d = tmp_path / "d"
    killed_writer(d, 200, "commit")
    _flip_in_the_write_ahead_log(d)
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        assert any("write-ahead log was damaged" in line for line in qm.recovery.damaged)
        assert 0 < qm.recovery.redone < 200
        got = [m for m, _, _ in contents(qm)]
    assert got == [b"m%03d" % i for i in range(200)]


@pytest.mark.parametrize("sync", ["os", "commit"])
def test_damage_in_the_log_without_whole_records_brings_back_a_clean_prefix(tmp_path, sync):
    """The same flip where nothing can make the writes after it again: under sync="os" in the
    redo log, the one file with the puts since its last drain whole (the change log keeps each
    by its head: blobstore/redolog.py), under "commit" in RocksDB's log with the change log
    gone too. What comes back is the messages put before the damage, in order, each once."""
    d = tmp_path / "d"
    killed_writer(d, 200, sync)
    if sync == "os":
        _flip_in(d / "sweepq-redo")
    else:
        _flip_in_the_write_ahead_log(d)
        os.remove(d / "sweepq-changes")
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        said = "redo log was cut short, damaged" if sync == "os" else "write-ahead log was damaged"
        assert any(said in line for line in qm.recovery.damaged), qm.recovery.damaged
        assert qm.recovery.redone == 0
        got = [m for m, _, _ in contents(qm)]
    assert 0 < len(got) < 200 and got == [b"m%03d" % i for i in range(len(got))]


@pytest.mark.parametrize("method", ["objects", "messages", "marks", "read", "manifest"])
def test_a_store_failure_while_recovering_is_an_mqerror_at_open_or_a_named_loss(method):
    """Every store call recovery makes, failing once at open: the open raises MQError 2102
    (nothing is half-loaded, the next open works). A blob's manifest is read only for a blob
    whose records do not carry their MsgIds or that is damaged (to name what it held): a
    reopen of whole blobs of durable records never reads one, so its failure costs nothing."""
    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    for i in range(12):
        h.put(b"m%02d" % i)
    qm.sweeper.run_once()
    h.get(GMO.SYNCPOINT)  # an in-blob get backed out: a mark
    qm.connect()
    store = FaultyStore(MemoryStore(kv=crash(kv), max_blob_records=BLOB))
    store.fail(method)
    try:
        after = manager(None, store)
    except MQError as e:
        assert e.reason == Reason.RESOURCE_PROBLEM and method != "manifest"
        store.heal()
        after = manager(None, store)
    assert store.failures[method] == (method != "manifest")
    assert [d for d, _, _ in contents(after)] == [b"m%02d" % i for i in range(12)]


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_bad_repair_flag_is_refused(bad):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeping=SweeperSettings(run=False), durability=DurabilitySettings(repair=bad))
    assert ei.value.reason == Reason.PARM_VALUE_ERROR


@pytest.mark.parametrize("bad", ["CORREL_ID", 3, 1.0, None])
def test_a_bad_index_type_is_refused(bad):
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm, pytest.raises(MQError) as ei:
        qm.define_queue("Q", index_type=bad)
    assert ei.value.reason == Reason.PARM_VALUE_ERROR


_GETS_THEN_KILLED = (
    "import os, signal, sys\n"
    "from sweepq.engine import GMO, OO, QueueManager, SweeperSettings\n"
    "qm = QueueManager.open(sys.argv[1], sweeping=SweeperSettings(run=False))\n"
    "conn = qm.connect()\n"
    "h = conn.open('Q', OO.INPUT_SHARED)\n"
    "for _ in range(3):\n"
    "    h.get(GMO.SYNCPOINT)\n"
    "conn.commit()\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)


_DELETE_THEN_KILLED = (
    "import os, signal, sys\n"
    "from sweepq.engine import QueueManager, SweeperSettings\n"
    "qm = QueueManager.open(sys.argv[1], sweeping=SweeperSettings(run=False))\n"
    "qm.delete_queue('Q', purge=True)\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)


@pytest.mark.parametrize("swept", [False, True])
def test_a_plain_kill_after_a_queue_was_deleted_brings_nothing_back(tmp_path, swept):
    """DELETE QLOCAL with purge, then kill -9 before any checkpoint: the checkpoint of the
    last close still lists the queue's messages, and the next open took the queue for one
    whose definition damage had taken: it defined it again and reported damage. The change
    log says the queue's records were deleted with it: nothing is reported, and no queue
    comes back. Another queue's messages do."""
    import signal
    import subprocess
    import sys

    d = tmp_path / "d"
    settings = {
        "sweeping": SweeperSettings(run=False),
        "durability": DurabilitySettings(store_options={"max_blob_records": 10}),
    }
    with QueueManager.open(d, **settings) as qm:
        for name in ("Q", "KEPT"):
            qm.define_queue(name, default_persistence=P)
            h = qm.connect().open(name, IO)
            for i in range(40):
                h.put(b"m%d" % i)
        if swept:
            qm.sweeper.run_once()
    out = subprocess.run([sys.executable, "-c", _DELETE_THEN_KILLED, str(d)], timeout=60)
    assert out.returncode == -signal.SIGKILL
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        assert qm.queue_names() == ["KEPT"]
        assert [m for m, _, _ in contents(qm, "KEPT")] == [b"m%d" % i for i in range(40)]


def test_a_plain_kill_after_gets_reports_no_message_lost(tmp_path):
    """Issue 24 item 3: put 10, close, reopen, get 3 under a committed unit of work, kill -9:
    the next open named those 3 as lost to damage (the checkpoint written at the reopen
    listed them live), an invitation to send them again, i.e. duplicates. Nothing was
    damaged: nothing is reported, and the other 7 come back."""
    import signal
    import subprocess
    import sys

    d = tmp_path / "d"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q", default_persistence=P)
        h = qm.connect().open("Q", IO)
        for i in range(10):
            h.put(b"m%d" % i)
    out = subprocess.run([sys.executable, "-c", _GETS_THEN_KILLED, str(d)], timeout=60)
    assert out.returncode == -signal.SIGKILL
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        assert [m for m, _, _ in contents(qm)] == [b"m%d" % i for i in range(3, 10)]
