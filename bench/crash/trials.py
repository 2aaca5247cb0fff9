"""Damage to the files of a data directory the harness built, then a drain and the verdict
with damage allowed (``sweepq crashtest --corrupt KIND``): proof that a damaged store is
reported by message, never delivered as data.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time

from ..harness_sizes import CORRUPTIONS  # noqa: F401  (trials.CORRUPTIONS, as before)
from .driver import KillPlan, run_worker_once
from .verdict import Verdict, judge, parse_logs, read_run_logs
from .worker import drain


def store_files(store_dir: str) -> dict[str, list[str]]:
    """The RocksDB files of a data directory by kind: ``sst`` (tables) and ``wal`` (logs)."""
    names = sorted(os.listdir(store_dir))
    return {
        "sst": [os.path.join(store_dir, n) for n in names if n.endswith(".sst")],
        "wal": [os.path.join(store_dir, n) for n in names if n.endswith(".log") and n[:-4].isdigit()],
    }


def corrupt(store_dir: str, kind: str, rng: random.Random) -> str:
    """Damage a closed data directory: ``sst-bitflip`` flips 3 bits in the data blocks (the first
    half) of its largest table, ``wal-bitflip`` 3 bits in the body of its newest write-ahead
    log, ``wal-truncate`` cuts the last third of that log, ``sst-truncate`` the last 200 bytes
    of its largest table. Returns what was done; raises FileNotFoundError when there is no
    such file."""
    files = store_files(store_dir)
    pool = files["sst" if kind.startswith("sst") else "wal"]
    pool = [p for p in pool if os.path.getsize(p) > 0]
    if not pool:
        raise FileNotFoundError(f"no {kind.split('-')[0]} file with data in {store_dir}")
    path = max(pool, key=os.path.getsize) if kind.startswith("sst") else pool[-1]
    size = os.path.getsize(path)
    name = os.path.basename(path)
    if kind.endswith("truncate"):
        cut = 200 if kind.startswith("sst") else max(size // 3, 1)
        with open(path, "r+b") as f:
            f.truncate(max(size - cut, 0))
        return f"{name}: cut {cut} of {size} bytes"
    hi = size // 2 if kind.startswith("sst") else size
    lo = 0 if kind.startswith("sst") else min(64, size - 1)
    offsets = sorted(rng.randrange(lo, max(hi, lo + 1)) for _ in range(3))
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ (1 << rng.randrange(8))]))
    return f"{name}: flipped a bit at offsets {offsets} of {size} bytes"


def corruption_trial(work_dir: str, kind: str, seed: int = 1, sync: str = "commit") -> tuple[Verdict, str]:
    """Build a backlog with one worker run, damage the store as ``kind`` says (:func:`corrupt`),
    then drain and judge with damage allowed: passes when every committed message either
    comes back intact or is named by MsgId in an OBJECT_DAMAGED (2101) error, and the store
    opens (when it refuses with an MQError, a second drain opens it with ``repair=True``, as
    the refusal advises, and the verdict notes both). The tables exist after a clean close
    (``sst-*``: the worker runs 400 units of work and closes); the write-ahead log holds data
    after a kill (``wal-*``: killed 0.7 s after it is ready). Returns the verdict and what was
    damaged."""
    rng = random.Random(seed)
    store_dir = os.path.join(work_dir, "store")
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir, exist_ok=True)
    t0 = time.monotonic()
    log_path = os.path.join(log_dir, "run-00001.log")
    if kind.startswith("sst"):
        _, problem = run_worker_once(store_dir, log_path, seed, 1, KillPlan("clean"), sync, max_ops=400, fill_only=True)
    else:
        _, problem = run_worker_once(store_dir, log_path, seed, 1, KillPlan("delay", delay=0.7), sync, fill_only=True)
    try:
        what = corrupt(store_dir, kind, rng)
    except FileNotFoundError as e:
        what = f"nothing damaged: {e}"
    drain_log = os.path.join(log_dir, "drain.log")
    why = drain(store_dir, drain_log, sync)
    notes = []
    if why and why.startswith("MQError"):
        # Refused, as the issue allows, with advice: an operator would open it again with
        # repair=True. In a new process: a refused open may hold the store's lock in this one.
        notes.append(f"open refused: {why}")
        os.remove(drain_log)
        cmd = [sys.executable, "-m", "sweepq.bench.crash", "drain", "--data-dir", store_dir, "--log", drain_log]
        out = subprocess.run([*cmd, "--sync", sync, "--repair"], capture_output=True, text=True)
        why = out.stderr.strip().splitlines()[-1] if out.returncode else None
        with open(drain_log) as f:
            moved = next((line.split()[1:] for line in f if line.startswith("RP")), None)
        if moved is not None:
            notes.append(f"opened with repair=True, which moved to lost/: {', '.join(moved) or 'nothing'}")

    verdict = judge(parse_logs(read_run_logs(log_dir)), allow_damaged=True)
    verdict.notes.extend(notes)
    verdict.seed, verdict.kills, verdict.seconds = seed, 0 if kind.startswith("sst") else 1, time.monotonic() - t0
    verdict.notes.insert(0, f"damage: {kind}, {what}")
    if why:
        verdict.violations["final open failed"].append(why)
    if problem:
        verdict.violations["worker failed"].append(problem)
    return verdict, what
