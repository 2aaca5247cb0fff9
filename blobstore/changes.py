"""The change log: every change to the message records since the last checkpoint, kept
outside RocksDB (a side log, ``sweepq-changes``, blobstore/sidelog.py).

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

* ``F`` key, record: a record written under ``key``, whole (a 4-byte length: a record may
  pass 64 KiB), so that the open can write it again when RocksDB lost it (:func:`redo`);
  the form of a store whose sync is the change log's alone (BlobStore's ``redo``: the
  engine's sync="commit");
* ``P`` key, head: the same by its first :data:`HEAD` bytes (enough to name it, not to
  write it again), in the other stores' logs and in logs written before ``F``;
* ``D`` key: a record deleted for good (consumed, quarantined);
* ``M`` key, blob ids: a record moved into one of these blobs (a sweep's link: not a removal);
* ``U`` blob id: a blob deleted (the records it still held went back to their keys, ``F``
  or ``P``);
* ``K`` blob id, position, value: a mark set (or cleared, without a value);
* ``X`` prefix: every record under ``prefix`` deleted (a queue deleted);
* ``L`` chain, at head, blob ids: blobs linked into a chain; ``R`` chain, blob id: a blob
  taken out of its chain; ``Z`` chain: a chain dropped.

A ``V`` record is a ``W`` record of a *deferred* write (a store that defers message writes,
BlobStore's ``defer``: the engine's sync="os"): its number is not a horizon but the write's
number in the redo log (blobstore/redolog.py), which holds the write whole while RocksDB
does not have it yet; its operations are ``P`` and ``D``, as in a ``W`` record of that
store. An open that finds ``V`` records past the last deferred write the store reached
(the redo log cut, zeroed or deleted) says writes were lost, and appends a ``Y`` record
(that write's number): the ``V`` records before it are settled.

A ``W`` record without operations is a write the log does not describe, made by the store
itself (a drain of deferred writes, blobstore/rocks.py): RocksDB's files must reach its
horizon, as they must reach a write the log holds only by its heads.

An ``O`` record (a horizon) is appended by an open that found records past the store's
horizon, after it redid what it could (:func:`redo`): the records before it are settled, so
the next open redoes only records after it, whose horizons rise from there. Without it a
write that was lost for good, and whose number a later write reused, could be redone later.

A ``H`` record starts the log (at each checkpoint): whether the store writes a log at all
(without one a crash loses writes by design, and nothing here calls that damage), what its
files were then (the manifest's name and length, the horizon: blobstore/guard.py checks
them before the next open), and its chains: with the chain operations since, they say what
every chain should hold, when damage took the chain records (blobstore/store.py). The log
is synced by the store's sync. In a store with ``redo`` (BlobStore) RocksDB's log is synced
with it only when a write since the last sync is not one the log holds whole (``KV.write``'s
``logged``; without ``redo``, with every sync): there a put, delete or mark of message
records is in the log whole, so the open can make it again (:func:`redo`) when a power loss
took it from RocksDB's unsynced log. Under the sync policy "commit" a sync covers every call
that returned (engine/durable/journal.py), so a returned call is in a synced file: the
change log (one file synced a call, not two: issue 31), or RocksDB's log too. The log is for
a process killed at any moment, damage to one file, or a power loss; after a power loss it
may lack the records no sync covered, which only makes it know less.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import cython
from cython import compiled as COMPILED

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING, PyBytes_FromStringAndSize
    from cython.cimports.libc.string import memcpy

NAME = "changes"
HEAD = 64  # bytes of each record written that the log keeps (enough for an engine record's MsgId)
LIMIT = 64 << 20  # a log this long starts again (after the store flushed what it covers)

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_MARK = struct.Struct("<QIB")  # blob id, position, has a value
_WRITE_OP = struct.Struct("<cQcH")  # "W", the horizon, then one operation's kind and key length
_HEAD = HEAD  # the compiled form's C copy (changes.pxd types it)


def start(
    wal: bool, files: dict, chains: dict[bytes, list[int]], continued: bool = False, dropped: Iterable[bytes] = ()
) -> bytes:
    """The record a log starts with: ``files``, the key-value store's (KV.files); ``chains``,
    every chain's blob ids; ``continued``: it goes on from a log that grew too long, not from
    a checkpoint, and ``dropped`` are the prefixes the logs before it dropped since the
    checkpoint (``X``: a queue deleted, which recovery must still know)."""
    head = {"wal": wal, "continued": continued, "files": files, "chains": {k.hex(): v for k, v in chains.items()}}
    if dropped:
        head["dropped"] = sorted(p.hex() for p in dropped)
    return b"H" + json.dumps(head).encode()


def write(
    horizon: int,
    puts: Sequence[tuple[bytes, bytes]] = (),
    deletes: Sequence[bytes] = (),
    moved: tuple[Sequence[int], Sequence[bytes]] = ((), ()),
    marks: Sequence[tuple[int, int, bytes | None]] = (),
    dropped: bytes | None = None,
    unlinked: Sequence[int] = (),
    chains: Sequence[tuple[bytes, str, Sequence[int]]] = (),
    whole: bool = True,
) -> bytes:
    """The record of one store write (see the module docstring); ``moved``: (the blobs a link
    wrote, the keys of the records they took); ``chains``: each (a chain, "head" / "tail" (a
    link), "out" (blobs taken out) or "drop", the blob ids); ``whole``: puts as ``F`` (else
    ``P``, their heads: a store whose change log is not its sync's, BlobStore's ``redo``)."""
    if not (chains or unlinked or moved[1] or marks or dropped is not None):
        if len(puts) == 1 and not deletes:
            return one(horizon, *puts[0], whole)
        if len(deletes) == 1 and not puts:
            return one(horizon, deletes[0], None, whole)
    parts = [b"W" + _U64.pack(horizon)]
    _ops(parts, puts, deletes, whole)
    if chains or unlinked or moved[1] or marks or dropped is not None:
        _rare(parts, moved, marks, dropped, unlinked, chains)
    return b"".join(parts)


def one(horizon: int, key: bytes, value: bytes | None, whole: bool, deferred: bool = False) -> bytes:
    """The record of a write of one record under ``key`` (``value``), or of its delete (None):
    :func:`write`'s record of it (every durable put and get outside a unit of work is one:
    issue 31); ``deferred``: a ``V`` record, ``horizon`` the write's number in the redo log
    (see the module docstring). Compiled, made in one allocation, its fields written in place (packed, about
    1,800 instructions a record); interpreted, its fixed part in one pack of a format compiled
    for the key's length."""
    n = len(key)
    if not COMPILED or n > 0xFFFF or (value is not None and (type(value) is not bytes or len(value) > 0xFFFFFFFF)):
        return _one_packed(horizon, key, value, whole, deferred)  # (a key or value too long for its field raises there)
    h = horizon
    if value is None:
        kind, width, m, full = 0x44, 0, 0, 0  # "D"
    elif whole:
        kind, width, full = 0x46, 4, len(value)  # "F": u32 length, the value
        m = full
    else:
        kind, width = 0x50, 2  # "P": u16 length of the head, the head
        m = min(len(value), _HEAD)
        full = m
    out = PyBytes_FromStringAndSize(cython.NULL, 12 + n + width + m)
    p = cython.cast(cython.p_uchar, PyBytes_AS_STRING(out))
    p[0] = 0x56 if deferred else 0x57  # "V" or "W"
    for k in range(8):  # little endian, as _WRITE_OP packs them
        p[1 + k] = (h >> (8 * k)) & 0xFF
    p[9] = kind
    p[10] = n & 0xFF
    p[11] = n >> 8
    memcpy(p + 12, PyBytes_AS_STRING(key), n)
    p += 12 + n
    for k in range(width):
        p[k] = (full >> (8 * k)) & 0xFF
    if m:
        memcpy(p + width, PyBytes_AS_STRING(value), m)
    return out


