"""Where a queue's durable records live in the store, and how each is encoded.

Message key: ``queue name (utf-8) + b"\\x00" + lane (1 byte) + seq (8 bytes, big endian)``.
Key order is therefore queue, then lane, then arrival: a prefix scan gives a lane's
in-memory messages in the order a get returns them (the ``seq`` of a record is its arrival
number, engine/record.py, and a lane holds its messages in arrival order).

Value: ``crc32 of the record (u32, little endian) + the record``. RocksDB checksums its
blocks too, but this crc names a damaged message by its key even when a damaged block is
read without RocksDB's checks.

Queue definitions are objects named by the queue name, holding the attributes as JSON;
other objects (engine/distributed/) have keys that start with NUL (:func:`is_queue_object`).
"""

from __future__ import annotations

import json
import struct
import zlib

from ..record import OFF_SEQ

_SEQ = struct.Struct(">Q")
_CRC = struct.Struct("<I")
_BACKOUT = struct.Struct("<H")

MARK_REMOVED = b"R"
MARK_BACKOUT = b"B"  # + u16 the record's backout count now


def queue_prefix(name: str) -> bytes:
    """The key prefix of every message record of queue ``name``."""
    return name.encode() + b"\x00"


def message_key(prefix: bytes, lane: int, rec: bytes) -> bytes:
    """The key of ``rec`` in lane ``lane`` of the queue with key prefix ``prefix``."""
    return prefix + bytes((lane,)) + rec[OFF_SEQ : OFF_SEQ + 8][::-1]


def message_key_at(prefix: bytes, lane: int, seq: int) -> bytes:
    """The key of the message numbered ``seq`` in lane ``lane`` (for searches by position)."""
    return prefix + bytes((lane,)) + _SEQ.pack(seq)


def key_parts(key: bytes) -> tuple[str, int, int]:
    """(queue name, lane, seq) of a message key."""
    name, _, rest = key.partition(b"\x00")
    return name.decode(), rest[0], _SEQ.unpack_from(rest, 1)[0]


def encode_value(rec: bytes) -> bytes:
    return _CRC.pack(zlib.crc32(rec)) + rec


def decode_value(value: bytes) -> bytes | None:
    """The record, or None when it fails its crc."""
    if len(value) < 4:
        return None
    rec = value[4:]
    if _CRC.unpack_from(value)[0] != zlib.crc32(rec):
        return None
    return bytes(rec)


def backout_mark(count: int) -> bytes:
    return MARK_BACKOUT + _BACKOUT.pack(min(count, 0xFFFF))


def mark_backout(value: bytes) -> int | None:
    """The backout count a mark sets, or None (a removal mark)."""
    if value[:1] == MARK_BACKOUT and len(value) == 3:
        return _BACKOUT.unpack_from(value, 1)[0]
    return None


def is_queue_object(key: bytes) -> bool:
    """Whether a stored object is a queue definition. Every other kind (the queue manager's
    own attributes, remote queues, channels: engine/distributed/registry.py) has a key that
    starts with NUL, which no queue name can."""
    return not key.startswith(b"\x00")


def encode_definition(attrs: dict) -> bytes:
    """JSON of a queue's attributes (enums as their numbers, so a rename never breaks it)."""
    plain = {k: v if isinstance(v, bool) or not isinstance(v, int) else int(v) for k, v in attrs.items()}
    return json.dumps(plain, sort_keys=True).encode()


def decode_definition(value: bytes) -> dict:
    return json.loads(value)
