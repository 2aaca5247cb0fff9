"""The wire protocol: one framed request/response exchange per call (docs/protocol.md).

A frame is a 6-byte header, ``length`` (u32, big endian: the bytes that follow the header),
``version`` (u8, :data:`VERSION`) and ``op`` (u8), then ``length`` bytes of body: one
MessagePack value. A request's body is the call's arguments; a reply's op is :data:`OK`
(the body is the result) or :data:`ERROR` (the body is ``[reason, completion code, text,
msg_ids]``, raised on the client as the same :class:`~sweepq.engine.MQError`).

Why MessagePack (``msgpack``, C-accelerated, well kept): a call's arguments are a handful of
ints, strings, None and bytes, which it packs in a microsecond with no schema to keep in
step, and message data travels as raw ``bin`` (one copy). Message records travel as the
engine's own record bytes (engine/record.py): a get's reply is the record itself, a put's is
the record's header, so neither side encodes a descriptor field by field on the hot path.

A value the client cannot send as itself (an object of a type MessagePack lacks) travels as
a placeholder that arrives as an instance of an empty class *of the same type name*, so the
engine refuses it with the reason, and the text, it gives in process. Integers beyond 64
bits travel as their decimal text and arrive as ints.
"""

from __future__ import annotations

import dataclasses
import struct
from functools import lru_cache

import cython
import msgpack
from cython import compiled as COMPILED

from sweepq.engine import CC, MD, MQError, QueueAttributes, QueueInfo, Reason

if COMPILED:  # the C functions the compiled form calls (net/protocol.pxd; forms.py)
    from cython.cimports.cpython.bytearray import PyByteArray_AS_STRING
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.cpython.long import PyLong_AsLongLongAndOverflow
    from cython.cimports.cpython.unicode import PyUnicode_AsUTF8AndSize, PyUnicode_DecodeASCII
    from cython.cimports.libc.string import memcpy

VERSION = 1
HEADER = struct.Struct(">IBB")  # body length, protocol version, op
HEADER_LEN = HEADER.size
HELLO_MAX_FRAME = 64 * 1024  # frames before the handshake is done, either way

# Requests.
HELLO = 1
OPEN = 2
CLOSE = 3
PUT = 4
PUT_MANY = 5
GET = 6
GET_MANY = 7
COMMIT = 8
BACKOUT = 9
UNCOMMITTED = 10
INQUIRE = 11
CANCEL = 12  # no reply of its own: ends a waiting get, which then replies
DEFINE = 13
ALTER = 14
DELETE = 15
NAMES = 16
DEFINE_MODEL = 17
STATUS = 18
BYE = 19
# Channels between queue managers (net/channels/, docs/channels.md "The protocol").
CHL_START = 20
CHL_BATCH = 21
CHL_HEARTBEAT = 22
DQ_ADMIN = 23  # channel and remote queue administration (the mutating actions need authority)
ONCE = 24  # a put, get or commit done at most once however often it is sent (net/once.py)
# Replies.
OK = 0
ERROR = 255

OP_NAMES = {
    v: k
    for k, v in dict(globals()).items()
    if k.isupper() and isinstance(v, int) and 0 <= v <= 255 and k not in ("VERSION", "HEADER_LEN")
}

