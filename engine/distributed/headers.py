"""The transmission header and the dead-letter header, in the message data as MQ has them.

Why in the data and not as sections of the record: that is where MQ puts its MQXQH and
MQDLH, so an application that browses a transmission queue or drains a dead-letter queue
reads them as it would in MQ (``Transmission.parse(m.data)``, ``DeadLetter.parse(m.data)``);
and the record format, the store and the sweeper stay as they are: a message on a
transmission queue is a message like any other, swept and brought back like any other.

**Transmission header** (a message on a transmission queue, MQ's MQXQH)::

    b"XQH " | version u8 (1) | n u8 | remote queue (n bytes) | m u8 | remote queue manager (m bytes)
    | the original message's record (engine/record.py), its MsgId written out

The transmission queue's own descriptor is the original's priority, persistence, MsgId and
CorrelId, so it is got, swept and kept exactly as the message itself would be; the record
inside keeps everything else (expiry counted from the original put time, properties,
groups, reply-to). A receiving queue manager puts that record as it came (MQ's
SET_ALL_CONTEXT), with a new arrival number of its own and the same MsgId.

**Dead-letter header** (a message a receiver could not deliver, MQ's MQDLH)::

    b"DLH " | version u8 (1) | reason i32 | put time i64 (us since the epoch) | n u8 | destination
    queue | m u8 | destination queue manager | the original message data

The dead-letter queue's message keeps the original descriptor (MsgId, CorrelId, priority,
persistence, properties); only its data is prefixed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .. import record

XQH = b"XQH "
DLH = b"DLH "
VERSION = 1
_DLH_NUMBERS = struct.Struct("<iq")


def _name(value: str) -> bytes:
    raw = value.encode()
    return bytes((len(raw),)) + raw


def _read_name(data: bytes, pos: int) -> tuple[str, int]:
    n = data[pos]
    end = pos + 1 + n
    if end > len(data):
        raise ValueError("a name runs past the end")
    return data[pos + 1 : end].decode(), end


@dataclass(frozen=True)
class Transmission:
    """What a transmission header says: the message is for ``remote_queue`` on
    ``remote_qmgr``; ``record`` is the original message's record."""

    remote_queue: str
    remote_qmgr: str
    record: bytes

    @classmethod
    def parse(cls, data: bytes) -> Transmission | None:
        """The header at the start of a transmission queue message's data (None: there is none,
        or it is cut short)."""
        if data[:4] != XQH or len(data) < 7 or data[4] != VERSION:
            return None
        try:
            rq, pos = _read_name(data, 5)
            rqm, pos = _read_name(data, pos)
        except (ValueError, IndexError, UnicodeDecodeError):
            return None
        rec = bytes(data[pos:])
        if len(rec) < record.HEAD_LEN or len(rec) < record.data_offset(rec):
            return None
        return cls(rq, rqm, rec)


def transmission(rec: bytes, ident: record.Identity, remote_queue: str, remote_qmgr: str) -> bytes:
    """The record that stands for ``rec`` on a transmission queue: the original descriptor's
    priority, persistence, MsgId and CorrelId, same arrival number and put time, and the
    data ``XQH`` + destination + the original record (its MsgId written out, since a
    generated one derives from this queue manager's run)."""
    inner = record.pin_msg_id(rec, ident)
    payload = XQH + bytes((VERSION,)) + _name(remote_queue) + _name(remote_qmgr) + inner
    _hlen, priority, flags, _backout, seq, put_us = record.HEAD.unpack_from(rec)
    return record.encode(
        seq,
        put_us,
        priority,
        bool(flags & record.PERSISTENT),
        payload,
        msg_id=ident.msg_id(rec),
        correl_id=record.correl_id(rec),
    )


@dataclass(frozen=True)
class DeadLetter:
    """What a dead-letter header says: why the message could not be put (an MQ reason code),
    when, where it was going, and its own data."""

    reason: int
    put_us: int
    dest_queue: str
    dest_qmgr: str
    data: bytes

    @classmethod
    def parse(cls, data: bytes) -> DeadLetter | None:
        """The header at the start of a dead-letter queue message's data (None: there is none)."""
        start = 5 + _DLH_NUMBERS.size
        if data[:4] != DLH or len(data) < start + 2 or data[4] != VERSION:
            return None
        reason, put_us = _DLH_NUMBERS.unpack_from(data, 5)
        try:
            q, pos = _read_name(data, start)
            qm, pos = _read_name(data, pos)
        except (ValueError, IndexError, UnicodeDecodeError):
            return None
        return cls(reason, put_us, q, qm, bytes(data[pos:]))


def dead_letter(rec: bytes, reason: int, dest_queue: str, dest_qmgr: str, now_us: int) -> bytes:
    """``rec`` as a dead-letter queue keeps it: the same descriptor, its data prefixed with a
    dead-letter header (``reason``, ``now_us``, where it was going)."""
    h = record.data_offset(rec)
    dlh = DLH + bytes((VERSION,)) + _DLH_NUMBERS.pack(int(reason), now_us) + _name(dest_queue) + _name(dest_qmgr)
    return rec[:h] + dlh + rec[h:]
