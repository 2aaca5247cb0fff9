"""Resident bytes per in-memory message beyond its payload.

Measured in a fresh subprocess so nothing else in the process moves the resident set:
the payloads are created first (they are the application's), then the baseline RSS is
read, then every payload is put; the growth divided by the count, less the payload
length, is what the queue costs per message.
"""

from __future__ import annotations

import json
import subprocess
import sys

_CHILD = r"""
import gc, json, os, sys
import psutil
from sweepq.engine import OO, QueueManager
n, size = int(sys.argv[1]), int(sys.argv[2])
payloads = [os.urandom(size) for _ in range(n)]
# No sweeper: on a loaded machine the loop outlasts its 5 s interval, a sweep moves part of
# the queue out, and the store's memory and the freed records raised the figure to 121-135 B.
qm = QueueManager(sweeper=False); qm.define_queue("M")
h = qm.connect().open("M", OO.OUTPUT)
h.put(b"warm-up"); gc.collect()
proc = psutil.Process()
before = proc.memory_info().rss
for p in payloads:
    h.put(p)
gc.collect()
after = proc.memory_info().rss
print(json.dumps({"messages": n, "payload": size, "rss_growth": after - before}))
"""


def resident_bytes_per_message(messages: int = 1_000_000, payload: int = 100) -> dict:
    """Run the measurement in a subprocess; return its figures and the per-message overhead."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(messages), str(payload)],
        check=True,
        capture_output=True,
        text=True,
    )
    fig = json.loads(out.stdout)
    fig["bytes_per_message"] = fig["rss_growth"] / messages
    fig["overhead_per_message"] = fig["bytes_per_message"] - payload
    return fig