# Who may send each request: the one table the server checks (net/session.py), and the one
# tests/test_authorization.py sends every request from, with every kind of credential.
HANDSHAKE = "handshake"  # HELLO carries the credentials (net/server.py ``authorize``)
CONNECTED = "connected"  # any connection the server admitted
ADMIN = "admin"  # a connection that presented the admin token
PER_ACTION = "per action"  # DQ_ADMIN: each action says (net/channels/admin.py ``ACTIONS``)
ADMIN_TO_RESET = "admin to reset"  # CHL_START: administration when it changes the receiver's sequence number
AUTHORITY = {
    HELLO: HANDSHAKE,
    OPEN: CONNECTED,
    CLOSE: CONNECTED,
    PUT: CONNECTED,
    PUT_MANY: CONNECTED,
    GET: CONNECTED,
    GET_MANY: CONNECTED,
    COMMIT: CONNECTED,
    BACKOUT: CONNECTED,
    UNCOMMITTED: CONNECTED,
    INQUIRE: CONNECTED,
    CANCEL: CONNECTED,
    DEFINE: ADMIN,
    ALTER: ADMIN,
    DELETE: ADMIN,
    NAMES: CONNECTED,
    DEFINE_MODEL: ADMIN,
    STATUS: CONNECTED,
    BYE: CONNECTED,
    CHL_START: ADMIN_TO_RESET,
    CHL_BATCH: CONNECTED,
    CHL_HEARTBEAT: CONNECTED,
    DQ_ADMIN: PER_ACTION,
    ONCE: CONNECTED,
}
REQUESTS = tuple(AUTHORITY)
ADMIN_OPS = frozenset(op for op, who in AUTHORITY.items() if who == ADMIN)  # need administration authority


def not_authorized(what: str) -> MQError:
    """MQRC_NOT_AUTHORIZED (2035) for a request that needs administration authority."""
    return MQError(Reason.NOT_AUTHORIZED, f"{what} needs the server's admin token; connect with admin_token=...")


_EXT_OPAQUE = 1  # a value of a type MessagePack lacks: its type name
_EXT_BIGINT = 2  # an int beyond 64 bits: its decimal text
_EXT_STR = 3  # a str UTF-8 cannot carry (lone surrogates): its "surrogatepass" bytes

_MD_FIELDS = tuple(f.name for f in dataclasses.fields(MD))
_INFO_FIELDS = tuple(f.name for f in dataclasses.fields(QueueInfo))


class ProtocolError(Exception):
    """A frame that breaks the protocol: the connection it came on is closed."""


@lru_cache(maxsize=256)
def _opaque_type(name: str) -> type:
    return type(name, (), {"__repr__": lambda self: f"<{name} object sent by a client>"})


def _default(obj: object) -> object:
    if isinstance(obj, MD):
        return [getattr(obj, f) for f in _MD_FIELDS]
    if isinstance(obj, int):  # beyond 64 bits (MessagePack refuses those)
        return msgpack.ExtType(_EXT_BIGINT, str(int(obj)).encode())
    if isinstance(obj, tuple | frozenset | set):
        return list(obj)
    if hasattr(obj, "keys") and hasattr(obj, "items"):  # a Mapping: properties
        return dict(obj.items())
    return msgpack.ExtType(_EXT_OPAQUE, type(obj).__name__.encode(errors="replace")[:200])


def _ext_hook(code: int, data: bytes) -> object:
    if code == _EXT_BIGINT:
        try:
            return int(data.decode())
        except ValueError:
            raise ProtocolError("a big integer that is not one") from None
    if code == _EXT_STR:
        return data.decode("utf-8", "surrogatepass")
    if code == _EXT_OPAQUE:
        return _opaque_type(data.decode(errors="replace") or "object")()
    raise ProtocolError(f"unknown extension type {code}")


# The compiled form's own MessagePack codec for the values of the hot calls (a put or a get,
# their replies): ints within 64 bits, None, booleans, bytes, ASCII strings on the way in and
# any encodable string on the way out, and lists or tuples of those (bytes, lists and tuples
# of their exact types only: the frame is sized on one pass and written on a second, and no
# Python code may run between them, as a subclass's __len__ or __iter__ would). It writes and reads
# exactly MessagePack's bytes (tests/test_wire_codec.py holds it to ``msgpack`` both ways)
# without a packer's or an unpacker's call, its keyword arguments and its buffer; anything
# else (a map, a float, an extension, a value past 64 bits, bytes that are not one whole
# value) is left to ``msgpack`` (a sentinel, or a size of -1), which then packs it, decodes
# it, or says what is wrong with it, as before. Interpreted (SWEEPQ_PURE=1), ``msgpack`` does
# everything.

_NO = object()  # what _unpack_at returns for bytes it leaves to msgpack
_DEPTH = 16  # lists deeper than this are left to msgpack


