"""The checkpoint written at open (engine/durable/ledger.py) after a clean close: the lanes the
open found as the last checkpoint lists them are written again as they were, not read back
out of the queue (issue 31 item 2: that read was a tenth of a million-message reopen); a
lane that changed since is read from the queue; a kill right after such an open, or after
gets that follow it, loses nothing and names nothing lost."""

from __future__ import annotations

import signal
import subprocess
import sys

import numpy as np

from sweepq.blobstore import BlobStore
from sweepq.engine import MD, OO, Persistence, QueueManager, SweeperSettings
from sweepq.engine.durable import ledger

from helpers import IO

P = Persistence.PERSISTENT
OFF = SweeperSettings(run=False)


def filled(d, n: int = 10) -> None:
    """Queue Q of a new data directory ``d`` with ``n`` persistent messages b"m0".. on two lanes
    (priorities 0 and 5, alternately), closed cleanly."""
    with QueueManager.open(d, sweeping=OFF) as qm:
        qm.define_queue("Q", default_persistence=P)
        h = qm.connect().open("Q", IO)
        for i in range(n):
            h.put(b"m%d" % i, MD(priority=5 * (i % 2)))


def checkpoint(d) -> ledger.Ledger:
    """The checkpoint of the closed data directory ``d``."""
    with BlobStore(d) as s:
        raw = s.checkpoint()
    assert raw is not None
    return ledger.parse(raw)


def checkpoint_while_open(qm: QueueManager) -> ledger.Ledger:
    raw = qm.internal.store().checkpoint()
    assert raw is not None
    return ledger.parse(raw)


def listed(book: ledger.Ledger) -> dict:
    return {k: (seqs.tolist(), ids.tolist()) for k, (seqs, ids) in book.records.items()}


def test_the_open_after_a_clean_close_writes_the_same_lanes_not_closed(tmp_path):
    d = tmp_path / "d"
    filled(d)
    before = checkpoint(d)
    assert before.closed and set(before.entries) == {("Q", 0), ("Q", 5)}
    with QueueManager.open(d, sweeping=OFF) as qm:
        now = checkpoint_while_open(qm)
        assert not now.closed  # a kill from here on is not a clean close
        assert listed(now) == listed(before)
        assert {k: bytes(v) for k, v in now.entries.items()} == {k: bytes(v) for k, v in before.entries.items()}


def test_an_unchanged_lane_is_written_from_the_last_checkpoint_not_read_from_the_queue(tmp_path):
    """snapshot() takes an unchanged lane's entry as the last checkpoint had it: given an entry
    that lists other messages than the queue holds, that is what it writes (only the open
    calls it so, when recovery found them equal)."""
    d = tmp_path / "d"
    filled(d, 4)
    with QueueManager.open(d, sweeping=OFF) as qm:
        last = ledger.Ledger(next_seq=100, blob_horizon=0)
        seqs = np.array([90, 91], np.uint64)
        ids = np.array([b"x" * 24, b"y" * 24], "V24")
        last.entries["Q", 0] = memoryview(b"".join(bytes(memoryview(p)) for p in ledger._pack_lane(b"Q", 0, seqs, ids)))
        last.records["Q", 0] = (seqs, ids)
        last.keep("Q", 0, seqs)
        last.keep("Q", 5, seqs)  # no entry for lane 5 in it: read from the queue
        assert last.unchanged == {("Q", 0)}
        got = ledger.parse(ledger.snapshot(qm, 100, 0, False, last))
        assert listed(got)["Q", 0] == ([90, 91], [b"x" * 24, b"y" * 24])
        assert len(listed(got)["Q", 5][0]) == 2  # m1, m3: from the queue


def test_a_lane_that_changed_is_read_from_the_queue(tmp_path):
    """Gets since the checkpoint, then a kill: the next open's checkpoint lists what is there."""
    d = tmp_path / "d"
    filled(d)
    out = subprocess.run([sys.executable, "-c", _GETS_THEN_KILLED, str(d), "3"], timeout=60)
    assert out.returncode == -signal.SIGKILL
    with QueueManager.open(d, sweeping=OFF) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        now = checkpoint_while_open(qm)
        assert sum(len(seqs) for seqs, _ in now.records.values()) == 7
        h = qm.connect().open("Q", OO.INPUT_SHARED)
        assert sorted(h.get().data for _ in range(7)) == sorted(b"m%d" % i for i in (0, 2, 4, 6, 8, 7, 9))


def test_a_kill_right_after_the_open_loses_nothing(tmp_path):
    d = tmp_path / "d"
    filled(d)
    out = subprocess.run([sys.executable, "-c", _GETS_THEN_KILLED, str(d), "0"], timeout=60)
    assert out.returncode == -signal.SIGKILL
    with QueueManager.open(d, sweeping=OFF) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == [] and qm.recovery.messages == 10
        assert sum(len(seqs) for seqs, _ in checkpoint_while_open(qm).records.values()) == 10
        h = qm.connect().open("Q", OO.INPUT_SHARED)
        assert [h.get().data for _ in range(10)] == [b"m%d" % i for i in (1, 3, 5, 7, 9, 0, 2, 4, 6, 8)]


_GETS_THEN_KILLED = (
    "import os, signal, sys\n"
    "from sweepq.engine import GMO, OO, QueueManager, SweeperSettings\n"
    "qm = QueueManager.open(sys.argv[1], sweeping=SweeperSettings(run=False))\n"
    "conn = qm.connect()\n"
    "h = conn.open('Q', OO.INPUT_SHARED)\n"
    "for _ in range(int(sys.argv[2])):\n"
    "    h.get(GMO.SYNCPOINT)\n"
    "conn.commit()\n"
    "os.kill(os.getpid(), signal.SIGKILL)\n"
)
