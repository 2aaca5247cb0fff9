"""The server's loop (net/loop.py): plain connections are served by one thread while their
calls cannot wait, and leave it for a thread of their own when a call may wait, without
stalling the others. A connection admitted alone is served on a thread of its own
(net/server.py): the tests of the loop open a first connection for it (:func:`beside_a_first`)."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

from net_env import served, short_dir

from sweepq.engine import GMO, MD, OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings
from sweepq.net import client as net_client
from sweepq.net import protocol as P

IO = OO.OUTPUT | OO.INPUT_SHARED


def session_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("sweepq-session-")]


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.005)


@contextlib.contextmanager
def beside_a_first(server):
    """A first connection open, admitted alone and so served on a thread of its own, for the
    block's duration: the connections made in the block are admitted beside it, to the loop.
    Yields the first's thread name: :func:`loop_leavers` leaves it out."""
    first = net_client.connect(server.url)
    try:
        wait_for(lambda: len(session_threads()) == 1, "the first connection on a thread of its own")
        yield session_threads()[0]
    finally:
        first.disconnect()


def loop_leavers(first: str) -> list[str]:
    """The session threads but the first connection's: those of connections that left the loop."""
    return [name for name in session_threads() if name != first]


def test_a_connection_admitted_alone_gets_a_thread_and_the_loop_takes_it_when_others_come():
    """Alone, a client's request wakes a thread blocked in its recv sooner than the loop's
    epoll; beside another, the loop serves it: the second goes to the loop, and the first's
    thread hands it to the loop after its next turn (beside a busy loop, a thread of its own
    would wait for the GIL at each request). Alone again later, a connection gets a thread
    of its own again."""
    with served() as (_qm, server):
        for _ in range(2):
            first = net_client.connect(server.url)
            wait_for(lambda: len(session_threads()) == 1, "the lone connection on a thread of its own")
            h1 = first.open("Q", IO)
            h1.put(b"zero")  # served on its thread
            assert len(session_threads()) == 1
            second = net_client.connect(server.url)
            h2 = second.open("Q", IO)
            assert h2.get().data == b"zero"
            h1.put(b"one")  # its thread serves it, then hands the connection to the loop
            wait_for(lambda: not session_threads(), "the first connection handed to the loop")
            assert h2.get().data == b"one"
            h2.put(b"two")
            assert h1.get().data == b"two"  # the loop serves both
            assert {c["state"] for c in server.status()["connections"]} == {"idle"}
            second.disconnect()
            first.disconnect()
            wait_for(lambda: not server.status()["connections"], "both ended")


def test_a_lone_connection_stays_on_its_thread_when_the_loop_is_gone():
    """The hand-over needs a loop: with none, the lone connection's thread goes on serving it."""
    with served() as (_qm, server):
        first = net_client.connect(server.url)
        wait_for(lambda: len(session_threads()) == 1, "the lone connection on a thread of its own")
        server._loop.close()
        second = net_client.connect(server.url)  # no loop: a thread of its own too
        try:
            h1, h2 = first.open("Q", IO), second.open("Q", IO)
            h1.put(b"x")
            assert h2.get().data == b"x"
            assert len(session_threads()) == 2
        finally:
            second.disconnect()
            first.disconnect()


def _reply(s: socket.socket) -> int:
    """The op of the next reply frame on ``s`` (its body read and dropped)."""
    n, _, op = P.HEADER.unpack(s.recv(P.HEADER_LEN, socket.MSG_WAITALL))
    s.recv(n, socket.MSG_WAITALL)
    return op


def test_a_lone_connection_on_its_thread_is_served_as_the_loop_serves():
    """The lone connection's thread runs the loop's turns after each wait in its recv
    (net/session.py ``run_alone``): frames that came together are answered together, a frame
    sent a byte at a time hands it on to the plain thread path (as it would leave the loop),
    which serves it, and the client's end ends the session."""
    with served() as (_qm, server):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(server.unix_path)
        s.sendall(P.request(P.HELLO, {"pid": 1, "client": "lone", "cancel": False}))
        assert _reply(s) == P.OK
        wait_for(lambda: len(session_threads()) == 1, "the lone connection on its thread")
        names = P.request(P.NAMES, [])
        s.sendall(names * 3)  # one read, three turns' worth
        assert [_reply(s) for _ in range(3)] == [P.OK] * 3
        for b in names:  # part of a frame: the thread path takes the connection over
            s.sendall(bytes([b]))
        assert _reply(s) == P.OK
        s.sendall(names)
        assert _reply(s) == P.OK
        s.close()
        wait_for(lambda: not server.status()["connections"] and not session_threads(), "the session ended")


def test_many_connections_are_served_without_a_thread_each():
    with served() as (_qm, server), beside_a_first(server) as first:
        conns = [net_client.connect(server.url) for _ in range(20)]
        try:
            for i, c in enumerate(conns):
                h = c.open("Q", IO)
                h.put(b"m%d" % i)
                assert h.get().data == b"m%d" % i
                assert "Q" in c.queue_names()
            assert loop_leavers(first) == []
            assert {s["state"] for s in server.status()["connections"]} == {"idle"}
        finally:
            for c in conns:
                c.disconnect()
        wait_for(lambda: len(server.status()["connections"]) == 1, "every session but the first ended")


