"""The change log: every change to the message records since the last checkpoint, kept
outside RocksDB (a side log, ``sweepq-changes``, blobstore/files.py).

Why. A consumed message leaves the store by a delete (or a removal mark on its blob
position) written to RocksDB's write-ahead log. Damage can take that write away (a log cut
short, a bit flipped in it, the log deleted), and the record would come back as if it had
never been consumed; the checkpoint of live messages (engine/durable/ledger.py) recognises
only what was consumed *before* it. A record of every removal in a second file, written
right after the store's write returned, survives damage to the first: recovery makes such
a removal again (docs/damage.md). The same log keeps the key and the first bytes of every
record written since the checkpoint (so a record that damage took can be named), and the
store's *horizon* after each write (RocksDB's sequence number: a store that opens below a
horizon it had reached has lost writes, whatever file took them).

What. One record per store write that touches message records or marks: the horizon after
it, then its operations, each a kind byte and its fields:

* ``P`` key, head: a record written under ``key`` (``head``: its first :data:`HEAD` bytes);
* ``D`` key: a record deleted for good (consumed, quarantined);
* ``M`` key, blob ids: a record moved into one of these blobs (a sweep's link: not a removal);
* ``U`` blob id: a blob deleted (the records it still held went back to their keys, ``P``);
* ``K`` blob id, position, value: a mark set (or cleared, without a value);
* ``X`` prefix: every record under ``prefix`` deleted (a queue deleted).

A ``H`` record starts the log (at each checkpoint): whether the store writes a log at all
(without one a crash loses writes by design, and nothing here calls that damage), and what
its files were then (the manifest's name and length, the horizon: blobstore/guard.py
checks them before the next open). The log
is never synced: it is for a process killed at any moment, or damage to one file; after a
power loss it may lack its last records, which only makes it know less.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

NAME = "changes"
HEAD = 64  # bytes of each record written that the log keeps (enough for an engine record's MsgId)
LIMIT = 64 << 20  # a log this long starts again (after the store flushed what it covers)

_U16 = struct.Struct("<H")
_U64 = struct.Struct("<Q")
_MARK = struct.Struct("<QIB")  # blob id, position, has a value


def start(wal: bool, files: dict, continued: bool = False) -> bytes:
    """The record a log starts with: ``files``, the key-value store's (KV.files);
    ``continued``: it goes on from a log that grew too long, not from a checkpoint."""
    return b"H" + json.dumps({"wal": wal, "continued": continued, "files": files}).encode()


def write(
    horizon: int,
    puts: Sequence[tuple[bytes, bytes]] = (),
    deletes: Sequence[bytes] = (),
    moved: tuple[Sequence[int], Sequence[bytes]] = ((), ()),
    marks: Sequence[tuple[int, int, bytes | None]] = (),
    dropped: bytes | None = None,
    unlinked: Sequence[int] = (),
) -> bytes:
    """The record of one store write (see the module docstring); ``moved``: (the blobs a link
    wrote, the keys of the records they took)."""
    parts = [b"W", _U64.pack(horizon)]
    for blob_id in unlinked:
        parts += [b"U", _U64.pack(blob_id)]
    for key, value in puts:
        head = value[:HEAD]
        parts += [b"P", _U16.pack(len(key)), key, _U16.pack(len(head)), head]
    for key in deletes:
        parts += [b"D", _U16.pack(len(key)), key]
    blobs, keys = moved
    homes = _U16.pack(len(blobs)) + b"".join(map(_U64.pack, blobs))
    for key in keys:
        parts += [b"M", _U16.pack(len(key)), key, homes]
    for blob_id, pos, value in marks:
        parts += [b"K", _MARK.pack(blob_id, pos, value is not None)]
        if value is not None:
            parts += [_U16.pack(len(value)), value]
    if dropped is not None:
        parts += [b"X", _U16.pack(len(dropped)), dropped]
    return b"".join(parts)


@dataclass
class Changes:
    """What a change log says happened since it started: each key's last state, each
    mark's last value, the highest horizon a write reached."""

    wal: bool = True
    continued: bool = False  # it does not reach back to the checkpoint (it grew too long)
    files: dict = field(default_factory=dict)  # the store's files when it started (KV.files)
    written: dict[bytes, bytes] = field(default_factory=dict)  # key -> head: last written (or moved)
    moved: dict[bytes, tuple[int, ...]] = field(default_factory=dict)  # key -> the blobs one of which took it
    unlinked: set[int] = field(default_factory=set)  # blobs deleted
    removed: set[bytes] = field(default_factory=set)  # last deleted for good
    marks: dict[tuple[int, int], bytes | None] = field(default_factory=dict)
    horizon: int = 0
    problem: str | None = None  # why the log could not be read to its end


def known(ch: Changes) -> dict:
    """What the key-value store should check at open (``known``, blobstore/guard.py): its
    files when the log started, the horizon raised to the last write the log has."""
    return {**ch.files, "wal": ch.wal, "horizon": max(int(ch.files.get("horizon", 0)), ch.horizon)}


def replay(records: list[bytes], problem: str | None = None) -> Changes:
    """The :class:`Changes` of a log's records (a record that does not decode ends it)."""
    out = Changes(problem=problem)
    for at, rec in enumerate(records):
        try:
            _apply(out, rec)
        except (struct.error, ValueError, IndexError) as e:
            out.problem = out.problem or f"record {at} of the change log does not decode ({e})"
            break
    return out


def _apply(out: Changes, rec: bytes) -> None:
    kind = rec[:1]
    if kind == b"H":
        head = json.loads(rec[1:])
        out.wal, out.continued, out.files = bool(head["wal"]), bool(head["continued"]), dict(head["files"])
        return
    if kind != b"W":
        raise ValueError(f"kind {kind!r}")
    out.horizon = max(out.horizon, _U64.unpack_from(rec, 1)[0])
    pos, n = 9, len(rec)
    while pos < n:
        op = rec[pos : pos + 1]
        pos += 1
        if op == b"U":
            out.unlinked.add(_U64.unpack_from(rec, pos)[0])
            pos += 8
            continue
        if op == b"K":
            blob_id, at, has = _MARK.unpack_from(rec, pos)
            pos += _MARK.size
            value = None
            if has:
                value, pos = _field(rec, pos)
            out.marks[blob_id, at] = value
            continue
        key, pos = _field(rec, pos)
        if op == b"P":
            head, pos = _field(rec, pos)
            out.written[key] = head
            out.moved.pop(key, None)
            out.removed.discard(key)
        elif op == b"D":
            out.written.pop(key, None)
            out.moved.pop(key, None)
            out.removed.add(key)
        elif op == b"M":
            (count,) = _U16.unpack_from(rec, pos)
            out.moved[key] = struct.unpack_from(f"<{count}Q", rec, pos + 2)
            pos += 2 + 8 * count
        elif op == b"X":
            for k in [k for k in out.written if k.startswith(key)]:
                del out.written[k]
                out.moved.pop(k, None)
                out.removed.add(k)
        else:
            raise ValueError(f"operation {op!r}")


def _field(rec: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _U16.unpack_from(rec, pos)
    end = pos + 2 + n
    if end > len(rec):
        raise ValueError("a field runs past its record")
    return rec[pos + 2 : end], end