def _int_size(v):
    if v >= 0:
        return 1 if v < 128 else 2 if v < 256 else 3 if v < 65536 else 5 if v < 4294967296 else 9
    return 1 if v >= -32 else 2 if v >= -128 else 3 if v >= -32768 else 5 if v >= -2147483648 else 9


def _size(value, depth):
    """The packed length of ``value``, or -1: not a value this codec packs."""
    if value is None or value is True or value is False:
        return 1
    if isinstance(value, int):
        overflow = 0
        v = PyLong_AsLongLongAndOverflow(value, cython.address(overflow))
        return -1 if overflow else _int_size(v)
    if type(value) is bytes:  # exactly: a subclass could say another length (__len__) on the second pass
        n = len(value)
        k = _head_size(n, 0, True)
        return -1 if k < 0 else n + k
    if isinstance(value, str):
        try:
            PyUnicode_AsUTF8AndSize(value, cython.address(n))
        except UnicodeEncodeError:  # a lone surrogate: msgpack's packer refuses it, _sendable carries it
            return -1
        k = _head_size(n, 32, True)
        return -1 if k < 0 else n + k
    if (type(value) is list or type(value) is tuple) and depth < _DEPTH:  # exactly, as bytes
        total = _head_size(len(value), 16, False)
        if total < 0:
            return -1
        for item in value:
            k = _size(item, depth + 1)
            if k < 0:
                return -1
            total += k
        return total
    return -1


def _head_size(n, fix_limit, has8):
    """The length of a str, bin or array header for ``n`` bytes or items, or -1 past 32 bits:
    one byte under ``fix_limit`` (the fix form), then an 8-bit length (``has8``: not arrays),
    16-bit, 32-bit. :func:`_head_into` writes the same forms."""
    if n < fix_limit:
        return 1
    return 2 if has8 and n < 256 else 3 if n < 65536 else 5 if n < 4294967296 else -1


def _head_into(p, n, fix_base, fix_limit, code8, code16, code32):
    """The header :func:`_head_size` measured, at ``p`` (``code8`` 0: no 8-bit form); past it."""
    if n < fix_limit:
        p[0] = fix_base | n
        return p + 1
    if code8 and n < 256:
        p[0] = code8
        return _be(p + 1, n, 1)
    if n < 65536:
        p[0] = code16
        return _be(p + 1, n, 2)
    p[0] = code32
    return _be(p + 1, n, 4)


def _be(p, v, width):
    """``v`` in ``width`` bytes, big endian, at ``p``; past them."""
    for i in range(width):
        p[width - 1 - i] = v & 255
        v >>= 8
    return p + width


def _pack_into(p, value):
    """Write ``value`` (one that :func:`_size` measured) at ``p``; past it."""
    if value is None:
        p[0] = 0xC0
        return p + 1
    if value is True or value is False:
        p[0] = 0xC3 if value is True else 0xC2
        return p + 1
    if isinstance(value, int):
        return _int_into(p, value)
    if type(value) is bytes:
        return _bin_into(p, PyBytes_AS_STRING(value), len(value))
    if isinstance(value, str):
        n = 0
        s = cython.cast(cython.p_char, PyUnicode_AsUTF8AndSize(value, cython.address(n)))
        p = _head_into(p, n, 0xA0, 32, 0xD9, 0xDA, 0xDB)
        memcpy(p, s, n)
        return p + n
    p = _head_into(p, len(value), 0x90, 16, 0, 0xDC, 0xDD)
    for item in value:
        p = _pack_into(p, item)
    return p


def _int_into(p, v):
    """The int ``v`` (a C long long) at ``p``, in its shortest form; past it."""
    if 0 <= v < 128 or -32 <= v < 0:
        p[0] = cython.cast(cython.uchar, v & 255)
        return p + 1
    n = _int_size(v)
    if v >= 0:
        p[0] = 0xCC if n == 2 else 0xCD if n == 3 else 0xCE if n == 5 else 0xCF
    else:
        p[0] = 0xD0 if n == 2 else 0xD1 if n == 3 else 0xD2 if n == 5 else 0xD3
    return _be(p + 1, cython.cast(cython.ulonglong, v), n - 1)


