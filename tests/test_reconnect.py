"""Clients that reconnect on their own (issue 32): a server restart is a pause for the client
connections, ``Queue(url=)`` and ``AsyncQueue(url=)``; a request sent again after a break is
done once (net/once.py); a unit of work the break backed out is reported only to code that
held one."""

from __future__ import annotations

import asyncio
import os
import queue as stdqueue
import threading

import pytest
from net_env import ServeProcess, served, short_dir

from sweepq import AsyncQueue, Queue
from sweepq.engine import GMO, OO, PMO, MQError, Persistence, Reason
from sweepq.net import RemoteQueueManager, auth
from sweepq.net import aio as net_aio
from sweepq.net import client as net_client
from sweepq.net import protocol as P
from sweepq.net.calls import FateUnknown
from sweepq.net.frames import Closed

from helpers import IO, wait_until


def _admin(data: str) -> str:
    return auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))


class _LosingReader:
    """A connection's frame socket whose next read loses its reply (``_lose_next_reply``);
    everything else goes to the socket itself. A wrapper, not a patched method: the compiled
    FrameSocket (net/frames.pxd) has no per-instance methods."""

    def __init__(self, fs, done):
        self._fs = fs
        self._done = done

    def read(self):
        wait_until(self._done, what="the server doing the call")
        self._fs.sock.shutdown(2)
        raise Closed("the reply was lost")

    def __getattr__(self, name):
        return getattr(self._fs, name)


def _lose_next_reply(conn, done) -> None:
    """The next reply ``conn`` reads is lost: once ``done()`` (the server did the call), the
    socket breaks under the read, as when a server dies between its work and its reply.

    ``done`` must be false now: a state already true says nothing of the call to come (a
    "done" that held before the put was sent let the break come before the server read the
    request, or, when the server was quicker than the test's first look, never came true)."""
    assert not done(), "done() holds before the call: it cannot tell that the server did it"
    conn._fs = _LosingReader(conn._fs, done)


def test_a_put_whose_reply_was_lost_is_sent_again_and_done_once():
    with served() as (qm, server):
        conn = net_client.connect(server.url, reconnect=5)
        h = conn.open("Q", IO)
        _lose_next_reply(conn, lambda: qm.inquire_queue("Q").current_depth == 1)
        r = h.put(b"once")  # no error: sent again after the reconnect, answered from the record
        assert qm.inquire_queue("Q").current_depth == 1
        assert h.get().msg_id == r.msg_id
        _lose_next_reply(conn, lambda: qm.inquire_queue("Q").current_depth == 1)
        h.put(b"two")
        assert qm.inquire_queue("Q").current_depth == 1  # the same handle, reopened, goes on
        conn.disconnect()


def test_a_get_whose_reply_was_lost_is_not_a_lost_message():
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put_many([b"a", b"b"])
        conn = net_client.connect(server.url, reconnect=5)
        h = conn.open("Q", IO)
        _lose_next_reply(conn, lambda: qm.inquire_queue("Q").current_depth == 1)
        assert h.get(GMO.WAIT, 5000).data == b"a"
        assert h.get().data == b"b"
        conn.disconnect()


def test_a_commit_whose_reply_was_lost_is_known_done():
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put(b"held")
        conn = net_client.connect(server.url, reconnect=5)
        h = conn.open("Q", IO)
        assert h.get(GMO.SYNCPOINT).data == b"held"
        _lose_next_reply(conn, lambda: qm.inquire_queue("Q").current_depth == 0)
        conn.commit()  # done before the break: the record says so, no 2003
        assert qm.inquire_queue("Q").current_depth == 0
        conn.disconnect()


