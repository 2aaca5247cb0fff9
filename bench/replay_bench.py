"""Replay benchmarks (issues 4 and 12): the numba kernel's events/s against the same kernel
interpreted (NUMBA_DISABLE_JIT=1, in a subprocess, on a smaller trace); ``sweepq replay``
end to end (file read -> metrics written) with its peak RSS per event; and the Spark
pipeline's events/s with each stage's time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time
from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate
n_queues, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
t = generate("many-queues", seconds=seconds, rate=rate, queues=n_queues, size=200, priorities=True, seed=1)
replay(t, record_header=HEAD_LEN, per_interval=False)  # compile (or warm up); the trace is checked and laid out once
best = 1e9
for _ in range(3):
    t0 = time.perf_counter()
    replay(t, record_header=HEAD_LEN, per_interval=False)
    best = min(best, time.perf_counter() - t0)
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
    """Events/s of the compiled kernel alone (the trace already read and checked) on
    ~``events_m`` million events over 100 queues, and of the same code interpreted on a
    hundredth of that."""
    rate = events_m * 1e6 / (100 * 2 * 60 * 1.6)  # ~1.6 events per put/get pair per queue
    jit = _run(100, 60.0, rate, True)
    py = _run(100, 60.0, rate / 100, False)
    return {"numba": jit, "python": py, "ratio": jit["events_per_s"] / py["events_per_s"]}


def end_to_end(events_m: float = 20.0) -> dict:
    """``sweepq replay TRACE --out DIR`` as a user runs it, in a subprocess: wall seconds and
    peak RSS, per event, on ~``events_m`` million events over 100 queues (one run after a
    warm-up run that compiles)."""
    from sweepq.sweeper.traces import generate, write

    rate = events_m * 1e6 / (100 * 2 * 600 * 1.6)
    t = generate("many-queues", seconds=600, rate=rate, queues=100, size=200, priorities=True, seed=1)
    n = len(t)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.parquet")
        write(t, path)
        del t
        cmd = [sys.executable, "-m", "sweepq.cli", "replay", path, "--out", os.path.join(d, "m")]
        subprocess.run(cmd, check=True, capture_output=True)  # compiles, if the cache is cold
        # The timed run's peak RSS: ru_maxrss of a fresh wrapper process's only child.
        wrapper = (
            "import resource, subprocess, sys, time\n"
            "t0 = time.perf_counter()\n"
            "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
            "print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        )
        out = subprocess.run([sys.executable, "-c", wrapper, *cmd], check=True, capture_output=True, text=True)
        secs_text, peak_kib = out.stdout.split()
        secs, peak = float(secs_text), int(peak_kib) * 1024
    return {
        "events": n,
        "seconds": secs,
        "events_per_s": n / secs,
        "peak_rss_bytes": peak,
        "rss_bytes_per_event": peak / n,
    }


def pipeline(events_m: float = 10.0, master: str = "local[*]", by_queue: bool = True) -> dict:
    """Events/s of ``sweepq pipeline`` on a synthetic trace laid out by queue (or not), after
    the JVM start, with each stage's time (the workers' warm-up is a stage of its own)."""
    from sweepq.pipeline.job import build_parser, run
    from sweepq.sweeper.traces import generate, write, write_by_queue

    rate = events_m * 1e6 / (100 * 2 * 600 * 1.6)
    t = generate("many-queues", seconds=600, rate=rate, queues=100, size=200, priorities=True, seed=2)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t" if by_queue else "t.parquet")
        if by_queue:
            write_by_queue(t, path, 16)
        else:
            write(t, path)
        n = len(t)
        del t
        args = build_parser().parse_args(["--traces", path, "--out", os.path.join(d, "out"), "--master", master])
        overall = run(args, log=lambda s: None)
    stages = overall["stage_seconds"]
    work = sum(v for k, v in stages.items() if k not in ("spark_start", "warm_up"))
    return {
        "events": n,
        "path": overall["path"],
        "stage_seconds": stages,
        "seconds": overall["seconds"],  # after the JVM start
        "events_per_s": n / overall["seconds"],
        "events_per_s_after_warm_up": n / max(work, 1e-9),
    }
