"""net/protocol.py's own MessagePack codec (the compiled form packs and decodes the hot calls'
values itself): whatever it packs is MessagePack's bytes exactly, whatever it decodes is what
``msgpack`` decodes, and what it leaves to ``msgpack`` (maps, floats, extensions, big ints,
non-ASCII strings, malformed bodies) still goes there, so both forms answer the same."""

from __future__ import annotations

import enum

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sweepq.engine import GMO, MQError, Reason
from sweepq.net import protocol as P


class _Flag(enum.IntFlag):
    A = 1
    B = 1 << 40


_BOUNDS = [0, 1, 31, 32, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**63 - 1]
INTS = sorted({s * b + d for b in _BOUNDS for s in (1, -1) for d in (-1, 0, 1)} | {-(2**63), 2**64 - 1})
LENGTHS = [0, 1, 15, 16, 31, 32, 255, 256, 65535, 65536]


def _body(frame: bytes) -> bytes:
    n, version, _op = P.HEADER.unpack_from(frame)
    assert (version, len(frame)) == (P.VERSION, P.HEADER_LEN + n)
    return frame[P.HEADER_LEN :]


def _values():
    yield from INTS
    yield from (None, True, False, GMO.WAIT | GMO.SYNCPOINT, Reason.NO_MSG_AVAILABLE, _Flag.A | _Flag.B)
    for n in LENGTHS:
        yield b"\xff" * n
        yield "a" * n
        yield "é" * n
        yield [n] * n
        yield tuple(range(n % 300))
    yield ["m", b"rec" * 400, None, 2079, 1_700_000_000_000_000]  # a get's reply
    yield [1, b"x" * 1024, None, 0]  # a put's request
    yield [1, 0, -1, -1, 3, None, None, None, 1, 0, None]  # a get's request
    yield [[[[]]], [1.5, {"k": b"v"}], msgpack.ExtType(2, b"12345")]  # partly msgpack's own
    yield {"version": 1, "qm": "QM1"}
    yield 2**70  # past 64 bits: _sendable's text
    yield "\udc80"  # a lone surrogate: _sendable's extension


@pytest.mark.parametrize("value", list(_values()), ids=lambda v: repr(v)[:40])
def test_a_frame_is_msgpacks_bytes_and_decodes_to_the_same_value(value):
    body = _body(P.Framer().frame(P.OK, value))
    try:
        expected = msgpack.packb(value)
    except (OverflowError, ValueError, TypeError):
        expected = msgpack.packb(P._sendable(value, 0))
    assert body == expected
    assert P.unpack(body) == msgpack.unpackb(body, ext_hook=P._ext_hook, raw=False, strict_map_key=False)


leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.binary(max_size=300)
    | st.text(max_size=40)
    | st.floats(allow_nan=False)
)
values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=20) | st.tuples(inner, inner), max_leaves=40)


@settings(max_examples=300, deadline=None)
@given(values)
def test_any_value_packs_as_msgpack_does_and_comes_back(value):
    body = _body(P.Framer().frame(P.GET, value))
    assert body == msgpack.packb(value)
    assert P.unpack(body) == msgpack.unpackb(body, raw=False)


@settings(max_examples=300, deadline=None)
@given(values, st.data())
def test_a_cut_or_padded_body_is_refused_as_msgpack_refuses_it(value, data):
    body = msgpack.packb(value)
    cut = data.draw(st.integers(0, max(0, len(body) - 1)))
    for bad in (body[:cut], body + b"\xc0", body + data.draw(st.binary(min_size=1, max_size=4))):
        try:
            expected = msgpack.unpackb(bad, ext_hook=P._ext_hook, raw=False, strict_map_key=False)
        except Exception:
            with pytest.raises(P.ProtocolError):
                P.unpack(bad)
        else:  # a cut that is a whole value still (an array's prefix is not)
            assert P.unpack(bad) == expected


@pytest.mark.parametrize(
    "bad",
    [
        b"\xdd\xff\xff\xff\xff\x01",  # an array that claims four billion items
        b"\xc6\xff\xff\xff\xff",  # bin that claims 4 GiB
        b"\xa2\xff\xfe",  # a str that is not UTF-8
        b"\x91" * 5000 + b"\xc0",  # lists deeper than the decoder goes
        b"\x92\x01",  # an array one item short
        b"",
    ],
)
def test_hostile_bodies_are_a_protocol_error_or_msgpacks_answer(bad):
    try:
        expected = msgpack.unpackb(bad, ext_hook=P._ext_hook, raw=False, strict_map_key=False)
    except Exception:
        with pytest.raises(P.ProtocolError):
            P.unpack(bad)
    else:
        assert P.unpack(bad) == expected


def test_an_error_reply_carries_its_reason_and_text():
    body = _body(P.Framer().error(MQError(Reason.NO_MSG_AVAILABLE, "nothing — none", msg_ids=[b"\x01" * 24])))
    with pytest.raises(MQError) as e:
        P.raise_error(P.unpack(body))
    assert (e.value.reason, e.value.text, e.value.msg_ids) == (
        Reason.NO_MSG_AVAILABLE,
        "nothing — none",
        [b"\x01" * 24],
    )


class _Lying(list):
    """A list that says another length than it has."""

    def __len__(self):
        return 1


class _Bytes(bytes):
    def __len__(self):
        return 10_000


def test_subclasses_of_list_and_bytes_are_packed_by_msgpack_whatever_they_say():
    """The compiled form sizes a frame, then writes it: a value that runs code of its own
    between the two (a subclass's __len__ or __iter__) goes to msgpack's packer instead, and
    the frame is that packer's bytes, however wrong the value's own account of itself."""
    for value in (_Lying([1, 2, 3]), [_Bytes(b"abc")], (_Lying([b"x" * 300]),)):
        assert _body(P.Framer().frame(P.OK, value)) == msgpack.packb(value)
    assert P.unpack(_body(P.Framer().frame(P.OK, [_Bytes(b"abc")]))) == [b"abc"]
