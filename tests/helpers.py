"""Helpers shared by the test modules."""

from __future__ import annotations

import time

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
