"""Where swept runs live: compressed, checksummed blobs, and the chains that order them.

A blob is *pending* from :meth:`BlobStore.write_pending` until :meth:`BlobStore.link` puts
it in a chain; linking and unlinking are each one atomic write, so a chain never names a
blob that is not there. Pending blobs that are never linked are deleted by
:meth:`BlobStore.delete_pending` (a sweep that aborts) or at the next open.

:class:`BlobStore` keeps its data in RocksDB (blobstore/kv.py holds the layout);
:class:`MemoryStore` is the same store over dicts, for tests and for a queue manager that
must not touch the disk. Both implement :class:`~sweepq.blobstore.protocol.Store`, and one
contract test suite runs over both.

Beside the blobs it keeps what a caller needs to make records durable without knowing
what they are: *messages* (a record under a caller's key, outside any blob), *marks* on
single records of a blob (removed, or a changed count), and *objects* (named definitions).
A record moves between its own key and a blob in one atomic write: :meth:`BlobStore.link`
deletes the keys of the records the blob now holds, and :meth:`BlobStore.unlink` can write
the records that leave a blob under their keys as it deletes the blob. So each record has
exactly one durable home at any moment.

The store knows nothing about queues: it stores opaque records under opaque owner labels
and scopes. Only this package imports rocksdict and zstandard.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import struct
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import chain

from . import changes
from . import format as fmt
from .codec import DEFAULT_LEVEL, MIN_SAMPLE_BYTES, Codec, train, zstd_error
from .files import SIDE_PREFIX, SideLog, claim, release
from .files import repair as kv_repair
from .group import WriteGroup
from .kv import (
    CF_BLOBS,
    CF_CHAINS,
    CF_MANIFESTS,
    CF_MARKS,
    CF_MESSAGES,
    CF_META,
    CF_OBJECTS,
    CF_QUARANTINE,
    DEFAULT_BLOCK_CACHE_BYTES,
    DEFAULT_WRITE_BUFFER_BYTES,
    KV,
    KVCorruption,
    KVError,
    MemoryKV,
    Op,
)
from .kv import CFS as FAMILIES
from .protocol import (
    MEMORY_HELD,
    BlobCorruptError,
    BlobInfo,
    Capability,
    Frame,
    Salvage,
    Since,
    StoreDamageError,
    StoreError,
)
from .rocks import ROCKSDB_OPTIONS, RocksKV

STORE_FORMAT = 3  # 3: messages, marks and objects (durable queues); 2 held only swept blobs
DEFAULT_MAX_BLOB_BYTES = 256 * 1024
DEFAULT_MAX_BLOB_RECORDS = 1024  # bounds a sweep's lock hold (verify + detach are per record)
# The caller cuts a run into blobs within these bounds (sweepq.sweeper.runs.cut_run: one
# implementation for the engine and the replay kernel); the store keeps them as its settings.
# Dictionaries help small records only; train once this many bytes of samples are seen.
DICT_MAX_AVG_RECORD = 1024
DICT_SAMPLE_BYTES = 256 * 1024
DICT_MIN_SAMPLES = 256

# Every option a BlobStore takes from a queue manager's ``store_options``.
OPTIONS = frozenset({"level", "max_blob_bytes", "max_blob_records", "sync", "dictionaries"} | ROCKSDB_OPTIONS)
CHECKPOINT = "checkpoint"  # the side record Checkpointing keeps

_U64 = struct.Struct(">Q")
_U32 = struct.Struct("<I")


# One caller's write_messages: (puts, deletes, marks).
MessageWrite = tuple[Sequence[tuple[bytes, bytes]], Sequence[bytes], Sequence[tuple[int, int, bytes | None]]]


@dataclass
class StoreStats:
    blobs_written: int = 0
    bytes_raw_written: int = 0
    bytes_compressed_written: int = 0
    blobs_read: int = 0
    bytes_compressed_read: int = 0
    seconds_writing: float = 0.0
    seconds_reading: float = 0.0
    dictionaries_trained: int = 0
    dict_ids: dict = field(default_factory=dict)


class BlobStore:
    """A blob store on a data directory (RocksDB).

    ``clear`` empties an existing store at open. ``sync`` makes every write durable
    against power loss before it returns; without it a write survives a crash of the
    process and :meth:`sync` makes all writes so far survive a power loss. ``wal=False``
    writes no log (blobstore/kv.py). Opening removes the pending blobs that never made it
    into a chain (an interrupted sweep).
    ``max_blob_bytes`` / ``max_blob_records`` bound one blob, so that bringing one back
    is a bounded amount of work; callers cut their runs within them. ``write_buffer_bytes``
    and ``block_cache_bytes`` bound RocksDB's memory (blobstore/kv.py). ``read_only`` opens
    for inspection.

    Thread safety: every method may be called from any thread. Atomicity: each write
    method applies all of its changes or none; it raises :class:`StoreError` when it applied
    none, so a caller that fails may simply try again.
    """

    capabilities = Capability.SALVAGE | Capability.DAMAGE_LOG | Capability.CHECKPOINT

    def __init__(
        self,
        path: str | os.PathLike | None,
        *,
        clear: bool = False,
        sync: bool = False,
        wal: bool = True,
        level: int = DEFAULT_LEVEL,
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
        dictionaries: bool = True,
        read_only: bool = False,
        write_buffer_bytes: int = DEFAULT_WRITE_BUFFER_BYTES,
        block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES,
        kv: KV | None = None,
    ):
        _check_option("max_blob_bytes", max_blob_bytes, 1)
        _check_option("max_blob_records", max_blob_records, 1)
        _check_option("write_buffer_bytes", write_buffer_bytes, 1 << 20)
        _check_option("block_cache_bytes", block_cache_bytes, 0)
        if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 22:
            raise StoreError(f"store option level={level!r}: a zstd level is an integer in 1..22")
        self.path = os.fspath(path) if path is not None else ":memory:"
        self.max_blob_bytes = max_blob_bytes
        self.max_blob_records = max_blob_records
        self.use_dictionaries = bool(dictionaries)
        self.codec = Codec(level)
        self.stats = StoreStats()
        self._lock = threading.Lock()
        self._temporary = False
        self._events: list[str] = []  # damage this store found and dealt with (DamageLog)
        self._listeners: list[Callable[[list[str]], None]] = []
        self._wal = wal
        self._since = Since()
        self._log_bytes = 0  # appended to the change log since it started (it starts again past LIMIT)
        self.group: WriteGroup[MessageWrite] = WriteGroup(self._write_group)  # write_messages' group commit
        if kv is None:
            self._make_directory(read_only)
            try:  # claimed before it is judged: a directory another opener is creating is in use, not damaged
                claimed = None if read_only else claim(self.path)
            except KVError as e:
                raise _store_error(e) from e
            try:
                self._check_directory(read_only)
                logged = changes.replay(*SideLog(self.path, changes.NAME).read())
            except BaseException:
                if claimed is not None:
                    release(claimed, untouched=True)
                raise
            try:
                kv = RocksKV(
                    self.path,
                    sync=sync,
                    wal=wal,
                    read_only=read_only,
                    write_buffer_bytes=write_buffer_bytes,
                    block_cache_bytes=block_cache_bytes,
                    known=changes.known(logged),
                    claimed=claimed,
                )
            except KVError as e:
                raise _store_error(e) from e
        self._kv: KV | None = kv
        try:
            opened_at = kv.horizon()  # before any write of this store's
            logged = changes.replay(*kv.read_log(changes.NAME))
            self._load(read_only, clear, logged.chains)
            self._since = self._changes_since_checkpoint(logged, opened_at)
        except BaseException:
            # A store that cannot be loaded (a format it cannot read, a failing disk) must
            # not keep the database open: its lock would refuse the next open in this
            # process, e.g. the one with repair=True that the error advises.
            self._kv = None
            with contextlib.suppress(KVError):
                kv.close()
            raise
        kv.listen(self._restore)

    def _load(self, read_only: bool, clear: bool, logged_chains: dict[bytes, list[int]] | None = None) -> None:
        """Read what the store keeps in memory (format, chains, dictionaries, marks) and
        delete the pending blobs of an interrupted sweep. Damage met here is set right as
        far as it can be (:meth:`_proven`, :meth:`_chains_again`) and written to the damage
        log. ``logged_chains``: what the change log says the chains hold."""
        stored = self._get(CF_META, b"format")
        if stored is None:
            if read_only:
                raise StoreError(f"{self.path} is not a sweepq store (no format record)")
            self._write([(CF_META, b"format", _U32.pack(STORE_FORMAT))])
        elif _U32.unpack(stored)[0] > STORE_FORMAT:
            raise StoreError(
                f"{self.path} holds store format {_U32.unpack(stored)[0]}, newer than this "
                f"sweepq's {STORE_FORMAT}; upgrade sweepq to open it"
            )
        elif _U32.unpack(stored)[0] < STORE_FORMAT and not read_only:
            # Format 2 stores held only swept copies of non-persistent messages, which no
            # restart keeps: there is nothing in them to carry over.
            clear = True
        if clear and not read_only:
            self._clear()
            self._write([(CF_META, b"format", _U32.pack(STORE_FORMAT))])
            with contextlib.suppress(KVError):  # what it said of the records cleared is void
                kv = self._open_kv()
                kv.start_log(changes.NAME, changes.start(self._wal, kv.files(), {}))
            logged_chains = None
        damaged_before = len(self._events)
        self._chains: dict[bytes, list[int]] = {
            k: list(struct.unpack(f"<{len(v) // 8}Q", v)) for k, v in self._proven(CF_CHAINS) if len(v) % 8 == 0
        }
        chains_whole = len(self._events) == damaged_before
        self._dict_refs: dict[int, int] = {}
        self._blob_dict: dict[int, int] = {}  # blob id -> its dictionary, for blobs that use one
        self._scope_dict: dict[bytes, int] = {}
        self._samples: dict[bytes, list[bytes]] = {}
        self._sample_bytes: dict[bytes, int] = {}
        meta = self._proven(CF_META)
        for k, v in meta:
            if k.startswith(b"dict/"):
                self.codec.add_dict(_U32.unpack(k[5:])[0], v)
            elif k.startswith(b"dictscope/"):
                self._scope_dict[k[10:]] = _U32.unpack(v)[0]
        self._marked: dict[int, set[int]] = {}  # blob id -> positions that carry a mark
        for k, _v in self._proven(CF_MARKS):
            self._marked.setdefault(_U64.unpack_from(k)[0], set()).add(_U32.unpack_from(k, 8)[0])
        # Dictionaries of an earlier run may serve blobs still in chains; which ones is not
        # known without reading every blob, so they are kept (a few dozen KiB each).
        self._pinned_dicts = set(self.codec.raw_dicts())
        # Blob ids are never reused: the next one is past every blob written, even if the
        # record of the next id was lost to damage.
        manifests = [_U64.unpack(k)[0] for k, _v in self._proven(CF_MANIFESTS)]
        stored_next = dict(meta).get(b"next_id")
        self._next_id = max([_U64.unpack(stored_next)[0] if stored_next else 1, *(m + 1 for m in manifests)])
        if read_only:
            return
        if logged_chains:
            self._chains_again(logged_chains, set(manifests))
        linked = {b for ids in self._chains.values() for b in ids}
        stale = [b for b in manifests if b not in linked]
        if stale and not chains_whole:
            # The chains that named them may be what the damage took: kept, for inspection.
            self._events.append(
                f"{len(stale)} blob(s) are in no chain after damage to the chain records; kept, not deleted"
            )
        elif stale:
            self.delete_pending(stale)

    def _chains_again(self, logged: dict[bytes, list[int]], blobs: set[int]) -> None:
        """Set again the chains that damage took links from (a chain record lost, a link in
        the part of a log that damage took), from the change log: every blob it shows linked
        and that is still there, in its order. A chain that holds a blob the log shows taken
        out (the unlink was lost) is left as it is: the records that blob held went back to
        their keys in the write that was lost, so the blob is the only home they have."""
        ops: list[Op] = []
        for name, ids in logged.items():
            want = [b for b in ids if b in blobs]
            have = self._chains.get(name, [])
            if want != have and set(have) <= set(want):
                ops.append((CF_CHAINS, name, struct.pack(f"<{len(want)}Q", *want)))
        if not ops:
            return
        try:
            self._write(ops)
        except StoreError as e:
            self._events.append(f"setting again the chains damage took links from failed ({e})")
            return
        for _cf, name, value in ops:
            self._chains[name] = list(struct.unpack(f"<{len(value) // 8}Q", value))  # type: ignore[arg-type]
        self._events.append(f"{len(ops)} chain(s) of blobs had lost links to damage; set again from the change log")

    def _changes_since_checkpoint(self, ch: changes.Changes, opened_at: int) -> Since:
        """What the change log (blobstore/changes.py) says changed since the checkpoint, and
        whether writes were lost: the open found damage, or the log shows a write that the
        store no longer reaches (a write-ahead log cut or deleted)."""
        lost = bool(self.damage_log())
        if ch.wal and ch.horizon > opened_at and not lost:  # (RocksDB's files say so too: blobstore/guard.py)
            lost = True
            self._events.append(
                f"the store lost writes it had made: it opened at write {opened_at}, but write {ch.horizon} had "
                "been made (sweepq's change log says so): a write-ahead log was cut short or deleted"
            )
        if ch.problem:
            self._events.append(f"the change log is damaged ({ch.problem}); what it held after the damage is unknown")
        complete = not ch.continued and ch.problem is None
        return Since(ch.written, ch.moved, frozenset(ch.unlinked), frozenset(ch.removed), ch.marks, lost, complete)

    def _note(self, horizon: int, *puts_and_deletes, **operations) -> None:
        """Add a write that returned to the change log (``changes.write``'s operations); one
        that grew past its limit starts again once the store flushed what it covers."""
        self._note_record(changes.write(horizon, *puts_and_deletes, **operations))

    def _note_record(self, rec: bytes) -> None:
        """Append ``rec`` (a record of :mod:`.changes`) to the change log (see :meth:`_note`)."""
        kv = self._kv
        if kv is None:
            return
        kv.append_log(changes.NAME, rec)
        self._log_bytes += len(rec)
        if self._log_bytes > changes.LIMIT:
            with self._lock:
                if self._log_bytes > changes.LIMIT:
                    self._log_bytes = 0
                    with contextlib.suppress(KVError):
                        kv.flush()
                        kv.start_log(changes.NAME, changes.start(self._wal, kv.files(), self.chains(), continued=True))

    def _proven(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every pair of ``cf`` under ``prefix``; past damage, those that can still be proven
        (the family is rebuilt without the rest, which the damage log names).

        :raises StoreError: the family cannot be read at all."""
        try:
            return self._items(cf, prefix)
        except StoreDamageError as e:
            salvage = self._salvage(cf, prefix)
            self._events.append(
                f"the {cf} records were damaged ({e}): {len(salvage.damaged)} record(s) could not be proven "
                f"(quarantined) and {len(salvage.gaps)} range(s) could not be read"
            )
            return salvage.pairs

    def _salvage(self, cf: str, prefix: bytes, probes: Sequence[bytes] = ()) -> Salvage:
        try:
            pairs, damaged, gaps = self._open_kv().salvage(cf, prefix, probes)
        except KVError as e:
            raise _store_error(e) from e
        return Salvage(pairs, damaged, gaps)

    def _restore(self, families: list[str]) -> None:
        """After the key-value layer rebuilt damaged families: write again what this store
        holds in memory of them (its chains, its meta records), then tell its listeners, who
        hold the rest (messages, marks, definitions). Runs on a thread of its own."""
        ops: list[Op] = []
        with self._lock:
            if CF_CHAINS in families:
                ops += [(CF_CHAINS, name, struct.pack(f"<{len(ids)}Q", *ids)) for name, ids in self._chains.items()]
            if CF_META in families:
                ops.append((CF_META, b"format", _U32.pack(STORE_FORMAT)))
                ops.append((CF_META, b"next_id", _U64.pack(self._next_id)))
                ops += [(CF_META, b"dict/" + _U32.pack(i), raw) for i, raw in self.codec.raw_dicts().items()]
                ops += [(CF_META, b"dictscope/" + scope, _U32.pack(i)) for scope, i in self._scope_dict.items()]
            try:
                if ops:
                    self._write(ops)
            except StoreError as e:
                self._events.append(f"writing back the {', '.join(families)} records after damage failed: {e}")
        for listener in list(self._listeners):
            listener(list(families))

    def damage_log(self) -> list[str]:
        """What this store found damaged and set right since it opened (DamageLog)."""
        kv = self._kv
        return [*(kv.damage_log() if kv is not None else []), *self._events]

    def on_damage(self, listener: Callable[[list[str]], None]) -> None:
        """Call ``listener(families)`` after damaged families were rebuilt (DamageLog)."""
        self._listeners.append(listener)

    def checkpoint(self) -> bytes | None:
        """The last checkpoint written (Checkpointing). :raises StoreDamageError: damaged."""
        try:
            return self._open_kv().read_side(CHECKPOINT)
        except KVError as e:
            raise _store_error(e) from e

    def write_checkpoint(self, data: bytes) -> None:
        """Replace the checkpoint atomically and durably, then start the change log again
        (what it held is in the checkpoint now; every write it covers is synced first).
        :raises StoreError: not replaced."""
        kv = self._open_kv()
        try:
            kv.write_side(CHECKPOINT, data)
        except KVError as e:
            raise _store_error(e) from e
        with contextlib.suppress(KVError):  # the old log stands: it only covers more
            with self._lock:  # no link meanwhile: the chains and the log start together
                kv.start_log(changes.NAME, changes.start(self._wal, kv.files(), self.chains()))
            self._log_bytes = 0

    def since_checkpoint(self) -> Since:
        """What changed since the last checkpoint, as the change log had it at open (Checkpointing)."""
        return self._since

    def blob_horizon(self) -> int:
        """Every blob written so far has a smaller id (Checkpointing)."""
        return self._next_id

    @staticmethod
    def repair(path: str | os.PathLike) -> list[str]:
        """Make a damaged store openable again: RocksDB rebuilds its manifest from the files it
        can read and moves those it cannot (a truncated table file) to ``lost/``; the records
        only they held are gone. Returns the names of the files moved.

        :raises StoreError: the repair failed."""
        try:
            return kv_repair(os.fspath(path))
        except KVError as e:
            raise StoreError(str(e)) from e

    @classmethod
    def temporary(cls, **kw) -> BlobStore:
        """A private store in a new temporary directory, removed by :meth:`close`."""
        path = tempfile.mkdtemp(prefix="sweepq-")
        store = cls(path, **kw)
        store._temporary = True
        # A queue manager that is never closed must not leave its directory behind.
        weakref.finalize(store, shutil.rmtree, path, True)
        return store

    def _make_directory(self, read_only: bool) -> None:
        """Create the store's directory when it does not exist (another opener may create it
        at the same time); refuse a path that cannot be one."""
        if os.path.islink(self.path) and not os.path.exists(self.path):
            raise StoreError(
                f"{self.path} is a symbolic link to {os.readlink(self.path)}, which does not exist; "
                "create that directory, or give the path of a real one"
            )
        if not os.path.exists(self.path):
            if read_only:
                raise StoreError(f"{self.path} does not exist")
            parent = os.path.dirname(os.path.abspath(self.path))
            if not os.path.isdir(parent):
                raise StoreError(f"the parent directory {parent} does not exist; create it first (a typo in the path?)")
            try:
                os.mkdir(self.path, 0o700)
            except FileExistsError:
                pass  # another opener made it: the claim tells which of the two goes on
            except OSError as e:
                raise StoreError(f"cannot create the store directory {self.path}: {e}") from e
        if not os.path.isdir(self.path):
            raise StoreError(f"{self.path} is not a directory")

    def _check_directory(self, read_only: bool) -> None:
        """Refuse a directory that is not a store, or one RocksDB would take for a new
        database over a store's files (``CURRENT`` missing). Only under the claim."""
        entries = os.listdir(self.path)
        if entries and "CURRENT" not in entries and _holds_a_database(entries):
            # RocksDB would take the directory for a new database, and delete every table file.
            raise StoreDamageError(
                f"the store at {self.path} is damaged: its CURRENT file is missing (the table files and logs are "
                "there)",
                os.path.join(self.path, "CURRENT"),
            )
        if entries and "CURRENT" not in entries and not _only_store_files(entries):
            raise StoreError(f"{self.path} is not a sweepq store (it holds other files); choose an empty directory")
        if "CURRENT" in entries:
            try:
                cfs = RocksKV.column_families(self.path)
            except KVError as e:
                raise _store_error(e) from e
            if not cfs & set(FAMILIES) and not any(n.startswith(SIDE_PREFIX) for n in entries):
                raise StoreError(f"{self.path} is a RocksDB database but not a sweepq store")
            if not cfs & set(FAMILIES):  # sweepq's own files are here: its manifest lost them
                raise StoreDamageError(
                    f"the manifest of the store at {self.path} names none of its families: it is damaged", self.path
                )

    def _clear(self) -> None:
        ops: list[Op] = []
        for name in (CF_BLOBS, CF_MANIFESTS, CF_CHAINS, CF_MESSAGES, CF_MARKS, CF_OBJECTS):
            ops += [(name, k, None) for k, _v in self._items(name)]
        ops += [(CF_META, k, None) for k, _v in self._items(CF_META) if k != b"format"]
        self._write(ops)

    # -- the key-value layer, with its errors made StoreErrors ---------------------------------

    def _get(self, cf: str, key: bytes) -> bytes | None:
        try:
            return self._open_kv().get(cf, key)
        except KVError as e:
            raise _store_error(e) from e

    def _items(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        try:
            return self._open_kv().items(cf, prefix)
        except KVError as e:
            raise _store_error(e) from e

    def _write(self, ops: list[Op]) -> int:
        """Apply ``ops`` atomically; return the horizon after them (the change log's)."""
        try:
            return self._open_kv().write(ops)
        except KVError as e:
            raise _store_error(e) from e

    def _open_kv(self) -> KV:
        kv = self._kv
        if kv is None:
            raise StoreError(f"the store at {self.path} is closed")
        return kv

    # -- writing ---------------------------------------------------------------------------

    def write_pending(
        self,
        owner: bytes,
        records: Sequence[bytes],
        ids: Sequence[bytes],
        ends: Sequence[int],
        scope: bytes | None = None,
    ) -> list[BlobInfo]:
        """Compress ``records`` into blobs cut at ``ends`` and write them as pending.

        Blob ``k`` holds ``records[ends[k-1]:ends[k]]``; the caller cuts within
        ``max_blob_bytes`` / ``max_blob_records`` (sweepq.sweeper.runs). ``ids`` (one per
        record) and ``owner`` are bound into each blob and kept in its manifest, to name the
        records if a blob is ever damaged. ``scope`` (e.g. a queue) selects the trained
        dictionary. Returns the blobs in record order.

        :raises StoreError: a write failed; blobs written before it stay pending (the
            caller deletes them, or the next open does).
        """
        if len(records) != len(ids):
            raise ValueError("one id per record")
        if len(records) and (not len(ends) or ends[-1] != len(records)):
            raise ValueError("ends must cut every record")
        t0 = time.perf_counter()
        dict_id = self._dictionary_for(scope, records) if scope is not None and self.use_dictionaries else 0
        out: list[BlobInfo] = []
        lo = 0
        for hi in ends:
            part = records[lo:hi]
            part_ids = ids[lo:hi]
            raw = fmt.frame(list(part))
            body = self.codec.compress(raw, dict_id)
            check = fmt.ids_check(part_ids)
            manifest = self.codec.compress(_U32.pack(hi - lo + 1) + fmt.frame([owner, *part_ids]))
            with self._lock:
                blob_id = self._next_id
                self._next_id += 1
            value = fmt.pack(fmt.CODEC_ZSTD, blob_id, owner, check, dict_id, len(part), len(raw), body)
            key = _U64.pack(blob_id)
            self._write(
                [
                    (CF_BLOBS, key, value),
                    (CF_MANIFESTS, key, manifest),
                    (CF_META, b"next_id", _U64.pack(blob_id + 1)),
                ]
            )
            if dict_id:
                with self._lock:
                    self._dict_refs[dict_id] = self._dict_refs.get(dict_id, 0) + 1
                    self._blob_dict[blob_id] = dict_id
            out.append(BlobInfo(blob_id, len(part), len(raw), len(value), dict_id, check))
            self.stats.blobs_written += 1
            self.stats.bytes_raw_written += len(raw)
            self.stats.bytes_compressed_written += len(value)
            lo = hi
        self.stats.seconds_writing += time.perf_counter() - t0
        return out

    def delete_pending(self, blob_ids: Sequence[int]) -> None:
        """Remove blobs that never made it into a chain (an aborted sweep), atomically.

        :raises StoreError: nothing was deleted; try again later (the next open also does)."""
        if not blob_ids:
            return
        with self._lock:
            ops: list[Op] = []
            for b in blob_ids:
                ops += self._delete_blob_ops(b)
            self._write(ops)
            self._forget_blobs(blob_ids)

    def link(self, chain: bytes, blob_ids: Sequence[int], at_head: bool, moved: Sequence[bytes] = ()) -> None:
        """Link pending blobs into ``chain`` (at its head or tail, in the order given), and
        delete the message keys ``moved`` (records the blobs now hold), atomically.

        :raises StoreError: nothing was linked or deleted; the blobs are still pending."""
        with self._lock:
            ids = self._chains.get(chain, [])
            ids = [*blob_ids, *ids] if at_head else [*ids, *blob_ids]
            ops: list[Op] = [(CF_CHAINS, chain, struct.pack(f"<{len(ids)}Q", *ids))]
            ops += [(CF_MESSAGES, k, None) for k in moved]
            horizon = self._write(ops)
            self._chains[chain] = ids
        self._note(horizon, moved=(blob_ids, moved), chains=[(chain, "head" if at_head else "tail", blob_ids)])

    def unlink(self, chain: bytes, blob_id: int, restore: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Take ``blob_id`` out of ``chain`` and delete it (with its marks), writing the
        records that leave it under their message keys (``restore``), in one atomic write.

        :raises StoreError: nothing changed."""
        self._remove_from_chain(chain, blob_id, delete=True, restore=restore)

    def detach(self, chain: bytes, blob_id: int) -> None:
        """Take ``blob_id`` out of ``chain`` but keep the blob (a damaged one, for inspection).

        :raises StoreError: nothing changed."""
        self._remove_from_chain(chain, blob_id, delete=False)

    def _remove_from_chain(
        self, chain: bytes, blob_id: int, delete: bool, restore: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        with self._lock:
            ids = [b for b in self._chains.get(chain, []) if b != blob_id]
            ops: list[Op] = [(CF_CHAINS, chain, struct.pack(f"<{len(ids)}Q", *ids) if ids else None)]
            if delete:
                ops += self._delete_blob_ops(blob_id)
            ops += [(CF_MESSAGES, k, v) for k, v in restore]
            horizon = self._write(ops)
            if delete:
                self._forget_blobs([blob_id])
            if ids:
                self._chains[chain] = ids
            else:
                self._chains.pop(chain, None)
        self._note(horizon, puts=restore, unlinked=[blob_id] if delete else (), chains=[(chain, "out", [blob_id])])

    # -- durable records outside blobs, marks, objects --------------------------------------

    def write_messages(
        self,
        puts: Sequence[tuple[bytes, bytes]] = (),
        deletes: Sequence[bytes] = (),
        marks: Sequence[tuple[int, int, bytes | None]] = (),
    ) -> None:
        """Write records under their keys, delete keys, and set (or clear, value None) marks
        on records of blobs, in one atomic write, and add it to the change log.

        Group commit: callers writing at the same time share one RocksDB write and one
        change-log record (:attr:`group`, blobstore/group.py); each returns once the write
        holding its changes returned, so the OS has them, as if it had written alone.

        :raises StoreError: nothing was written. Thread-safe."""
        if puts or deletes or marks:
            self.group.run((puts, deletes, marks))

    def _write_group(self, writes: list[MessageWrite]) -> None:
        """One atomic write of every caller's changes, in their order, and one change-log
        record of it (the :class:`WriteGroup`'s ``write``: never two at once)."""
        ops: list[Op] = []
        marked = False
        for puts, deletes, marks in writes:
            ops += [(CF_MESSAGES, k, v) for k, v in puts]
            ops += [(CF_MESSAGES, k, None) for k in deletes]
            if marks:
                marked = True
                ops += [(CF_MARKS, _U64.pack(blob_id) + _U32.pack(pos), value) for blob_id, pos, value in marks]
        if not marked:
            horizon = self._write(ops)
        else:
            with self._lock:  # the marks known in memory change with the write, not between
                horizon = self._write(ops)
                for _puts, _deletes, marks in writes:
                    for blob_id, pos, value in marks:
                        if value is None:
                            self._marked.get(blob_id, set()).discard(pos)
                        else:
                            self._marked.setdefault(blob_id, set()).add(pos)
        if len(writes) == 1:
            puts, deletes, marks = writes[0]
            self._note_record(changes.write(horizon, puts, deletes, marks=marks))
        else:
            self._note_record(changes.write_group(horizon, writes))

    def messages(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every (key, record) whose key starts with ``prefix``, in key order.

        :raises StoreDamageError: a checksum failed, or a rebuild of the records after
            damage left some under ``prefix`` that it could not prove: read them with
            :meth:`salvage_messages`. :raises StoreError: unreadable. Thread-safe."""
        return list(chain.from_iterable(self.message_chunks(prefix, 1 << 20)))

    def message_chunks(self, prefix: bytes = b"", size: int = 4096) -> Iterator[list[tuple[bytes, bytes]]]:
        """:meth:`messages` in lists of at most ``size`` pairs, each read when it is taken: a
        reader of a backlog that drops each list before taking the next never holds it all.

        :raises StoreDamageError: as :meth:`messages`, possibly after some lists were given
            (the caller drops what it made of them). :raises StoreError. Thread-safe."""
        kv = self._open_kv()
        if kv.unproven(CF_MESSAGES, prefix):
            raise StoreDamageError(f"message records under {prefix!r} were lost to damage", "messages")
        try:
            yield from kv.chunks(CF_MESSAGES, prefix, size)
        except KVError as e:
            raise _store_error(e) from e
        if self._open_kv().unproven(CF_MESSAGES, prefix):
            raise StoreDamageError(f"message records under {prefix!r} were lost to damage", "messages")

    def salvage_messages(self, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> Salvage:
        """After :meth:`messages` found damage (Salvaging): the records under ``prefix`` that
        can still be proven, and the keys and ranges that cannot; ``probes`` are message
        keys (under any prefix) known to the caller, read one by one where damage hides
        them. The family is rebuilt without the damaged table files.
        :raises StoreError: unreadable at all. Thread-safe."""
        return self._salvage(CF_MESSAGES, prefix, probes)

    def quarantine_messages(self, keys: Sequence[bytes]) -> None:
        """Move the records under ``keys`` to the quarantine (Salvaging), atomically: kept for
        inspection, never read as data. :raises StoreError: nothing moved. Thread-safe."""
        ops: list[Op] = []
        for key in keys:
            try:
                value = self._get(CF_MESSAGES, key)
            except StoreDamageError:
                value = None  # unreadable: it goes all the same
            if value is not None:
                ops.append((CF_QUARANTINE, CF_MESSAGES.encode() + b"\0" + key, value))
            ops.append((CF_MESSAGES, key, None))
        if ops:
            self._note(self._write(ops), deletes=keys)

    def marks(self, blob_id: int) -> dict[int, bytes]:
        """The marks on the records of one blob: position -> value; past damage, those that
        can be proven (the damage log says what was lost).

        :raises StoreError: unreadable. Thread-safe."""
        if blob_id not in self._marked:
            return {}
        return {_U32.unpack_from(k, 8)[0]: v for k, v in self._proven(CF_MARKS, _U64.pack(blob_id))}

    def objects(self) -> dict[bytes, bytes]:
        """Every named object (definition); past damage, those that can be proven.
        :raises StoreError: unreadable. Thread-safe."""
        return dict(self._proven(CF_OBJECTS))

    def put_object(
        self, name: bytes, value: bytes | None, drop_messages: bytes | None = None, drop_chains: Sequence[bytes] = ()
    ) -> None:
        """Write (value None: delete) a named object; with ``drop_messages``, also delete every
        message key with that prefix and the chains ``drop_chains`` with their blobs, all in
        one atomic write (a definition deleted with what it held).

        :raises StoreError: nothing changed. Thread-safe."""
        with self._lock:
            ops: list[Op] = [(CF_OBJECTS, name, value)]
            if drop_messages is not None:
                ops += [(CF_MESSAGES, k, None) for k, _v in self._items(CF_MESSAGES, drop_messages)]
            dropped: list[int] = []
            for chain in drop_chains:
                ids = self._chains.get(chain, [])
                ops.append((CF_CHAINS, chain, None))
                for b in ids:
                    ops += self._delete_blob_ops(b)
                dropped += ids
            horizon = self._write(ops)
            self._forget_blobs(dropped)
            for chain in drop_chains:
                self._chains.pop(chain, None)
        if drop_messages is not None or drop_chains:
            self._note(horizon, dropped=drop_messages, unlinked=dropped, chains=[(c, "drop", ()) for c in drop_chains])

    def sync(self) -> None:
        """Make every write so far survive a power loss (one fsync of the log; the GIL is
        released meanwhile). :raises StoreError: it failed. Thread-safe."""
        try:
            self._open_kv().sync()
        except KVError as e:
            raise _store_error(e) from e

    def drop_chain(self, chain: bytes) -> None:
        """Delete a chain and all its blobs (a queue deleted with purge), atomically.

        :raises StoreError: nothing changed."""
        with self._lock:
            ids = self._chains.get(chain, [])
            ops: list[Op] = [(CF_CHAINS, chain, None)]
            for b in ids:
                ops += self._delete_blob_ops(b)
            horizon = self._write(ops)
            self._forget_blobs(ids)
            self._chains.pop(chain, None)
        self._note(horizon, unlinked=ids, chains=[(chain, "drop", ())])

    def _delete_blob_ops(self, blob_id: int) -> list[Op]:
        """The writes that delete a blob, and its dictionary if it was the last user
        (called with ``_lock`` held; bookkeeping changes only once the write succeeded)."""
        key = _U64.pack(blob_id)
        ops: list[Op] = [(CF_BLOBS, key, None), (CF_MANIFESTS, key, None)]
        dict_id = self._blob_dict.get(blob_id, 0)
        for pos in self._marked.get(blob_id, ()):
            ops.append((CF_MARKS, _U64.pack(blob_id) + _U32.pack(pos), None))
        if (
            dict_id
            and self._dict_refs.get(dict_id, 0) <= 1
            and dict_id not in self._scope_dict.values()
            and dict_id not in self._pinned_dicts
        ):
            ops.append((CF_META, b"dict/" + _U32.pack(dict_id), None))
        return ops

    def _forget_blobs(self, blob_ids: Sequence[int]) -> None:
        for b in blob_ids:
            self._marked.pop(b, None)
            dict_id = self._blob_dict.pop(b, 0)
            if dict_id and dict_id in self._dict_refs:
                self._dict_refs[dict_id] -= 1
                if self._dict_refs[dict_id] <= 0:
                    del self._dict_refs[dict_id]

    # -- reading ---------------------------------------------------------------------------

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        """The records of one blob, verified against its key and, when given, the owner and
        the ids' check it was linked with.

        :raises BlobCorruptError: the blob is damaged, missing or not the one expected; it
            names what the blob held. :raises StoreError: the read itself failed (transient).
        """
        return self._read(blob_id, owner, check, fmt.unframe)

    def read_frame(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> Frame:
        """See :meth:`Store.read_frame`."""

        def framed(raw: bytes, count: int) -> tuple[bytes, int]:
            fmt.check_frame(raw, count)
            return raw, count

        (raw, count), head = self._read(blob_id, owner, check, framed, True)
        return Frame(raw, count, head.ids_crc)

    def _read(self, blob_id: int, owner: bytes | None, check: int | None, unframe, with_head: bool = False):
        """A blob's frame made into what ``unframe(raw, count)`` returns (with the header when
        ``with_head``), everything verified; raises as :meth:`read`."""
        t0 = time.perf_counter()
        try:
            value = self._open_kv().get(CF_BLOBS, _U64.pack(blob_id))
        except KVCorruption as e:
            raise self._corrupt(blob_id, str(e)) from e
        except KVError as e:
            raise _store_error(e) from e
        if value is None:
            raise self._corrupt(blob_id, "missing from the store")
        try:
            head, body = fmt.unpack(value, blob_id, owner, check)
            if head.codec == fmt.CODEC_ZSTD:
                raw = self.codec.decompress(body, head.raw_len, head.dict_id)
            else:
                raw = bytes(body)
            records = unframe(raw, head.count)
        except Exception as e:  # FormatError, a missing dictionary (KeyError), zstd's ZstdError
            raise self._corrupt(blob_id, str(e)) from e
        self.stats.blobs_read += 1
        self.stats.bytes_compressed_read += len(value)
        self.stats.seconds_reading += time.perf_counter() - t0
        return (records, head) if with_head else records

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        """(owner, record ids) of a blob, from its separately stored manifest; (b"?", []) when
        there is none. :raises StoreError: it cannot be read."""
        raw = self._get(CF_MANIFESTS, _U64.pack(blob_id))
        if raw is None:
            return b"?", []
        try:
            data = self.codec.decompress(raw, 0)
            parts = fmt.unframe(data[4:], _U32.unpack_from(data)[0])
        except Exception as e:  # zstd's ZstdError, a FormatError, a struct.error: damaged
            raise StoreDamageError(f"the manifest of blob {blob_id} is damaged ({e})", f"manifest {blob_id}") from e
        return parts[0], parts[1:]

    def _corrupt(self, blob_id: int, why: str) -> BlobCorruptError:
        try:
            owner, ids = self.manifest(blob_id)
        except Exception:  # the manifest may be damaged too: still name the blob
            owner, ids = b"?", []
        return BlobCorruptError(blob_id, owner, ids, why)

    def chain(self, name: bytes) -> list[int]:
        """The blob ids of one chain, in order (from memory: no I/O)."""
        return list(self._chains.get(name, []))

    def chains(self) -> dict[bytes, list[int]]:
        return {k: list(v) for k, v in self._chains.items()}

    def blob_header(self, blob_id: int) -> fmt.Header:
        """The verified header of a stored blob (for inspection)."""
        value = self._get(CF_BLOBS, _U64.pack(blob_id))
        if value is None:
            raise self._corrupt(blob_id, "missing from the store")
        try:
            return fmt.unpack(value, blob_id)[0]
        except fmt.FormatError as e:
            raise self._corrupt(blob_id, str(e)) from e

    def raw_blob(self, blob_id: int) -> bytes | None:
        """A blob's stored bytes, unverified (inspection and fault injection)."""
        return self._get(CF_BLOBS, _U64.pack(blob_id))

    def replace_raw_blob(self, blob_id: int, value: bytes) -> None:
        """Overwrite a blob's stored bytes as they are (fault injection in tests: a flipped
        bit, or another blob's bytes under this key)."""
        self._write([(CF_BLOBS, _U64.pack(blob_id), value)])

    def pending(self) -> list[int]:
        """Blob ids that are in no chain. (Listed from the manifests, written with each blob in
        the same write: small, so the scan does not read every blob, nor trip on a damaged one.)"""
        linked = {b for ids in self._chains.values() for b in ids}
        return [_U64.unpack(k)[0] for k, _v in self._items(CF_MANIFESTS) if _U64.unpack(k)[0] not in linked]

    def memory(self) -> dict[str, int]:
        """Bytes the store holds in memory (memtables, block cache, ...), by kind, and under
        ``MEMORY_HELD`` what a memory budget counts."""
        try:
            mem = self._open_kv().memory()
        except (KVError, StoreError):
            return {MEMORY_HELD: 0}
        mem.setdefault(MEMORY_HELD, sum(mem.values()))
        return mem

    # -- dictionaries ---------------------------------------------------------------------

    def _dictionary_for(self, scope: bytes, records: Sequence[bytes]) -> int:
        """The scope's dictionary id, training one once enough small records were seen."""
        current = self._scope_dict.get(scope, 0)
        if current:
            return current
        # Records too short to learn from are no samples: an empty one is a message got
        # while its sweep read the run (it fails verification), and zstd's trainer must
        # never see a run of them (blobstore/codec.py, train).
        usable = [r for r in records if len(r) >= MIN_SAMPLE_BYTES]
        if not usable or sum(map(len, usable)) / len(usable) > DICT_MAX_AVG_RECORD:
            return 0
        with self._lock:
            samples = self._samples.setdefault(scope, [])
            have = self._sample_bytes.get(scope, 0)
            for r in usable:
                if have >= DICT_SAMPLE_BYTES:
                    break
                samples.append(bytes(r))
                have += len(r)
            self._sample_bytes[scope] = have
            if have < DICT_SAMPLE_BYTES or len(samples) < DICT_MIN_SAMPLES:
                return 0
            del self._samples[scope]
        try:
            raw = train(samples)
        except (ValueError, zstd_error()):  # samples it cannot learn from: go without
            return 0
        with self._lock:
            dict_id = max([0, *self._scope_dict.values(), *self._dict_refs, *self.codec.raw_dicts()]) + 1
            self.codec.add_dict(dict_id, raw)
            try:
                self._write(
                    [
                        (CF_META, b"dict/" + _U32.pack(dict_id), raw),
                        (CF_META, b"dictscope/" + scope, _U32.pack(dict_id)),
                    ]
                )
            except StoreError:
                return 0  # no dictionary this time; the blobs are written without one
            self._scope_dict[scope] = dict_id
            self.stats.dictionaries_trained += 1
            self.stats.dict_ids[scope] = dict_id
        return dict_id

    # -- lifetime ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what is buffered in memory to the store's files (inspection and tests).

        :raises StoreError: it failed (damage is set right at the next call)."""
        try:
            self._open_kv().flush()
        except KVError as e:
            raise _store_error(e) from e

    def compact(self) -> None:
        """Make RocksDB rewrite every table now (tests: damage after a compaction).

        :raises StoreError: it failed (damage is set right at the next call)."""
        try:
            self._open_kv().compact()
        except KVError as e:
            raise _store_error(e) from e

    def close(self) -> None:
        """Close the database, releasing the directory even when closing fails; a
        temporary store is removed.

        :raises StoreError: what was buffered could not be written at close (a full disk);
            the log keeps every write, so the next open has them."""
        kv = self._kv
        if kv is None:
            return
        try:
            kv.close()  # first: a rewrite after damage still at work finishes through this store
        except KVError as e:
            raise StoreError(f"{e}; the store is released, and its log keeps every write made") from e
        finally:
            self._kv = None
            if self._temporary:
                shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class MemoryStore(BlobStore):
    """The same blob store over dicts: nothing touches the disk and nothing survives close.

    For tests (every behaviour of :class:`BlobStore` but the files) and for queue managers
    that tier only to compress their backlog in memory."""

    def __init__(self, kv: MemoryKV | None = None, **options):
        options.pop("sync", None)
        options.pop("wal", None)
        # ``kv``: the dicts of a store that was abandoned without close (a simulated crash).
        super().__init__(None, kv=kv if kv is not None else MemoryKV(), **options)


def _store_error(e: KVError) -> StoreError:
    """The key-value layer's error as the protocol's: damage stays damage."""
    if isinstance(e, KVCorruption):
        return StoreDamageError(str(e), e.where)
    return StoreError(str(e))


def _holds_a_database(entries: list[str]) -> bool:
    """Whether a directory holds a database's own files (a manifest, tables, logs, sweepq's
    checkpoint): then it is a store, whatever else is missing."""
    return any(n.startswith(("MANIFEST-", SIDE_PREFIX + CHECKPOINT)) or n.endswith((".sst", ".log")) for n in entries)


def _only_store_files(entries: list[str]) -> bool:
    """A data directory whose RocksDB files are gone but for ones a queue manager writes."""
    return all(n.startswith(("sweepq-", "LOG", "LOCK", "rocksdict-config")) for n in entries)


def _check_option(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise StoreError(f"store option {name}={value!r}: use an integer >= {low}")