def _bin_into(p, s, n):
    """The ``n`` bytes at ``s`` as a bin at ``p``; past it."""
    p = _head_into(p, n, 0, 0, 0xC4, 0xC5, 0xC6)
    memcpy(p, s, n)
    return p + n


def _header_into(p, n, op):
    """A frame's header (:data:`HEADER`) at ``p``."""
    _be(p, n, 4)
    p[4] = VERSION
    p[5] = op


def _uint(p, width):
    v = 0
    for i in range(width):
        v = (v << 8) | p[i]
    return v


def _unpack_at(p, end, pos, depth):
    """The value at ``p[pos[0]]`` (``pos[0]`` moved past it), or the sentinel (bytes left to msgpack)."""
    i = pos[0]
    if i >= end:
        return _NO
    b = p[i]
    i += 1
    if b < 0x80 or b >= 0xE0:  # a fixint
        pos[0] = i
        return b if b < 0x80 else b - 256
    if b == 0xC0 or b == 0xC2 or b == 0xC3:
        pos[0] = i
        return None if b == 0xC0 else b == 0xC3
    if 0xCC <= b <= 0xD3:  # an int of 1, 2, 4 or 8 bytes, unsigned then signed
        w = 1 << ((b - 0xCC) & 3)
        if end - i < w:
            return _NO
        u = _uint(p + i, w)
        pos[0] = i + w
        if b <= 0xCF:
            return u
        if w < 8 and u >> (8 * w - 1):  # sign-extend
            u |= ~cython.cast(cython.ulonglong, 0) << (8 * w)
        return cython.cast(cython.longlong, u)
    if 0x90 <= b <= 0x9F or b == 0xDC or b == 0xDD:  # an array
        if b <= 0x9F:
            n = b & 15
        else:
            w = 2 if b == 0xDC else 4
            if end - i < w:
                return _NO
            n = _uint(p + i, w)
            i += w
        if n > end - i or depth >= _DEPTH:  # each item takes a byte at least
            return _NO
        pos[0] = i
        out = [None] * n  # made at its length: appends grew it (and reallocated it) twice for a get's 11
        for _j in range(n):
            item = _unpack_at(p, end, pos, depth + 1)
            if item is _NO:
                return _NO
            out[_j] = item
        return out
    if 0xA0 <= b <= 0xBF or 0xD9 <= b <= 0xDB or 0xC4 <= b <= 0xC6:  # a str or bin
        if b <= 0xBF:
            n = b & 31
        else:
            w = 1 << ((b - 0xD9) if b >= 0xD9 else (b - 0xC4))
            if end - i < w:
                return _NO
            n = _uint(p + i, w)
            i += w
        if n > end - i:
            return _NO
        pos[0] = i + n
        if b >= 0xC4 and b <= 0xC6:
            return PyBytes_FromStringAndSize(cython.cast(cython.p_char, p + i), n)
        for k in range(i, i + n):  # ASCII only here: msgpack decodes (and refuses) the rest
            if p[k] >= 0x80:
                return _NO
        return PyUnicode_DecodeASCII(cython.cast(cython.p_char, p + i), n, cython.NULL)
    return _NO


KEEP_BUFFER = 64 * 1024  # a connection's packer keeps a buffer this large between calls
# The largest frame Framer.frame_kept packs into the framer's own buffer (which grows to the
# largest it packed): a larger one is made as bytes, so an idle connection holds at most this.
KEEP_REPLY = 8 * 1024