def _one_packed(horizon: int, key: bytes, value: bytes | None, whole: bool, deferred: bool = False) -> bytes:
    """:func:`one`, interpreted."""
    n = len(key)
    kind = b"V" if deferred else b"W"
    if value is None:
        s = _DELETES.get(n) or _compile(_DELETES, n, f"<cQcH{n}s")
        return s.pack(kind, horizon, b"D", n, key)
    if whole:
        s = _PUTS.get(n) or _compile(_PUTS, n, f"<cQcH{n}sI")
        return s.pack(kind, horizon, b"F", n, key, len(value)) + value
    if len(value) >= HEAD:  # the head is HEAD bytes: one format per key length
        s = _HEADS.get(n) or _compile(_HEADS, n, f"<cQcH{n}sH{HEAD}s")
        return s.pack(kind, horizon, b"P", n, key, HEAD, value)  # "{HEAD}s" takes the first HEAD bytes
    return b"".join((_WRITE_OP.pack(kind, horizon, b"P", n), key, _U16.pack(len(value)), value))


def settled(deferred: int) -> bytes:
    """The record an open appends when the log has ``V`` records past ``deferred``, the last
    deferred write the store reached (see the module docstring): they were lost, and said so."""
    return b"Y" + _U64.pack(deferred)


def opened(horizon: int) -> bytes:
    """The record an open appends (see the module docstring): the store stands at
    ``horizon``, and every record before this one is settled."""
    return b"O" + _U64.pack(horizon)


