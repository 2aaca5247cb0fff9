"""Shared fixtures: a queue manager on a manual clock, so no test waits on real time.

The lock rule is checked in every test (engine/core/lock.py): SWEEPQ_CHECKS is set before
sweepq is first imported, and the processes the tests start inherit it.
"""

from __future__ import annotations

import os

os.environ.setdefault("SWEEPQ_CHECKS", "1")

import pytest
from net_client_mode import pytest_generate_tests, transport  # noqa: F401 - behaviour tests over clients too

from sweepq.engine import QueueManager
from sweepq.sweeper.clock import ManualClock

from helpers import IO


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
