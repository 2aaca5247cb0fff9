"""What a group-commit cycle of 8 producers spends its time on, with the gathering (the shipped
``GroupSync``, engine/durable/journal.py: after a sync that served several callers the next
leader holds its sync back until as many have written again, at most ``COMMIT_DELAY``) and
without it (``delay`` 0: a sync starts as soon as the last one ended and someone waits), and
with the interpreter's switch interval cut from 5 ms to 0.2 ms.

Each row is a fresh queue manager (``sync="commit"``, persistent 1 KiB puts outside syncpoint,
``N`` messages in all, each producer on its own connection) in a fresh process: messages per
second, syncs, messages per sync, the wall time of a cycle (the run over its syncs), and each
``os.fdatasync``'s time (median) and their sum as a share of the wall time.

Usage: python docs/figures/group-cycle/gather55.py DIR N ROUNDS > docs/figures/group-cycle/gather55.txt
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

FORMS = [
    ("1 producer", 1, None, None),
    ("8 producers", 8, None, None),
    ("8, no gathering", 8, 0.0, None),
    ("8, switch 0.2 ms", 8, None, 0.0002),
]


def child(d: str, k: int, n: int, delay: float | None, switch: float | None) -> str:
    """One row: bench/durable.py's producers (the bench's own ``_Producers``, reached into from
    this measuring process only), each ``os.fdatasync`` of the process timed."""
    from sweepq.bench.durable import _Producers

    if switch is not None:
        sys.setswitchinterval(switch)
    shutil.rmtree(d, ignore_errors=True)
    runner = _Producers(d, k, False, n + 1000)
    real, durs = os.fdatasync, []

    def timed(fd: int) -> None:
        t = time.perf_counter()
        real(fd)
        durs.append(time.perf_counter() - t)

    os.fdatasync = timed  # this process only
    payload = b"x" * 1024
    runner.run(20 * k, payload)  # a warm-up
    durs.clear()
    if delay is not None:
        runner.qm.journal.group.delay = delay
    dt, syncs = runner.run(n, payload)
    runner.close()
    shutil.rmtree(d, ignore_errors=True)
    done = n // k * k
    return (
        f"{done / dt:7.0f} msg/s, {syncs:4d} syncs ({done / syncs:.1f} msg/sync), cycle "
        f"{dt / syncs * 1e6:4.0f} us; fdatasync median {statistics.median(durs) * 1e6:3.0f} us, "
        f"{sum(durs) / dt * 100:3.0f}% of the wall time"
    )


def main() -> None:
    if sys.argv[1] == "--child":
        _, _, d, k, n, delay, switch = sys.argv
        print(
            child(d, int(k), int(n), None if delay == "-" else float(delay), None if switch == "-" else float(switch))
        )
        return
    base, n, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(base, exist_ok=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = f"python docs/figures/group-cycle/gather55.py {base} {n} {rounds}"
    print(f"# {command}; commit {head}; {when}; load {_load()} at the start")
    for r in range(1, rounds + 1):
        for name, k, delay, switch in FORMS:
            args = [str(k), str(n), "-" if delay is None else str(delay), "-" if switch is None else str(switch)]
            out = subprocess.run(
                [sys.executable, __file__, "--child", os.path.join(base, "g"), *args],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            print(f"round {r}, {name:17}: {out}")
    print(f"# load {_load()} at the end")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
