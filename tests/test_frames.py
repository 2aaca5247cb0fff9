"""net/frames.py's FrameSocket on a socket pair, in the form that runs here (compiled, or
interpreted under SWEEPQ_PURE=1; tests/test_forms.py runs this file in the interpreted form
too): the header read in place by the compiled form and the one struct reads interpreted
must give the same frames and refuse the same ones."""

from __future__ import annotations

import socket
import struct

import pytest

from sweepq.net import protocol as P
from sweepq.net.frames import Closed, FrameSocket


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(10)
    b.settimeout(10)
    yield a, b
    a.close()
    b.close()


def _reader(sock, max_frame=1 << 20):
    return FrameSocket(sock, max_frame, None, 64 * 1024)


SMALL_BODY = 4096  # net/frames.py: a body up to this long comes back as bytes of its own (compiled)


@pytest.mark.parametrize("size", [0, 1, 255, 256, 65535, 65536, SMALL_BODY, SMALL_BODY + 1, 40_000])
def test_a_frame_read_whole_gives_its_op_and_its_body(pair, size):
    a, b = pair
    body = bytes(range(256)) * (size // 256) + bytes(size % 256)
    b.sendall(P.frame(P.PUT, body))
    op, got = _reader(a).read()
    assert (op, bytes(got)) == (P.PUT, body)


def test_frames_sent_together_are_read_one_by_one(pair):
    a, b = pair
    frames = [(op, bytes([op]) * op * 10) for op in (P.PUT, P.GET, P.COMMIT, P.ERROR)]
    b.sendall(b"".join(P.frame(op, body) for op, body in frames))
    fs = _reader(a)
    assert [(op, bytes(body)) for op, body in (fs.read() for _ in frames)] == frames


@pytest.mark.parametrize("length", [(1 << 20) + 1, 1 << 31, (1 << 32) - 1])
def test_a_header_claiming_more_than_the_limit_is_refused_whatever_its_top_bit(pair, length):
    """A length with its top bit set is a large unsigned number, never a negative one."""
    a, b = pair
    b.sendall(struct.pack(">IBB", length, P.VERSION, P.PUT) + b"x" * 64)
    with pytest.raises(P.ProtocolError, match="over the limit"):
        _reader(a).read()


def test_a_header_of_another_version_is_refused(pair):
    a, b = pair
    b.sendall(struct.pack(">IBB", 3, P.VERSION + 1, P.PUT) + b"abc")
    with pytest.raises(P.ProtocolError, match="protocol version"):
        _reader(a).read()


def test_a_peer_that_closes_is_closed(pair):
    a, b = pair
    b.sendall(P.frame(P.GET, b"ab")[:4])
    b.close()
    with pytest.raises(Closed, match="in the middle of a frame"):
        _reader(a).read()
