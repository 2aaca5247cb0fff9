"""The change log's append + sync: main's SideLog (O_APPEND, the file grows every record)
against the preallocated one (pwrite in place over zeros), and the fsync floor.

Usage: python docs/figures/commit-recycle/side_log.py DIR ROUNDS BASE
(BASE: the commit whose blobstore/files.py is main's; it is loaded from git show).

Run in a checkout of 30061b3 (`git checkout 30061b3`, then rebuild): the preallocated
SideLog was tried there and not kept (docs/durable-bench.md); main's files.py has none.
"""

import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time

from sweepq.blobstore import files

old_src = subprocess.run(
    ["git", "show", f"{sys.argv[3]}:blobstore/files.py"], capture_output=True, text=True, check=True
).stdout
old_src = old_src.replace("from .kv import", "from sweepq.blobstore.kv import").replace(
    "from .rocksfiles import", "from sweepq.blobstore.rocksfiles import"
)
spec = importlib.util.spec_from_loader("oldfiles", loader=None)
oldfiles = importlib.util.module_from_spec(spec)
sys.modules["oldfiles"] = oldfiles
exec(compile(old_src, "oldfiles", "exec"), oldfiles.__dict__)
d = tempfile.mkdtemp(dir=sys.argv[1] if len(sys.argv) > 1 else "/tmp")
N = 400
rec = os.urandom(300)
val = os.urandom(1024)
old = oldfiles.SideLog(d, "old")
old.start(b"x")
new = files.SideLog(d, "new")
new.start(b"x")
fl = os.open(d + "/floor", os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def floor():
    for _ in range(N):
        os.write(fl, val)
        os.fdatasync(fl)


def side(log):
    def f():
        for _ in range(N):
            log.append(rec)
            log.sync()

    return f


V = {"floor": floor, "growing (main)": side(old), "in place (prealloc)": side(new)}
res = {k: [] for k in V}
for _r in range(int(sys.argv[2]) if len(sys.argv) > 2 else 7):
    for k, f in V.items():
        t = time.perf_counter()
        f()
        res[k].append((time.perf_counter() - t) / N)
fm = statistics.median(res["floor"])
for k, v in res.items():
    m = statistics.median(v)
    print(f"{k:20s} {m * 1e6:6.0f} us  {fm / m:.2f}x floor ({min(v) * 1e6:.0f}-{max(v) * 1e6:.0f})")
print("load", " ".join(f"{x:.2f}" for x in os.getloadavg()))
