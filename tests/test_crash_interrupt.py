"""Ctrl-C on the kill -9 harnesses (``sweepq crashtest``, ``sweepq crashtest-server``): the
driver's children end with it, the exit is 130, and the user is told where the logs and the
store of the interrupted run are kept (the directory is kept: it is all they have to look at)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import psutil
import pytest

from helpers import children_once_running, reaped


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
        kids += children_once_running(proc, child)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        out, err = proc.communicate(timeout=60)
        # A guard against a leak, not a speed: a killed worker in the middle of a sync on a loaded
        # disk takes seconds to go (5 s was not always enough on the shared machine).
        _, alive = psutil.wait_procs(kids, timeout=60)
        # Read here: once the block ends, reaped() kills whatever is left.
        left = [(k.pid, k.cmdline()) for k in alive if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    assert left == []
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
