"""A loop's reply packed in the connection's own buffer and sent from there (net/protocol.py
``Framer.frame_kept``, net/frames.py ``FrameSocket.send_ready_from``): the bytes sent are the
frame ``Framer.frame`` makes, a frame too large for the buffer is left to ``frame``, and the
server's replies through it are the usual ones."""

from __future__ import annotations

import socket
import threading

import pytest
from net_env import served

from sweepq import forms
from sweepq.engine import OO
from sweepq.net import client as net_client
from sweepq.net import protocol as P
from sweepq.net.frames import FrameSocket

COMPILED = "sweepq.net.protocol" in forms.built()
VALUES = [
    None,
    0,
    -1,
    2**40,
    b"",
    b"x" * 1024,
    "text",
    ["m", b"r" * 1100, None, 0, 1_764_000_000_000_000],
    [0, b"h" * 33],
]


@pytest.mark.parametrize("value", VALUES)
def test_a_kept_frame_is_the_frame(value):
    f = P.Framer()
    n = f.frame_kept(P.OK, value)
    if not COMPILED:
        assert n == -1  # the interpreted form makes every frame with frame()
        return
    assert n >= 0
    assert bytes(f.kept[:n]) == f.frame(P.OK, value)


def test_the_buffer_is_reused_and_a_larger_frame_grows_it():
    f = P.Framer()
    small, large = [0, b"a" * 10], [0, b"b" * 3000]
    n1 = f.frame_kept(P.OK, large)
    n2 = f.frame_kept(P.OK, small)
    if not COMPILED:
        assert (n1, n2) == (-1, -1)
        return
    assert bytes(f.kept[:n2]) == f.frame(P.OK, small)  # written over the larger one's first bytes
    assert len(f.kept) >= n1


def test_a_frame_past_the_kept_size_is_left_to_frame():
    f = P.Framer()
    assert f.frame_kept(P.OK, b"z" * (64 * 1024)) == -1
    assert len(f.kept) <= 64 * 1024
    assert f.frame_kept(P.OK, [object()]) == -1  # not a value the in-place codec packs


def test_send_ready_from_sends_the_first_n_bytes():
    a, b = socket.socketpair()
    try:
        b.settimeout(10)
        fs = FrameSocket(a, 1 << 20, None, 64 * 1024)
        buf = bytearray(b"0123456789")
        assert fs.send_ready_from(buf, 4) == 4
        assert b.recv(100) == b"0123"
    finally:
        a.close()
        b.close()


def test_the_loop_replies_to_puts_and_gets():
    with served() as (_qm, server):
        first = net_client.connect(server.url)  # admitted alone: a thread of its own (net/server.py)
        c = net_client.connect(server.url)  # admitted beside it: the loop's
        try:
            h = c.open("Q", OO.OUTPUT | OO.INPUT_SHARED)
            for size in (0, 10, 1024, 5000, 9000):  # in the kept buffer, then past it
                h.put(b"p" * size)
                assert h.get().data == b"p" * size
            assert len([t.name for t in threading.enumerate() if t.name.startswith("sweepq-session-")]) == 1  # first's
        finally:
            c.disconnect()
            first.disconnect()


@pytest.mark.parametrize(
    ("reason", "rec", "end"), [(0, b"h" * 40 + b"d" * 1024, 40), (2049, b"h" * 33, 33), (-1, b"", 0)]
)
def test_a_put_reply_packed_from_its_fields_is_the_list_s_frame(reason, rec, end):
    f = P.Framer()
    n = f.frame_kept_put(P.OK, reason, rec, end)
    if not COMPILED:
        assert n == -1
        return
    assert bytes(f.kept[:n]) == f.frame(P.OK, [reason, rec[:end]])


@pytest.mark.parametrize("data", [None, b"", b"t" * 100])
@pytest.mark.parametrize("read_at", [None, 0, 1_764_000_000_000_000])
@pytest.mark.parametrize("reason", [0, 2079])
def test_a_get_reply_packed_from_its_fields_is_the_list_s_frame(data, read_at, reason):
    f = P.Framer()
    rec = b"r" * 1100
    n = f.frame_kept_message(P.OK, rec, data, reason, read_at)
    if not COMPILED:
        assert n == -1
        return
    assert bytes(f.kept[:n]) == f.frame(P.OK, ["m", rec, data, reason, read_at])


def test_a_reply_past_the_kept_size_is_not_packed_from_its_fields():
    f = P.Framer()
    assert f.frame_kept_put(P.OK, 0, b"x" * 10_000, 10_000) == -1
    assert f.frame_kept_message(P.OK, b"x" * 10_000, None, 0, None) == -1
