"""A change log as sweepq wrote it before its records held each put whole (``P``: the key and
the record's first 64 bytes, enough to name a lost message, not to write it again). Tests of
damage that the change log cannot redo use it: a store written by that sweepq opens the old
way (what RocksDB lost is named by MsgId, nothing consumed comes back)."""

from __future__ import annotations

import struct
from pathlib import Path

from sweepq.blobstore import changes
from sweepq.blobstore.sidelog import SideLog

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def as_before_whole_records(d: Path) -> None:
    """Rewrite the change log of the data directory ``d`` with each ``F`` operation as the
    ``P`` of before (its other records as they are)."""
    records, problem = SideLog(str(d), changes.NAME).read()
    assert problem is None, problem
    log = SideLog(str(d), changes.NAME)  # its start (records[0]) and appends frame them
    log.start(records[0])
    for rec in records[1:]:
        log.append(_legacy(rec) if rec[:1] == b"W" else rec)
    log.close()


def _legacy(rec: bytes) -> bytes:
    parts, pos = [rec[:9]], 9
    while pos < len(rec):
        op, start = rec[pos : pos + 1], pos
        pos += 1
        if op == b"F":
            (n,) = _U16.unpack_from(rec, pos)
            key = rec[pos + 2 : pos + 2 + n]
            pos += 2 + n
            (m,) = _U32.unpack_from(rec, pos)
            head = rec[pos + 4 : pos + 4 + min(m, changes.HEAD)]
            pos += 4 + m
            parts.append(b"P" + _U16.pack(n) + key + _U16.pack(len(head)) + head)
            continue
        pos = _past(rec, op, pos)
        parts.append(rec[start:pos])
    return b"".join(parts)


def _past(rec: bytes, op: bytes, pos: int) -> int:
    """Where the operation ``op`` whose fields start at ``pos`` ends."""
    if op == b"U":
        return pos + 8
    if op == b"K":
        has = rec[pos + 12]
        pos += 13
        return pos + 2 + _U16.unpack_from(rec, pos)[0] if has else pos
    (n,) = _U16.unpack_from(rec, pos)
    pos += 2 + n
    if op == b"P":
        return pos + 2 + _U16.unpack_from(rec, pos)[0]
    if op == b"M":
        return pos + 2 + 8 * _U16.unpack_from(rec, pos)[0]
    if op == b"R":
        return pos + 8
    if op == b"L":
        return pos + 3 + 8 * _U16.unpack_from(rec, pos + 1)[0]
    assert op in (b"D", b"X", b"Z"), op
    return pos
