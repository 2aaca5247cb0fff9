"""Openers racing for one new data directory (issue 32 item 4): the loser is told it is in use.

Processes that open one data directory that does not exist yet, at the same moment: one of
them gets it; every other one is told another queue manager has it open, never that it is
damaged ("its CURRENT file is missing ... repair=True") nor that it is not a sweepq store,
which is what a directory another process is creating looks like to an opener that judges
it before it holds the directory's lock.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

OPENERS = 4
ROUNDS = 12

# One opener: for each round, wait for the go file, open the round's directory, write what
# happened; the winner keeps it open until the done file (so a loser cannot get it after it).
_OPENER = r"""
import os, sys, time
from sweepq.engine import MQError, QueueManager, SweeperSettings
work, me, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
open(os.path.join(work, f"ready-{me}"), "w").close()

def wait_for(name):
    while not os.path.exists(os.path.join(work, name)):
        time.sleep(0.001)

for r in range(rounds):
    wait_for(f"go-{r}")
    try:
        qm = QueueManager.open(os.path.join(work, f"d{r}"), sweeping=SweeperSettings(run=False))
    except MQError as e:
        qm, said = None, f"refused {int(e.reason)} " + " ".join(str(e).split())
    else:
        said = "opened"
    with open(os.path.join(work, f"r{r}-{me}.tmp"), "w") as f:
        f.write(said)
    os.rename(os.path.join(work, f"r{r}-{me}.tmp"), os.path.join(work, f"r{r}-{me}"))
    if qm is not None:
        wait_for(f"done-{r}")
        qm.close()
"""


def _wait_for(paths: list[str], procs: list[subprocess.Popen], deadline: float) -> None:
    """Until every path exists (a state the openers reach); fails when an opener died or the
    bound passed, instead of hanging (a loser of the last round is done: it exits 0)."""
    while not all(os.path.exists(p) for p in paths):
        dead = [p for p in procs if p.poll() not in (None, 0)]
        assert not dead, [p.communicate()[1][-2000:] for p in dead]
        assert time.monotonic() < deadline, f"openers stuck: {[p for p in paths if not os.path.exists(p)]}"
        time.sleep(0.005)


def test_openers_racing_for_a_new_directory_are_told_it_is_in_use_never_damaged(tmp_path):
    work = str(tmp_path)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _OPENER, work, str(i), str(ROUNDS)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(OPENERS)
    ]
    deadline = time.monotonic() + 300
    outcomes: list[list[str]] = []
    try:
        _wait_for([os.path.join(work, f"ready-{i}") for i in range(OPENERS)], procs, deadline)
        for r in range(ROUNDS):
            open(os.path.join(work, f"go-{r}"), "w").close()
            results = [os.path.join(work, f"r{r}-{i}") for i in range(OPENERS)]
            _wait_for(results, procs, deadline)
            said = []
            for p in results:
                with open(p) as f:
                    said.append(f.read())
            outcomes.append(said)
            open(os.path.join(work, f"done-{r}"), "w").close()
        for p in procs:
            assert p.wait(timeout=max(deadline - time.monotonic(), 1)) == 0, p.stderr.read()[-2000:]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for said in outcomes:
        assert said.count("opened") == 1, said  # the winner holds it until every loser has tried
        for s in said:
            assert s == "opened" or ("has it open" in s and "damaged" not in s and "repair" not in s), said
