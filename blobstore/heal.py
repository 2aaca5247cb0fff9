"""What a damaged family of records still holds, proven record by record.

RocksDB checks a checksum per block; once one fails, a scan stops there. To go on, the
family is read once more *without* those checks (and without filling the block cache, so
that no damaged block can be served later as if it were whole, and be rewritten by a
compaction under fresh checksums: B1 of issue 16), stepping over blocks that cannot even
be parsed. Nothing read that way is trusted: each key found is read again with the checks,
which gives its newest version or fails. A key whose checked read fails cannot be proven
(its record, or a newer delete of it, sits in the damaged block: B2, a delete damage took
away would otherwise bring a consumed message back); a key whose checked read finds
nothing was deleted. The caller decides what to do with the unproven (the engine can prove
a record by its own checksum and its checkpoint, engine/durable/recovery.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from rocksdict import ReadOptions

PROVEN, DAMAGED, GAP = "proven", "damaged", "gap"


def prove(cf, prefix: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every key of the family ``cf`` under ``prefix``, in key order, as one of:

    * ``(PROVEN, key, value)``: a checksum-verified read gave this value back;
    * ``(DAMAGED, key, bytes as read past the checks)``: no verified read can give it;
    * ``(GAP, last good key, first key after it or b"")``: a range that could not be read.

    A key read past the checks whose verified read finds nothing was deleted (its delete is
    intact): it is left out. Streams: a large family is never held in memory at once."""
    for kind, a, b in scan_unverified(cf, prefix):
        if kind == GAP:
            yield kind, a, b
            continue
        try:
            value = cf.get(a)
        except Exception:
            yield DAMAGED, a, b
            continue
        if value is not None:
            yield PROVEN, a, value


def collect(steps: Iterator[tuple[str, bytes, bytes]]) -> tuple[list, list, list]:
    """(proven pairs, damaged (key, bytes), gaps) of a :func:`prove` run."""
    out: dict[str, list] = {PROVEN: [], DAMAGED: [], GAP: []}
    for kind, a, b in steps:
        out[kind].append((a, b))
    return out[PROVEN], out[DAMAGED], out[GAP]


def scan_unverified(cf, prefix: bytes) -> Iterator[tuple[str, bytes, bytes]]:
    """Every (key, value) under ``prefix`` that can be read without RocksDB's checksums
    (nothing read this way is cached), as ``("read", key, value)``, stepping over blocks
    that cannot even be parsed by seeking ahead (the last 8 bytes of a key are taken as a
    counter), each such step as ``(GAP, last good key, next key or b"")``."""
    ro = ReadOptions()
    ro.set_verify_checksums(False)
    ro.fill_cache(False)
    it = cf.iter(ro)
    last = None
    it.seek(prefix)
    while True:
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                return
            yield "read", k, it.value()
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
            it = cf.iter(ro)
            it.seek(here[:-8] + min(n + step, (1 << 64) - 1).to_bytes(8, "big"))
            try:
                it.status()
                break
            except Exception:
                step *= 2
        yield GAP, here, it.key() if it.valid() else b""
        if not it.valid():
            return
