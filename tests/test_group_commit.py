"""Group commit (engine/durable/journal.py, blobstore/group.py): concurrent durable calls
share one store write and one change-log record, and one sync; no returned call is lost to
a kill or a power loss (the store's own fault layer drops what no sync covered)."""

from __future__ import annotations

import os
import struct
import threading

import pytest

from sweepq.blobstore import BlobStore, MemoryStore, changes
from sweepq.blobstore.faults import PowerLossKV
from sweepq.blobstore.group import WriteGroup
from sweepq.blobstore.kv import KVError, MemoryKV
from sweepq.engine import OO, DurabilitySettings, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock

P = Persistence.PERSISTENT
IO = OO.INPUT_SHARED | OO.OUTPUT


def manager(kv: MemoryKV, sync: str = "commit") -> QueueManager:
    return QueueManager(
        store=MemoryStore(kv=kv),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(durable=True, sync=sync),
        clock=ManualClock(),
    )


def drain(qm: QueueManager, name: str) -> list[bytes]:
    h = qm.connect().open(name, OO.INPUT_SHARED)
    out = []
    while True:
        try:
            out.append(h.get().data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            return out


class GatedKV(MemoryKV):
    """Counts its writes; an armed ``gate`` holds the next write until it is set (the others
    queue up behind it meanwhile); ``fail_next`` makes the write after the held one fail."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0
        self.gate: threading.Event | None = None
        self.held = threading.Event()
        self.fail_next = False

    def write(self, ops, logged=False):
        self.writes += 1
        gate, self.gate = self.gate, None
        if gate is not None:
            self.held.set()
            assert gate.wait(30)
        elif self.fail_next:
            self.fail_next = False
            raise KVError("injected: the group's write failed")
        return super().write(ops, logged)


def _hold_then_queue(kv: GatedKV, store, handles, payload=b"m"):
    """Each handle puts from a thread of its own: the first write is held until every other
    put is queued behind it; returns the threads' outcomes (None, or the MQError)."""
    gate = threading.Event()
    kv.gate = gate
    outcomes: dict[int, MQError | None] = {}

    def put(i: int) -> None:
        try:
            handles[i].put(payload + b"%d" % i)
            outcomes[i] = None
        except MQError as e:
            outcomes[i] = e

    first = threading.Thread(target=put, args=(0,))
    first.start()
    assert kv.held.wait(30)
    others = [threading.Thread(target=put, args=(i,)) for i in range(1, len(handles))]
    for t in others:
        t.start()
    while store.group.queued < len(others):  # state, not time: every other put is queued
        assert all(t.is_alive() for t in others)
        threading.Event().wait(0.001)
    gate.set()
    for t in [first, *others]:
        t.join(30)
        assert not t.is_alive()
    return outcomes


@pytest.mark.parametrize("sync", ["os", "commit"])
def test_puts_of_many_threads_share_one_store_write_and_one_change_log_record(sync):
    n = 6
    kv = GatedKV()
    qm = manager(kv, sync=sync)
    for i in range(n):
        qm.define_queue(f"Q{i}", default_persistence=P)
    handles = [qm.connect().open(f"Q{i}", IO) for i in range(n)]
    store = qm._storage.store()
    writes0, log0 = kv.writes, len(kv.read_log(changes.NAME)[0])
    group0 = store.group.writes
    outcomes = _hold_then_queue(kv, store, handles)
    assert outcomes == dict.fromkeys(range(n))
    # The held put alone, then the five queued behind it in one write and one record.
    assert kv.writes - writes0 == 2 and store.group.writes - group0 == 2
    assert len(kv.read_log(changes.NAME)[0]) - log0 == 2
    after = manager(_crash(kv))
    assert [drain(after, f"Q{i}") for i in range(n)] == [[b"m%d" % i] for i in range(n)]
    assert not after._storage.store().since_checkpoint().lost_writes


def test_a_group_whose_write_fails_fails_every_call_in_it_and_changes_nothing():
    n = 5
    kv = GatedKV()
    qm = manager(kv, sync="os")
    for i in range(n):
        qm.define_queue(f"Q{i}", default_persistence=P)
    handles = [qm.connect().open(f"Q{i}", IO) for i in range(n)]
    kv.fail_next = True  # not the held write: the group's after it
    # RocksKV retries a failed write once after a reopen; MemoryKV does not, so the group fails.
    outcomes = _hold_then_queue(kv, qm._storage.store(), handles)
    assert outcomes[0] is None
    assert all(outcomes[i].reason == Reason.RESOURCE_PROBLEM for i in range(1, n))  # 2102: nothing changed
    assert [qm.inquire_queue(f"Q{i}").current_depth for i in range(n)] == [1] + [0] * (n - 1)
    for i in range(1, n):
        handles[i].put(b"again")  # each may simply try again
    after = manager(_crash(kv))
    assert [drain(after, f"Q{i}") for i in range(n)] == [[b"m0"]] + [[b"again"]] * (n - 1)


def _crash(kv: MemoryKV) -> MemoryKV:
    """What a killed process leaves: the store as it stands."""
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}
    return copy