_PUTS: dict[int, struct.Struct] = {}  # key length -> the fixed part of one's put, whole
_HEADS: dict[int, struct.Struct] = {}  # key length -> the format of one's put by its head
_DELETES: dict[int, struct.Struct] = {}  # key length -> the format of one's delete


def _compile(cache: dict[int, struct.Struct], n: int, fmt: str) -> struct.Struct:
    """The format ``fmt`` compiled, kept under ``n`` (a few key lengths: a queue's keys all
    have one, its prefix's and 9 bytes)."""
    s = cache[n] = struct.Struct(fmt)
    return s


def write_group(
    horizon: int,
    writes: Sequence[tuple[Sequence[tuple[bytes, bytes]], Sequence[bytes], Sequence[tuple[int, int, bytes | None]]]],
    whole: bool = True,
) -> bytes:
    """The record of one store write made for a group of callers (blobstore/group.py): each
    caller's (puts, deletes, marks) in the order they were written, so that a key deleted by
    one and written again by a later one replays as written; ``whole`` as :func:`write`."""
    parts = [b"W" + _U64.pack(horizon)]
    for puts, deletes, marks in writes:
        _ops(parts, puts, deletes, whole)
        if marks:
            _rare(parts, ((), ()), marks, None, (), ())
    return b"".join(parts)


def _ops(parts: list[bytes], puts: Sequence[tuple[bytes, bytes]], deletes: Sequence[bytes], whole: bool) -> None:
    """The puts and deletes of :func:`write`, added to ``parts``."""
    for key, value in puts:
        if whole:
            parts += (b"F" + _U16.pack(len(key)) + key + _U32.pack(len(value)), value)
        else:
            head = value[:HEAD]
            parts.append(b"P" + _U16.pack(len(key)) + key + _U16.pack(len(head)) + head)
    for key in deletes:
        parts.append(b"D" + _U16.pack(len(key)) + key)


def _rare(
    parts: list[bytes],
    moved: tuple[Sequence[int], Sequence[bytes]],
    marks: Sequence[tuple[int, int, bytes | None]],
    dropped: bytes | None,
    unlinked: Sequence[int],
    chains: Sequence[tuple[bytes, str, Sequence[int]]],
) -> None:
    """The operations of :func:`write` other than puts and deletes, added to ``parts``."""
    for name, how, ids in chains:
        if how == "drop":
            parts.append(b"Z" + _U16.pack(len(name)) + name)
        elif how == "out":
            parts += [b"R" + _U16.pack(len(name)) + name + _U64.pack(b) for b in ids]
        else:
            parts.append(b"L" + _U16.pack(len(name)) + name + bytes([how == "head"]) + _U16.pack(len(ids)))
            parts += [_U64.pack(b) for b in ids]
    parts += [b"U" + _U64.pack(blob_id) for blob_id in unlinked]
    blobs, keys = moved
    if keys:
        homes = _U16.pack(len(blobs)) + b"".join(map(_U64.pack, blobs))
        parts += [b"M" + _U16.pack(len(key)) + key + homes for key in keys]
    for blob_id, pos, mark in marks:
        parts.append(b"K" + _MARK.pack(blob_id, pos, mark is not None))
        if mark is not None:
            parts.append(_U16.pack(len(mark)) + mark)
    if dropped is not None:
        parts.append(b"X" + _U16.pack(len(dropped)) + dropped)


