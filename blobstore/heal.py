"""What a damaged family of records still holds, proven record by record.

RocksDB checks a checksum per block; once one fails, a scan stops there. To go on, the scan
seeks past the damaged range (taking the last 8 bytes of a key as a counter and stepping
ever further until a seek lands on readable blocks) and carries on. **RocksDB is never
given a block it cannot verify**: its block parser trusts the checksum, and reading
damaged blocks with the checks off crashes the process (the damage fuzz found that, as a
SIGSEGV in RocksDB), and a damaged block read that way and cached could be rewritten by a
compaction under fresh checksums (B1 of issue 16). Every record a scan returns is the
newest version of its key, whole: a delete that sits in a damaged block cannot be stepped
around into an older version (B2: that is how a consumed message came back).

What lies in a range the scan had to step over is unknown, but its keys may be known
elsewhere (``probes``: the blob ids of the manifests, the messages a checkpoint lists):
each is read with the checks, which gives its newest version if the damage is not on its
way, or fails (it is then *damaged*: named, never returned as data).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

PROVEN, DAMAGED, GAP = "proven", "damaged", "gap"


def prove(cf, prefix: bytes, probes: Iterable[bytes] = ()) -> Iterator[tuple[str, bytes, bytes | None]]:
    """Every key of the family ``cf`` under ``prefix`` that can be proven, in key order, as
    ``(PROVEN, key, value)``; each range stepped over as ``(GAP, last good key, first key
    after it or b"")``; then each of ``probes`` inside a range stepped over, as
    ``(PROVEN, key, value)`` or ``(DAMAGED, key, None)`` (a probe that finds nothing was
    deleted, or never was: left out). Streams: a large family is never held in memory."""
    gaps: list[tuple[bytes, bytes]] = []
    for step in scan(cf, prefix):
        if step[0] == GAP:
            gaps.append((step[1], step[2]))
        yield step
    if not gaps:
        return
    los = [lo for lo, _hi in gaps]
    for key in sorted(set(probes)):
        k = bisect.bisect_right(los, key) - 1
        if k < 0 or not (key > gaps[k][0] and (not gaps[k][1] or key < gaps[k][1])):
            continue  # not in a range stepped over: the scan already gave it, or it is gone
        try:
            value = cf.get(key)
        except Exception:
            yield DAMAGED, key, None
            continue
        if value is not None:
            yield PROVEN, key, value


def collect(steps: Iterator[tuple[str, bytes, bytes | None]]) -> tuple[list, list, list]:
    """(proven pairs in key order, damaged (key, None), gaps) of a :func:`prove` run."""
    out: dict[str, list] = {PROVEN: [], DAMAGED: [], GAP: []}
    for kind, a, b in steps:
        out[kind].append((a, b))
    out[PROVEN].sort()
    return out[PROVEN], out[DAMAGED], out[GAP]


def scan(cf, prefix: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every (key, value) under ``prefix`` that checksum-verified reads give, as
    ``(PROVEN, key, value)``, and each damaged range stepped over as ``(GAP, last good key,
    next readable key or b"")``."""
    it = cf.iter()
    last = None
    it.seek(prefix)
    while True:
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                return
            yield PROVEN, k, it.value()
            last = k
            it.next()
        try:
            it.status()
            return
        except Exception:
            pass
        here = last if last is not None else prefix + bytes(9)
        if len(here) < 8:
            yield GAP, here, b""
            return
        n, step = int.from_bytes(here[-8:], "big"), 1
        while step < 1 << 62:
            it = cf.iter()
            it.seek(here[:-8] + min(n + step, (1 << 64) - 1).to_bytes(8, "big"))
            try:
                it.status()
                break
            except Exception:
                step *= 2
        nxt = it.key() if it.valid() else b""
        yield GAP, here, nxt if nxt.startswith(prefix) else b""
        if not it.valid():
            return