class Framer:
    """Packs the frames of one connection with one MessagePack packer kept between calls:
    ``msgpack.packb`` makes a packer per call, and that (its 256 KiB buffer taken and given
    back) was two thirds of packing a small request or reply. After a body larger than
    :data:`KEEP_BUFFER` the packer is replaced, so an idle connection never holds the buffer
    its largest frame grew. Not thread-safe: one per connection, used by its one writer."""

    __slots__ = ("_packb", "kept")

    def __init__(self) -> None:
        self._packb = msgpack.Packer(default=_default, buf_size=4096).pack
        self.kept = bytearray()  # frame_kept's frame, in its first bytes

    def frame_kept(self, op: int, value: object) -> int:
        """The frame :meth:`frame` makes, packed into :attr:`kept` (valid until the next call):
        its length, or -1 when it must be made with :meth:`frame` (a value this codec does not
        pack in place, a frame over KEEP_REPLY's 8 KiB, the interpreted form). Why: the server
        loop's reply is sent from here at once, with no bytes object allocated and freed per
        reply (a get's 1 KiB reply is past the memory allocator's cheap sizes)."""
        if COMPILED:
            n = _size(value, 0)
            if 0 <= n <= KEEP_REPLY - 6:
                _pack_into(self._kept_at(op, n), value)
                return n + 6
        return -1

    def frame_kept_put(self, op: int, reason: int, rec: bytes, end: int) -> int:
        """:meth:`frame_kept` of ``[reason, rec[:end]]`` (a put's reply: net/session.py), packed
        from those fields: no list and no bytes of the header made."""
        if COMPILED:
            n = 1 + _int_size(reason) + _head_size(end, 0, True) + end
            if 0 <= end <= len(rec) and n <= KEEP_REPLY - 6:
                p = self._kept_at(op, n)
                p[0] = 0x92
                _bin_into(_int_into(p + 1, reason), PyBytes_AS_STRING(rec), end)
                return n + 6
        return -1

    def frame_kept_message(self, op: int, rec: bytes, data: bytes | None, reason: int, read_at: int | None) -> int:
        """:meth:`frame_kept` of ``["m", rec, data, reason, read_at]`` (a get's reply: net/session.py
        ``message_to_wire``), packed from those fields: no list made."""
        if COMPILED:
            k = _size(data, 0)
            t = _size(read_at, 0)
            r = len(rec)
            n = 3 + _head_size(r, 0, True) + r + k + _int_size(reason) + t
            if k > 0 and t > 0 and n <= KEEP_REPLY - 6:
                p = self._kept_at(op, n)
                p[0] = 0x95  # an array of 5, then "m"
                p[1] = 0xA1
                p[2] = 0x6D
                p = _bin_into(p + 3, PyBytes_AS_STRING(rec), r)
                _pack_into(_int_into(_pack_into(p, data), reason), read_at)
                return n + 6
        return -1

    def _kept_at(self, op: int, n: int):
        """(Compiled.) Where in :attr:`kept` a frame's body of ``n`` bytes goes, its header
        written: the buffer grown in steps of 256 bytes, to 8 KiB at most (KEEP_REPLY)."""
        if len(self.kept) < n + 6:
            self.kept = bytearray(min((n + 6 + 255) & ~255, KEEP_REPLY))
        p = cython.cast(cython.p_uchar, PyByteArray_AS_STRING(self.kept))
        _header_into(p, n, op)
        return p + 6

    def frame(self, op: int, value: object) -> bytes:
        """The frame of ``op`` whose body is ``value``, packed as described above."""
        if COMPILED:  # the usual values (ints, None, bytes, short lists) packed here, in place
            n = _size(value, 0)
            if n >= 0:
                out = PyBytes_FromStringAndSize(cython.NULL, n + 6)
                p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
                _header_into(p, n, op)
                _pack_into(p + 6, value)
                return out
        try:
            body = self._packb(value)
        except (OverflowError, ValueError, TypeError):  # a big int (the packer does not call
            # default for those), or a value that cannot be packed at all (a list that
            # contains itself); the packer is empty again after a failure
            body = self._packb(_sendable(value, 0))
        n = len(body)
        if n > KEEP_BUFFER:
            self._packb = msgpack.Packer(default=_default, buf_size=4096).pack
        if COMPILED:  # header and body in one allocation: no struct call, no concatenation
            out = PyBytes_FromStringAndSize(cython.NULL, n + 6)
            p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
            _header_into(p, n, op)
            memcpy(p + 6, PyBytes_AS_STRING(body), n)
            return out
        return HEADER.pack(n, VERSION, op) + body

    def ok(self, result: object) -> bytes:
        return self.frame(OK, result)

    def error(self, e: MQError) -> bytes:
        return self.frame(ERROR, [int(e.reason), int(e.completion_code), e.text, e.msg_ids])


