"""Ctrl-C on the kill -9 harnesses (``sweepq crashtest``, ``sweepq crashtest-server``): the
driver's children end with it, the exit is 130, and the user is told where the logs and the
store of the interrupted run are kept (the directory is kept: it is all they have to look at)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import psutil
import pytest

from helpers import reaped


def _children_once_running(proc: subprocess.Popen, want: str, within: float = 90.0) -> list[psutil.Process]:
    """The driver's descendants once one of them runs ``want`` (a worker or a server)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        kids = psutil.Process(proc.pid).children(recursive=True)
        try:
            if any(want in " ".join(k.cmdline()) for k in kids):
                return kids
        except psutil.NoSuchProcess:
            pass
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"no {want} started")


@pytest.mark.parametrize(
    ("argv", "child"),
    [
        (["crashtest", "--kills", "1000", "--quick"], "sweepq.bench.crash worker"),
        (["crashtest-server", "--kills", "1000", "--quick"], "sweepq.bench.crash_server serve"),
    ],
)
def test_ctrl_c_ends_the_harness_and_says_where_its_run_is_kept(argv, child):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweepq", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    kids: list[psutil.Process] = []
    with reaped(proc, kids):  # kids: read when the block ends, so those found below count
        kids += _children_once_running(proc, child)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        out, err = proc.communicate(timeout=60)
        # A guard against a leak, not a speed: a killed worker in the middle of a sync on a loaded
        # disk takes seconds to go (5 s was not always enough on the shared machine).
        _, alive = psutil.wait_procs(kids, timeout=60)
    assert [(k.pid, k.cmdline()) for k in alive if k.is_running() and k.status() != psutil.STATUS_ZOMBIE] == []
    assert proc.returncode == 130, err
    said = re.search(r"interrupted; the logs and store are kept in (\S+)", err)
    assert said, err
    work = said.group(1)
    try:
        assert os.path.isdir(os.path.join(work, "logs")) and work in out
        assert "Traceback" not in err
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
