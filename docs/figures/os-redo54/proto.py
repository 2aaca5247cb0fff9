"""What `sync="os"` would cost a put+get end to end with RocksDB's own log off (issue 31: the
"no-rocks-log" and "log+witness" designs of docs/durable-bench.md, measured through the whole
queue manager instead of as floors). A measurement, not a design: the patched contenders are
NOT crash-safe (a kill -9 loses RocksDB's memtable, and the open's redo is not arranged for it).

Usage: python docs/figures/os-redo54/proto.py ROUNDS [MESSAGES]

Contenders, rounds interleaved by bench/durable.py's own fill_drain_rounds (put MESSAGES of
1 KiB, then get them), each ratio paired against SQLiteQueue OFF's round beside it:

  SQLiteQueue OFF        the goal's baseline
  sweepq os (shipped)    a RocksDB write with its log, and a change-log record of the
                         write's first 64 bytes, per call
  redo in place, no log  the store opened with redo, as under sync="commit": the change log
                         holds each write whole, written in place over zeros kept ahead;
                         RocksDB written with its log off
  redo, no log           the same with the change log growing by appends, as under "os"
  redo, no log, witness  the same, and a 24-byte pwrite to a second file per call: the witness
                         that would let an open see a change log cut after a kill (made from
                         Python around the call: dearer than it would be in C)
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from rocksdict import WriteOptions

from sweepq.bench import durable
from sweepq.blobstore import sidelog
from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings, storage

_MODE = {"redo": False, "in_place": None}  # what the next store opened gets (set by each contender)
_storage_init = storage.Storage.__init__
_side_init = sidelog.SideLog.__init__


def _storage(self, *a, **k):
    k["redo"] = k.get("redo", False) or _MODE["redo"]
    _storage_init(self, *a, **k)


def _side(self, path, name, in_place=False):
    _side_init(self, path, name, in_place if _MODE["in_place"] is None else _MODE["in_place"])


storage.Storage.__init__ = _storage  # type: ignore[method-assign]
sidelog.SideLog.__init__ = _side  # type: ignore[method-assign]


def _contender(redo: bool, in_place: bool | None, rocks_log: bool, witness: bool):
    def make(path: str) -> durable.Opened:
        _MODE.update(redo=redo, in_place=in_place)
        try:
            qm = QueueManager.open(path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os"))
            qm.define_queue("Q", default_persistence=Persistence.PERSISTENT)
            if not rocks_log:
                kv = qm.blob_store()._access.kv()  # a measurement's reach inside: the design is not built
                wo = WriteOptions()
                wo.disable_wal = True  # type: ignore[method-assign, assignment]
                kv._wopts = wo
            h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED)
            put, get = h.put, h.get
            put(b"warm")  # the side logs are made at their first use: under this mode
            get()
        finally:
            _MODE.update(redo=False, in_place=None)
        if not witness:
            return durable.Opened(put, lambda: get().data, qm.close)
        fd = os.open(os.path.join(path, "witness"), os.O_WRONLY | os.O_CREAT, 0o600)
        at = [0]
        entry = b"w" * 24

        def wput(data: bytes) -> None:
            put(data)
            os.pwrite(fd, entry, at[0])
            at[0] += 24

        def wget() -> bytes:
            m = get()
            os.pwrite(fd, entry, at[0])
            at[0] += 24
            return m.data

        def close() -> None:
            os.close(fd)
            qm.close()

        return durable.Opened(wput, wget, close)

    return make


CONTENDERS = {
    durable.SQLITE_OFF: lambda p: durable._sqlite_queue(p, "OFF"),
    "sweepq os (shipped)": _contender(False, None, True, False),
    "redo in place, no log": _contender(True, True, False, False),
    "redo, no log": _contender(True, False, False, False),
    "redo, no log, witness": _contender(True, False, False, True),
}


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    rounds = int(sys.argv[1])
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    here = os.path.dirname(os.path.abspath(__file__))
    head = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"# python docs/figures/os-redo54/proto.py {' '.join(sys.argv[1:])}; commit {head.stdout.strip()}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {_load()} at the start"
    )
    res = durable.fill_drain_rounds(CONTENDERS, n, b"x" * 1024, rounds)
    ref = res[durable.SQLITE_OFF]["round_seconds"]
    print("| contender | median round, put+get pairs/s | paired ratio to SQLiteQueue OFF |")
    print("|---|--:|--:|")
    for name, r in res.items():
        times = sorted(r["round_seconds"])
        print(f"| {name} | {n / times[len(times) // 2]:,.0f} | {durable._paired(r['round_seconds'], ref):.2f} x |")
    print(f"# load {_load()} at the end")


if __name__ == "__main__":
    main()
