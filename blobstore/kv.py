"""The key-value layer under the blob store: its families of records, its protocol, and a
backend over plain dicts (tests, demos). The RocksDB backend is blobstore/rocks.py.

Eight families of records (RocksDB column families), all in raw mode:

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
``quarantine`` family name + NUL + key -> the bytes as they were read: records that failed
               their checks, moved aside for inspection, never read as data;
               b"detached" + NUL + u64 blob id -> the chain a caller took that blob out of
               because it was damaged (``BlobStore.detach``): not a pending blob, so the
               next open keeps it for its caller to name (``BlobStore.detached``).

Beside them a store keeps *side records* (the engine's checkpoint), apart from the families
so that damage to them cannot take those too (blobstore/files.py).

Every method of a :class:`KV` is thread-safe; :meth:`KV.write` applies its operations
atomically.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

from . import changes

CF_BLOBS = "blobs"
CF_MANIFESTS = "manifests"
CF_CHAINS = "chains"
CF_META = "meta"
CF_MESSAGES = "messages"
CF_MARKS = "marks"
CF_OBJECTS = "objects"
CF_QUARANTINE = "quarantine"
DETACHED = b"detached\0"  # the quarantine's keys of blobs detached as damaged (see above)
CFS = (CF_BLOBS, CF_MANIFESTS, CF_CHAINS, CF_META, CF_MESSAGES, CF_MARKS, CF_OBJECTS, CF_QUARANTINE)

# The memory a store's write buffers and read cache may take, by default (store options
# ``write_buffer_bytes`` and ``block_cache_bytes``).
DEFAULT_WRITE_BUFFER_BYTES = 16 << 20
DEFAULT_BLOCK_CACHE_BYTES = 8 << 20

Op = tuple[str, bytes, bytes | None]  # (column family, key, value); value None deletes
Listener = Callable[[list[str]], None]


class KVError(Exception):
    """An I/O failure of the key-value layer (the blob store turns it into StoreError)."""


class KVCorruption(KVError):
    """The key-value layer found damaged data (a checksum failed); ``where`` names it."""

    def __init__(self, message: str, where: str = ""):
        super().__init__(message)
        self.where = where


class KV(Protocol):
    """What the blob store needs of a key-value store. Thread-safe; ``write`` is atomic."""

    def get(self, cf: str, key: bytes) -> bytes | None:
        """:raises KVCorruption: the stored data is damaged. :raises KVError: I/O failed."""
        ...

    def items(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every pair of ``cf`` whose key starts with ``prefix``, in key order.
        :raises KVCorruption: a checksum failed on the way."""
        ...

    def chunks(self, cf: str, prefix: bytes, size: int) -> Iterator[list[tuple[bytes, bytes]]]:
        """:meth:`items` in lists of at most ``size`` pairs, each read when it is taken (a
        caller that drops each list before the next never holds them all). The scan's checks
        run to its end: :raises KVCorruption: possibly after some lists were given."""
        ...

    def salvage(self, cf: str, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> tuple[list, list, list]:
        """After damage: (proven pairs, [(key, None)] that could not be proven, gaps [(last
        good key, next key or b"")]) under ``prefix``; ``probes`` are keys (of the whole
        family) to read one by one where a scan must step over damage. The family is
        healed (rebuilt without what cannot be proven) when the store can write."""
        ...

    def write(self, ops: Sequence[Op], logged: bool = False) -> int:
        """Apply ``ops`` atomically (all or none); return the horizon after them (see
        :meth:`horizon`). ``logged``: the caller appends them, whole, to the change log next
        (blobstore/changes.py), which can make them again at the next open: then :meth:`sync`
        need not sync this write itself. :raises KVError: nothing was written."""
        ...

    def write_one(self, cf: str, key: bytes, value: bytes | None, log: str, whole: bool) -> int:
        """``write([(cf, key, value)], whole)``, then the record of that write in the change
        log's format (``changes.one``, the record ``whole`` or by its head) appended to the
        side log ``log``, in one call: a lone durable put or get (issue 31). A store that
        defers (RocksKV's ``defer``) makes the write in its redo log instead, and the record
        is a ``V`` record (blobstore/redolog.py). Returns the record's length.
        :raises KVError: nothing was written, nor appended."""
        ...

    def sync(self) -> None:
        """Make every write so far, and every record appended to a side log, durable against
        power loss: the side logs, and the writes themselves unless every one since the last
        sync was ``logged`` (and the logs took every record: the change log can redo them).
        :raises KVError: it failed."""
        ...

    def read_side(self, name: str) -> bytes | None:
        """A side record (None: none). :raises KVCorruption: it is damaged."""
        ...

    def write_side(self, name: str, data: bytes) -> None:
        """Replace a side record atomically and durably. :raises KVError: not replaced."""
        ...

    def read_log(self, name: str) -> tuple[list[bytes], str | None]:
        """A side log's whole records, and why reading stopped before its end (None: it did not)."""
        ...

    def start_log(self, name: str, record: bytes) -> None:
        """Replace a side log with one holding ``record``, atomically and durably.
        :raises KVError: not replaced."""
        ...

    def append_log(self, name: str, record: bytes) -> str | None:
        """Append ``record`` to a side log; never raises: returns why the log takes no more
        records (until it starts again), or None."""
        ...

    def horizon(self) -> int:
        """Every write made so far has a number at most this (RocksDB's last sequence number)."""
        ...

    def at_open(self) -> tuple[int, int]:
        """(:meth:`horizon` when the store opened, before it replayed its redo log; the number
        of the last deferred write it then had: blobstore/redolog.py, 0 for a store that
        never deferred). The change log's records are judged against them."""
        ...

    def files(self) -> dict:
        """Sync, then say what the store's files are now (JSON-able), for the caller to keep
        apart from them and give back at the next open (``known``): an open then recognises
        the damage that would let it destroy data, or that lost writes (blobstore/guard.py).
        :raises KVError: the sync failed."""
        ...

    def unproven(self, cf: str, prefix: bytes = b"") -> bool:
        """Whether a rebuild of ``cf`` left records under ``prefix`` it could not prove."""
        ...

    def listen(self, listener: Listener) -> None:
        """Call ``listener(families)`` after families were rebuilt from a damaged state."""
        ...

    def flush(self) -> None:
        """Write what is buffered in memory to the store's files (inspection and tests)."""
        ...

    def compact(self) -> None:
        """Rewrite the store's files now (tests). :raises KVError: it failed."""
        ...

    def damage_log(self) -> list[str]:
        """What was found damaged and set right since the store opened."""
        ...

    def memory(self) -> dict[str, int]:
        """Bytes the store holds in memory, by kind."""
        ...

    def close(self) -> None:
        """Release the store even if it fails. :raises KVError: what could not be written."""
        ...


class MemoryKV:
    """Dicts behind a lock: the in-memory store's backend (nothing survives close).

    ``_cfs`` holds every family and, under ``"side"``, the side records: a copy of ``_cfs``
    is what a killed process would leave (the tests' crash)."""

    def __init__(self) -> None:
        self._cfs: dict[str, dict[bytes, bytes]] = {cf: {} for cf in (*CFS, "side", "logs")}
        self._lock = threading.Lock()

    def get(self, cf: str, key: bytes) -> bytes | None:
        return self._cfs[cf].get(key)

    def items(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        with self._lock:
            return sorted((k, v) for k, v in self._cfs[cf].items() if k.startswith(prefix))

    def chunks(self, cf: str, prefix: bytes, size: int) -> Iterator[list[tuple[bytes, bytes]]]:
        items = self.items(cf, prefix)
        for lo in range(0, len(items), size):
            yield items[lo : lo + size]

    def salvage(self, cf: str, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> tuple[list, list, list]:
        return self.items(cf, prefix), [], []  # dicts hold no damage of their own

    def write(self, ops: Sequence[Op], logged: bool = False) -> int:
        with self._lock:
            for cf, key, value in ops:
                if value is None:
                    self._cfs[cf].pop(key, None)
                else:
                    self._cfs[cf][key] = bytes(value)
            meta = self._cfs["side"]
            horizon = int(meta.get(b"\0horizon", b"0")) + len(ops)
            meta[b"\0horizon"] = str(horizon).encode()
        return horizon

    def write_one(self, cf: str, key: bytes, value: bytes | None, log: str, whole: bool) -> int:
        record = changes.one(self.write([(cf, key, value)], whole), key, value, whole)
        self.append_log(log, record)
        return len(record)

    def sync(self) -> None:
        pass

    def read_side(self, name: str) -> bytes | None:
        return self._cfs.setdefault("side", {}).get(name.encode())

    def write_side(self, name: str, data: bytes) -> None:
        with self._lock:
            self._cfs.setdefault("side", {})[name.encode()] = bytes(data)

    def read_log(self, name: str) -> tuple[list[bytes], str | None]:
        raw = self._cfs.setdefault("logs", {}).get(name.encode())
        return (list(_unjoin(raw)) if raw else []), None

    def start_log(self, name: str, record: bytes) -> None:
        with self._lock:
            self._cfs.setdefault("logs", {})[name.encode()] = _joined(record)

    def append_log(self, name: str, record: bytes) -> str | None:
        with self._lock:
            logs = self._cfs.setdefault("logs", {})
            logs[name.encode()] = logs.get(name.encode(), b"") + _joined(record)
        return None

    def horizon(self) -> int:
        return int(self._cfs["side"].get(b"\0horizon", b"0"))

    def at_open(self) -> tuple[int, int]:
        return self.horizon(), 0  # nothing here is deferred

    def files(self) -> dict:
        return {"horizon": self.horizon()}  # no files

    def unproven(self, cf: str, prefix: bytes = b"") -> bool:
        return False

    def listen(self, listener: Listener) -> None:
        pass  # nothing here is ever rebuilt

    def flush(self) -> None:
        pass

    def compact(self) -> None:
        pass

    def damage_log(self) -> list[str]:
        return []

    def memory(self) -> dict[str, int]:
        with self._lock:
            held = sum(len(k) + len(v) for d in self._cfs.values() for k, v in d.items())
        # The dicts are the records themselves, not buffers or a cache: a budget counts none
        # of them (MEMORY_HELD), as it counts none of RocksDB's table files.
        return {"dict_bytes": held, "held_bytes": 0}

    def close(self) -> None:
        self._cfs = {cf: {} for cf in (*CFS, "side", "logs")}


def _joined(record: bytes) -> bytes:
    return len(record).to_bytes(4, "little") + record


def _unjoin(raw: bytes):
    pos = 0
    while pos < len(raw):
        n = int.from_bytes(raw[pos : pos + 4], "little")
        yield raw[pos + 4 : pos + 4 + n]
        pos += 4 + n
