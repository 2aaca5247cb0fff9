"""A ``sweepq pipeline`` run as a user starts it, in a session of its own (its JVM, Spark's
Python daemon and the daemon's workers all in it), for the tests that interrupt one or run one
beside a busy CPU: the processes of that session, whether they are all gone, and a run
interrupted where a chosen process of it is held.

An interrupt lands where it is meant to without waiting on time: :func:`interrupted` waits
until the process it is told of exists, stops it (SIGSTOP: the run cannot get past it), sends
SIGINT to the run's process group as a terminal does, and lets the process go on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

WAIT_S = 600  # bounds each run of a fresh JVM on a busy machine; nothing waits on time
# The session's start runs a first job of its own (pipeline/session.py warm_up), whose worker
# is the first the daemon forks: without it, the first worker is the run's own first job's.
NO_START_JOB = {**os.environ, "SWEEPQ_PIPELINE_FIRST_JOB": "0"}


def sweepq(*args: str) -> list[str]:
    """The command line of ``sweepq ARGS`` in this interpreter."""
    return [sys.executable, "-m", "sweepq", *args]


def session(sid: int) -> dict[int, tuple[str, int, int]]:
    """The living processes of session ``sid`` (a process started with ``start_new_session``
    and all it started: Spark's JVM, the Python daemon, which makes a process group of its own
    but stays in the session, and its workers): pid -> (name, parent, process group)."""
    found = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:  # not a process, or ended meanwhile
            continue
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if int(rest[3]) == sid and rest[0] != "Z":  # fields 6 (session) and 3 (state)
            found[int(entry)] = (name, int(rest[1]), int(rest[2]))
    return found


def gone(sid: int) -> list[str]:
    """Wait (bounded) until session ``sid`` has no process left; what is left at the bound."""
    end = time.monotonic() + WAIT_S
    while (left := session(sid)) and time.monotonic() < end:
        time.sleep(0.1)
    return [f"{pid} {name}" for pid, (name, _, _) in left.items()]


def worker(sid: int) -> int | None:
    """A Python worker of Spark's daemon in session ``sid``, if one is running: the daemon makes
    itself a process group of its own (pyspark's daemon.py), and forks a worker for a task."""
    procs = session(sid)
    daemons = {pid for pid, (_, _, group) in procs.items() if group == pid and pid != sid}
    return next((pid for pid, (_, parent, _) in procs.items() if parent in daemons), None)


def interrupted(
    args: list[str], held: Callable[[int], int | None], env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    """Run ``sweepq pipeline --master local[2] ARGS`` (with ``env``), wait until
    ``held(session)`` names a process, stop it, interrupt the run, let the process go on; once
    every process of the run is gone, the run's exit code, stdout and stderr."""
    proc = subprocess.Popen(
        sweepq("pipeline", "--master", "local[2]", *args),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own session and process group, as a terminal's foreground job
    )
    try:
        end = time.monotonic() + WAIT_S
        while (pid := held(proc.pid)) is None and proc.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        assert pid is not None, proc.communicate(timeout=WAIT_S)[1][-3000:]
        os.kill(pid, signal.SIGSTOP)
        os.killpg(proc.pid, signal.SIGINT)
        os.kill(pid, signal.SIGCONT)
        out, err = proc.communicate(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert gone(proc.pid) == []
    return proc.returncode, out, err
