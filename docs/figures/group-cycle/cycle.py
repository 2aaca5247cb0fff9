"""What one group-commit cycle is made of (issue 31): k producer threads, each a persistent put
under syncpoint then commit, sync="commit", on a queue manager in DIR. Times, with
time.perf_counter_ns into lists, one cycle = one GroupSync sync and the gap to the next:

  sync        the store's sync (RocksKV.sync: RocksDB's flush_wal(True) on the leader's thread
              and the change log's fdatasync on the store's sync thread, at once);
  side start  from the sync's submit of the change log's fdatasync to its thread running it;
  gap         from a sync's end to the next one's start: the released callers' put and
              commit, one after the other under the GIL, and every hand-over between them;
  put, commit the calls' own times (commit: up to its wait for the sync);
  end->ret    from a sync's end until a caller it covered returns from commit;

and counts the condition wake-ups in GroupSync per sync. Usage:
  python cycle.py DIR K MESSAGES
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from bisect import bisect_right

from sweepq.blobstore import rocks
from sweepq.engine import OO, PMO, DurabilitySettings, Persistence, QueueManager, SweeperSettings

ns = time.perf_counter_ns
side_start: list[int] = []
_sync_all = rocks._sync_all


def _timed_sync_all(logs, submitted):
    side_start.append(ns() - submitted)
    _sync_all(logs)


def _sync(self) -> None:  # RocksKV.sync with the submit's time handed to the sync thread
    logs = [log for log in list(self._logs.values()) if log.unsynced]
    side = self._syncing().submit(_timed_sync_all, logs, ns()) if logs else None
    try:
        self._call(lambda: self._db.flush_wal(True), lambda: "flush_wal", True)
    finally:
        if side is not None:
            side.result()


class _Counting(threading.Condition):
    wakes = 0

    def wait(self, timeout=None):
        r = super().wait(timeout)
        _Counting.wakes += 1
        return r


def main(base: str, k: int, n: int) -> None:
    rocks.RocksKV.sync = _sync
    qm = QueueManager.open(
        tempfile.mkdtemp(dir=base), sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="commit")
    )
    qm.define_queue("Q", default_persistence=Persistence.PERSISTENT, max_depth=10**7)
    conns = [qm.connect() for _ in range(k)]
    handles = [c.open("Q", OO.OUTPUT) for c in conns]
    group = qm.journal.group
    group._cond = _Counting(threading.Lock())
    syncs: list[tuple[int, int]] = []
    inner = group._sync

    def timed() -> None:
        a = ns()
        inner()
        syncs.append((a, ns()))

    group._sync = timed
    events: list[tuple[int, int, int]] = []  # (put start, put end, commit end)

    def producer(i: int) -> None:
        put, c, payload = handles[i].put, conns[i], b"x" * 1024
        for _ in range(n // k):
            a = ns()
            put(payload, None, PMO.SYNCPOINT)
            b = ns()
            c.commit()
            events.append((a, b, ns()))

    for _ in range(2):  # the first round warms up
        syncs.clear(), events.clear(), side_start.clear()
        _Counting.wakes = 0
        threads = [threading.Thread(target=producer, args=(i,)) for i in range(k)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        dt = time.perf_counter() - t0
    qm.close()

    def med(v: list[int]) -> str:
        return f"{statistics.median(v) / 1e3:6.0f} us"

    ends = [b for _, b in syncs]
    gaps = [syncs[i + 1][0] - syncs[i][1] for i in range(len(syncs) - 1)]
    ret = [r - ends[j] for _, _, r in events if (j := bisect_right(ends, r) - 1) >= 0]
    print(
        f"k={k}: {n / dt:5.0f} msg/s, {n / len(syncs):.1f} msg a sync,"
        f" {_Counting.wakes / len(syncs):.1f} wake-ups a sync;"
        f" medians: sync {med([b - a for a, b in syncs])} (side start {med(side_start)}), gap {med(gaps)},"
        f" put {med([b - a for a, b, _ in events])}, commit {med([r - b for _, b, r in events])}, end->ret {med(ret)};"
        f" load {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
