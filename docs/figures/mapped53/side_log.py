"""A side-log append three ways, and a durable sync="os" put+get pair two ways, each in a fresh
process, alternating (issue 31: the change log written through a memory map, measured and not
kept, since a file cut while the store is open then ends the process with SIGBUS).

Appends (of SIZE bytes):

* ``grows``: today's SideLog not in place (``pwrite`` at the logical end, the file grows), the
  change log under sync="os" and "none";
* ``in-place``: today's SideLog in place (``pwrite`` over zeros kept a MiB ahead), the change
  log under sync="commit";
* ``mapped``: the SideLog of commit ddf4dc2 with ``mapped=True`` (a copy into a shared memory
  map of the chunks at the log's end, zeros kept a MiB ahead).

Pairs (``pair-today``, ``pair-mapped``): ``sweepq.bench.durable.open_sweepq(d, "os")``, put 2,000
of 1 KiB then get them, best of 7 rounds, with today's blobstore/files.py or with commit
ddf4dc2's, whose SideLog maps every log the store does not sync after each call.

Usage: python docs/figures/mapped53/side_log.py ROUNDS N SIZE...  (from the repository's root,
the sweepq venv's python, the compiled form built from this tree). Prints each way's median
microseconds (min-max) over ROUNDS rounds.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

_LOAD = r"""
import importlib.util, os, sys, time
import sweepq.blobstore
which, d, mapped_files = sys.argv[1], sys.argv[2], sys.argv[3]
if which in ("mapped", "pair-mapped"):  # commit ddf4dc2's files.py, before the store imports it
    spec = importlib.util.spec_from_file_location("sweepq.blobstore.files", mapped_files)
    m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)

    class _AsDdf4dc2(m.SideLog):  # as ddf4dc2's store made them: mapped unless synced every call
        def __init__(self, path, name, redo=False, mapped=None):
            super().__init__(path, name, mapped=not redo if mapped is None else mapped)

    m.SideLog = _AsDdf4dc2
from sweepq.blobstore import files as m
"""

_APPENDS = (
    _LOAD
    + r"""
n, size = int(sys.argv[4]), int(sys.argv[5])
os.makedirs(d)
log = m.SideLog(d, "t", mapped=True) if which == "mapped" else m.SideLog(d, "t", which == "in-place")
log.start(b"H")
rec = b"W" + b"x" * (size - 1)
t = time.perf_counter()
for _ in range(n):
    log.append(rec)
assert log.failed is None
print((time.perf_counter() - t) / n * 1e6)
"""
)

_PAIRS = (
    _LOAD
    + r"""
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
)


def _median(times: dict[str, list[float]], base: str, label: str) -> None:
    b = statistics.median(times[base])
    for which, ts in times.items():
        m = statistics.median(ts)
        spread = f"({min(ts):.2f}-{max(ts):.2f})"
        print(f"{label} {which:11} {m:5.2f} us {spread}, {m / b:.2f} x {base}")


def main() -> None:
    rounds, n, sizes = int(sys.argv[1]), int(sys.argv[2]), [int(a) for a in sys.argv[3:]]
    mapped = subprocess.run(["git", "show", "ddf4dc2:blobstore/files.py"], capture_output=True, check=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        mapped_files = os.path.join(tmp, "files_mapped.py")
        with open(mapped_files, "wb") as f:
            f.write(mapped)

        def child(code: str, which: str, name: str, *more: str) -> float:
            d = os.path.join(tmp, name)
            args = [sys.executable, "-c", code, which, d, mapped_files, *more]
            return float(subprocess.run(args, capture_output=True, text=True, check=True).stdout)

        for size in sizes:
            appends: dict[str, list[float]] = {w: [] for w in ("grows", "in-place", "mapped")}
            for r in range(rounds):
                for which in appends:
                    appends[which].append(child(_APPENDS, which, f"{size}-{which}-{r}", str(n), str(size)))
            _median(appends, "grows", f"append of {size:4} B:")
        pairs: dict[str, list[float]] = {w: [] for w in ("pair-today", "pair-mapped")}
        for r in range(rounds):
            for which in pairs:
                pairs[which].append(child(_PAIRS, which, f"{which}-{r}"))
        _median(pairs, "pair-today", "durable os put+get:")


if __name__ == "__main__":
    main()
