"""Helpers shared by the test modules."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress

from sweepq.engine import OO, MQError, Reason

IO = OO.OUTPUT | OO.INPUT_SHARED


def drain(handle) -> list[bytes]:
    """Get every available message (no syncpoint) and return the data in order."""
    out = []
    while True:
        try:
            out.append(handle.get().data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            return out


def wait_until(predicate, timeout: float = 30.0, what: str = "the condition") -> None:
    """Poll ``predicate`` until it is true; fail, saying ``what``, after ``timeout`` seconds.
    For progress made in real time by threads, sockets and other processes; never for the
    sweeper, which tests drive by its clock. The timeout is a guard against a hang, not a
    speed: a poll that runs out never falls through to the assertion after it."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.01)


@contextmanager
def reaped(proc: subprocess.Popen, also: Iterable = ()) -> Iterator[subprocess.Popen]:
    """``proc`` for the block; whatever way the block ends (an assertion failed, a timeout),
    ``proc``, every process under it and the psutil processes in ``also`` (its children found
    before: an orphan is no longer under it) are killed if they still run, so that a failed
    test leaves no process behind (a Ctrl-C test that fails is one whose child ignored it)."""
    try:
        yield proc
    finally:
        import psutil

        tree = list(also)
        with suppress(psutil.NoSuchProcess):
            if proc.poll() is None:
                tree += [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
        for p in tree:
            with suppress(psutil.NoSuchProcess):
                p.kill()
        psutil.wait_procs(tree, timeout=30)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(30)


def children_once_running(proc: subprocess.Popen, *wants: str, within: float = 90.0) -> list:
    """``proc``'s descendants (psutil processes) once, for each of ``wants``, one of them runs
    a command line holding it (a worker, a server). Fails, ``proc`` killed, when ``proc`` ends
    first or after ``within`` seconds (a guard against a hang, not a speed)."""
    import psutil
    import pytest

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        kids = psutil.Process(proc.pid).children(recursive=True)
        try:
            lines = [" ".join(k.cmdline()) for k in kids]
        except psutil.NoSuchProcess:
            lines = []
        if all(any(want in line for line in lines) for want in wants):
            return kids
        time.sleep(0.02)
    proc.kill()
    pytest.fail(f"not all of {wants} started")


def _stack(frame) -> list:
    """A frame and its callers, innermost first."""
    out = []
    while frame is not None:
        out.append(frame)
        frame = frame.f_back
    return out


def wait_parked(thread: threading.Thread, inside: str = "get", timeout: float = 30.0) -> None:
    """Return once ``thread`` is parked: blocked in a ``threading`` wait (a condition or an
    event: the only way a thread waits for another here) below a call named ``inside``. This is
    the state a test of "X ends a blocked get" needs before it does X: read from the thread's
    own stack (``sys._current_frames``), not guessed from a sleep. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        frame = sys._current_frames().get(thread.ident)
        assert frame is not None and thread.is_alive(), f"the thread ended before it was parked in {inside}()"
        stack = _stack(frame)
        if stack[0].f_code.co_filename == threading.__file__ and any(f.f_code.co_name == inside for f in stack):
            return
        assert time.monotonic() < deadline, f"the thread was not parked in {inside}() after {timeout} s"
        time.sleep(0.005)  # a poll of the thread's state, never a wait for it to happen


async def task_parked(task: asyncio.Task, inside: str, timeout: float = 30.0) -> None:
    """Return once ``task`` is suspended on a future under a coroutine named ``inside`` (its
    chain of awaits, ``cr_await``, read each time the loop runs): a get or a put that waits,
    not one not yet begun. Fails after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        assert not task.done(), f"the task ended before it was parked in {inside}(): {task}"
        names, aw = [], task.get_coro()
        while hasattr(aw, "cr_await"):
            names.append(aw.cr_code.co_name)
            aw = aw.cr_await
        # Suspended on a future (what ``await fut`` leaves at the end of the chain: the
        # future's iterator), not on the loop's bare yield of ``asyncio.sleep(0)``.
        sleeping = getattr(getattr(aw, "gi_code", None), "co_name", "") == "__sleep0"
        if inside in names and aw is not None and not sleeping:
            return
        assert time.monotonic() < deadline, f"the task was not parked in {inside}() after {timeout} s"
        await asyncio.sleep(0.005)  # lets the task run; the loop polls its state, never times it