def test_a_power_loss_keeps_every_call_that_returned_under_commit():
    """Producers and consumers on two queues; a power loss in the middle (the fault layer keeps
    only what a sync covered): every put that had returned is there unless some get took it,
    and no get that had returned gives its message back."""
    lossy = PowerLossKV()
    qm = manager(lossy, sync="commit")
    for q in ("A", "B"):
        qm.define_queue(q, default_persistence=P)
    put_done: list[bytes] = []
    got: list[bytes] = []
    enough = threading.Event()

    def producer(q: str, t: int) -> None:
        h = qm.connect().open(q, IO)
        for k in range(60):
            h.put(b"%s-%d-%d" % (q.encode(), t, k))
            put_done.append(b"%s-%d-%d" % (q.encode(), t, k))
            if len(put_done) >= 80:
                enough.set()

    def consumer(q: str) -> None:
        h = qm.connect().open(q, IO)
        for _ in range(50):
            try:
                got.append(h.get().data)
            except MQError as e:
                assert e.reason == Reason.NO_MSG_AVAILABLE

    threads = [threading.Thread(target=producer, args=(q, t)) for q in ("A", "B") for t in range(2)]
    threads += [threading.Thread(target=consumer, args=(q,)) for q in ("A", "B")]
    for t in threads:
        t.start()
    assert enough.wait(60)
    returned_puts, returned_gets = set(put_done), set(got)  # returned before the power went
    after_loss = lossy.power_loss()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    after = manager(after_loss)
    recovered = set(drain(after, "A") + drain(after, "B"))
    assert returned_puts - set(got) <= recovered  # every returned put not taken since is back
    assert not returned_gets & recovered  # no returned get is undone


def test_the_power_loss_layer_drops_what_no_sync_covered():
    """The same layer under sync="os": returned puts are not synced, and a power loss takes
    them (what the test above would see if the journal did not sync before returning)."""
    lossy = PowerLossKV()
    qm = manager(lossy, sync="os")
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    for i in range(5):
        h.put(b"m%d" % i)
    assert lossy.syncs == 0
    assert drain(manager(_crash(lossy)), "Q") == [b"m%d" % i for i in range(5)]  # a kill keeps them
    after = manager(lossy.power_loss())
    assert "Q" not in after.queue_names() or drain(after, "Q") == []


def test_the_stores_sync_syncs_the_change_log_too(tmp_path, monkeypatch):
    """Under sync="commit" the change log's tail must survive a power loss too: the store's
    sync fsyncs it (before, its appends were never synced)."""
    store = BlobStore(tmp_path / "d")
    synced: list[str] = []

    def spy(real):
        def sync(fd: int) -> None:
            synced.append(os.readlink(f"/proc/self/fd/{fd}"))
            real(fd)

        return sync

    store.write_checkpoint(b"")  # the change log starts at a checkpoint
    store.write_messages([(b"k", b"v")])
    monkeypatch.setattr(os, "fsync", spy(os.fsync))
    monkeypatch.setattr(os, "fdatasync", spy(os.fdatasync))
    store.sync()
    monkeypatch.undo()
    store.close()
    assert any(p.endswith("sweepq-" + changes.NAME) for p in synced)


def test_a_group_record_replays_each_callers_changes_in_their_order():
    """One caller deletes a key and a later one in the same group writes it again (or the
    other way round): the change log says what the store holds."""
    rec = changes.write_group(
        7,
        [((), [b"a"], ()), ([(b"a", b"again")], (), ()), ([(b"b", b"v")], (), ()), ((), [b"b"], [(3, 1, b"R")])],
    )
    ch = changes.replay([rec])
    assert ch.horizon == 7 and ch.written == {b"a": b"again"} and ch.removed == {b"b"}
    assert ch.marks == {(3, 1): b"R"}