def test_a_commit_the_server_reads_after_its_client_reconnected_is_not_done():
    """The client's commit was in the old connection's socket when the break came, and that
    connection's session, slow, read it only after the new connection's ONCE of it (``again``,
    answered BACKED_OUT: nothing to commit there). Done then, it would commit work the client
    was told was backed out: a producer's request read on an older connection than the one
    its producer now uses is not done. The order is made by sending, not by timing."""
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put(b"held")
        pid = os.urandom(16)
        old = net_client.connect(server.url)
        assert old.open("Q", IO).get(GMO.SYNCPOINT).data == b"held"
        new = net_client.connect(server.url)
        assert reason_of(lambda: new.request(P.ONCE, [pid, 1, True, P.COMMIT, []])) == Reason.BACKED_OUT
        stale = reason_of(lambda: old.request(P.ONCE, [pid, 1, False, P.COMMIT, []]))
        assert stale == Reason.CONNECTION_BROKEN
        old.disconnect()  # what the break does in the server: the unit of work is backed out
        assert new.open("Q", IO).get().data == b"held"  # as the client was told
        new.disconnect()


def test_work_under_syncpoint_a_break_backed_out_is_reported_to_its_holder_only():
    with served() as (_qm, server):
        conn = net_client.connect(server.url, reconnect=5)
        h = conn.open("Q", IO)
        h.put(b"lost", None, PMO.SYNCPOINT)
        conn._fs.sock.shutdown(2)
        assert reason_of(lambda: h.put(b"more", None, PMO.SYNCPOINT)) == Reason.BACKED_OUT
        assert reason_of(conn.commit) == Reason.BACKED_OUT  # reported once
        h.put(b"outside")  # outside syncpoint: never concerned
        assert [m.data for m in h.get_many(10)] == [b"outside"]
        quiet = net_client.connect(server.url, reconnect=5, redeliver=True)
        qh = quiet.open("Q", IO)
        h.put(b"back")
        assert qh.get(GMO.SYNCPOINT).data == b"back"
        quiet._fs.sock.shutdown(2)
        assert quiet.commit() == Reason.BACKED_OUT  # said, not raised: the get went back
        # The server backs the broken session's get out when it sees the break, which may come
        # after the new session's first call: wait for the message, as any consumer would.
        assert qh.get(GMO.WAIT, 10_000).data == b"back"
        conn.disconnect()
        quiet.disconnect()


def test_reconnect_zero_fails_fast_and_a_bad_bound_is_3229():
    with served() as (_qm, server):
        conn = net_client.connect(server.url, reconnect=0)
        h = conn.open("Q", IO)
        conn._fs.sock.shutdown(2)
        assert reason_of(lambda: h.put(b"x")) == Reason.CONNECTION_BROKEN
        conn.disconnect()
        for bad in (-1, float("nan"), "5"):
            assert reason_of(lambda b=bad: net_client.connect(server.url, reconnect=b)) == Reason.PARM_VALUE_ERROR
        with pytest.raises(ValueError, match="reconnect"):
            Queue(url=server.url + "?reconnect=soon", name="Q")


def test_a_put_whose_server_never_came_back_has_an_unknown_fate():
    data = os.path.join(short_dir(), "d")
    srv = ServeProcess(data).start()
    with RemoteQueueManager(srv.url, admin_token=_admin(data)) as r:
        r.define_queue("P")
    conn = net_client.connect(srv.url, reconnect=0.2)
    h = conn.open("P", OO.OUTPUT)
    srv.kill()
    with pytest.raises(FateUnknown, match="may or may not"):
        h.put(b"x")
    srv.start()
    h.put(b"y")  # the next call connects again
    conn.disconnect()
    srv.kill()


# -- across a kill -9 of the server ---------------------------------------------------------------


def test_a_request_done_once_is_remembered_across_a_kill_9():
    data = os.path.join(short_dir(), "d")
    with ServeProcess(data) as srv:
        with RemoteQueueManager(srv.url, admin_token=_admin(data)) as r:
            r.define_queue("P", default_persistence=Persistence.PERSISTENT)
        pid = os.urandom(16)
        conn = net_client.connect(srv.url)
        hid = conn.open("P", IO)._hid
        first = conn.request(P.ONCE, [pid, 1, False, P.PUT, [hid, b"x", None, 0]])
        srv.kill()
        srv.start()
        conn = net_client.connect(srv.url)
        hid = conn.open("P", IO)._hid
        again = conn.request(P.ONCE, [pid, 1, True, P.PUT, [hid, b"x", None, 0]])
        assert again == first  # its reply, from the record: not put twice
        assert reason_of(lambda: conn.request(P.ONCE, [pid, 2, True, P.COMMIT, []])) == Reason.BACKED_OUT
        assert conn.inquire_queue("P").current_depth == 1
        conn.disconnect()