def test_a_waiting_get_leaves_the_loop_and_the_others_go_on():
    with served() as (qm, server), beside_a_first(server) as first:
        qm.define_queue("R")
        waiter, other = net_client.connect(server.url), net_client.connect(server.url)
        got = []
        wh = waiter.open("Q", IO)
        t = threading.Thread(target=lambda: got.append(wh.get(GMO.WAIT, wait_interval=-1).data))
        t.start()
        wait_for(lambda: any(c["state"] == "waiting" for c in server.status()["connections"]), "the get waiting")
        assert len(loop_leavers(first)) == 1
        oh = other.open("R", IO)
        for i in range(50):  # served by the loop while the get waits
            oh.put(b"x%d" % i)
            assert oh.get().data == b"x%d" % i
        assert got == []
        assert len(loop_leavers(first)) == 1
        other.open("Q", IO).put(b"for the waiter")
        t.join(30)
        assert len(got) == 1
        waiter.disconnect()
        other.disconnect()


def test_a_client_that_does_not_read_its_replies_stalls_only_itself():
    """Requests sent without reading a reply fill the socket's buffer: the rest of that
    connection's replies are sent by a thread of its own, and the loop serves the others."""
    with served() as (_qm, server), beside_a_first(server) as first:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(server.unix_path)
        s.sendall(P.request(P.HELLO, {"pid": 1, "client": "greedy", "cancel": False}))
        header = s.recv(P.HEADER_LEN, socket.MSG_WAITALL)
        n, _, op = P.HEADER.unpack(header)
        s.recv(n, socket.MSG_WAITALL)
        assert op == P.OK
        frame = P.request(P.NAMES, [])
        count = 40_000  # replies of ~20 bytes: more than a Unix socket's buffers hold
        sender = threading.Thread(target=lambda: s.sendall(frame * count))
        sender.start()
        wait_for(lambda: len(loop_leavers(first)) == 1, "the greedy connection on a thread")
        with net_client.connect(server.url) as c:  # the loop goes on
            h = c.open("Q", IO)
            h.put(b"in")
            assert h.get().data == b"in"
        replies = 0
        buf = b""
        while replies < count:
            buf += s.recv(1 << 20)
            while len(buf) >= P.HEADER_LEN:
                n, _, op = P.HEADER.unpack_from(buf)
                if len(buf) < P.HEADER_LEN + n:
                    break
                assert op == P.OK
                buf = buf[P.HEADER_LEN + n :]
                replies += 1
        sender.join(30)
        s.close()


def test_a_persistent_message_under_sync_commit_moves_its_connection_to_a_thread():
    where = short_dir()
    settings = DurabilitySettings(sync="commit")
    with QueueManager(path=os.path.join(where, "qm"), durability=settings, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        with (
            qm.serve(os.path.join(where, "s.sock")) as server,
            beside_a_first(server) as first,
            net_client.connect(server.url) as c,
        ):
            h = c.open("Q", IO)
            h.put(b"np", MD(persistence=Persistence.NOT_PERSISTENT))
            assert h.get().data == b"np"
            assert loop_leavers(first) == []
            h.put(b"p", MD(persistence=Persistence.PERSISTENT))  # its sync must not hold the loop
            wait_for(lambda: len(loop_leavers(first)) == 1, "the connection on a thread")
            assert h.get().data == b"p"


def test_once_the_loop_is_gone_new_connections_get_threads_of_their_own():
    """The server's fallback (Server admitting to a thread when ``Loop.alive`` is false: the
    loop closed, or ended by a failure of its own, net/loop.py) rather than to a loop that
    nobody runs."""
    with served() as (_qm, server), beside_a_first(server) as first:
        server._loop.close()
        assert not server._loop.alive
        after = net_client.connect(server.url)
        try:
            ah = after.open("Q", IO)
            ah.put(b"after")
            assert loop_leavers(first)  # served on a thread of its own
            assert ah.get().data == b"after"
        finally:
            after.disconnect()


def test_a_connection_admitted_as_the_loop_ends_is_served_on_a_thread(monkeypatch):
    """The door saw the loop alive, and the loop ended before it admitted the connection
    (net/loop.py ``Loop.admit``): the connection gets a thread of its own. Before, it was left
    in a queue nobody read (its client's HELLO never answered) and its wake-up was written to
    the loop's closed pipe, whose descriptor may be another file's by then."""
    with served() as (_qm, server), beside_a_first(server) as first:
        loop = server._loop
        loop.close()
        assert not loop.alive
        monkeypatch.setattr(type(loop), "alive", property(lambda self: True))  # what the door saw an instant before
        c = net_client.connect(server.url, timeout=5.0)
        try:
            h = c.open("Q", IO)
            h.put(b"late")
            assert h.get().data == b"late"
            assert loop_leavers(first)  # served on a thread of its own
        finally:
            c.disconnect()
