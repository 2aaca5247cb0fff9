"""Before RocksDB opens a data directory: what the open would destroy, and what is lost.

RocksDB opens a directory as its manifest describes it and deletes, at once, every table
file the manifest does not name. After a crash that is right (a flush or compaction cut
short leaves files nothing needs). After damage to the manifest it is not: a manifest cut
short no longer names the table files of its last flushes, whose write-ahead logs are gone
already, and the plain open deletes the only copy of those writes (the damage fuzz: 726 of
895 messages, with nothing reported). RocksDB cannot tell the two apart; sweepq can, from
the manifest itself and from its own record of it:

* the manifest ends inside a record (cut short: a crash never leaves one so);
* the manifest is shorter than when sweepq last recorded it (in the change log, at every
  checkpoint, after syncing the write-ahead log: blobstore/changes.py; a manifest only grows);
* the writes the logs hold do not follow on from the manifest's last sequence number (a
  gap: the writes between are in no file);

and whenever one of them holds while a table file would be deleted, the open is refused
(:class:`~.kv.KVCorruption`, which the queue manager turns into "open it with
``repair=True``"): RocksDB's repair rebuilds the manifest from every table file there is.
A gap in the logs without such a file is reported as writes lost (a log deleted or cut).
"""

from __future__ import annotations

import os
import struct

from .kv import KVCorruption
from .rocksfiles import current_manifest, numbered, read_manifest, walk

_BATCH = struct.Struct("<QI")  # a write batch's first sequence number and its count


def before_open(path: str, known: dict | None = None) -> list[str]:
    """Check ``path`` before RocksDB opens it for writing (see the module docstring).

    ``known``: what sweepq recorded (:func:`files`, kept in the change log): ``manifest`` and
    ``size``, the manifest's name and length then; ``horizon``, the highest sequence number a
    write is known to have reached since (the manifest and the logs must reach it too);
    ``wal``, whether the writes went to a log at all (without one a crash loses writes by
    design, and nothing here calls that damage).

    Returns what was found lost (one line each: the open goes on).
    :raises KVCorruption: the open would delete table files that hold writes."""
    m = read_manifest(path)
    if m is None:
        return []  # no readable manifest: RocksDB refuses the open itself
    known = known or {}
    wal = bool(known.get("wal", True))
    shorter = known.get("manifest") == m.name and m.size < int(known.get("size", 0))
    gaps = _log_gaps(path, m.last_sequence, int(known.get("horizon", 0))) if wal else []
    orphans = sorted(set(numbered(path, ".sst")) - m.live_tables())
    cut = []
    if not m.whole:
        cut.append(f"it ends inside a record ({m.size} bytes)")
    if shorter:
        cut.append(f"it has {m.size} bytes where it had {known['size']} when last recorded")
    why = [*cut, *([f"neither it nor a write-ahead log holds writes {_ranges(gaps)}, which were made"] * bool(gaps))]
    if orphans and why:
        files = ", ".join(f"{n:06d}.sst" for n in orphans[:10]) + (" ..." if len(orphans) > 10 else "")
        raise KVCorruption(
            f"the manifest {m.name} of {path} is damaged: {'; '.join(why)}. Opened as it is, RocksDB would "
            f"delete {len(orphans)} table file(s) it no longer names ({files}), which hold writes",
            m.name,
        )
    lost = []
    if cut:
        lost.append(f"the manifest {m.name} was cut short: {'; '.join(cut)}")
    if gaps:
        lost.append(
            f"writes {_ranges(gaps)} are in no file: a write-ahead log was deleted or cut short, and what it "
            "held since the last flush is lost"
        )
    return lost


def files(path: str, horizon: int, wal: bool) -> dict:
    """What :func:`before_open` wants ``known`` of the directory now: the manifest's name and
    length, and ``horizon`` (every write made so far, synced by the caller when ``wal``)."""
    name = current_manifest(path)
    size = os.path.getsize(os.path.join(path, name)) if name else 0
    return {"manifest": name, "size": size, "horizon": horizon, "wal": wal}


def _log_gaps(path: str, last_sequence: int, expected: int) -> list[tuple[int, int]]:
    """The ranges of sequence numbers past ``last_sequence`` (the manifest's: every write up
    to it is in a table file or a log) that no write-ahead log holds, though a later write
    is in one or is ``expected``."""
    spans = []
    for number, name in sorted(numbered(path, ".log").items()):
        try:
            with open(os.path.join(path, name), "rb") as f:
                records = walk(f.read(), number).records
        except OSError:
            continue
        for rec in records:
            if len(rec) < _BATCH.size:
                break
            seq, count = _BATCH.unpack_from(rec)
            if count:
                spans.append((seq, seq + count - 1))
    if expected:
        spans.append((expected + 1, expected + 1))  # where the writes known to sweepq must reach
    gaps, reached = [], last_sequence
    for lo, hi in sorted(spans):
        if lo > reached + 1:
            gaps.append((reached + 1, lo - 1))
        reached = max(reached, hi)
    return gaps


def _ranges(gaps: list[tuple[int, int]]) -> str:
    return ", ".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in gaps[:5]) + (" ..." if len(gaps) > 5 else "")
