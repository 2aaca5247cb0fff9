"""Replay benchmarks (issue 4): the numba kernel's events/s against the same kernel
interpreted (NUMBA_DISABLE_JIT=1, in a subprocess, on a smaller trace), and the Spark
pipeline's events/s end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

_CHILD = r"""
import json, sys, time
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate
n_queues, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
t = generate("many-queues", seconds=seconds, rate=rate, queues=n_queues, size=200, priorities=True, seed=1)
replay(t, per_interval=False)  # compile (or warm up)
best = 1e9
for _ in range(3):
    t0 = time.perf_counter(); replay(t, per_interval=False); best = min(best, time.perf_counter() - t0)
print(json.dumps({"events": len(t), "seconds": best, "events_per_s": len(t) / best}))
"""


def _run(n_queues: int, seconds: float, rate: float, jit: bool) -> dict:
    env = dict(os.environ)
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n_queues), str(seconds), str(rate)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernel(events_m: float = 10.0) -> dict:
    """Events/s of the compiled kernel on ~``events_m`` million events over 100 queues, and of
    the same code interpreted on a hundredth of that."""
    rate = events_m * 1e6 / (100 * 2 * 60 * 1.6)  # ~1.6 events per put/get pair per queue
    jit = _run(100, 60.0, rate, True)
    py = _run(100, 60.0, rate / 100, False)
    return {"numba": jit, "python": py, "ratio": jit["events_per_s"] / py["events_per_s"]}


def pipeline(events_m: float = 10.0, master: str = "local[*]") -> dict:
    """Events/s of ``sweepq pipeline`` end to end (Spark start-up included) on a synthetic trace."""
    from sweepq.pipeline.job import build_parser, run
    from sweepq.sweeper.traces import generate, write

    rate = events_m * 1e6 / (1000 * 2 * 300 * 1.6)
    t = generate("many-queues", seconds=300, rate=rate, queues=1000, size=200, priorities=True, seed=2)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.parquet")
        write(t, path)
        args = build_parser().parse_args(["--traces", path, "--out", os.path.join(d, "out"), "--master", master])
        t0 = time.perf_counter()
        overall = run(args, log=lambda s: None)
        secs = time.perf_counter() - t0
    return {"events": len(t), "seconds": secs, "events_per_s": len(t) / secs, "queues": overall["queues"]}
