"""FrameSocket.read_ready, the server loop's read that never waits (net/frames.py): after a read
that left the socket empty, it serves the frames that read brought, then returns None without
reading again (the loop's epoll says when more has come), and the next call reads what came.
In tests/test_forms.py's list too, so the interpreted form is held to the same."""

from __future__ import annotations

import socket

import pytest

from sweepq.net import protocol as P
from sweepq.net.frames import Closed, FrameSocket


@pytest.fixture
def pair():
    a, b = socket.socketpair()  # ``a`` blocking, as the loop's sockets are: read_ready never waits
    b.settimeout(10)
    yield a, b
    a.close()
    b.close()


def _frames(*ops: int) -> bytes:
    return b"".join(P.frame(op, bytes([op]) * 7) for op in ops)


def test_frames_of_one_read_are_served_then_none_without_a_read(pair):
    a, b = pair
    fs = FrameSocket(a, 1 << 20, None, 64 * 1024)
    b.sendall(_frames(P.PUT, P.GET))
    assert [fs.read_ready()[0], fs.read_ready()[0]] == [P.PUT, P.GET]
    b.sendall(_frames(P.COMMIT))  # came after the read that emptied the socket
    assert fs.read_ready() is None  # no read: the loop waits for epoll, which reports it
    assert not fs.partial()
    op, body = fs.read_ready()  # the next turn reads it
    assert (op, bytes(body)) == (P.COMMIT, bytes([P.COMMIT]) * 7)
    assert fs.read_ready() is None


def test_a_read_that_filled_the_buffer_is_followed_by_another(pair):
    a, b = pair
    fs = FrameSocket(a, 1 << 20, None, 65)  # 13 bytes a frame: a read that fills it brings 5 whole
    b.sendall(_frames(*[P.PUT] * 10))
    ops = []
    while (frame := fs.read_ready()) is not None:
        ops.append(frame[0])
    # A read that filled the buffer may have left bytes in the socket: it is followed by
    # another once its frames are served, so all ten are served in one turn.
    assert ops == [P.PUT] * 10
    assert not fs.partial()


def test_the_peer_closing_is_seen_at_the_next_read(pair):
    a, b = pair
    fs = FrameSocket(a, 1 << 20, None, 64 * 1024)
    b.sendall(_frames(P.PUT))
    assert fs.read_ready()[0] == P.PUT
    b.close()
    assert fs.read_ready() is None
    with pytest.raises(Closed):
        fs.read_ready()