def test_a_lone_caller_writes_at_once_and_errors_reach_every_caller_of_their_group():
    written: list[list[int]] = []
    group: WriteGroup[int] = WriteGroup(written.append)
    group.run(1)
    group.run(2)
    assert written == [[1], [2]] and group.writes == 2 and group.items == 2

    def boom(items: list[int]) -> None:
        raise KVError("no")

    failing: WriteGroup[int] = WriteGroup(boom)
    with pytest.raises(KVError):
        failing.run(1)
    assert failing.writes == 1


def test_alone_or_join_without_an_item_writes_only_when_nobody_writes_and_leaves_the_group_usable():
    """``alone_or_join`` without an item writes at once when the group
    is idle; while a write is under way it writes nothing and says so (the caller then joins
    the group with ``run``); what it raises reaches its caller, and the group stays free."""
    grouped: list[list[int]] = []
    inside, release = threading.Event(), threading.Event()

    def write(items: list[int]) -> None:
        inside.set()
        release.wait(30)
        grouped.append(items)

    group: WriteGroup[int] = WriteGroup(write)
    pairs: list[tuple[int, int]] = []
    assert group.alone_or_join(lambda a, b: pairs.append((a, b)), None, 1, 2) and pairs == [(1, 2)]
    t = threading.Thread(target=group.run, args=(7,))
    t.start()
    assert inside.wait(30)
    assert not group.alone_or_join(lambda a, b: pairs.append((a, b)), None, 3, 4) and pairs == [(1, 2)]
    release.set()
    t.join(30)
    assert grouped == [[7]] and group.writes == 2 and group.items == 2

    def boom(a: int, b: int) -> None:
        raise KVError("no")

    with pytest.raises(KVError):
        group.alone_or_join(boom, None, 5, 6)
    assert group.alone_or_join(lambda a, b: pairs.append((a, b)), None, 8, 9) and pairs == [(1, 2), (8, 9)]


def test_a_lone_caller_is_written_by_alone_with_no_list_and_a_failure_leaves_the_group_usable():
    """A caller that finds nobody writing or waiting hands its item to ``alone`` as it is
    (no list, no group taken apart: issue 31); what ``alone`` raises reaches that caller, and
    the group is free for the next."""
    lone: list[int] = []
    grouped: list[list[int]] = []
    group: WriteGroup[int] = WriteGroup(grouped.append, lone.append)
    group.run(1)
    group.run(2)
    assert lone == [1, 2] and grouped == [] and group.writes == 2 and group.items == 2

    def fails_once(item: int) -> None:
        if item == 1:
            raise KVError("no")
        lone.append(item)

    failing: WriteGroup[int] = WriteGroup(grouped.append, fails_once)
    with pytest.raises(KVError):
        failing.run(1)
    assert failing.writes == 1 and failing.queued == 0
    failing.run(3)  # the next lone caller is not held up by the failed one
    assert lone == [1, 2, 3] and grouped == []


@pytest.mark.parametrize(
    "key, value",
    [
        (b"q/0/1", b"v" * 100),
        (b"k", b""),
        (b"q/0/1", None),
        (b"q/0/1", b"v" * 64),  # a whole head exactly
        (b"q/0/1", b"v" * 63),  # a short head (not the compiled format)
        (b"k" * 300, b"v" * 2000),
        (b"k" * 0xFFFF, b"v"),  # the longest key its u16 holds
        (b"", None),
    ],
)
@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("horizon", [0, 9, 0x0102030405060708, 2**64 - 1])
def test_the_record_of_one_put_or_delete_is_the_general_encoding(key, value, whole, horizon):
    """changes.one, the record of a lone durable put or get (compiled: written field by
    field), is byte for byte what changes.write and a group's record make of the same change,
    whole or by its head."""
    puts, deletes = ([(key, value)], ()) if value is not None else ((), [key])
    assert changes.one(horizon, key, value, whole) == changes.write(horizon, puts, deletes, whole=whole)
    assert changes.one(horizon, key, value, whole) == changes.write_group(horizon, [(puts, deletes, ())], whole)


def test_the_record_of_one_refuses_what_its_fields_cannot_hold():
    """A key longer than its u16 length, and a horizon outside a u64, fail as the pack fails
    (never a record that says something else)."""
    with pytest.raises(struct.error):
        changes.one(9, b"k" * 0x10000, b"v", True)
    with pytest.raises((struct.error, OverflowError)):
        changes.one(-1, b"k", b"v", True)
    with pytest.raises((struct.error, OverflowError)):
        changes.one(2**64, b"k", None, True)
    assert changes.one(9, b"k", bytearray(b"v"), True) == changes.one(9, b"k", b"v", True)  # a value not bytes