@dataclass
class Changes:
    """What a change log says happened since it started: each key's last state, each
    mark's last value, the highest horizon a write reached."""

    wal: bool = True
    continued: bool = False  # it does not reach back to the checkpoint (it grew too long)
    files: dict = field(default_factory=dict)  # the store's files when it started (KV.files)
    chains: dict[bytes, list[int]] | None = None  # every chain's blob ids now (None: unknown)
    written: dict[bytes, bytes] = field(default_factory=dict)  # key -> head: last written (or moved)
    moved: dict[bytes, tuple[int, ...]] = field(default_factory=dict)  # key -> the blobs one of which took it
    unlinked: set[int] = field(default_factory=set)  # blobs deleted
    removed: set[bytes] = field(default_factory=set)  # last deleted for good
    dropped: set[bytes] = field(default_factory=set)  # prefixes whose every record was deleted (X)
    marks: dict[tuple[int, int], bytes | None] = field(default_factory=dict)
    horizon: int = 0
    firm: int = 0  # the highest horizon of a write the log does not hold whole (or of an open)
    deferred: int = 0  # the highest number of a deferred write (V), or of the last Y
    problem: str | None = None  # why the log could not be read to its end


def known(ch: Changes) -> dict:
    """What the key-value store should check at open (``known``, blobstore/guard.py): its
    files when the log started, the horizon raised to the last write the log has that it could
    not make again (:attr:`Changes.firm`: RocksDB's files must reach that one; a later put,
    delete or mark the log holds whole may be missing from them after a power loss under
    sync="commit", which synced the change log alone, and the open redoes it: :func:`redo`)."""
    return {**ch.files, "wal": ch.wal, "horizon": max(int(ch.files.get("horizon", 0)), ch.firm)}


