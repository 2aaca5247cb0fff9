"""The compiled crc32 (engine/durable/checked.py) with its 16-byte blocks folded by carry-less
multiplies and with the table loop alone (``checked.crc_folds(False)``), in one build: the
instructions of one ``stored_value`` of a 1,100-byte record (the crc of every durable put;
callgrind, the difference of a child doing 2n calls and one doing n, divided by n), and the
CPU time of the open's check of 500,000 whole 200-byte records in chunks of 10,000
(``check_chunk``, best of ROUNDS, the two alternating).

Usage: python docs/figures/crc55/crc.py ROUNDS > docs/figures/crc55/crc.txt
"""

from __future__ import annotations

import os
import random
import re
import struct
import subprocess
import sys
import tempfile
import time
import zlib

_CHILD = r"""
import gc, sys
from sweepq.engine.durable import checked
checked.crc_folds(sys.argv[1] == "folded")
rec = bytes(1100)
for _ in range(1000):
    checked.stored_value(rec)
gc.freeze()
for _ in range(int(sys.argv[2])):
    checked.stored_value(rec)
"""


def instructions(form: str, n: int) -> float:
    def total(k: int) -> int:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "cg.out")
            cmd = ["setarch", "-R", "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
            cmd += [sys.executable, "-P", "-c", _CHILD, form, str(k)]
            subprocess.run(cmd, check=True, capture_output=True, cwd=tmp, env={**os.environ, "PYTHONHASHSEED": "0"})
            with open(out) as f:
                text = f.read()
        m = re.search(r"^totals: (\d+)", text, re.M)
        assert m is not None
        return int(m.group(1))

    return (total(2 * n) - total(n)) / n


def chunks() -> list[list[tuple[bytes, bytes]]]:
    from sweepq.engine import record

    random.seed(5)
    pairs = []
    for seq in range(1, 500_001):
        rec = bytearray(random.randbytes(200))
        rec[record.OFF_SEQ : record.OFF_SEQ + 8] = seq.to_bytes(8, "little")
        rec[record.OFF_FLAGS] |= record.PERSISTENT
        value = struct.pack("<I", zlib.crc32(rec)) + bytes(rec)
        pairs.append((b"Q\x00/" + bytes([seq % 10]) + seq.to_bytes(8, "big"), value))
    return [pairs[i : i + 10_000] for i in range(0, len(pairs), 10_000)]


def main() -> None:
    from sweepq.engine.durable import checked

    rounds = int(sys.argv[1])
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# python docs/figures/crc55/crc.py {rounds}; commit {head}; {when}; load {_load()} at the start")
    print(f"# folding available on this CPU: {checked.crc_folds()}")
    for form in ("table", "folded"):
        print(
            f"stored_value of 1,100 bytes, {form:6}: {instructions(form, 20000):,.0f} instructions a call (callgrind)"
        )
    cs = chunks()
    best = {"table": 1e9, "folded": 1e9}
    for _ in range(rounds):
        for form in best:
            checked.crc_folds(form == "folded")
            t = time.process_time()
            ok = sum(int(checked.check_chunk(c, 3, 10)[4].sum()) for c in cs)
            best[form] = min(best[form], time.process_time() - t)
            assert ok == 500_000
    checked.crc_folds(True)
    for form, t in best.items():
        print(f"check_chunk of 500,000 records of 200 bytes, {form:6}: {t * 1000:.0f} ms of CPU (best of {rounds})")
    print(f"# load {_load()} at the end")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
