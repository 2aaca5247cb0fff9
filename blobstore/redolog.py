"""The redo log of a store that defers its message writes (BlobStore's ``defer``, the engine's
sync="os"): a side log (``sweepq-redo``, blobstore/sidelog.py) holding every deferred write
whole, numbered, until RocksDB has it.

Why. Under sync="os" a put or get that returned must survive a kill -9. Written to RocksDB one
at a time (its log, its memtable, through rocksdict), the write of one message record was
about half of a durable put+get (issue 31). Deferred, a lone put or get appends its record
here (one ``pwrite``) and its head to the change log (a ``V`` record, blobstore/changes.py:
the witness that names it if this log is damaged), and RocksKV keeps each record's last state
in memory (blobstore/rocks.py) until a *drain* writes them all, with the number of the last
write it covers (the meta record :data:`APPLIED`), in one RocksDB write: a record put and
consumed between two drains reaches RocksDB as one delete.

An open replays the writes past that number into RocksDB, in one write, before anything reads
the store (whatever its sync policy now), then starts the log afresh; so does a log past
:data:`LIMIT`, or the change log's start (after a drain: the numbers go on, so the change
log's ``V`` records still name the writes). A kill at any moment leaves both files in the OS.
What damage to this log takes is named by the change log's ``V`` records, as damage to
RocksDB's own log is named by its ``W`` records (docs/damage.md).

What. A start record (``H`` and JSON ``{"after": n}``: the log holds the writes after the
``n``-th), then one record per deferred write: :func:`changes.one`'s record of it, whole
(``W``, then ``F`` or ``D``), whose number is the write's. Invariant: the writes numbered up to
:data:`APPLIED` are in RocksDB, those after it up to the last one appended are in this log.
"""

from __future__ import annotations

import json
import struct

from . import changes
from .kv import CF_META, Op

NAME = "redo"
APPLIED = b"redo"  # the meta record: the number of the last deferred write RocksDB has
DRAIN_WRITES = 16384  # deferred writes between two drains, at most (the replay after a kill)
DRAIN_BYTES = 8 << 20  # bytes of deferred records held in memory between two drains, at most
LIMIT = 64 << 20  # a log this long starts again (after a drain): its numbers go on

_U64 = struct.Struct("<Q")

State = list[tuple[bytes, bytes | None]]  # each key's last state: a record, or None (deleted)


def start(after: int) -> bytes:
    """The record the log starts with: it holds the writes numbered after ``after``."""
    return b"H" + json.dumps({"after": after}).encode()


def applied(raw: bytes | None) -> int:
    """The number :data:`APPLIED` holds (0: none, a store that never deferred)."""
    return _U64.unpack(raw)[0] if raw is not None and len(raw) == _U64.size else 0


def applied_op(number: int) -> Op:
    """The write of :data:`APPLIED`: RocksDB has every deferred write up to ``number``."""
    return (CF_META, APPLIED, _U64.pack(number))


def replay(records: list[bytes], after: int) -> tuple[State, int]:
    """What to write again over a store that has the deferred writes up to ``after``: each
    key's last state after the records past it, and the number of the last record taken.
    The records are taken in the order of their numbers (a log written by one thread at a time
    has them in order already), each following on from the one before: the first gap, or a
    record that does not decode, ends the replay, and the writes after it are lost (the change
    log's ``V`` records name them)."""
    numbered: dict[int, bytes] = {}
    for rec in records:
        if rec[:1] == b"H":
            try:
                after = max(after, int(json.loads(rec[1:])["after"]))
            except (ValueError, KeyError, TypeError):
                break
            continue
        if rec[:1] != b"W" or len(rec) < 9:
            break
        numbered.setdefault(_U64.unpack_from(rec, 1)[0], rec)
    # The change log's rule of a redo (each write following on from the one before) over
    # them in number order; the redo log holds message records alone, no marks.
    writes, marks, _count = changes.redo([numbered[k] for k in sorted(numbered)], after)
    assert not marks, "a redo log holds no marks"
    return list(dict(writes).items()), after + len(writes)
