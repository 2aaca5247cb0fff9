"""Hostile clients against the server (issue 24 items 6, 7; docs/clients.md "Limits"): slow
clients (good bytes sent one at a time), silent ones, many of them; greedy ones (headers
claiming the largest frame, many connections), per connection and for the whole server.

Time is injected where the server keeps it: the handshake's deadline is on the
server's own clock (a ManualClock here), and a test waits for the door's next turn, never for
the wall clock. The frame-memory wait is real time, made short (0.2 s) where it must elapse.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time

import psutil
import pytest
from net_env import short_dir

from sweepq.engine import GMO, OO, MQError, QueueManager, Reason, SweeperSettings
from sweepq.net import client as net_client
from sweepq.net import protocol as P
from sweepq.net.frames import GROW
from sweepq.sweeper import ManualClock

IO = OO.OUTPUT | OO.INPUT_SHARED


@contextlib.contextmanager
def served(clock=None, **options):
    """(queue manager with queue Q, its server on a Unix socket and loopback TCP with the token
    "T", its handshake deadlines on ``clock``)."""
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        server = qm.serve(os.path.join(short_dir(), "s.sock"), tcp=":0", token="T", clock=clock, **options)
        yield qm, server


def tcp_url(server) -> str:
    return f"tcp://127.0.0.1:{server.tcp[1]}"


def raw_tcp(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.tcp[1]))


def raw_unix(server) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(server.unix_path)
    return s


HELLO = P.request(P.HELLO, {"token": "T", "admin_token": None, "pid": 1, "client": "slow", "cancel": False})


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.005)


def next_turns(server, n: int = 2) -> None:
    """Wait until the door has turned ``n`` more times: it has looked at its clock since."""
    start = server._door.turns
    wait_for(lambda: server._door.turns >= start + n, "the door's next turns")


def closed(s: socket.socket) -> bool:
    """Whether the server has closed ``s`` (without waiting: what it sent is read and dropped)."""
    s.setblocking(False)
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def reason_of(call) -> int:
    try:
        call()
    except MQError as e:
        return e.reason
    raise AssertionError("no MQError")


def handshakes(server) -> int:
    return server.status()["handshakes"]


# -- the handshake's deadline --------------------------------------------------------------------


def test_the_whole_handshake_has_a_deadline_however_its_bytes_trickle_in():
    clock = ManualClock()
    with served(clock, hello_timeout=10.0) as (_qm, server):
        s = raw_tcp(server)
        wait_for(lambda: handshakes(server) == 1, "the door taking the connection")
        for i, byte in enumerate(HELLO[:11]):  # one good byte every 0.9 s: every read brings something
            s.send(bytes([byte]))
            clock.advance(0.9)
            next_turns(server)
            assert not closed(s), f"closed after {i + 1} bytes, {0.9 * (i + 1):.1f} s: before its deadline"
        clock.advance(0.2)  # 10.1 s since the accept: past it, bytes or not
        s.send(bytes([HELLO[11]]))
        next_turns(server)
        assert closed(s)
        assert server.status()["dropped"] == 1 and handshakes(server) == 0
        with net_client.connect(tcp_url(server), "T") as c:  # the door is open to everyone else
            c.open("Q", IO).put(b"in")


def _admitted(server, s: socket.socket) -> None:
    """Say HELLO on ``s`` and read the server's OK: a session now serves it."""
    s.sendall(HELLO)
    header = s.recv(P.HEADER_LEN, socket.MSG_WAITALL)
    n, _, op = P.HEADER.unpack(header)
    s.recv(n, socket.MSG_WAITALL)
    assert op == P.OK


def test_a_frame_after_the_handshake_has_a_deadline_however_its_bytes_trickle_in():
    """One byte a second after the handshake: every read brings something, yet the frame as
    a whole must come within ``frame_timeout`` of its first byte (issue 32, item 6)."""
    clock = ManualClock()
    with served(clock, frame_timeout=10.0) as (_qm, server):
        s = raw_tcp(server)
        _admitted(server, s)
        frame = P.request(P.NAMES, [])
        for i, byte in enumerate(frame[:-1]):
            s.send(bytes([byte]))
            wait_for(lambda: any(x.fs.frame_since is not None for x in server._sessions.values()), "the bytes")
            clock.advance(1.0)
            next_turns(server)
            assert not closed(s), f"closed after {i + 1} bytes, {i + 1} s: before its deadline"
        clock.advance(9.5)  # 10.5 s since its first byte
        next_turns(server)
        assert closed(s)
        assert server.cut == 1
        with net_client.connect(tcp_url(server), "T") as c:  # everyone else goes on
            c.open("Q", IO).put(b"in")


