"""Shared fixtures: a queue manager on a manual clock, so no test waits on real time."""

from __future__ import annotations

import logging

import pytest
from net_client_mode import pytest_generate_tests, transport  # noqa: F401 - behaviour tests over clients too

from sweepq.engine import QueueManager
from sweepq.sweeper.clock import ManualClock

from helpers import IO


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