@pytest.mark.parametrize("whole", [True, False])
@pytest.mark.parametrize("backend", ["memory", "rocks"])
def test_write_one_is_a_write_then_its_change_log_record_and_a_failed_one_leaves_neither(backend, whole, tmp_path):
    """KV.write_one, a lone durable put's or get's one call (issue 31), leaves what
    write() of that change and append_log() of changes.one would; a write that fails
    appends nothing."""
    from sweepq.blobstore.kv import CF_MESSAGES
    from sweepq.blobstore.rocks import RocksKV

    (tmp_path / "kv").mkdir()
    kv = GatedKV() if backend == "memory" else RocksKV(str(tmp_path / "kv"))
    kv.start_log(changes.NAME, changes.start(True, {}, {}))
    n = kv.write_one(CF_MESSAGES, b"k", b"v" * 100, changes.NAME, whole)
    h1 = kv.horizon()
    kv.write_one(CF_MESSAGES, b"k", None, changes.NAME, whole)
    h2 = kv.horizon()
    assert kv.get(CF_MESSAGES, b"k") is None
    records = kv.read_log(changes.NAME)[0][1:]
    assert records == [changes.one(h1, b"k", b"v" * 100, whole), changes.one(h2, b"k", None, whole)]
    assert n == len(records[0])
    if isinstance(kv, GatedKV):
        kv.fail_next = True  # the write fails
    else:
        kv.close()  # a closed store writes nothing
    with pytest.raises(KVError):
        kv.write_one(CF_MESSAGES, b"j", b"w", changes.NAME, whole)
    assert len(kv.read_log(changes.NAME)[0]) == 3
    kv.close()


@pytest.mark.parametrize(
    "puts, deletes",
    [([(b"q/0/1", b"v" * 100)], ()), ([(b"k", b"")], ()), ((), [b"q/0/1"]), ([(b"a", b"1")], [b"b"])],
)
def test_the_short_record_of_a_lone_put_or_delete_is_the_groups_encoding(puts, deletes):
    """changes.write builds a durable put's or get's record in one pack (issue 31): the same
    bytes as the general encoding a group's record uses, so a reader cannot tell them apart."""
    assert changes.write(9, puts, deletes) == changes.write_group(9, [(puts, deletes, ())])
    ch = changes.replay([changes.write(9, puts, deletes)])
    assert ch.horizon == 9 and ch.written == {k: v[: changes.HEAD] for k, v in puts}
    assert ch.removed == set(deletes)


def test_a_lone_write_of_messages_is_one_store_write_and_one_change_log_record():
    kv = GatedKV()
    store = MemoryStore(kv=kv)
    writes0, log0 = kv.writes, len(kv.read_log(changes.NAME)[0])
    store.write_messages([(b"k1", b"one")])
    store.write_messages((), [b"k1"])
    store.write_messages([(b"k2", b"two")], [b"k3"])
    assert kv.writes - writes0 == 3 and store.group.writes == 3
    records = kv.read_log(changes.NAME)[0][log0:]
    assert len(records) == 3
    ch = changes.replay(records)
    assert ch.written == {b"k2": b"two"} and ch.removed == {b"k1", b"k3"}
    assert dict(store.messages()) == {b"k2": b"two"}


def test_lone_callers_and_groups_racing_write_each_item_once_and_never_two_writes_at_once():
    """The right to write is a token a lone caller pops without the condition's lock (issue
    31): callers of alone_or_join and run() racing on many threads still write every item
    exactly once, one write at a time, and every caller returns."""
    running = [0]
    overlaps: list[int] = []
    written: list[object] = []

    def write(items: list) -> None:
        running[0] += 1
        if running[0] != 1:
            overlaps.append(running[0])
        written.extend(items)
        os.sched_yield()  # let the others race while this write runs
        running[0] -= 1

    group: WriteGroup[tuple[int, int]] = WriteGroup(write, lambda item: write([item]))

    def caller(t: int) -> None:
        for i in range(400):
            item = (t, i)
            if i % 2 or not group.alone_or_join(lambda a, b: write([(a, b)]), None, t, i):
                group.run(item)

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert not any(th.is_alive() for th in threads)
    assert overlaps == []
    assert sorted(written) == [(t, i) for t in range(6) for i in range(400)]
    assert group.items == 6 * 400 and group.queued == 0