def test_an_idle_connection_is_closed_after_the_idle_timeout_and_a_waiting_get_is_not_idle():
    clock = ManualClock()
    with served(clock, idle_timeout=60.0) as (qm, server):
        idle = net_client.connect(tcp_url(server), "T")
        waiter = net_client.connect(tcp_url(server), "T")
        wh = waiter.open("Q", IO)
        got = []
        t = threading.Thread(target=lambda: got.append(wh.get(GMO.WAIT, wait_interval=-1).data))
        t.start()
        wait_for(lambda: any(c["state"] == "waiting" for c in server.status()["connections"]), "the get waiting")
        clock.advance(30.0)
        next_turns(server)
        idle.open("Q", IO)  # a call: active again
        clock.advance(50.0)
        next_turns(server)
        assert server.cut == 0
        clock.advance(20.0)  # 70 s since its last call
        next_turns(server)
        wait_for(lambda: server.cut == 1, "the idle connection cut")
        assert reason_of(lambda: idle.queue_names()) == Reason.CONNECTION_BROKEN
        with qm.connect() as c:
            c.open("Q", IO).put(b"for the waiter")
        t.join(30)
        assert got == [b"for the waiter"]
        waiter.disconnect()
        idle.disconnect()


def test_the_timeouts_are_checked():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        for bad in ({"frame_timeout": 0}, {"idle_timeout": -1}, {"idle_timeout": "1"}):
            with pytest.raises(MQError) as e:
                qm.serve(os.path.join(short_dir(), "s.sock"), **bad)
            assert e.value.reason == Reason.PARM_VALUE_ERROR


def test_the_queue_managers_virtual_time_does_not_run_the_handshake_deadline():
    """A simulation runs ``qm.clock`` fast (a sweeper loop advancing a ManualClock): a
    connection whose HELLO is on its way is not closed for it. The deadline is the server's
    clock (the real one here), not the queue manager's."""
    qm_clock = ManualClock()
    with QueueManager(sweeping=SweeperSettings(run=False), clock=qm_clock) as qm:
        qm.define_queue("Q")
        server = qm.serve(os.path.join(short_dir(), "s.sock"), tcp=":0", token="T", hello_timeout=10.0)
        s = raw_tcp(server)
        wait_for(lambda: handshakes(server) == 1, "the door taking the connection")
        qm_clock.advance(3600.0)  # an hour of virtual time before the HELLO comes
        next_turns(server)
        assert not closed(s) and handshakes(server) == 1
        s.close()
        with net_client.connect(server.url) as c:
            h = c.open("Q", IO)
            h.put(b"in")
            assert h.get().data == b"in"


def test_a_tls_client_that_never_says_hello_is_closed_at_the_same_deadline():
    trustme = pytest.importorskip("trustme")
    import ssl

    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    clock = ManualClock()
    with served(clock, tls=ctx, hello_timeout=5.0) as (_qm, server):
        silent = raw_tcp(server)  # no ClientHello at all
        client_ctx = ssl.create_default_context()
        ca.configure_trust(client_ctx)
        shook = client_ctx.wrap_socket(raw_tcp(server), server_hostname="127.0.0.1")  # TLS done, then no HELLO
        shook.send(HELLO[:3])
        wait_for(lambda: handshakes(server) == 2, "the door taking both")
        clock.advance(4.9)
        next_turns(server)
        assert handshakes(server) == 2
        clock.advance(0.2)
        next_turns(server)
        assert closed(silent) and handshakes(server) == 0 and server.status()["dropped"] == 2
        with net_client.connect(tcp_url(server).replace("tcp", "tls"), "T", tls=client_ctx) as c:
            c.open("Q", IO).put(b"in")
        shook.close()


