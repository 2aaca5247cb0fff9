"""One side-log append of 90 B, three ways, each in a fresh process, alternating (issue 31):

* ``append``: the SideLog of commit 408a6e7 (``os.write`` on an O_APPEND file), the form
  before this change, read from git;
* ``grows``: today's SideLog not in place (``pwrite`` at the logical end, the file grows):
  a store without redo (sync="os" and "none");
* ``in-place``: today's SideLog in place (``pwrite`` over zeros kept a MiB ahead): a store
  with redo (sync="commit"), whose syncs are this log's.

Usage: python docs/figures/redo31/side_log.py ROUNDS N  (from the repository's root, the
sweepq venv's python). Prints each way's median microseconds an append over ROUNDS rounds
of N appends (min-max).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import importlib.util, os, sys, time
which, n, d = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if which == "append":
    import sweepq.blobstore.files
    spec = importlib.util.spec_from_file_location("sweepq.blobstore.files_before", sys.argv[4])
    m = importlib.util.module_from_spec(spec); sys.modules[spec.name] = m; spec.loader.exec_module(m)
    log = m.SideLog(d, "t")
else:
    from sweepq.blobstore import files as m
    log = m.SideLog(d, "t", which == "in-place")
log.start(b"H")
rec = b"W" + b"x" * 89
t = time.perf_counter()
for _ in range(n):
    log.append(rec)
assert log.failed is None
print((time.perf_counter() - t) / n * 1e6)
"""


def main() -> None:
    rounds, n = int(sys.argv[1]), int(sys.argv[2])
    before = subprocess.run(["git", "show", "408a6e7:blobstore/files.py"], capture_output=True, check=True).stdout
    times: dict[str, list[float]] = {"append": [], "grows": [], "in-place": []}
    with tempfile.TemporaryDirectory() as tmp:
        old = os.path.join(tmp, "files_before.py")
        with open(old, "wb") as f:
            f.write(before)
        for r in range(rounds):
            for which in times:
                d = os.path.join(tmp, f"{which}-{r}")
                os.makedirs(d)
                out = subprocess.run(
                    [sys.executable, "-c", _CHILD, which, str(n), d, old], capture_output=True, text=True, check=True
                )
                times[which].append(float(out.stdout))
    base = statistics.median(times["append"])
    for which, ts in times.items():
        m = statistics.median(ts)
        print(f"{which:9} {m:5.2f} us an append ({min(ts):.2f}-{max(ts):.2f}), {m / base:.2f} x append")


if __name__ == "__main__":
    main()