# -- one file synced a call: the change log, which the open redoes from (issue 31) ---------------


def test_a_durable_call_under_commit_syncs_the_change_log_alone_and_a_definition_syncs_both():
    """A persistent put or get under sync="commit" makes its write durable by syncing the change
    log, which holds it whole; a write the log cannot make again (a queue's definition) has
    the next sync take the store's own writes too (PowerLossKV: ``data_syncs``)."""
    lossy = PowerLossKV()
    qm = manager(lossy, sync="commit")
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    syncs, data = lossy.syncs, lossy.data_syncs
    for i in range(5):
        h.put(b"m%d" % i)
    h.get()
    assert lossy.syncs == syncs + 6 and lossy.data_syncs == data  # six calls: the change log alone
    qm.define_queue("R", default_persistence=P)  # synced by itself, the store's writes and all
    assert lossy.data_syncs == data + 1


def test_a_power_loss_after_change_log_syncs_alone_makes_the_calls_again():
    """The store's writes of five puts and a get, synced through the change log alone, are
    gone after a power loss: the open makes them again from the log (recovery.redone), says
    so, and the queue holds what the calls returned."""
    lossy = PowerLossKV()
    qm = manager(lossy, sync="commit")
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    h.put(b"first")
    for i in range(5):
        h.put(b"m%d" % i)
    assert h.get().data == b"first"
    after = manager(lossy.power_loss())
    assert after.recovery.redone == 7  # the definition was synced by itself
    assert any("made again, none lost" in line for line in after.recovery.damaged)
    assert drain(after, "Q") == [b"m%d" % i for i in range(5)]


def test_a_kill_leaves_nothing_to_redo():
    """A kill leaves the OS both files: the open redoes nothing and says nothing."""
    lossy = PowerLossKV()
    qm = manager(lossy, sync="commit")
    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    for i in range(5):
        h.put(b"m%d" % i)
    after = manager(_crash(lossy))
    assert after.recovery.redone == 0 and after.recovery.damaged == []
    assert drain(after, "Q") == [b"m%d" % i for i in range(5)]


def test_redo_takes_the_writes_past_the_horizon_that_follow_on_and_stops_at_a_gap():
    """changes.redo: the records past the store's horizon, each whole and starting where the
    last ended; a gap (a write the log lacks), or a record not whole, ends it; an open's
    record settles what came before it."""
    recs = [
        changes.start(True, {}, {}),
        changes.one(5, b"a", b"A" * 100, True),  # write 5
        changes.write_group(7, [([(b"b", b"B")], (), ()), ((), [b"a"], ())]),  # writes 6-7, two callers
        changes.write(9, [(b"c", b"C")], marks=[(3, 1, b"R")]),  # writes 8-9
        changes.one(11, b"d", b"D", True),  # write 10 is not in the log: a gap
    ]
    assert changes.redo(recs, 4) == ([(b"a", b"A" * 100), (b"b", b"B"), (b"a", None), (b"c", b"C")], [(3, 1, b"R")], 3)
    assert changes.redo(recs, 7) == ([(b"c", b"C")], [(3, 1, b"R")], 1)
    assert changes.redo(recs, 6) == ([], [], 0)  # inside a write: no record starts there
    assert changes.redo(recs, 10) == ([(b"d", b"D")], [], 1)
    assert changes.redo(recs, 11) == ([], [], 0)
    linked = changes.write(12, moved=([4], [b"c"]), chains=[(b"Q", "tail", [4])])
    assert changes.redo([*recs[:4], linked], 9) == ([], [], 0)  # a link is not whole: never redone
    assert changes.redo([*recs, changes.opened(11)], 4) == ([], [], 0)  # settled by an open
    ch = changes.replay([*recs, changes.opened(8)])
    assert (ch.horizon, ch.firm) == (8, 8)  # the open stood at 8: the stale 9 and 11 are settled
    assert changes.replay([*recs, linked]).firm == 12


