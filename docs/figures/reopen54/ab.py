"""A reopen of 1,000,000 persistent messages, half swept, with and without RocksDB's
compaction of the messages' table files that are mostly deletions (blobstore/rocks.py,
DELETES_TO_COMPACT).

Usage: python docs/figures/reopen54/ab.py DIR ROUNDS [MESSAGES [MODES]]

Builds two data directories with bench/durable.py's own builder (the bench's recovery row):
"off" with the collector switched off in the building process (as every directory was built
before it), "on" as shipped. Then, ROUNDS times, each is copied afresh and opened in a fresh
process (the sweeper off), alternating; each line is one open's wall and CPU seconds and
the peak resident size. MODES (default "off,on") picks the directories built."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

BUILD = r"""
import sys
import sweepq.blobstore.rocks as rocks
if sys.argv[3] == "off":
    rocks.DELETION_WINDOW = rocks.DELETES_TO_COMPACT = 1 << 62  # never reached: no file marked
from sweepq.bench.durable import build_recovery_dir
build_recovery_dir(sys.argv[1], int(sys.argv[2]))
"""

OPEN = r"""
import sys, time
from sweepq.engine import QueueManager, SweeperSettings
t0, c0 = time.perf_counter(), time.process_time()
qm = QueueManager.open(sys.argv[1], sweeping=SweeperSettings(run=False))
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
n = qm.recovery.messages
qm.close()
import resource
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{wall:.3f} s ({cpu:.3f} s of CPU), {n:,} messages, peak RSS {rss:,.0f} MB")
"""


def _load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main() -> None:
    where, rounds = sys.argv[1], int(sys.argv[2])
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
    modes = sys.argv[4].split(",") if len(sys.argv) > 4 else ["off", "on"]
    os.makedirs(where, exist_ok=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    load = _load()
    print(
        f"# python docs/figures/reopen54/ab.py {' '.join(sys.argv[1:])}; commit {head}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load {load} at the start"
    )
    for mode in modes:
        shutil.rmtree(f"{where}/{mode}", ignore_errors=True)
        subprocess.run([sys.executable, "-c", BUILD, f"{where}/{mode}", str(n), mode], check=True)
    for r in range(rounds):
        for mode in modes:
            copy = f"{where}/open"
            shutil.rmtree(copy, ignore_errors=True)
            shutil.copytree(f"{where}/{mode}", copy)
            out = subprocess.run([sys.executable, "-c", OPEN, copy], capture_output=True, text=True, check=True)
            print(f"round {r + 1} collector {mode:<3}: {out.stdout.strip()}", flush=True)
    load = _load()
    print(f"# load {load} at the end")


if __name__ == "__main__":
    main()
