"""The blob format: a versioned header bound to its key and owner, then zstd-compressed records.

::

    header (52 bytes, little endian)
      0  4s  magic         b"SQB2"
      4  u8  version       FORMAT_VERSION
      5  u8  codec         CODEC_ZSTD | CODEC_NONE
      6  u16 reserved
      8  u64 blob_id       the key the blob was written under
      16 u32 owner_crc     crc32 of the owner label (the chain, i.e. queue and lane)
      20 u32 ids_crc       crc32 of the record ids, back to back
      24 u32 dict_id       0 = no dictionary
      28 u32 count         records in the blob
      32 u32 raw_len       length of the frame before compression
      36 u32 comp_len      length of the body that follows
      40 u32 reserved
      44 u32 reserved
      48 u32 crc32         of the header's first 48 bytes and the body
    body: compress(frame)

    frame: u32 length of each record (count of them), then the records back to back:
    a record costs its length plus FRAME_BYTES inside a blob.

The checksum covers the header too, and the header names the blob's key, its owner and its
records: a valid blob read under another key, for another owner or with other records
fails :func:`unpack` exactly like a damaged one. Records are opaque bytes: this package
knows nothing about messages. Framing uses ``struct``, never pickle, so a damaged blob
cannot execute anything.
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from dataclasses import dataclass

DEFAULT_MAX_BLOB_BYTES = 256 * 1024
DEFAULT_MAX_BLOB_RECORDS = 1024  # bounds a sweep's lock hold (verify + detach are per record)
# A blob's default bounds (a BlobStore's settings, store.py). Here, in a module that imports
# no RocksDB, so that the replay and the command line read them without loading the store.

MAGIC = b"SQB2"
FORMAT_VERSION = 2
CODEC_NONE = 0
CODEC_ZSTD = 1

HEADER = struct.Struct("<4sBBHQ9I")
FRAME_BYTES = 4  # the u32 length of each record in the frame's table
HEADER_LEN = HEADER.size


class FormatError(ValueError):
    """A blob that is not a sweepq blob, is of a newer format, or fails its checksum."""


@dataclass(frozen=True)
class Header:
    version: int
    codec: int
    blob_id: int
    owner_crc: int
    ids_crc: int
    dict_id: int
    count: int
    raw_len: int
    comp_len: int
    crc32: int


def ids_check(ids) -> int:
    """The crc32 of a blob's record ids, as its header keeps it."""
    return zlib.crc32(b"".join(ids))


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


def check_frame(raw: bytes, count: int) -> None:
    """:raises FormatError: the frame's table does not account for its bytes exactly (what
    :func:`unframe` checks, without making the records)."""
    lengths = array("I", raw[: 4 * count])
    if sys.byteorder != "little":
        lengths.byteswap()
    if len(lengths) != count or 4 * count + sum(lengths) != len(raw):
        raise FormatError(f"frame holds {len(raw)} bytes but its table does not account for them")


def pack(codec: int, blob_id: int, owner: bytes, ids_crc: int, dict_id: int, count: int, raw_len: int, body) -> bytes:
    head = HEADER.pack(
        MAGIC,
        FORMAT_VERSION,
        codec,
        0,
        blob_id,
        zlib.crc32(owner),
        ids_crc,
        dict_id,
        count,
        raw_len,
        len(body),
        0,
        0,
        0,
    )[: HEADER_LEN - 4]
    return head + struct.pack("<I", zlib.crc32(body, zlib.crc32(head))) + body


def unpack(
    value: bytes, blob_id: int | None = None, owner: bytes | None = None, ids_crc: int | None = None
) -> tuple[Header, memoryview]:
    """Parse and verify a stored blob; return its header and its (verified) body.

    ``blob_id``, ``owner`` and ``ids_crc``, when given, must be what the blob was written
    with: a blob stored under the wrong key is as damaged as a flipped bit."""
    if len(value) < HEADER_LEN:
        raise FormatError(f"{len(value)} bytes is shorter than a blob header")
    magic, version, codec, _r, bid, owner_crc, icrc, dict_id, count, raw_len, comp_len, _r1, _r2, crc = (
        HEADER.unpack_from(value)
    )
    if magic != MAGIC:
        raise FormatError(f"bad magic {magic!r}: not a sweepq blob of this format")
    if version > FORMAT_VERSION:
        raise FormatError(f"blob format {version} is newer than this sweepq ({FORMAT_VERSION}); upgrade sweepq")
    view = memoryview(value)
    body = view[HEADER_LEN:]
    if len(body) != comp_len:
        raise FormatError(f"body is {len(body)} bytes, header says {comp_len}")
    if zlib.crc32(body, zlib.crc32(view[: HEADER_LEN - 4])) != crc:
        raise FormatError("checksum mismatch: the stored bytes are damaged")
    if blob_id is not None and bid != blob_id:
        raise FormatError(f"the blob stored under id {blob_id} was written as blob {bid}")
    if owner is not None and owner_crc != zlib.crc32(owner):
        raise FormatError(f"the blob does not belong to {owner.decode(errors='replace')!r}")
    if ids_crc is not None and icrc != ids_crc:
        raise FormatError("the blob holds other records than the chain expects")
    return Header(version, codec, bid, owner_crc, icrc, dict_id, count, raw_len, comp_len, crc), body
