"""Recovery's check of a chunk of stored records (engine/durable/checked.py): the compiled
form (one C loop, its own crc32) gives the interpreted form's answers (numpy and zlib), pair
for pair, on records whole and damaged every way the check looks for."""

from __future__ import annotations

import os
import pickle
import platform
import random
import struct
import subprocess
import sys
import zlib
from pathlib import Path

from sweepq.blobstore import crc
from sweepq.engine import record
from sweepq.engine.durable import checked

ROOT = Path(__file__).resolve().parent.parent
PREFIX = b"Q\x00/"


def pair(seq: int, lane: int, rec: bytes) -> tuple[bytes, bytes]:
    """A stored (key, value) of a record as recovery expects it."""
    return PREFIX + bytes([lane]) + seq.to_bytes(8, "big"), struct.pack("<I", zlib.crc32(rec)) + rec


def a_record(seq: int, size: int, persistent: bool = True) -> bytes:
    rec = bytearray(random.randbytes(size))
    rec[record.OFF_SEQ : record.OFF_SEQ + 8] = seq.to_bytes(8, "little")
    rec[record.OFF_FLAGS] = (rec[record.OFF_FLAGS] | record.PERSISTENT) if persistent else 0
    return bytes(rec)


def chunk(seed: int, n: int = 2000) -> list[tuple[bytes, bytes]]:
    """``n`` pairs, most whole, the rest damaged: a flipped bit, a cut value or key, a key of
    another number or of a lane past the last, a record not persistent, a value too short."""
    random.seed(seed)
    out = []
    for _ in range(n):
        seq, lane = random.randrange(1, 1 << 48), random.randrange(10)
        key, value = pair(seq, lane, a_record(seq, random.choice([13, 14, 21, 45, 100, 151, 1024, 5000])))
        damage = random.randrange(12)
        if damage == 0:
            at = random.randrange(len(value) * 8)
            value = bytearray(value)
            value[at // 8] ^= 1 << (at % 8)
            value = bytes(value)
        elif damage == 1:
            value = value[: random.randrange(len(value))]
        elif damage == 2:
            key = key[: random.randrange(len(key))]
        elif damage == 3:
            key = PREFIX + bytes([lane]) + (seq + 1).to_bytes(8, "big")
        elif damage == 4:
            key = PREFIX + bytes([random.randrange(10, 256)]) + seq.to_bytes(8, "big")
        elif damage == 5:
            key, value = pair(seq, lane, a_record(seq, 60, persistent=False))
        out.append((key, value))
    return out


def answers(pairs: list[tuple[bytes, bytes]]) -> tuple:
    keys, recs, seqs, lanes, ok = checked.check_chunk(pairs, len(PREFIX), 10)
    return keys, recs, ok.tolist(), seqs[ok].tolist(), lanes[ok].tolist()


_INTERPRETED = (
    "import pickle, sys\n"
    "from sweepq.engine.durable import checked\n"
    "assert checked.__file__.endswith('.py')\n"
    "pairs = pickle.load(sys.stdin.buffer)\n"
    "keys, recs, seqs, lanes, ok = checked.check_chunk(pairs, 3, 10)\n"
    "sys.stdout.buffer.write(pickle.dumps((keys, recs, ok.tolist(), seqs[ok].tolist(), lanes[ok].tolist())))\n"
)


def test_whole_records_pass_and_each_damage_fails():
    random.seed(1)
    whole = [pair(s, s % 10, a_record(s, 20 + s)) for s in range(1, 200)]
    keys, recs, ok, seqs, lanes = answers(whole)
    assert all(ok) and seqs == list(range(1, 200)) and lanes == [s % 10 for s in range(1, 200)]
    assert recs == [v[4:] for _, v in whole] and keys == [k for k, _ in whole]
    for bit in range(8 * len(whole[7][1])):  # every single bit flip of one value is caught
        value = bytearray(whole[7][1])
        value[bit // 8] ^= 1 << (bit % 8)
        assert answers([(whole[7][0], bytes(value))])[2] == [False]


def test_both_forms_give_the_same_answers():
    for seed in range(3):
        pairs = chunk(seed)
        mine = answers(pairs)
        assert 0 < sum(mine[2]) < len(pairs)
        out = subprocess.run(
            [sys.executable, "-c", _INTERPRETED],
            input=pickle.dumps(pairs),
            env={**os.environ, "SWEEPQ_PURE": "1"},
            cwd=ROOT,
            capture_output=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr.decode()[-2000:]
        assert pickle.loads(out.stdout) == mine


def _cpu_folds() -> bool:
    """Whether this machine's CPU can fold the crc (x86-64 with PCLMULQDQ and SSE4.1, as
    /proc/cpuinfo says) and this form is the compiled one (the interpreted form calls zlib)."""
    if checked.__file__.endswith(".py") or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "pclmulqdq" in flags and "sse4_1" in flags


def test_the_crc32_is_zlibs_at_every_length_and_alignment():
    """The compiled crc32 (blobstore/crc.pxd: its 16-byte blocks folded with PCLMULQDQ from 64 bytes
    on where the CPU can, the rest slice-by-8) is zlib's: for every length to 300 and random
    ones to 70,000, with the bytes at every offset in 16 from where a bytes object's bytes
    start (a slice would start as aligned as any bytes), folding and with the table loop
    alone; stored_value's first 4 bytes are it, little endian; and a side log's records'."""
    rnd = random.Random(55)
    buf = rnd.randbytes(70_016)
    lengths = [*range(301), 1100, 1104, *(rnd.randrange(301, 70_001) for _ in range(150))]
    folds = crc.crc_folds()
    assert folds == _cpu_folds()
    try:
        for fold in (True, False) if folds else (False,):
            assert crc.crc_folds(fold) == fold
            for n in lengths:
                for at in range(16):
                    want = zlib.crc32(buf[at : at + n])
                    assert crc.crc32_at(buf[: at + n], at) == want, (fold, n, at)
                rec = buf[:n]
                assert checked.stored_value(rec) == struct.pack("<I", zlib.crc32(rec)) + rec, (fold, n)
                assert crc.crc32_at(rec, 0) == zlib.crc32(rec), (fold, n)  # a side log's record
    finally:
        crc.crc_folds(folds)
    assert crc.crc_folds() == folds
