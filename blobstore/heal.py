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

from rocksdict import ReadOptions


def prove(cf, prefix: bytes) -> tuple[list, list, list]:
    """Every pair of ``fam`` under ``prefix`` whose value a checksum-verified read gives
    back, the keys no such read can give (with their bytes as read past the checks), and
    the ranges that could not be read at all. A key read past the checks whose verified
    read finds nothing was deleted (its delete is intact): it is not returned."""
    found, gaps = scan_unverified(cf, prefix)
    pairs, damaged = [], []
    for key, raw in found:
        try:
            value = cf.get(key)
        except Exception:
            damaged.append((key, raw))
            continue
        if value is not None:
            pairs.append((key, value))
    return pairs, damaged, gaps


def scan_unverified(cf, prefix: bytes) -> tuple[list, list]:
    """Every key under ``prefix`` that can be read without RocksDB's checksums (nothing
    read this way is cached), stepping over blocks that cannot even be parsed by seeking
    ahead (the last 8 bytes of a key are taken as a counter). Returns (pairs, gaps)."""
    ro = ReadOptions()
    ro.set_verify_checksums(False)
    ro.fill_cache(False)
    it = cf.iter(ro)
    pairs: list[tuple[bytes, bytes]] = []
    gaps: list[tuple[bytes, bytes]] = []
    it.seek(prefix)
    while True:
        while it.valid():
            k = it.key()
            if not k.startswith(prefix):
                return pairs, gaps
            pairs.append((k, it.value()))
            it.next()
        try:
            it.status()
            return pairs, gaps
        except Exception:
            pass
        last = pairs[-1][0] if pairs else prefix + bytes(9)
        if len(last) < 8:
            gaps.append((last, b""))
            return pairs, gaps
        n, step = int.from_bytes(last[-8:], "big"), 1
        while step < 1 << 62:
            it = cf.iter(ro)
            it.seek(last[:-8] + min(n + step, (1 << 64) - 1).to_bytes(8, "big"))
            try:
                it.status()
                break
            except Exception:
                step *= 2
        gaps.append((last, it.key() if it.valid() else b""))
        if not it.valid():
            return pairs, gaps
