"""The key-value layer under the blob store: RocksDB, or plain dicts for tests and demos.

This is the one place for the RocksDB layout. Seven column families, all in raw mode:

``blobs``      u64 blob id (big endian) -> blob (blobstore/format.py). RocksDB's own
               compression is off here: blobs are zstd-compressed already.
``manifests``  u64 blob id -> zstd(owner label, then the record ids). Kept apart from the
               blob so that a damaged blob can still be named.
``chains``     chain name -> the chain's blob ids, u64 each, in order.
``meta``       b"format" -> u32 store format; b"next_id" -> u64;
               b"dict/" + u32 id -> a trained zstd dictionary;
               b"dictscope/" + scope -> u32 id of that scope's current dictionary.
``messages``   a caller's key -> one record that lives outside any blob (the engine keeps
               its persistent messages here while they are in memory; the key says where
               the message belongs, the store does not look inside).
``marks``      u64 blob id + u32 position -> a caller's mark on one record of a blob (the
               engine: b"R" removed, b"B" + u16 its backout count raised).
``objects``    a caller's name -> a caller's definition (the engine: queue definitions).

Durability: a write is in the write-ahead log (the OS has it) when :meth:`RocksKV.write`
returns, so it survives a crash of the process; :meth:`RocksKV.sync` makes every write
made so far survive a power loss (one fsync of the log: group commit, see
engine/durable/journal.py). ``wal=False`` writes no log at all (sync policy "none"):
then a crash loses the writes since the last flush, and ``atomic_flush`` keeps what is
left consistent across the column families.

Memory is bounded (issue: RocksDB's memtables grew to 123 MB beside 36 MB of messages): one
``WriteBufferManager`` caps the memtables of every column family together
(``write_buffer_bytes``, 16 MiB by default) and one LRU ``Cache`` holds the data blocks
(``block_cache_bytes``, 8 MiB); :meth:`RocksKV.memory` reports both.

Every method is thread-safe; :meth:`KV.write` applies its operations atomically.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from typing import Protocol

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

CF_BLOBS = "blobs"
CF_MANIFESTS = "manifests"
CF_CHAINS = "chains"
CF_META = "meta"
CF_MESSAGES = "messages"
CF_MARKS = "marks"
CF_OBJECTS = "objects"
CFS = (CF_BLOBS, CF_MANIFESTS, CF_CHAINS, CF_META, CF_MESSAGES, CF_MARKS, CF_OBJECTS)

DEFAULT_WRITE_BUFFER_BYTES = 16 << 20
DEFAULT_BLOCK_CACHE_BYTES = 8 << 20

Op = tuple[str, bytes, bytes | None]  # (column family, key, value); value None deletes


class KVError(Exception):
    """An I/O failure of the key-value layer (the blob store turns it into StoreError)."""


class KVCorruption(KVError):
    """The key-value layer found damaged data (RocksDB's own checksums failed)."""


class KV(Protocol):
    """What the blob store needs of a key-value store. Thread-safe; ``write`` is atomic."""

    def get(self, cf: str, key: bytes) -> bytes | None:
        """:raises KVCorruption: the stored data is damaged. :raises KVError: I/O failed."""
        ...

    def items(self, cf: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        """Every pair of ``cf`` whose key starts with ``prefix``, in key order."""
        ...

    def write(self, ops: Sequence[Op]) -> None:
        """Apply ``ops`` atomically (all or none). :raises KVError: nothing was written."""
        ...

    def sync(self) -> None:
        """Make every write so far durable against power loss. :raises KVError: it failed."""
        ...

    def memory(self) -> dict[str, int]:
        """Bytes the store holds in memory, by kind."""
        ...

    def close(self) -> None: ...


class MemoryKV:
    """Dicts behind a lock: the in-memory store's backend (nothing survives close)."""

    def __init__(self) -> None:
        self._cfs: dict[str, dict[bytes, bytes]] = {cf: {} for cf in CFS}
        self._lock = threading.Lock()

    def get(self, cf: str, key: bytes) -> bytes | None:
        return self._cfs[cf].get(key)

    def items(self, cf: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        with self._lock:
            pairs = sorted((k, v) for k, v in self._cfs[cf].items() if k.startswith(prefix))
        return iter(pairs)

    def write(self, ops: Sequence[Op]) -> None:
        with self._lock:
            for cf, key, value in ops:
                if value is None:
                    self._cfs[cf].pop(key, None)
                else:
                    self._cfs[cf][key] = bytes(value)

    def sync(self) -> None:
        pass

    def memory(self) -> dict[str, int]:
        with self._lock:
            return {"dict_bytes": sum(len(k) + len(v) for d in self._cfs.values() for k, v in d.items())}

    def close(self) -> None:
        self._cfs = {cf: {} for cf in CFS}


def _db_options(write_buffer_bytes: int, cache: Cache, wal: bool = True) -> tuple[Options, dict[str, Options]]:
    manager = WriteBufferManager(write_buffer_bytes, False)

    def base() -> Options:
        o = Options(raw_mode=True)
        o.set_write_buffer_manager(manager)
        # Each family's memtable is a share of the cap, and at most two exist per family.
        o.set_write_buffer_size(max(1 << 20, write_buffer_bytes // 4))
        o.set_max_write_buffer_number(2)
        table = BlockBasedOptions()
        table.set_block_cache(cache)
        o.set_block_based_table_factory(table)
        return o

    db = base()
    db.create_if_missing(True)
    db.create_missing_column_families(True)
    # A torn last write of the log (a crash mid-write, or a truncated file) is dropped and
    # the store opens at the last whole write, instead of refusing to open.
    db.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
    if not wal:
        db.set_atomic_flush(True)
    cfs = {}
    for name in CFS:
        o = base()
        if name in (CF_BLOBS, CF_MESSAGES):
            # Blobs are zstd-compressed already. Message records stay uncompressed so that a
            # damaged block can still be read past record by record (each has its own crc).
            o.set_compression_type(DBCompressionType.none())
        cfs[name] = o
    return db, cfs


class RocksKV:
    """RocksDB through rocksdict, in the layout of the module docstring.

    ``sync`` makes every write durable (fsync) before it returns; ``wal=False`` writes no
    log (see the module docstring). ``read_only`` opens for inspection beside nothing
    else."""

    def __init__(
        self,
        path: str,
        *,
        sync: bool = False,
        wal: bool = True,
        read_only: bool = False,
        write_buffer_bytes: int = DEFAULT_WRITE_BUFFER_BYTES,
        block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES,
    ):
        self.path = path
        self._cache = Cache(block_cache_bytes)
        self.write_buffer_bytes = write_buffer_bytes
        self.block_cache_bytes = block_cache_bytes
        opts, cf_opts = _db_options(write_buffer_bytes, self._cache, wal)
        access = AccessType.read_only() if read_only else AccessType.read_write()
        self._shadow = _shadow_of(path) if read_only else None
        self.log_damage: str | None = None  # what a damaged log cost (see below), else None
        try:
            if read_only:
                self._db = Rdict(self._shadow, options=opts, column_families=cf_opts, access_type=access)  # type: ignore[arg-type]
            else:
                self._db = self._open_checking_the_log(path, opts, cf_opts, access)
        except Exception as e:
            self._drop_shadow()
            raise KVError(_why(e, f"cannot open the store at {path}")) from e
        self._cf = {name: self._db.get_column_family(name) for name in CFS}
        self._h = {name: self._db.get_column_family_handle(name) for name in CFS}
        self._wopts = WriteOptions()
        self._wopts.sync = sync
        self._wopts.disable_wal = not wal  # type: ignore[method-assign, assignment]  # a property; the stub says method
        self._wal = wal

    def _open_checking_the_log(self, path: str, opts: Options, cf_opts: dict, access) -> Rdict:
        """Open so that damage in the write-ahead log is noticed, not silently cut away.

        The log is first replayed strictly (absolute consistency). If that finds damage and a
        replay up to the last whole write (point in time) opens, the damage was in the log:
        the writes after it cannot be trusted and are dropped, as RocksDB's point-in-time
        recovery does, and ``log_damage`` says so for the open's report."""
        strict = opts
        strict.set_wal_recovery_mode(DBRecoveryMode.absolute_consistency())
        try:
            return Rdict(path, options=strict, column_families=cf_opts, access_type=access)
        except Exception as e:
            if "corrupt" not in str(e).lower():
                raise
            first = e
        opts.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
        try:
            db = Rdict(path, options=opts, column_families=cf_opts, access_type=access)
        except Exception:
            raise first from None
        self.log_damage = (
            f"the write-ahead log was damaged ({first}); the store was opened at the last whole write "
            "before the damage, and the writes after it are lost"
        )
        return db

    @staticmethod
    def column_families(path: str) -> set[str]:
        """The column families of an existing RocksDB directory. :raises KVError: not one."""
        try:
            return set(Rdict.list_cf(path, Options(raw_mode=True)))
        except Exception as e:
            raise KVError(f"{path} is not a readable RocksDB store: {e}") from e

    def get(self, cf: str, key: bytes) -> bytes | None:
        try:
            return self._cf[cf].get(key)
        except Exception as e:
            raise _error(e, f"reading {cf} key {key.hex()} failed") from e

    def items(self, cf: str, prefix: bytes = b"") -> Iterator[tuple[bytes, bytes]]:
        # rocksdict's items() is the fast scan, but it ends silently at a damaged block: a
        # checked iterator then looks just past the last key it gave, where its status
        # says whether the scan really ended or was cut short.
        last = None
        try:
            upper = _successor(prefix)
            if upper is None:
                pairs = self._cf[cf].items(from_key=prefix)
            else:  # RocksDB stops at the bound itself: no prefix test per key here
                ro = ReadOptions()
                ro.set_iterate_upper_bound(upper)
                pairs = self._cf[cf].items(from_key=prefix, read_opt=ro)
            for k, v in pairs:
                last = k
                yield k, v  # type: ignore[misc]  # raw mode: bytes keys
            it = self._cf[cf].iter(ro) if upper is not None else self._cf[cf].iter()
            if last is None:
                it.seek(prefix)
            else:
                it.seek(last)
                if it.valid():
                    it.next()
            it.status()
        except Exception as e:
            raise _error(e, f"scanning {cf} failed") from e

    def salvage(self, cf: str, prefix: bytes = b"") -> tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes]]]:
        """Every pair under ``prefix`` that can still be read from a damaged family, and the
        key ranges that could not: RocksDB's block checksums are not checked (the caller
        checks each value itself), and a block that cannot even be parsed is stepped over by
        seeking ahead (the last 8 bytes of a key are taken as a counter). Returns (pairs,
        [(last good key, first key after the gap)])."""
        ro = ReadOptions()
        ro.set_verify_checksums(False)
        it = self._cf[cf].iter(ro)
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
                it = self._cf[cf].iter(ro)
                it.seek(last[:-8] + min(n + step, (1 << 64) - 1).to_bytes(8, "big"))
                try:
                    it.status()
                    break
                except Exception:
                    step *= 2
            gaps.append((last, it.key() if it.valid() else b""))
            if not it.valid():
                return pairs, gaps

    def write(self, ops: Sequence[Op]) -> None:
        if len(ops) == 1:
            # One change (a durable put or get): a single put or delete is atomic by itself
            # and skips building a WriteBatch.
            cf, key, value = ops[0]
            try:
                if value is None:
                    self._cf[cf].delete(key, self._wopts)
                else:
                    self._cf[cf].put(key, value, self._wopts)
            except Exception as e:
                raise _error(e, f"write to {self.path} failed") from e
            return
        wb = WriteBatch(raw_mode=True)
        h = self._h
        for cf, key, value in ops:
            if value is None:
                wb.delete(key, h[cf])
            else:
                wb.put(key, value, h[cf])
        try:
            self._db.write(wb, self._wopts)
        except Exception as e:
            raise _error(e, f"write to {self.path} failed") from e

    def sync(self) -> None:
        # rocksdict releases the GIL while the log is synced: other threads go on writing,
        # and the next sync covers them all.
        if not self._wal:
            return
        try:
            self._db.flush_wal(True)
        except Exception as e:
            raise _error(e, f"syncing the log of {self.path} failed") from e

    def flush(self) -> None:
        """Write the memtables to table files (tests use it to reach the files)."""
        for name in CFS:
            self._cf[name].flush()

    def memory(self) -> dict[str, int]:
        def prop(name: str) -> int:
            try:
                return sum(int(self._cf[cf].property_int_value(name) or 0) for cf in CFS)
            except Exception:  # a property this RocksDB does not report
                return 0

        return {
            "memtable_bytes": prop("rocksdb.cur-size-all-mem-tables"),
            "block_cache_bytes": int(self._cache.get_usage()),
            "table_readers_bytes": prop("rocksdb.estimate-table-readers-mem"),
            "write_buffer_limit": self.write_buffer_bytes,
            "block_cache_limit": self.block_cache_bytes,
        }

    def close(self) -> None:
        if self._db is None:
            return
        self._db.close()
        # rocksdict keeps the database locked while column-family objects are alive.
        self._cf.clear()
        self._h.clear()
        self._db = None  # type: ignore[assignment]  # closed: the check above returns
        self._drop_shadow()

    def _drop_shadow(self) -> None:
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None


def _successor(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: there is none)."""
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return None


def _shadow_of(path: str) -> str:
    """A private directory of links to the store's files, to open read-only through.

    Opening a database, even read-only, makes rocksdict write its ``rocksdict-config.json``
    and RocksDB its info ``LOG`` into the directory; inspecting a store must write nothing
    into it. Through the links RocksDB reads the real files and writes its own into the
    shadow, which is removed at close."""
    shadow = tempfile.mkdtemp(prefix="sweepq-inspect-")
    for name in os.listdir(path):
        if name == "rocksdict-config.json" or name == "LOCK" or name.startswith("LOG"):
            continue
        os.symlink(os.path.join(os.path.abspath(path), name), os.path.join(shadow, name))
    return shadow


def _why(e: Exception, what: str) -> str:
    text = str(e)
    if "lock" in text.lower():
        return f"{what}: another queue manager (in this or another process) has it open ({text})"
    return f"{what}: {text}"


def _error(e: Exception, what: str) -> KVError:
    text = str(e)
    if "corrupt" in text.lower() or "checksum" in text.lower():
        return KVCorruption(f"{what}: {text}")
    return KVError(f"{what}: {text}")


def repair(path: str) -> list[str]:
    """RocksDB's repair: rebuild the manifest from the files that can be read; files that
    cannot (a truncated table, a damaged log) are moved to ``lost/``. Returns their names.
    :raises KVError: the repair itself failed."""
    lost = os.path.join(path, "lost")
    before = set(os.listdir(lost)) if os.path.isdir(lost) else set()
    try:
        Rdict.repair(path, Options(raw_mode=True))
    except Exception as e:
        raise KVError(f"repairing the store at {path} failed: {e}") from e
    after = set(os.listdir(lost)) if os.path.isdir(lost) else set()
    return sorted(after - before)


def exists_as_store(path: str) -> bool:
    return os.path.isdir(path) and "CURRENT" in os.listdir(path)
