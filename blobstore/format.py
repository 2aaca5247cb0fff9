"""The blob format: a versioned header, then zstd-compressed framed records.

::

    header (28 bytes, little endian)
      0  4s  magic         b"SQB1"
      4  u8  version       FORMAT_VERSION
      5  u8  codec         CODEC_ZSTD | CODEC_NONE
      6  u16 reserved
      8  u32 dict_id       0 = no dictionary
      12 u32 count         records in the blob
      16 u32 raw_len       length of the frame before compression
      20 u32 comp_len      length of the body that follows
      24 u32 crc32         zlib.crc32 of the body (the compressed bytes)
    body: compress(frame)

    frame: u32 length of each record (count of them), then the records back to back:
    a record costs its length plus FRAME_BYTES inside a blob.

Records are opaque bytes: this package knows nothing about messages. Framing uses
``struct``, never pickle, so a blob written by one version can be read by the next and
a damaged one cannot execute anything.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

MAGIC = b"SQB1"
FORMAT_VERSION = 1
CODEC_NONE = 0
CODEC_ZSTD = 1

HEADER = struct.Struct("<4sBBHIIIII")
FRAME_BYTES = 4  # the u32 length of each record in the frame's table
HEADER_LEN = HEADER.size


class FormatError(ValueError):
    """A blob that is not a sweepq blob, is of a newer format, or fails its checksum."""


@dataclass(frozen=True)
class Header:
    version: int
    codec: int
    dict_id: int
    count: int
    raw_len: int
    comp_len: int
    crc32: int


def frame(records: list[bytes]) -> bytes:
    """Lengths table then the records: one allocation for the table, one join."""
    n = len(records)
    return struct.pack(f"<{n}I", *map(len, records)) + b"".join(records)


def unframe(raw: bytes, count: int) -> list[bytes]:
    lengths = struct.unpack_from(f"<{count}I", raw)
    out = []
    pos = 4 * count
    for n in lengths:
        end = pos + n
        out.append(raw[pos:end])
        pos = end
    if pos != len(raw):
        raise FormatError(f"frame holds {len(raw)} bytes but its table accounts for {pos}")
    return out


def pack(codec: int, dict_id: int, count: int, raw_len: int, body: bytes) -> bytes:
    return HEADER.pack(MAGIC, FORMAT_VERSION, codec, 0, dict_id, count, raw_len, len(body), zlib.crc32(body)) + body


def unpack(value: bytes) -> tuple[Header, memoryview]:
    """Parse and verify a stored blob; return its header and its (verified) body."""
    if len(value) < HEADER_LEN:
        raise FormatError(f"{len(value)} bytes is shorter than a blob header")
    magic, version, codec, _r, dict_id, count, raw_len, comp_len, crc = HEADER.unpack_from(value)
    if magic != MAGIC:
        raise FormatError(f"bad magic {magic!r}: not a sweepq blob")
    if version > FORMAT_VERSION:
        raise FormatError(f"blob format {version} is newer than this sweepq ({FORMAT_VERSION}); upgrade sweepq")
    body = memoryview(value)[HEADER_LEN:]
    if len(body) != comp_len:
        raise FormatError(f"body is {len(body)} bytes, header says {comp_len}")
    if zlib.crc32(body) != crc:
        raise FormatError("checksum mismatch: the stored bytes are damaged")
    return Header(version, codec, dict_id, count, raw_len, comp_len, crc), body