@pytest.mark.parametrize("delivery", ["at-most-once", "at-least-once"])
def test_queue_objects_work_again_after_the_server_is_killed(delivery):
    """The short form of the restart harness (bench/reconnect.py, ``sweepq crashtest-reconnect``):
    a producer and a consumer ``Queue(url=)`` through two kill -9s of the server: every item
    delivered, none twice (at-least-once: but an item held, got and not yet done, when the
    server died, which it backed out: at most one a kill), the same objects (and a new one)
    working after."""
    data = os.path.join(short_dir(), "d")
    srv = ServeProcess(data).start()
    try:
        producer = Queue(url=srv.url, name="JOBS", delivery=delivery)
        consumer = Queue(url=srv.url, name="JOBS", delivery=delivery)
        got: list[int] = []
        stop = threading.Event()

        def consume():
            while not stop.is_set() or len(set(got)) < 300:
                try:
                    got.append(consumer.get(timeout=0.5))
                except stdqueue.Empty:
                    continue
                consumer.task_done()

        t = threading.Thread(target=consume, daemon=True)
        t.start()
        for i in range(300):
            producer.put(i)
            if i in (100, 200):
                srv.kill()
                srv.start()
        stop.set()
        t.join(60)
        assert not t.is_alive()
        assert set(got) == set(range(300))  # none lost
        assert len(got) - 300 <= (2 if delivery == "at-least-once" else 0)  # none twice but a held one
        fresh = Queue(url=srv.url, name="JOBS")  # a new object beside the open ones
        fresh.put("after")
        assert consumer.get(timeout=10) == "after"
        consumer.task_done()
        for q in (producer, consumer, fresh):
            q.close()
    finally:
        srv.kill()


def test_an_async_client_reconnects_and_a_put_is_done_once():
    async def main(url):
        conn = await net_aio.connect(url, reconnect=5)
        h = await conn.open("Q", IO)
        await h.put(b"a")
        conn._writer.transport.abort()
        await h.put(b"b")  # reconnected, reopened
        assert [m.data for m in await h.get_many(10)] == [b"a", b"b"]
        await conn.disconnect()

    with served() as (_qm, server):
        asyncio.run(main(server.url))


def test_an_async_queue_works_again_after_the_server_is_killed():
    data = os.path.join(short_dir(), "d")
    srv = ServeProcess(data).start()

    async def main():
        q = AsyncQueue(url=srv.url, name="A")
        await q.put(1)
        srv.kill()
        srv.start()
        await q.put(2)
        assert [await q.get(), await q.get()] == [1, 2]
        await q.aclose()

    try:
        asyncio.run(main())
    finally:
        srv.kill()


def reason_of(call) -> int:
    try:
        call()
    except MQError as e:
        return e.reason
    raise AssertionError("no MQError")


@pytest.mark.long
@pytest.mark.timeout(1200)  # ten restarts of a server with a data directory, each waited for
@pytest.mark.parametrize("delivery", ["at-most-once", "at-least-once"])
def test_ten_kills_of_the_server_under_queue_producers_and_consumers(delivery):
    """The long form: bench/reconnect.py, 10 kill -9s, two producers and two consumers."""
    from sweepq.bench.reconnect import run

    verdict = run(kills=10, delivery=delivery)
    assert verdict["errors"] == [] and verdict["lost"] == 0 and verdict["phantom"] == 0, verdict
    assert verdict["duplicated"] <= verdict["redelivery_bound"], verdict
    assert len(verdict["recovered_s"]) == 10
