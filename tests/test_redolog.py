"""Deferred message writes under sync="os" (blobstore/redolog.py, issue 31): a lone put or get
goes to the redo log and reaches RocksDB with others at a drain. What a returned call is
promised does not change: a kill -9 at any moment loses none of them and raises no false
alarm; damage to the redo log of a killed store (cut, zeroed, deleted) is said and names what
it took, and brings no consumed message back; a failure of the redo log or of a drain fails no
call that returned and loses nothing."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from sweepq.blobstore import BlobStore, changes, redolog
from sweepq.blobstore.kv import KVError
from sweepq.blobstore.rocks import RocksKV
from sweepq.blobstore.sidelog import SideLog
from sweepq.engine import OO, DurabilitySettings, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.engine.durable import ledger

P = Persistence.PERSISTENT
IO = OO.INPUT_SHARED | OO.OUTPUT
OS = DurabilitySettings(sync="os")
QUIET = SweeperSettings(run=False)

_PUTS_GETS_THEN_KILLED = """
import os, signal, sys
from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings
qm = QueueManager.open(sys.argv[1], sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os"))
qm.define_queue("Q", default_persistence=Persistence.PERSISTENT)
h = qm.connect().open("Q", OO.INPUT_SHARED | OO.OUTPUT)
ids = [h.put(b"m%03d" % i).msg_id for i in range(300)]
for i in range(100):
    assert h.get().data == b"m%03d" % i
ids += [h.put(b"n%03d" % i).msg_id for i in range(50)]
with open(sys.argv[2], "w") as f:
    f.write("\\n".join(i.hex() for i in ids))
os.kill(os.getpid(), signal.SIGKILL)
"""


def killed(tmp_path) -> tuple[str, list[bytes]]:
    """A data directory whose process put 300 messages, got 100, put 50 more (each a lone call
    under sync="os", so each deferred), then was killed with SIGKILL; and the MsgIds put."""
    d, ids = str(tmp_path / "d"), tmp_path / "ids"
    out = subprocess.run([sys.executable, "-c", _PUTS_GETS_THEN_KILLED, d, str(ids)], timeout=120)
    assert out.returncode == -signal.SIGKILL
    assert len(SideLog(d, redolog.NAME).read()[0]) == 1 + 450  # its start, then every write whole
    return d, [bytes.fromhex(line) for line in ids.read_text().split()]


def drain(qm: QueueManager) -> list[bytes]:
    h = qm.connect().open("Q", OO.INPUT_SHARED)
    got = []
    while True:
        try:
            got.append(h.get().data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE, e
            return got


AFTER_THE_KILL = [b"m%03d" % i for i in range(100, 300)] + [b"n%03d" % i for i in range(50)]


@pytest.mark.parametrize("sync", ["os", "commit", "none"])
def test_a_killed_store_gives_back_every_deferred_write_under_any_sync_it_opens_with(tmp_path, sync):
    """No drain ran before the kill (350 puts and 100 gets, under redolog.DRAIN_WRITES): RocksDB
    has none of them, the redo log all. The open replays them before anything reads the store,
    whatever sync it now asks for: every message back in order, nothing consumed back, nothing
    said (a plain kill is no damage)."""
    d, _ids = killed(tmp_path)
    with QueueManager.open(d, sweeping=QUIET, durability=DurabilitySettings(sync=sync)) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        assert drain(qm) == AFTER_THE_KILL


@pytest.mark.parametrize("how", ["cut", "zeroed", "deleted"])
def test_damage_to_the_redo_log_of_a_killed_store_is_said_and_names_what_it_took(tmp_path, how):
    """The redo log is the only file with the deferred writes since the last drain; the change
    log's V records name each of them. Damaged, the open says writes were lost, names by MsgId
    every message put that neither came back nor was consumed, brings none of the 100 consumed
    back, and gives back in order what the log still held."""
    d, ids = killed(tmp_path)
    path = os.path.join(d, "sweepq-redo")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    used = len(data.rstrip(b"\0"))  # its records: zeros are kept after them (written through a map)
    if how == "cut":
        data = data[: used // 2]
    elif how == "zeroed":
        data[used // 3 : used // 3 + 4096] = bytes(4096)
    if how == "deleted":
        os.remove(path)
    else:
        with open(path, "wb") as f:
            f.write(data)
    with QueueManager.open(d, sweeping=QUIET, durability=OS) as qm:
        said, named = qm.recovery.damaged, set(qm.recovery.damaged_msg_ids)
        got = drain(qm)
    assert any("redo log" in line for line in said), said
    assert got == AFTER_THE_KILL[: len(got)] or not got  # what came back, in order
    assert not set(ids[:100]) & named  # consumed: never named, never back
    assert len(named) + len(got) == len(AFTER_THE_KILL)  # each lost one named


def test_a_killed_store_whose_change_log_is_deleted_loses_nothing(tmp_path):
    """The redo log holds the writes whole: with the change log gone they all come back; the
    loss of the change log is said."""
    d, _ids = killed(tmp_path)
    os.remove(os.path.join(d, "sweepq-changes"))
    with QueueManager.open(d, sweeping=QUIET, durability=OS) as qm:
        assert drain(qm) == AFTER_THE_KILL
        assert qm.recovery.damaged_msg_ids == []


def test_a_read_only_look_at_a_killed_store_sees_its_deferred_writes(tmp_path):
    """A read-only open writes nothing: the redo log's writes are held in memory and laid over
    what RocksDB has (sweepq inspect)."""
    d, _ids = killed(tmp_path)
    store = BlobStore(d, read_only=True)
    try:
        records = store.messages()
    finally:
        store.close()
    assert len(records) == len(AFTER_THE_KILL)
    assert len(SideLog(d, redolog.NAME).read()[0]) == 1 + 450  # untouched


@contextlib.contextmanager
def queue_q(d: str, **attrs) -> Iterator[tuple[QueueManager, object]]:
    """A queue manager on ``d`` under sync="os" with the persistent queue Q, and a handle on it."""
    with QueueManager.open(d, sweeping=QUIET, durability=OS) as qm:
        qm.define_queue("Q", default_persistence=P, **attrs)
        yield qm, qm.connect().open("Q", IO)


def as_killed(d: str, crashed: str) -> str:
    """The directory ``d`` of a live store as a kill -9 would leave it (the OS has every write)."""
    shutil.copytree(d, crashed, ignore=shutil.ignore_patterns("LOCK"))
    return crashed


def test_a_redo_log_that_fails_sends_the_writes_to_rocksdb_and_loses_none(tmp_path, monkeypatch):
    """A redo log that takes no more records (a full disk) fails no call: the write, and those
    after it, go to RocksDB's log as without defer, after a drain of what was deferred."""
    d = str(tmp_path / "d")
    real = SideLog.append

    def append(self, record):
        if self.path.endswith("sweepq-redo") and record[9:10] == b"F" and record.endswith(b"m010"):
            self.failed = "no space left (a test)"
        return real(self, record)

    monkeypatch.setattr(SideLog, "append", append)
    with queue_q(d) as (qm, h):
        for i in range(20):
            h.put(b"m%03d" % i)
        assert h.get().data == b"m000"
        crashed = as_killed(d, str(tmp_path / "crashed"))
    monkeypatch.setattr(SideLog, "append", real)
    with QueueManager.open(crashed, sweeping=QUIET, durability=OS) as qm:
        assert qm.recovery.damaged == []
        assert drain(qm) == [b"m%03d" % i for i in range(1, 20)]


def test_a_drain_that_fails_fails_the_call_that_needed_it_and_loses_nothing(tmp_path, monkeypatch):
    """A drain comes before any other write: when RocksDB refuses it, that write fails with 2102
    (nothing of it made); the deferred writes stay in memory and in the redo log, and the next
    drain writes them."""
    d = str(tmp_path / "d")
    real = RocksKV._write_retrying
    fail = {"left": 1}

    def write(self, ops):
        if fail["left"] and any(cf == "meta" and key == redolog.APPLIED for cf, key, _v in ops):
            fail["left"] -= 1
            raise KVError("the disk is full (a test)")
        return real(self, ops)

    monkeypatch.setattr(RocksKV, "_write_retrying", write)
    with queue_q(d) as (qm, h):
        for i in range(10):
            h.put(b"m%03d" % i)
        with pytest.raises(MQError) as e:
            qm.define_queue("R", default_persistence=P)  # a write the drain must come before
        assert e.value.reason == Reason.RESOURCE_PROBLEM
        assert "R" not in qm.queue_names()
        qm.define_queue("R", default_persistence=P)  # the drain, then the write
        assert h.get().data == b"m000"
        crashed = as_killed(d, str(tmp_path / "crashed"))
    with QueueManager.open(crashed, sweeping=QUIET, durability=OS) as qm:
        assert qm.recovery.damaged == [] and "R" in qm.queue_names()
        assert drain(qm) == [b"m%03d" % i for i in range(1, 10)]


def test_drains_and_a_checkpoint_start_the_logs_again_with_nothing_lost(tmp_path):
    """Past redolog.DRAIN_WRITES writes a drain writes their last states (a message put and got
    between two drains reaches RocksDB as one delete); a checkpoint drains and starts the redo
    log again with the change log. A kill after either loses nothing."""
    d = str(tmp_path / "d")
    n = redolog.DRAIN_WRITES + 500
    with queue_q(d) as (qm, h):
        for i in range(n):
            h.put(b"m%05d" % i)
            if i % 2:
                h.get()
        first = as_killed(d, str(tmp_path / "first"))
        ledger.write(qm, qm.next_seq(), closed=False)  # the checkpoint an open writes
        assert len(SideLog(d, redolog.NAME).read()[0]) == 1  # its start record alone
        h.put(b"last")
        second = as_killed(d, str(tmp_path / "second"))
    want = [b"m%05d" % i for i in range(n // 2, n)]
    for crashed, tail in ((first, []), (second, [b"last"])):
        with QueueManager.open(crashed, sweeping=QUIET, durability=OS) as qm:
            assert qm.recovery.damaged == []
            assert drain(qm) == want + tail


def test_replay_takes_the_writes_in_number_order_and_stops_at_a_gap():
    """redolog.replay: records past the number RocksDB has, in number order, each following
    on from the one before; the start record's number counts as had; a gap ends it."""

    def w(n: int, key: bytes, value: bytes | None = b"v") -> bytes:
        return changes.one(n, key, value, True)

    records = [redolog.start(3), w(5, b"b"), w(4, b"a"), w(6, b"a", None), w(8, b"c")]
    assert redolog.replay(records, 0) == ([(b"a", None), (b"b", b"v")], 6)
    assert redolog.replay(records, 5) == ([(b"a", None)], 6)
    assert redolog.replay([w(1, b"a"), w(1, b"a"), w(2, b"b")], 0) == ([(b"a", b"v"), (b"b", b"v")], 2)
    assert redolog.replay([w(2, b"a")], 0) == ([], 0)  # write 1 is missing
    assert redolog.replay([redolog.start(7), b"garbage", w(8, b"a")], 0) == ([], 7)


def test_the_change_log_counts_deferred_writes_apart_from_rocksdb_horizons():
    """A V record names a write by its number in the redo log: it raises no horizon that
    RocksDB's files must reach (blobstore/guard.py), and a Y record settles those before it."""
    records = [
        changes.start(True, {"horizon": 10}, {}),
        changes.one(12, b"k1", b"x" * 100, False),
        changes.one(900, b"k2", b"y" * 100, False, True),
        changes.one(901, b"k1", None, False, True),
    ]
    ch = changes.replay(records)
    assert (ch.horizon, ch.firm, ch.deferred) == (12, 12, 901)
    assert b"k2" in ch.written and b"k1" in ch.removed
    assert changes.known(ch)["horizon"] == 12
    assert changes.replay([*records, changes.settled(700)]).deferred == 700
    assert changes.replay([*records, changes.settled(700), changes.one(701, b"k3", None, False, True)]).deferred == 701


def test_damage_the_drain_at_close_meets_is_healed_and_the_records_written_again(tmp_path, monkeypatch):
    """Damage RocksDB found in the background (a compaction's) is met by the next write of the
    store; under sync="os" that may be the drain at close. There the family is rebuilt, and the
    queue manager's records are written again from memory through the closing store (it is
    still the queue manager's store while it closes): nothing is lost, nothing fails to be
    written again."""
    d = str(tmp_path / "d")
    real = RocksKV._write
    met = {"left": 1}

    def write(self, ops):
        if met["left"] and any(key == redolog.APPLIED for _cf, key, _v in ops):
            met["left"] -= 1
            self._enter()
            try:
                raise self._failed(Exception("Corruption: block checksum mismatch (a test)"), "write failed", True)
            finally:
                self._gate.leave()
        return real(self, ops)

    with queue_q(d) as (qm, h):
        for i in range(30):
            h.put(b"m%03d" % i)
        assert h.get().data == b"m000"
        monkeypatch.setattr(RocksKV, "_write", write)
    assert met["left"] == 0
    damage = qm.damage()
    assert not any("failed" in line for line in damage), damage
    monkeypatch.setattr(RocksKV, "_write", real)
    with QueueManager.open(d, sweeping=QUIET, durability=OS) as qm:
        assert drain(qm) == [b"m%03d" % i for i in range(1, 30)]


def test_a_redo_log_past_its_limit_starts_again_after_a_drain_and_loses_nothing(tmp_path):
    """Past redolog.LIMIT (64 MiB of records) the redo log starts again, after a drain made
    with its appends held: it never grows without end under a queue that is never checkpointed,
    and a kill after it loses nothing."""
    d = str(tmp_path / "d")
    payload = b"x" * 1024
    n = redolog.LIMIT // len(payload) + 2000
    with queue_q(d, max_depth=n) as (qm, h):
        for i in range(n):
            h.put(b"%06d" % i + payload)
        records = SideLog(d, redolog.NAME).read()[0]
        assert os.path.getsize(os.path.join(d, "sweepq-redo")) < redolog.LIMIT
        assert redolog.replay(records[:1], 0)[1] > 0  # it starts after the writes RocksDB has
        crashed = as_killed(d, str(tmp_path / "crashed"))
    with QueueManager.open(crashed, sweeping=QUIET, durability=OS) as qm:
        assert qm.recovery.damaged == []
        got = drain(qm)
    assert len(got) == n and got[0][:6] == b"000000" and got[-1][:6] == b"%06d" % (n - 1)