def replay(records: list[bytes], problem: str | None = None) -> Changes:
    """The :class:`Changes` of a log's records (a record that does not decode ends it)."""
    out = Changes(problem=problem)
    for at, rec in enumerate(records):
        try:
            _apply(out, rec)
        except (struct.error, ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
            out.problem = out.problem or f"record {at} of the change log does not decode ({e})"
            break
    return out


def _apply(out: Changes, rec: bytes) -> None:
    kind = rec[:1]
    if kind == b"H":
        head = json.loads(rec[1:])
        out.wal, out.continued, out.files = (
            bool(head.get("wal", True)),
            bool(head.get("continued")),
            head.get("files", {}),
        )
        chains = head.get("chains")
        out.chains = {bytes.fromhex(k): list(v) for k, v in chains.items()} if chains is not None else None
        out.dropped = {bytes.fromhex(p) for p in head.get("dropped", ())}
        return
    if kind == b"O":
        # An open settled what came before (redone, or found lost and said so): the store
        # stands at ``at``, and only what follows can raise it.
        (at,) = _U64.unpack(rec[1:])
        out.horizon = out.firm = at
        return
    if kind == b"Y":
        (out.deferred,) = _U64.unpack(rec[1:])  # an open said what was lost past it
        return
    if kind != b"W" and kind != b"V":
        raise ValueError(f"kind {kind!r}")
    horizon = _U64.unpack_from(rec, 1)[0]
    deferred = kind == b"V"  # a number in the redo log, not a horizon of RocksDB's
    if deferred:
        out.deferred = max(out.deferred, horizon)
    else:
        out.horizon = max(out.horizon, horizon)
    pos, n = 9, len(rec)
    if pos == n and not deferred:
        out.firm = max(out.firm, horizon)  # a write of the store's own (see the module docstring)
    while pos < n:
        op = rec[pos : pos + 1]
        pos += 1
        if op not in _WHOLE and not deferred:
            out.firm = max(out.firm, horizon)
        if op == b"U":
            out.unlinked.add(_U64.unpack_from(rec, pos)[0])
            pos += 8
            continue
        if op in (b"L", b"R", b"Z"):
            pos = _chain_op(out, op, rec, pos)
            continue
        if op == b"K":
            blob_id, at, value, pos = _mark(rec, pos)
            out.marks[blob_id, at] = value
            continue
        key, pos = _field(rec, pos)
        if op == b"F" or op == b"P":
            if op == b"F":
                head, pos = _whole(rec, pos)
            else:
                head, pos = _field(rec, pos)
            out.written[key] = head[:HEAD]
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
            out.dropped.add(key)
            for k in [k for k in out.written if k.startswith(key)]:
                del out.written[k]
                out.moved.pop(k, None)
                out.removed.add(k)
        else:
            raise ValueError(f"operation {op!r}")


def _chain_op(out: Changes, op: bytes, rec: bytes, pos: int) -> int:
    name, pos = _field(rec, pos)
    chains = out.chains if out.chains is not None else {}
    if op == b"Z":
        chains.pop(name, None)
    elif op == b"R":
        (blob_id,) = _U64.unpack_from(rec, pos)
        pos += 8
        chains[name] = [b for b in chains.get(name, []) if b != blob_id]
        if not chains[name]:
            del chains[name]
    else:
        at_head = rec[pos] == 1
        (count,) = _U16.unpack_from(rec, pos + 1)
        ids = list(struct.unpack_from(f"<{count}Q", rec, pos + 3))
        pos += 3 + 8 * count
        have = chains.get(name, [])
        chains[name] = [*ids, *have] if at_head else [*have, *ids]
    if out.chains is not None:  # known only from a start record on
        out.chains = chains
    return pos


_WHOLE = (b"F", b"D", b"K")  # the operations a record holds whole: redo can make them again


Redo = tuple[list[tuple[bytes, bytes | None]], list[tuple[int, int, bytes | None]], int]


def redo(records: list[bytes], after: int) -> Redo:
    """What to write again, after a store opened at ``after`` (its horizon): the message
    records written (a value) or deleted (None) and the marks set or cleared by the records
    past it, each write whole (``F``, ``D``, ``K``) and following on from the one before (the
    horizon before it is the last one's: no write the log lacks came between), from the
    last open's record on; and how many writes they are. It stops at the first record that
    breaks that: what follows is lost (the open says so, as it did before redo). Records and
    marks are apart (their keys never meet), each in its order.

    Only a power loss under sync="commit", or damage to RocksDB's log, leaves records past
    the store's horizon (a kill leaves the OS both files)."""
    start = 0
    for at, rec in enumerate(records):
        if rec[:1] == b"O":
            start = at + 1
    messages: list[tuple[bytes, bytes | None]] = []
    marks: list[tuple[int, int, bytes | None]] = []
    writes, reached = 0, after
    for rec in records[start:]:
        if rec[:1] == b"H":
            continue  # the log's start
        if rec[:1] != b"W" or len(rec) < 9:
            break
        horizon = _U64.unpack_from(rec, 1)[0]
        if horizon <= after:
            continue
        mine = whole_ops(rec)
        if mine is None or horizon - len(mine[0]) - len(mine[1]) != reached:
            break
        messages += mine[0]
        marks += mine[1]
        writes += 1
        reached = horizon
    return messages, marks, writes


def whole_ops(rec: bytes) -> tuple[list[tuple[bytes, bytes | None]], list[tuple[int, int, bytes | None]]] | None:
    """The message records and marks of one write record, when it holds every operation
    whole (else None): ``F`` a record put, ``D`` deleted, ``K`` a mark set or cleared."""
    messages: list[tuple[bytes, bytes | None]] = []
    marks: list[tuple[int, int, bytes | None]] = []
    pos, n = 9, len(rec)
    try:
        while pos < n:
            op = rec[pos : pos + 1]
            pos += 1
            if op == b"K":
                blob_id, at, value, pos = _mark(rec, pos)
                marks.append((blob_id, at, value))
                continue
            if op != b"F" and op != b"D":
                return None
            key, pos = _field(rec, pos)
            value = None
            if op == b"F":
                value, pos = _whole(rec, pos)
            messages.append((key, value))
    except (struct.error, ValueError):
        return None
    return messages, marks


def _mark(rec: bytes, pos: int) -> tuple[int, int, bytes | None, int]:
    """A ``K`` operation's fields at ``pos``: blob id, position, value (None: cleared), and
    where it ends."""
    blob_id, at, has = _MARK.unpack_from(rec, pos)
    pos += _MARK.size
    value = None
    if has:
        value, pos = _field(rec, pos)
    return blob_id, at, value, pos


def _whole(rec: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _U32.unpack_from(rec, pos)
    end = pos + 4 + n
    if end > len(rec):
        raise ValueError("a field runs past its record")
    return rec[pos + 4 : end], end


def _field(rec: bytes, pos: int) -> tuple[bytes, int]:
    (n,) = _U16.unpack_from(rec, pos)
    end = pos + 2 + n
    if end > len(rec):
        raise ValueError("a field runs past its record")
    return rec[pos + 2 : end], end
