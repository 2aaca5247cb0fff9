"""A side-log append three ways, and a durable sync="os" put+get pair two ways, each in a fresh
process, alternating (issue 31: the logs of a store that defers written through a map of
their ends, with the compiled copy's bus-error guard, blobstore/sidelog.py).

Appends (of SIZE bytes), today's SideLog:

* ``grows``: not in place (``pwrite`` at the logical end, the file grows), the change log's and
  the redo log's way under sync="os" before this change;
* ``in-place``: in place (``pwrite`` over zeros kept a MiB ahead), the change log under
  sync="commit";
* ``mapped``: ``mapped=True`` (a copy into a shared map of the log's end, zeros kept ahead).

Pairs: ``sweepq.bench.durable.open_sweepq(d, "os")``, put 2,000 of 1 KiB then get them, best of
7 rounds; ``pair-pwrite`` with the store's side logs made as before (``mapped=False``: RocksKV's
SideLog replaced by one that ignores it), ``pair-mapped`` as shipped.

Usage: python docs/figures/mapped57/side_log.py ROUNDS N SIZE...  (from the repository's root,
the sweepq venv's python, the compiled form built from this tree). Prints each way's median
microseconds (min-max) over ROUNDS rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

_APPENDS = r"""
import os, sys, time
from sweepq.blobstore.sidelog import SideLog
which, d, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
os.makedirs(d)
log = SideLog(d, "t", which == "in-place", which == "mapped")
log.start(b"H")
rec = b"W" + b"x" * (size - 1)
t = time.perf_counter()
for _ in range(n):
    log.append(rec)
assert log.failed is None
print((time.perf_counter() - t) / n * 1e6)
"""

_PAIRS = r"""
import sys, time
from sweepq.blobstore import rocks
which, d = sys.argv[1], sys.argv[2]
if which == "pair-pwrite":
    class _Written(rocks.SideLog):
        def __init__(self, path, name, in_place=False, mapped=False):
            super().__init__(path, name, in_place)
    rocks.SideLog = _Written
from sweepq.bench.durable import open_sweepq
o = open_sweepq(d, "os")
msg, best = b"m" * 1024, float("inf")
for _ in range(7):
    t = time.perf_counter()
    for _ in range(2000):
        o.put(msg)
    for _ in range(2000):
        o.get()
    best = min(best, time.perf_counter() - t)
o.close()
print(best / 2000 * 1e6)
"""


def _median(times: dict[str, list[float]], base: str, label: str) -> None:
    b = statistics.median(times[base])
    for which, ts in times.items():
        m = statistics.median(ts)
        spread = f"({min(ts):.2f}-{max(ts):.2f})"
        print(f"{label} {which:11} {m:5.2f} us {spread}, {m / b:.2f} x {base}")


def main() -> None:
    rounds, n, sizes = int(sys.argv[1]), int(sys.argv[2]), [int(a) for a in sys.argv[3:]]
    with tempfile.TemporaryDirectory() as tmp:

        def child(code: str, which: str, name: str, *more: str) -> float:
            args = [sys.executable, "-c", code, which, os.path.join(tmp, name), *more]
            return float(subprocess.run(args, capture_output=True, text=True, check=True).stdout)

        for size in sizes:
            appends: dict[str, list[float]] = {w: [] for w in ("grows", "in-place", "mapped")}
            for r in range(rounds):
                for which in appends:
                    appends[which].append(child(_APPENDS, which, f"{size}-{which}-{r}", str(n), str(size)))
            _median(appends, "grows", f"append of {size:4} B:")
        pairs: dict[str, list[float]] = {w: [] for w in ("pair-pwrite", "pair-mapped")}
        for r in range(rounds):
            for which in pairs:
                pairs[which].append(child(_PAIRS, which, f"{which}-{r}"))
        _median(pairs, "pair-pwrite", "durable os put+get:")


if __name__ == "__main__":
    main()
