"""A ``sweepq bench`` run stopped from outside leaves no process of its own behind: the servers
it starts (``sweepq serve``, ``redis-server``) end with it whether it is killed outright
(bench/children.py ``bound``: the kernel's parent-death signal) or asked to stop with SIGTERM
(ended as Ctrl-C ends it: its scenarios stop their servers, exit 130)."""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
import sys

import psutil
import pytest

from sweepq.bench.children import bound

from helpers import children_once_running, reaped


def _servers() -> list[str]:
    """What the ``clients`` scenario starts first: sweepq's server, and Redis's where it runs."""
    redis = shutil.which("redis-server") and importlib.util.find_spec("redis")
    return ["sweepq serve", "redis-server"] if redis else ["sweepq serve"]


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_bench_stopped_from_outside_leaves_no_server_behind(how):
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweepq", "bench", "clients", "--quick"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    kids: list[psutil.Process] = []
    with reaped(proc, kids):
        kids += children_once_running(proc, *_servers())
        proc.send_signal(how)  # to the bench alone: its servers are not told by anyone else
        _, err = proc.communicate(timeout=60)
        # A guard against a leak, not a speed: a server closes its store on SIGTERM.
        _, alive = psutil.wait_procs(kids, timeout=60)
        # Read here: once the block ends, reaped() kills whatever is left.
        left = [(k.pid, k.cmdline()) for k in alive if k.is_running() and k.status() != psutil.STATUS_ZOMBIE]
    assert left == []
    if how == signal.SIGTERM:
        assert proc.returncode == 130, err
        assert "sweepq bench: interrupted" in err and "Traceback" not in err, err
    else:
        assert proc.returncode == -signal.SIGKILL


def test_a_bound_command_is_its_program_and_ends_with_the_thread_that_started_it():
    """``bound(argv)`` runs ``argv`` itself (its output and exit code), and a bound child of a
    process killed outright ends with it."""
    done = subprocess.run(bound(["sh", "-c", "echo $$; exit 3"]), capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and done.stdout.strip().isdigit()
    starter = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import subprocess, sys, time; from sweepq.bench.children import bound;"
            "p = subprocess.Popen(bound(['sleep', '600'])); print(p.pid, flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    with reaped(starter):
        assert starter.stdout is not None
        child = psutil.Process(int(starter.stdout.readline()))
        starter.kill()
        starter.wait(60)
        child.wait(60)  # a guard against a leak, not a speed (not its child: no exit status here)
        assert not child.is_running()