# -- slow and silent clients never keep a legitimate one out -------------------------------------


def test_clients_in_their_handshake_do_not_count_against_max_connections():
    with served(max_connections=2, max_handshakes=64) as (_qm, server):
        slow = [raw_tcp(server) for _ in range(40)]  # no token, a third of a HELLO each: they hold
        for s in slow:
            s.send(HELLO[:20])
        wait_for(lambda: handshakes(server) == 40, "the door taking them")
        a = net_client.connect(tcp_url(server), "T")
        b = net_client.connect(server.url)  # the Unix socket too
        with pytest.raises(MQError) as e:
            net_client.connect(tcp_url(server), "T")
        assert e.value.reason == Reason.MAX_CONNS_LIMIT_REACHED  # the limit counts a and b only
        assert handshakes(server) == 40 and not any(closed(s) for s in slow)
        a.open("Q", IO).put(b"x")
        assert b.open("Q", IO).get().data == b"x"
        for c in (a, b):
            c.disconnect()


def test_at_the_handshake_limit_the_oldest_is_closed_and_a_legitimate_client_gets_in():
    with served(max_handshakes=8) as (_qm, server):
        silent = []
        for _ in range(8):  # accepted in this order (the listen queue is first in, first out)
            silent.append(raw_tcp(server))
        wait_for(lambda: handshakes(server) == 8, "the door taking them")
        with net_client.connect(tcp_url(server), "T") as c:  # the ninth: the oldest goes to make room
            c.open("Q", IO).put(b"in")
        wait_for(lambda: closed(silent[0]), "the oldest being closed")
        assert not any(closed(s) for s in silent[1:])
        assert server.status()["dropped"] == 1


def test_a_thousand_slow_clients_hold_connections_while_a_legitimate_one_gets_in():
    with served(max_connections=20) as (_qm, server):
        slow = []
        for _ in range(1000):
            s = raw_tcp(server)
            s.send(HELLO[:1])
            slow.append(s)
        wait_for(lambda: handshakes(server) == 1000, "the door taking all of them")
        for i in range(1, 4):  # they keep sending, a byte at a time
            for s in slow:
                s.send(HELLO[i : i + 1])
            for _ in range(5):
                with net_client.connect(tcp_url(server), "T") as c:
                    h = c.open("Q", IO)
                    h.put(b"legitimate")
                    assert h.get().data == b"legitimate"
        assert handshakes(server) == 1000 and server.status()["dropped"] == 0
        wait_for(lambda: server.status()["connections"] == [], "the last visit's session ending")
        for s in slow:
            s.close()


def test_garbage_and_a_wrong_first_frame_close_at_once_without_a_thread():
    with served() as (_qm, server):
        threads = psutil.Process().num_threads()
        for data in (b"GET / HTTP/1.1\r\n\r\n", P.request(P.PUT, [1, b"x", None, 0]), P.HEADER.pack(1 << 20, 1, 1)):
            s = raw_unix(server)
            s.sendall(data)
            wait_for(lambda s=s: closed(s), f"{data[:10]!r} being refused")
        assert psutil.Process().num_threads() == threads
        assert handshakes(server) == 0


# -- greedy clients: frame memory follows the bytes, per connection and server-wide -----------------


def greedy(server, claim: int) -> socket.socket:
    """A connection past its handshake that sends a PUT header claiming ``claim`` bytes."""
    s = raw_unix(server)
    s.sendall(HELLO)
    n = P.HEADER.unpack(s.recv(P.HEADER_LEN, socket.MSG_WAITALL))[0]
    s.recv(n, socket.MSG_WAITALL)
    s.sendall(P.HEADER.pack(claim, P.VERSION, P.PUT))
    return s