def _sendable(value: object, depth: int) -> object:
    """``value`` with big ints as their text and what cannot be packed as a placeholder."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return msgpack.ExtType(_EXT_STR, value.encode("utf-8", "surrogatepass"))
        return value
    if isinstance(value, bool) or value is None or isinstance(value, float | bytes):
        return value
    if isinstance(value, int):
        return value if -(2**63) <= value < 2**64 else msgpack.ExtType(_EXT_BIGINT, str(int(value)).encode())
    if depth > 8:
        return _default(object())
    if isinstance(value, MD):
        value = _default(value)
    if isinstance(value, list | tuple):
        return [_sendable(v, depth + 1) for v in value]
    if isinstance(value, dict):
        return {_sendable(k, depth + 1): _sendable(v, depth + 1) for k, v in value.items()}
    return _default(value)


_unpackb = msgpack.unpackb


def unpack(body) -> object:
    """The value of a frame's body.

    :raises ProtocolError: when the body is not one well-formed MessagePack value."""
    if COMPILED and type(body) is bytes:  # the usual request or reply: decoded here
        value = _decoded(cython.cast(cython.p_uchar, PyBytes_AS_STRING(body)), len(body))
        if value is not _NO:
            return value
    try:
        return _unpackb(body, ext_hook=_ext_hook, raw=False, strict_map_key=False)
    except ProtocolError:
        raise
    except Exception as e:  # ExtraData, FormatError, StackError, ValueError, UnicodeDecodeError, ...
        raise ProtocolError(f"a body that is not MessagePack ({type(e).__name__})") from None


def unpack_buffer(p, n):
    """(Compiled only.) :func:`unpack` of the ``n`` bytes at ``p``, a body where it lies in a
    read buffer (net/frames.py ``ready_value``): no bytes of its own made to decode it."""
    value = _decoded(p, n)
    if value is not _NO:
        return value
    return unpack(PyBytes_FromStringAndSize(cython.cast(cython.p_char, p), n))  # msgpack's, and its errors


def _decoded(p, n):
    """The ``n`` bytes at ``p`` decoded by the compiled codec if they are one value it reads
    whole, else the sentinel (left to msgpack)."""
    pos = cython.declare(cython.Py_ssize_t, 0)
    value = _unpack_at(p, n, cython.address(pos), 0)
    return value if pos == n else _NO


def frame(op: int, body: bytes = b"") -> bytes:
    return HEADER.pack(len(body), VERSION, op) + body


def request(op: int, args: object) -> bytes:
    return Framer().frame(op, args)


def ok(result: object) -> bytes:
    return Framer().ok(result)


def error(e: MQError) -> bytes:
    return Framer().error(e)


def raise_error(body: object) -> None:
    """Raise the MQError an ERROR reply carries."""
    try:
        reason, cc, text, msg_ids = body  # type: ignore[misc]
        err = MQError(int(reason), str(text), CC(int(cc)), [bytes(m) for m in msg_ids])
    except (TypeError, ValueError):
        raise MQError(
            Reason.CONNECTION_BROKEN, f"the server sent an error reply that is not one: {body!r:.80}"
        ) from None
    raise err


def md_from_wire(value: object) -> object:
    """A put's descriptor: MD from its field list; anything else as sent (the engine judges)."""
    if isinstance(value, list) and len(value) == len(_MD_FIELDS):
        return MD(*value)
    return value


def info_to_wire(info: QueueInfo) -> list:
    out = [getattr(info, f) for f in _INFO_FIELDS]
    out[1] = {f.name: getattr(info.attributes, f.name) for f in dataclasses.fields(info.attributes)}
    return out


def info_from_wire(value: list) -> QueueInfo:
    values = dict(zip(_INFO_FIELDS, value, strict=True))
    values["attributes"] = QueueAttributes(**values["attributes"]).validated()
    return QueueInfo(**values)
