"""The message record: one immutable ``bytes`` holding the descriptor header and the payload.

Why one ``bytes`` per message: a message in memory is then one list node plus one bytes
object, which keeps the overhead beyond the payload under the 128-byte budget (a
dataclass descriptor per message would cost more than the payload of a small message);
and a sweep moves records into a blob by joining them, with no per-message encoding.

Layout (little endian)::

    0   u8   hlen        header length, payload starts here; 0 when the header is longer
                         than 255 bytes (large properties): see data_offset()
    1   u8   priority    0..9, as the application put it (the lane may differ in FIFO)
    2   u8   flags       PERSISTENT | HAS_MSG_ID | HAS_CORREL_ID | HAS_GROUP | HAS_EXPIRY
                         | HAS_PROPS | HAS_REPLY | HAS_ITEM
    3   u16  backout     backout count (saturates at 65535)
    5   u64  seq         message instance number, unique in a queue manager run; gives the
                         MsgToken, the generated MsgId and the arrival order
    13  i64  put_us      put time, microseconds since the epoch
    21  [24 msg_id]      only if HAS_MSG_ID (otherwise the MsgId is generated from seq)
        [24 correl_id]   only if HAS_CORREL_ID (otherwise MQCI_NONE)
        [24 group_id, u32 msg_seq_number, u32 offset, u32 msg_flags]   only if HAS_GROUP
        [i32 expiry]     only if HAS_EXPIRY (tenths of a second, as put)
        [u8 n, n bytes, u8 m, m bytes]   only if HAS_REPLY: ReplyToQ and ReplyToQMgr (ASCII)
        [u32 n, n bytes] only if HAS_PROPS: message properties (engine/properties.py)
    hlen payload

A record with HAS_ITEM has no payload of its own: its message is a Python object that the
queue core keeps beside it (engine/core/lanes.py, "Items"), put by ``sweepq.Queue``. Such a
record never leaves memory: a sweep writes :func:`with_payload` of it and the item's
encoding instead, without the flag.

A record without properties is exactly what it was before properties existed; one with
them keeps ``rec[0]`` as the payload offset whenever the header fits in 255 bytes, so
only messages with large properties need :func:`data_offset`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy

from .constants import (
    CORRELID_NONE,
    EXPIRY_UNLIMITED,
    GROUPID_NONE,
    MSGID_NONE,
    PRIORITY_AS_Q_DEF,
    Persistence,
    Reason,
)
from .errors import MQError

HEAD = struct.Struct("<BBBHQq")
HEAD_LEN = HEAD.size  # 21
_U16 = struct.Struct("<H")
_GROUP = struct.Struct("<24sIII")
_EXPIRY = struct.Struct("<i")
_SEQ = struct.Struct("<Q")

PERSISTENT = 0x01
HAS_MSG_ID = 0x02
HAS_CORREL_ID = 0x04
HAS_GROUP = 0x08
HAS_EXPIRY = 0x10
HAS_PROPS = 0x20
HAS_REPLY = 0x40  # MD.reply_to_q / reply_to_q_mgr (request/reply, docs/clients.md)
HAS_ITEM = 0x80  # the payload is an object the core keeps beside the record (see above)
MAX_REPLY_NAME = 48  # MQ_Q_NAME_LENGTH and MQ_Q_MGR_NAME_LENGTH
_U32 = struct.Struct("<I")

OFF_HLEN = 0
OFF_PRIORITY = 1
OFF_FLAGS = 2
OFF_BACKOUT = 3
OFF_SEQ = 5
# The compiled form's C copies of the constants its hot function uses (record.pxd types them;
# the public names stay Python objects that other modules import).
_HEAD_LEN, _PERSISTENT, _OFF_SEQ, _HAS_ITEM, _OFF_FLAGS = HEAD_LEN, PERSISTENT, OFF_SEQ, HAS_ITEM, OFF_FLAGS
_HAS_MSG_ID = HAS_MSG_ID
_PINNED_HLEN = HEAD_LEN + 24  # the header of a plain record with its MsgId written out (pinned)


@dataclass
class MD:
    """The message descriptor (MQMD), fields in snake_case.

    On put, ``priority=-1`` and ``persistence=2`` mean "as the queue's default"; MsgId
    ``MSGID_NONE`` asks the queue manager to generate one. On output every field holds
    the stored value. ``put_time`` is seconds since the epoch; ``expiry`` is in tenths of a
    second (-1 = unlimited) and on output is what remains of it. ``properties`` maps names
    to str, int, float, bool, bytes or None (engine/properties.py has the rules); on output
    it is a dict, empty when the message has none. ``reply_to_q`` / ``reply_to_q_mgr`` name
    where a reply goes (a request's temporary dynamic queue, engine/dynamic.py): up to 48
    characters each, "" for none (2026 MD_ERROR otherwise).
    """

    msg_id: bytes = MSGID_NONE
    correl_id: bytes = CORRELID_NONE
    group_id: bytes = GROUPID_NONE
    msg_seq_number: int = 1
    offset: int = 0
    msg_flags: int = 0
    priority: int = PRIORITY_AS_Q_DEF
    persistence: int = Persistence.AS_Q_DEF
    backout_count: int = 0
    expiry: int = EXPIRY_UNLIMITED
    put_time: float = 0.0
    properties: dict | None = None
    reply_to_q: str = ""
    reply_to_q_mgr: str = ""


def encode(
    seq: int,
    put_us: int,
    priority: int,
    persistent: bool,
    payload: bytes,
    msg_id: bytes | None = None,
    correl_id: bytes | None = None,
    group: tuple[bytes, int, int, int] | None = None,
    expiry: int = EXPIRY_UNLIMITED,
    backout: int = 0,
    props: bytes | None = None,
    reply: bytes | None = None,
) -> bytes:
    """Build a record. ``None`` / defaults leave an optional section out; ``props`` is an
    encoded properties section (engine/properties.encode); ``reply`` an encoded reply-to
    section (:func:`reply_section`)."""
    flags = PERSISTENT if persistent else 0
    extra = b""
    if msg_id is not None:
        flags |= HAS_MSG_ID
        extra += msg_id
    if correl_id is not None and correl_id != CORRELID_NONE:
        flags |= HAS_CORREL_ID
        extra += correl_id
    if group is not None:
        flags |= HAS_GROUP
        extra += _GROUP.pack(*group)
    if expiry != EXPIRY_UNLIMITED:
        flags |= HAS_EXPIRY
        extra += _EXPIRY.pack(expiry)
    if reply:
        flags |= HAS_REPLY
        extra += reply
    if props:
        flags |= HAS_PROPS
        extra += _U32.pack(len(props)) + props
    hlen = HEAD_LEN + len(extra)
    if hlen > 255:
        hlen = 0  # too long for the byte: data_offset() reads the sections
    return HEAD.pack(hlen, priority, flags, min(backout, 0xFFFF), seq, put_us) + extra + payload


def plain(seq: int, put_us: int, priority: int, persistent: bool, payload: bytes) -> bytes:
    """The record of a message with no optional section (no MsgId, CorrelId, group, expiry,
    reply-to or properties): what a put with no descriptor makes, :func:`encode` written out
    for the put hot path (compiled, one allocation and two copies)."""
    if not COMPILED:  # interpreted, one call fewer
        return HEAD.pack(_HEAD_LEN, priority, _PERSISTENT if persistent else 0, 0, seq, put_us) + payload
    return _plain(seq, put_us, priority, _PERSISTENT if persistent else 0, payload)


def item_head(seq: int, put_us: int, priority: int) -> bytes:
    """The record of a message whose payload is an item the core keeps (HAS_ITEM): a plain,
    non-persistent header and no payload."""
    return _plain(seq, put_us, priority, _HAS_ITEM, b"")


def _plain(seq: int, put_us: int, priority: int, flags: int, payload: bytes) -> bytes:
    if COMPILED:
        n = len(payload)
        out = PyBytes_FromStringAndSize(cython.NULL, _HEAD_LEN + n)
        p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
        _write_head(p, _HEAD_LEN, priority, flags, seq, put_us)
        if n:
            memcpy(p + _HEAD_LEN, PyBytes_AS_STRING(payload), n)
        return out
    return HEAD.pack(_HEAD_LEN, priority, flags, 0, seq, put_us) + payload


def _write_head(p, hlen: int, priority: int, flags: int, seq: int, put_us: int) -> None:  # type: ignore[no-untyped-def]  # p: a C pointer (record.pxd)
    """Write the header :data:`HEAD` packs, with a backout count of 0, at ``p`` (compiled form
    only: a C pointer; inline C, the one copy of the header's bytes for :func:`_plain` and
    :func:`pinned`)."""
    p[0] = hlen
    p[1] = priority
    p[2] = flags
    p[3] = 0
    p[4] = 0
    v = cython.cast(cython.ulonglong, seq)
    w = cython.cast(cython.ulonglong, put_us)
    for k in range(8):  # little endian, as HEAD packs them
        p[_OFF_SEQ + k] = (v >> (8 * k)) & 0xFF
        p[_OFF_SEQ + 8 + k] = (w >> (8 * k)) & 0xFF


class PlainRecords:
    """The records of a batch put of plain messages, which the queue's memory holds already
    (written there from their fields: engine/core/arena.py ``store_plain``), made again only
    when one is read (put_many's results, engine/message.py ``PutResults``): the ``k``-th is
    ``plain(seqs[k], put_us, priority, persistent, payloads[k])``, equal to the queue's."""

    __slots__ = ("payloads", "persistent", "priority", "put_us", "seqs")

    def __init__(
        self, seqs: Sequence[int], put_us: int, priority: int, persistent: bool, payloads: Sequence[bytes]
    ) -> None:
        self.seqs = seqs
        self.put_us = put_us
        self.priority = priority
        self.persistent = persistent
        self.payloads = payloads

    def __len__(self) -> int:
        return len(self.payloads)

    def __getitem__(self, k: int) -> bytes:
        return plain(self.seqs[k], self.put_us, self.priority, self.persistent, self.payloads[k])


def with_payload(rec: bytes, data: bytes) -> bytes:
    """The record of an item (HAS_ITEM) as it leaves memory: the same header without the
    flag, and ``data``, the item's encoding, as its payload."""
    assert rec[OFF_FLAGS] & HAS_ITEM and rec[OFF_HLEN] == len(rec), "not an item's record"
    return rec[:OFF_FLAGS] + bytes((rec[OFF_FLAGS] & ~HAS_ITEM,)) + rec[OFF_FLAGS + 1 :] + data


def tail(rec: bytes, start: int) -> bytes:
    """``rec[start:]`` (the message data of a record, given where it starts), written out for
    the get hot path: compiled, one allocation and one copy, no slice object."""
    if COMPILED:
        n = len(rec) - start
        if n <= 0:
            return b""
        return PyBytes_FromStringAndSize(PyBytes_AS_STRING(rec) + start, n)
    return rec[start:]


def props_span(rec: bytes) -> tuple[int, int]:
    """``(start, end)`` of the encoded properties in a record that has HAS_PROPS."""
    flags = rec[OFF_FLAGS]
    pos = HEAD_LEN
    if flags & HAS_MSG_ID:
        pos += 24
    if flags & HAS_CORREL_ID:
        pos += 24
    if flags & HAS_GROUP:
        pos += _GROUP.size
    if flags & HAS_EXPIRY:
        pos += 4
    if flags & HAS_REPLY:
        pos = _after_reply(rec, pos)
    n = _U32.unpack_from(rec, pos)[0]
    return pos + 4, pos + 4 + n


def reply_section(md: MD) -> bytes | None:
    """The HAS_REPLY section of a put's descriptor, or None when it names no reply queue (the
    put path calls this only then, so a put without one pays nothing).

    :raises MQError: MD_ERROR (2026) when a name is not a str of at most 48 ASCII characters."""
    parts = []
    for field in ("reply_to_q", "reply_to_q_mgr"):
        value = getattr(md, field)
        if not isinstance(value, str) or len(value) > MAX_REPLY_NAME or not value.isascii():
            raise MQError(Reason.MD_ERROR, f"{field} must be a str of at most {MAX_REPLY_NAME} ASCII characters")
        parts.append(bytes((len(value),)) + value.encode())
    return b"".join(parts) if parts[0] != b"\0" or parts[1] != b"\0" else None


def _after_reply(rec: bytes, pos: int) -> int:
    """Where the section after the reply-to section at ``pos`` starts."""
    pos += 1 + rec[pos]
    return pos + 1 + rec[pos]


def reply_to(rec: bytes) -> tuple[str, str]:
    """(ReplyToQ, ReplyToQMgr) of a record; ("", "") when it names none."""
    flags = rec[OFF_FLAGS]
    if not flags & HAS_REPLY:
        return "", ""
    pos = HEAD_LEN + 24 * (bool(flags & HAS_MSG_ID) + bool(flags & HAS_CORREL_ID))
    pos += _GROUP.size if flags & HAS_GROUP else 0
    pos += 4 if flags & HAS_EXPIRY else 0
    n = rec[pos]
    q = rec[pos + 1 : pos + 1 + n].decode()
    pos += 1 + n
    return q, rec[pos + 1 : pos + 1 + rec[pos]].decode()


def data_offset(rec: bytes) -> int:
    """Where the payload starts: ``rec[0]``, or past a header too long for that byte."""
    return rec[0] or props_span(rec)[1]


def data_of(rec: bytes) -> bytes:
    """The message data (payload) of a record."""
    return rec[rec[0] or props_span(rec)[1] :]


def properties_of(rec: bytes) -> dict:
    """The message properties of a record (a new dict; empty when it has none)."""
    if not rec[OFF_FLAGS] & HAS_PROPS:
        return {}
    from . import properties  # not at import time: properties -> selector -> record

    start, end = props_span(rec)
    return properties.lookup(rec, start, end)


def seq_of(rec: bytes) -> int:
    return _SEQ.unpack_from(rec, OFF_SEQ)[0]


def backout_of(rec: bytes) -> int:
    return _U16.unpack_from(rec, OFF_BACKOUT)[0]


def is_persistent(rec: bytes) -> bool:
    return bool(rec[_OFF_FLAGS] & _PERSISTENT)  # compiled: C ints, no module lookup


def with_backout(rec: bytes, count: int) -> bytes:
    """A copy of ``rec`` with its backout count replaced (records are immutable)."""
    return rec[:OFF_BACKOUT] + _U16.pack(min(count, 0xFFFF)) + rec[OFF_SEQ:]


def rehome(rec: bytes, seq: int, ident: Identity) -> bytes:
    """The record as a new message instance (new seq, so a new MsgToken) that keeps its
    MsgId: a generated MsgId is written out explicitly, since it derives from the old seq."""
    if rec[OFF_FLAGS] & HAS_MSG_ID:
        return rec[:OFF_SEQ] + _SEQ.pack(seq) + rec[OFF_SEQ + 8 :]
    msg_id = ident.msg_id(rec)
    hlen = data_offset(rec) + 24
    head = bytes([hlen if hlen <= 255 else 0, rec[1], rec[2] | HAS_MSG_ID]) + rec[3:OFF_SEQ]
    return head + _SEQ.pack(seq) + rec[OFF_SEQ + 8 : HEAD_LEN] + msg_id + rec[HEAD_LEN:]


def pin_msg_id(rec: bytes, ident: Identity) -> bytes:
    """The record with its MsgId written out (same seq). A generated MsgId derives from the
    run's id, which a restart changes: a durable record must carry its MsgId itself."""
    if rec[OFF_FLAGS] & HAS_MSG_ID:
        return rec
    hlen = data_offset(rec) + 24
    head = bytes([hlen if hlen <= 255 else 0, rec[1], rec[2] | HAS_MSG_ID]) + rec[3:HEAD_LEN]
    return head + ident.msg_id(rec) + rec[HEAD_LEN:]


def pinned(seq: int, put_us: int, priority: int, persistent: bool, payload: bytes, ident: Identity) -> bytes:
    """``pin_msg_id(plain(seq, put_us, priority, persistent, payload), ident)`` made in one
    allocation and one copy of the payload: the record of a durable put with no descriptor
    (every durable put outside a unit of work with no option, issue 31), where the plain
    record and its pinned copy were two copies of the payload and several of the header."""
    flags = (_PERSISTENT if persistent else 0) | _HAS_MSG_ID
    prefix = ident._msg_prefix  # b"SWQ " + run id: the MsgId ident.msg_id generates, less the seq
    if not COMPILED:
        return HEAD.pack(_PINNED_HLEN, priority, flags, 0, seq, put_us) + prefix + seq.to_bytes(8, "big") + payload
    n = len(payload)
    out = PyBytes_FromStringAndSize(cython.NULL, _PINNED_HLEN + n)
    p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    _write_head(p, _PINNED_HLEN, priority, flags, seq, put_us)
    v = cython.cast(cython.ulonglong, seq)
    for k in range(8):  # the MsgId's seq big endian, as msg_id makes it
        p[_HEAD_LEN + 23 - k] = (v >> (8 * k)) & 0xFF
    memcpy(p + _HEAD_LEN, PyBytes_AS_STRING(prefix), 16)
    if n:
        memcpy(p + _PINNED_HLEN, PyBytes_AS_STRING(payload), n)
    return out


def _sections(rec: bytes) -> tuple[int, int, int, int]:
    """Offsets of (msg_id, correl_id, group, expiry) sections, -1 where absent."""
    flags = rec[OFF_FLAGS]
    pos = HEAD_LEN
    out = [-1, -1, -1, -1]
    if flags & HAS_MSG_ID:
        out[0] = pos
        pos += 24
    if flags & HAS_CORREL_ID:
        out[1] = pos
        pos += 24
    if flags & HAS_GROUP:
        out[2] = pos
        pos += _GROUP.size
    if flags & HAS_EXPIRY:
        out[3] = pos
    return out[0], out[1], out[2], out[3]


class Identity:
    """How one queue manager run turns a record's ``seq`` into a MsgId and a MsgToken.

    Generated MsgIds are ``b"SWQ " + run id (12 bytes) + seq (8 bytes, big endian)``: unique,
    and ordered by arrival like MQ's own. A run id is the queue manager's name (its first 8
    characters, padded with spaces) and 4 random bytes (:meth:`for_qmgr`), so a MsgId says
    which queue manager made it, as MQ's ``AMQ `` + name do, and runs of one queue manager
    (a non-durable one counts from 1 again) never make the same one. Tokens are ``run id[4:]
    + seq``: valid for this run only, never reused (docs/semantics.md §5.2).
    """

    __slots__ = ("_msg_prefix", "_tok_prefix", "run_id")

    def __init__(self, run_id: bytes):
        if len(run_id) != 12:
            raise ValueError("run id must be 12 bytes")
        self.run_id = run_id
        self._msg_prefix = b"SWQ " + run_id
        self._tok_prefix = run_id[4:]

    @classmethod
    def for_qmgr(cls, name: str) -> Identity:
        """A new run of the queue manager called ``name`` (see the class docstring)."""
        return cls(name.encode()[:8].ljust(8, b" ") + os.urandom(4))

    def msg_id(self, rec: bytes) -> bytes:
        if rec[OFF_FLAGS] & HAS_MSG_ID:
            return rec[HEAD_LEN : HEAD_LEN + 24]
        return self._msg_prefix + rec[OFF_SEQ : OFF_SEQ + 8][::-1]

    def msg_ids(self, records: list[bytes]) -> list[bytes]:
        """:meth:`msg_id` of each of a run of records (a sweep's), written out for speed; an
        empty record (a slot a get emptied after the sweep chose it) gets 24 zero bytes, which
        no message has, so that verifying that run finds it removed (engine/tiering.py)."""
        pre = self._msg_prefix
        seq_rev = slice(OFF_SEQ + 7, OFF_SEQ - 1, -1)
        return [
            (rec[HEAD_LEN : HEAD_LEN + 24] if rec[OFF_FLAGS] & HAS_MSG_ID else pre + rec[seq_rev]) if rec else bytes(24)
            for rec in records
        ]

    def token(self, rec: bytes) -> bytes:
        return self._tok_prefix + rec[OFF_SEQ : OFF_SEQ + 8][::-1]

    def seq_of_token(self, token: bytes) -> int | None:
        """The seq a token names, or None if it is not a token of this run."""
        if len(token) != 16 or token[:8] != self._tok_prefix:
            return None
        return int.from_bytes(token[8:], "big")


def correl_id(rec: bytes) -> bytes:
    if rec[OFF_FLAGS] & HAS_CORREL_ID:
        off = HEAD_LEN + (24 if rec[OFF_FLAGS] & HAS_MSG_ID else 0)
        return rec[off : off + 24]
    return CORRELID_NONE


def expiry_deadline_us(rec: bytes) -> int | None:
    """Epoch microseconds at which the message expires, or None if it never does."""
    if not rec[OFF_FLAGS] & HAS_EXPIRY:
        return None
    off = _sections(rec)[3]
    tenths = _EXPIRY.unpack_from(rec, off)[0]
    return HEAD.unpack_from(rec)[5] + tenths * 100_000


def decode_md(rec: bytes, ident: Identity, now_us: int | None = None) -> MD:
    """The full descriptor of a record (output form: every field resolved)."""
    _hlen, prio, flags, backout, _seq, put_us = HEAD.unpack_from(rec)
    _mid, cid, grp, exp = _sections(rec)
    md = MD(
        msg_id=ident.msg_id(rec),
        correl_id=rec[cid : cid + 24] if cid >= 0 else CORRELID_NONE,
        priority=prio,
        persistence=Persistence.PERSISTENT if flags & PERSISTENT else Persistence.NOT_PERSISTENT,
        backout_count=backout,
        put_time=put_us / 1e6,
        properties=properties_of(rec),
    )
    if grp >= 0:
        md.group_id, md.msg_seq_number, md.offset, md.msg_flags = _GROUP.unpack_from(rec, grp)
    if flags & HAS_REPLY:
        md.reply_to_q, md.reply_to_q_mgr = reply_to(rec)
    if exp >= 0:
        tenths = _EXPIRY.unpack_from(rec, exp)[0]
        if now_us is not None:
            tenths = max(1, tenths - (now_us - put_us) // 100_000)
        md.expiry = int(tenths)
    return md


__all__ = ["MD", "MSGID_NONE", "Identity", "decode_md", "encode"]