def test_a_hundred_headers_claiming_the_largest_frame_cost_no_memory():
    max_frame = 8 * 2**20
    with served(max_frame=max_frame, max_connections=200) as (_qm, server):
        me = psutil.Process()
        before = me.memory_info().rss
        socks = [greedy(server, max_frame) for _ in range(100)]
        receiving = f"receiving {max_frame:,} bytes"
        wait_for(
            lambda: [c["state"] for c in server.status()["connections"]] == [receiving] * 100, "their headers read"
        )
        rise = me.memory_info().rss - before  # 800 MiB if a header's claim were allocated
        assert server.frame_memory.used == 0
        assert rise < 40 * 2**20, f"resident memory rose {rise / 2**20:.0f} MiB for headers alone"
        socks[0].sendall(b"\0" * 2**20)  # one of them sends 1 MiB of its frame: that is what it holds
        wait_for(lambda: server.frame_memory.used >= 2**20, "the server taking its bytes")
        assert server.frame_memory.used <= 2**20 + GROW
        for s in socks:
            s.close()
        wait_for(lambda: server.frame_memory.used == 0, "the memory given back")


def put_frame(s: socket.socket, size: int) -> bytes:
    """A PUT of a message of about ``size`` bytes on handle 1 (a valid frame, MessagePack)."""
    return P.request(P.PUT, [1, b"m" * size, None, 0])


def connected(server) -> tuple[socket.socket, object]:
    s = raw_unix(server)
    s.sendall(HELLO)
    reply(s)
    s.sendall(P.request(P.OPEN, ["Q", int(IO), None]))
    assert reply(s)[0] == P.OK
    return s


def reply(s: socket.socket) -> tuple[int, object]:
    n, _, op = P.HEADER.unpack(s.recv(P.HEADER_LEN, socket.MSG_WAITALL))
    return op, P.unpack(s.recv(n, socket.MSG_WAITALL) if n else b"")


def test_past_the_servers_frame_memory_a_frame_waits_then_is_dropped_with_2071_and_the_connection_goes_on():
    with served(frame_memory=2**20, frame_memory_wait=0.2) as (qm, server):
        a, b = connected(server), connected(server)
        frame_a = put_frame(a, 900_000)
        a.sendall(frame_a[:800_000])  # a holds 800 kB of the 1 MiB, and stalls
        wait_for(lambda: server.frame_memory.used >= 768 * 1024, "a's bytes taken")
        b.sendall(put_frame(b, 600_000))  # b needs more than is left: it waits, then drops its frame
        op, err = reply(b)
        assert op == P.ERROR and err[0] == Reason.STORAGE_NOT_AVAILABLE and "try again" in err[2]
        assert server.frame_memory.refused == 1 and server.frame_memory.peak <= 2**20
        a.sendall(frame_a[800_000:])
        assert reply(a)[0] == P.OK
        wait_for(lambda: server.frame_memory.used == 0, "a's memory given back")
        b.sendall(put_frame(b, 600_000))  # b's frame goes through now
        assert reply(b)[0] == P.OK
        assert qm.inquire_queue("Q").current_depth == 2
        wait_for(lambda: server.frame_memory.used == 0, "the memory given back")


def test_a_frame_over_the_whole_bound_is_dropped_at_once_and_a_waiting_one_gets_in_when_memory_comes_back():
    with served(frame_memory=2**20, frame_memory_wait=30.0) as (qm, server):
        a, b = connected(server), connected(server)
        a.sendall(put_frame(a, 1_500_000))  # alone over the bound: no wait could help
        op, err = reply(a)
        assert op == P.ERROR and err[0] == Reason.STORAGE_NOT_AVAILABLE
        frame_a = put_frame(a, 900_000)
        a.sendall(frame_a[:800_000])
        wait_for(lambda: server.frame_memory.used >= 768 * 1024, "a's bytes taken")
        b.sendall(put_frame(b, 600_000)[:100_000])  # b waits for memory (30 s at most)
        wait_for(lambda: server.frame_memory.waiting == 1, "b waiting")
        a.sendall(frame_a[800_000:])
        assert reply(a)[0] == P.OK
        b.sendall(put_frame(b, 600_000)[100_000:])
        assert reply(b)[0] == P.OK  # it waited, then went through
        assert qm.inquire_queue("Q").current_depth == 2 and server.frame_memory.refused == 1


def test_a_client_reading_a_large_reply_grows_its_buffer_with_the_bytes_too():
    with served() as (_qm, server), net_client.connect(server.url) as c:
        h = c.open("Q", IO)
        h.put(b"z" * 3_000_000)
        assert h.get().data == b"z" * 3_000_000
