"""The behaviour tests a second time, through client connections (docs/clients.md).

tests/conftest.py takes the two names below: ``pytest_generate_tests`` gives every test of
:data:`MODULES` a ``transport`` of "in-process" and "client", and the autouse ``transport``
fixture, for "client", makes ``QueueManager.connect`` return a client connection
(``sweepq.client.connect``) to a server on that same queue manager (``qm.serve`` on a Unix
socket, started at the first connect). The tests themselves are unchanged: whatever they
build their queue manager with, every connection they make goes over the wire, while the
administration calls and the assertions that read the queue (``qm.inquire_queue``,
``h.queue.depth``) stay in process.
"""

from __future__ import annotations

import shutil
import tempfile
import threading

import pytest

from sweepq.engine import QueueManager
from sweepq.net import client as net_client

MODULES = frozenset(
    {
        "test_get",
        "test_put",
        "test_uow",
        "test_properties",
        "test_browse",
        "test_lock",
        "test_groups",
        "test_segments",
        "test_selector",
        "test_skip_backout",
        "test_batch",
        "test_ordering",
        "test_open_and_admin",
        "test_poison",
        "test_threads",
    }
)

# Tests that read the in-process handle's own state (HandleState), which a client handle does
# not have: they get no client form (they are white-box checks of the engine, not behaviour a
# client could see), so they run once, never skipped.
IN_PROCESS_ONLY = {
    "test_bad_group_fields_are_mq_errors": "reads HandleState.groups",
    "test_get_side_2245_warning_after_logical_order_and_state_dropped_when_idle": "reads HandleState.groups",
    "test_match_options_without_selector_are_unchanged": "reads HandleState.match",
    "test_a_selector_that_is_always_true_keeps_the_plain_get": "reads HandleState.match",
    "test_browse_of_a_swept_queue_reads_blobs_into_a_bounded_cache": "reads HandleState.cursor",
    "test_records_without_properties_are_unchanged": "reads the whole record a put made (a client's put result "
    "holds the record's header)",
    "test_a_batch_get_returns_the_items_kept_as_objects": "items are the in-process door's (Handle.keep_items)",
    "test_four_producers_four_consumers_exactly_once_and_ordered": "200,000 messages; its client form is "
    "tests/test_net_proof.py (processes through one server)",
}


def pytest_generate_tests(metafunc):
    if "transport" in metafunc.fixturenames and metafunc.module.__name__.rpartition(".")[2] in MODULES:
        forms = ["in-process"] if metafunc.function.__name__ in IN_PROCESS_ONLY else ["in-process", "client"]
        metafunc.parametrize("transport", forms, indirect=True)


@pytest.fixture(autouse=True)
def transport(request, monkeypatch):
    """ "client": every ``QueueManager.connect()`` of the test is a client connection."""
    if getattr(request, "param", "in-process") != "client":
        yield "in-process"
        return
    where = tempfile.mkdtemp(prefix="sq")  # short: a Unix socket's path has ~100 bytes
    served: dict[str, QueueManager] = {}
    engine_connect = QueueManager.connect
    starting = threading.Lock()

    def connect(qm: QueueManager):
        if threading.current_thread().name.startswith("sweepq-session"):
            return engine_connect(qm)  # the server's own connection for its client
        with starting:
            if not qm._servers:
                server = qm.serve(f"{where}/{len(served)}.sock")
                served[server.unix_path] = qm
        return net_client.connect(qm._servers[0].url, client=request.node.name[:60])

    monkeypatch.setattr(QueueManager, "connect", connect)
    # What the assertions read through a handle: the served queue itself, in process.
    monkeypatch.setattr(
        net_client.ClientHandle,
        "queue",
        property(lambda h: served[h._conn.address.path]._queue(h.name)),
        raising=False,
    )
    yield "client"
    shutil.rmtree(where, ignore_errors=True)
