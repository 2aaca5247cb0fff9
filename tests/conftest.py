"""Shared fixtures: a queue manager on a manual clock, so no test waits on real time.

The lock rule is checked in every test (engine/core/lock.py): SWEEPQ_CHECKS is set before
sweepq is first imported, and the processes the tests start inherit it.
"""

from __future__ import annotations

import logging
import os
import signal

os.environ.setdefault("SWEEPQ_CHECKS", "1")


import pytest
from net_client_mode import pytest_generate_tests, transport  # noqa: F401 - behaviour tests over clients too

from sweepq.engine import QueueManager
from sweepq.sweeper.clock import ManualClock

from helpers import IO

# The Ctrl-C tests send SIGINT to the processes they start. A suite started in the background
# of a non-interactive shell (`cmd &`, nohup, CI) inherits SIGINT ignored, every child it
# execs would inherit that too, ignore the signal and hang its test. A handled signal is reset
# to its default across exec, so handling it here gives every child SIGINT's default, and
# Python's own KeyboardInterrupt (tests/test_ctrl_c_env.py checks it under an ignored SIGINT).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@pytest.fixture(autouse=True)
def _root_logger_as_it_was():
    """A command run in process (``sweepq serve``'s main calls ``logging.basicConfig``) gives
    the root logger a handler on this test's captured stderr, closed after the test: remove it,
    so that no later test of the same process (an xdist worker runs many files) logs into a
    closed stream. pytest's own capture handlers are left to pytest."""
    root = logging.getLogger()
    before, level = list(root.handlers), root.level
    yield
    for h in root.handlers[:]:
        if type(h) is logging.StreamHandler and h not in before:
            root.removeHandler(h)
    root.setLevel(level)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def qm(clock):
    with QueueManager(clock=clock) as qm:
        qm.define_queue("Q")
        yield qm


@pytest.fixture
def conn(qm):
    with qm.connect() as c:
        yield c


@pytest.fixture
def h(conn):
    """A handle on queue Q open for put and shared get."""
    return conn.open("Q", IO)