def test_a_write_the_log_cannot_redo_has_the_next_sync_take_the_stores_writes():
    """A power loss that takes a write the change log lacks (a sweep's blob, written before
    its link) and a put after it: the puts before it are made again; the put after it had not
    returned (its record was never synced). Had it returned, its sync would have taken the
    store's own writes too: nothing to redo."""
    lossy = PowerLossKV()
    store = MemoryStore(kv=lossy)
    store.write_checkpoint(b"")  # the store's writes durable, the change log started
    store.write_messages([(b"k0", b"v0")])
    store.sync()
    store.write_messages([(b"k1", b"v1")])
    store.sync()
    assert lossy.data_syncs == 0  # the change log alone, twice
    lossy.write([("meta", b"unlogged", b"x")])  # in no change-log record
    store.write_messages([(b"k2", b"v2")])
    lost = lossy.power_loss()  # k2's record never synced: as if its call never returned
    again = MemoryStore(kv=lost)
    assert [k for k, _v in again.messages()] == [b"k0", b"k1"]
    assert again.since_checkpoint().redone == 2 and not again.since_checkpoint().lost_writes
    store.sync()  # k2's call returns: the unlogged write before it has the sync take the store's writes
    assert lossy.data_syncs == 1
    again = MemoryStore(kv=lossy.power_loss())
    assert [k for k, _v in again.messages()] == [b"k0", b"k1", b"k2"] and again.since_checkpoint().redone == 0


def test_a_real_stores_sync_leaves_rocksdbs_log_to_the_change_log_until_a_write_it_cannot_redo(tmp_path, monkeypatch):
    """RocksKV: a message write's sync fsyncs the change log alone; a write the change log
    cannot make again (an object) has the next sync take RocksDB's log too; and the change
    log is started again (a checkpoint) only after RocksDB's log was synced, appends held,
    since a record it drops may be the only synced copy of its write."""
    from sweepq.blobstore import rocks, sidelog

    store = BlobStore(tmp_path / "d")
    store.write_checkpoint(b"")
    events: list[str] = []
    real_wal, real_replace = rocks.RocksKV._sync_wal, sidelog.write_side_file

    def wal(self) -> None:
        events.append("wal")
        real_wal(self)

    def replace(*args, **kw) -> None:
        events.append("replace")
        real_replace(*args, **kw)

    monkeypatch.setattr(rocks.RocksKV, "_sync_wal", wal)
    monkeypatch.setattr(sidelog, "write_side_file", replace)
    store.write_message(b"k", b"v")
    store.sync()
    assert events == []  # the change log alone
    store.put_object(b"o", b"x")
    store.sync()
    assert events == ["wal"]
    store.write_message(b"k2", b"v2")
    store.sync()
    assert events == ["wal"]
    store.write_checkpoint(b"")
    assert events[-2:] == ["wal", "replace"]
    store.close()


def test_a_store_without_redo_logs_heads_and_every_sync_takes_its_writes():
    """BlobStore(redo=False), the engine's store under sync="os" and "none": the change log
    keeps each put by its head (cheaper writes), so nothing can be redone from it and every
    sync takes the store's own writes too."""
    lossy = PowerLossKV()
    store = MemoryStore(kv=lossy, redo=False)
    store.write_checkpoint(b"")
    store.write_messages([(b"k0", b"v" * 100)])
    store.write_message(b"k1", b"w" * 100)
    store.sync()
    assert lossy.data_syncs == 1
    records = lossy.read_log(changes.NAME)[0][1:]
    assert changes.redo(records, 0) == ([], [], 0)  # heads only: nothing to write again
    assert changes.replay(records).written == {b"k0": b"v" * changes.HEAD, b"k1": b"w" * changes.HEAD}
    assert [k for k, _v in MemoryStore(kv=lossy.power_loss()).messages()] == [b"k0", b"k1"]


@pytest.mark.parametrize(("sync", "redo"), [("commit", True), ("os", False), ("none", False)])
def test_the_engine_asks_for_redo_under_commit_alone(tmp_path, sync, redo):
    """The queue manager's store keeps puts whole in its change log under sync="commit" (its
    syncs are that log's); by their heads under the others. The log is written in place over
    zeros under "commit" and "os" (written through a map of its end, blobstore/sidelog.py),
    and grows under "none"."""
    from sweepq.blobstore.sidelog import CHUNK, SideLog

    d = tmp_path / "d"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync)) as qm:
        qm.define_queue("Q", default_persistence=P)
        qm.connect().open("Q", IO).put(b"m" * 100)
        records = SideLog(str(d), changes.NAME).read()[0]
        put = int.from_bytes(records[-1][1:9], "little")  # the put's record: the log's last
        assert changes.redo(records, put - 1)[2] == int(redo)
        in_place = (d / "sweepq-changes").stat().st_size >= CHUNK  # zeros kept ahead: its sync commits no journal
        assert in_place is (sync != "none")
