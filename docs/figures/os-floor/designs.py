"""How fast could a process-crash-safe put+get be, per design of the writes it makes? (issue 31:
`sync="os"` at 5x SQLiteQueue with `synchronous=OFF`.)

Each row is a floor: the writes a design makes per call, with no queue manager around them (a
put writes the next key, a get deletes the oldest: `sweepq.bench.durable._fifo_of_records`),
timed by the durable bench's own `fill_drain_rounds` (put N then get N of 1 KiB, rounds
interleaved), against SQLiteQueue OFF and sweepq `sync="os"` in the same run:

* two-files:     today's design and floor (the bench's "kv floor"): a RocksDB write to its log
                 per call and a change-log record (key, first 64 bytes) appended beside it, so
                 that damage to either file is noticed and named by the other;
* no-rocks-log:  RocksDB's memtable written without its log, the change log taking the
                 whole record (the change log the only log: damage to it loses what it held);
* log-alone:     the change log alone, whole records (RocksDB written only at checkpoints,
                 for messages still queued: the floor of a one-log design, as MQ's log);
* log+witness:   the change log with whole records, and a second side log of each call's key
                 and crc32 (two witnesses again, with no RocksDB write per call).

Run: python docs/figures/os-floor/designs.py [N] [ROUNDS] [DIR]   (defaults 2000 7 /tmp)
"""

from __future__ import annotations

import os
import struct
import sys
import time
import zlib

from rocksdict import Options, Rdict, WriteOptions

from sweepq.bench import durable

_HEAD = struct.Struct("<II")  # a side log's frame: length, crc32 (blobstore/files.py)


def _append(fd: int, record: bytes) -> None:
    os.write(fd, _HEAD.pack(len(record), zlib.crc32(record)) + record)


def _log(path: str, name: str) -> int:
    return os.open(os.path.join(path, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND)


def no_rocks_log(path: str) -> durable.Opened:
    os.makedirs(path)
    o = Options(raw_mode=True)
    o.create_if_missing(True)
    db = Rdict(os.path.join(path, "db"), o)
    wo = WriteOptions()
    wo.disable_wal = True
    db.set_write_options(wo)
    fd = _log(path, "changes")

    def write(puts: list, deletes: list) -> None:
        if puts:
            key, value = puts[0]
            db[key] = value
            _append(fd, b"P" + key + value)
        else:
            del db[deletes[0]]
            _append(fd, b"D" + deletes[0])

    return durable._fifo_of_records(write, lambda: (db.close(), os.close(fd)))


def log_alone(path: str) -> durable.Opened:
    os.makedirs(path)
    fd = _log(path, "changes")

    def write(puts: list, deletes: list) -> None:
        if puts:
            key, value = puts[0]
            _append(fd, b"P" + key + value)
        else:
            _append(fd, b"D" + deletes[0])

    return durable._fifo_of_records(write, lambda: os.close(fd))


def log_and_witness(path: str) -> durable.Opened:
    os.makedirs(path)
    fd, witness = _log(path, "changes"), _log(path, "witness")

    def write(puts: list, deletes: list) -> None:
        if puts:
            key, value = puts[0]
            _append(fd, b"P" + key + value)
            _append(witness, b"P" + key + struct.pack("<I", zlib.crc32(value)))
        else:
            _append(fd, b"D" + deletes[0])
            _append(witness, b"D" + deletes[0])

    return durable._fifo_of_records(write, lambda: (os.close(fd), os.close(witness)))


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    base = sys.argv[3] if len(sys.argv) > 3 else "/tmp"
    contenders = {
        "SQLiteQueue OFF": lambda p: durable._sqlite_queue(p, "OFF"),
        'sweepq sync="os"': lambda p: durable.open_sweepq(p, "os"),
        "two-files": durable._kv_alone,
        "no-rocks-log": no_rocks_log,
        "log-alone": log_alone,
        "log+witness": log_and_witness,
    }
    load = os.getloadavg()
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    res = durable.fill_drain_rounds(contenders, n, b"x" * 1024, rounds, base)
    sqlite = res["SQLiteQueue OFF"]["round_seconds"]
    loads = " ".join(f"{x:.2f}" for x in load)
    print(f"# python docs/figures/os-floor/designs.py {n} {rounds} {base}; {stamp}; load {loads}")
    print("| design | median put+get pairs/s | paired ratio to SQLiteQueue OFF |")
    print("|---|--:|--:|")
    for name, r in res.items():
        median_pairs = r["median_ops_per_s"] / 2
        print(f"| {name} | {median_pairs:,.0f} | {durable._paired(r['round_seconds'], sqlite):.2f} x |")


if __name__ == "__main__":
    main()
