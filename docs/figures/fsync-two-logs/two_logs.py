"""What a power-safe call costs when it must sync one log or two (issue 31: `sync="commit"`,
one producer, against the fsync floor).

sweepq's `sync="commit"` syncs two growing files per call: RocksDB's write-ahead log and the
change log (blobstore/changelog.py), the second at the same time on another thread
(blobstore/rocks.py `RocksKV.sync`). This measures, on plain files in one directory, with
alternating rounds in one process:

* one:      append 1 KiB to one file, fdatasync it (the floor of `sweepq bench durable`);
* two-seq:  append 1 KiB to each of two files, fdatasync one then the other;
* two-par:  the same, the second fdatasync on another thread at the same time (what sweepq does);
* one-two:  two records appended to one file, one fdatasync (what a single log would do);
* pre-one:  1 KiB written in place into a file zero-filled and synced beforehand (a
            preallocated log, as SQLite's WAL is rewritten from its start), one fdatasync;
* pre-seq:  one growing file and one preallocated, synced in turn;
* pre-par:  the same, synced at once.

A sync of a growing file also commits the filesystem's journal (the file's size changed); a
sync of a preallocated one writes the data alone.

Run: python docs/figures/fsync-two-logs/two_logs.py [DIR] [ROUNDS]   (DIR default: /tmp)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time

OPS = 200  # synced calls per round
BUF = b"x" * 1024
PREALLOCATED = 16 << 20  # the preallocated file's bytes, written in place round and round


def _open(d: str, name: str) -> int:
    return os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_TRUNC)


class Side:
    """A thread that fdatasyncs one file when asked: the second log's syncer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.go = threading.Event()
        self.done = threading.Event()
        self.stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while True:
            self.go.wait()
            self.go.clear()
            if self.stop:
                return
            os.fdatasync(self.fd)
            self.done.set()


def main() -> None:
    d = sys.argv[1] if len(sys.argv) > 1 else tempfile.gettempdir()
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    with tempfile.TemporaryDirectory(dir=d) as tmp:
        a, b = _open(tmp, "a"), _open(tmp, "b")
        side = Side(b)

        def one() -> None:
            os.write(a, BUF)
            os.fdatasync(a)

        def two_seq() -> None:
            os.write(a, BUF)
            os.write(b, BUF)
            os.fdatasync(a)
            os.fdatasync(b)

        def two_par() -> None:
            os.write(a, BUF)
            os.write(b, BUF)
            side.go.set()
            os.fdatasync(a)
            side.done.wait()
            side.done.clear()

        c = os.open(os.path.join(tmp, "c"), os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        os.write(c, bytes(PREALLOCATED))
        os.fsync(c)
        side_pre = Side(c)
        at = [0]

        def write_in_place() -> None:
            os.pwrite(c, BUF, at[0])
            at[0] = (at[0] + len(BUF)) % PREALLOCATED

        def pre_one() -> None:
            write_in_place()
            os.fdatasync(c)

        def pre_seq() -> None:
            os.write(a, BUF)
            write_in_place()
            os.fdatasync(a)
            os.fdatasync(c)

        def pre_par() -> None:
            os.write(a, BUF)
            write_in_place()
            side_pre.go.set()
            os.fdatasync(a)
            side_pre.done.wait()
            side_pre.done.clear()

        def one_two() -> None:
            os.write(a, BUF)
            os.write(a, BUF)
            os.fdatasync(a)

        kinds = {
            "one": one,
            "two-seq": two_seq,
            "two-par": two_par,
            "one-two": one_two,
            "pre-one": pre_one,
            "pre-seq": pre_seq,
            "pre-par": pre_par,
        }
        per_op: dict[str, list[float]] = {k: [] for k in kinds}
        for _ in range(rounds):
            for k, f in kinds.items():
                t = time.perf_counter()
                for _ in range(OPS):
                    f()
                per_op[k].append((time.perf_counter() - t) / OPS * 1e6)
        for s in (side, side_pre):
            s.stop = True
            s.go.set()
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}, dir {d}, {rounds} rounds of {OPS} synced calls each, loadavg {load}")
    base = statistics.median(per_op["one"])
    for k, v in per_op.items():
        m = statistics.median(v)
        print(f"{k:8s} median {m:6.0f} us a call (rounds {min(v):.0f}-{max(v):.0f}), {base / m:.2f} x one")


if __name__ == "__main__":
    main()
