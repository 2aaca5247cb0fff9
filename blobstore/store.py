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
import functools
import os
import shutil
import struct
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from itertools import chain

from . import changes
from . import format as fmt
from .access import Access, store_error
from .chains import Chains
from .chains import record as chain_record
from .changelog import ChangeLog
from .codec import DEFAULT_LEVEL, Codec
from .dictionaries import Dictionaries
from .directory import CHECKPOINT, check_directory, make_directory
from .files import claim, let_go_of_frames, release
from .format import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS
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
    DETACHED,
    KV,
    KVError,
    MemoryKV,
    Op,
)
from .marks import Marks, blob_prefix, position
from .marks import key as mark_key
from .protocol import (
    MEMORY_HELD,
    BlobInfo,
    Capability,
    Frame,
    Salvage,
    Since,
    StoreDamageError,
    StoreError,
)
from .reading import BlobReader
from .repairing import repair as kv_repair
from .rocks import ROCKSDB_OPTIONS, RocksKV
from .sidelog import SideLog
from .stats import StoreStats

STORE_FORMAT = 3  # 3: messages, marks and objects (durable queues); 2 held only swept blobs
# The default bounds of a blob (DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS) are format.py's,
# imported here: the caller cuts a run into blobs within them (sweepq.sweeper.runs.cut_run: one
# implementation for the engine and the replay kernel); the store keeps them as its settings.

# Every option a BlobStore takes from a queue manager's ``store_options``.
OPTIONS = frozenset({"level", "max_blob_bytes", "max_blob_records", "sync", "dictionaries"} | ROCKSDB_OPTIONS)

_U64 = struct.Struct(">Q")
_U32 = struct.Struct("<I")


def _detached_key(blob_id: int) -> bytes:
    """The quarantine's key marking blob ``blob_id`` detached as damaged (kv.DETACHED)."""
    return DETACHED + _U64.pack(blob_id)


def _detached_id(key: bytes) -> int:
    """The blob id of a key :func:`_detached_key` made."""
    return int(_U64.unpack(key[len(DETACHED) :])[0])


__all__ = ["STORE_FORMAT", "BlobStore", "MemoryStore", "StoreStats"]

# One caller's write_messages: (puts, deletes, marks).
MessageWrite = tuple[Sequence[tuple[bytes, bytes]], Sequence[bytes], Sequence[tuple[int, int, bytes | None]]]


def _message_write(key: bytes, value: bytes | None) -> MessageWrite:
    """The write of one record under ``key`` (``value`` None: its delete) as an item of the
    write group: BlobStore.write_message's when it meets other writers."""
    return (((key, value),), (), ()) if value is not None else ((), (key,), ())


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
    for inspection. ``redo`` keeps every put, delete and mark of a message record whole in
    the change log (blobstore/changes.py): :meth:`sync` then syncs that log alone unless a
    write since the last sync is one it cannot make again, and the open makes again what a
    power loss took from RocksDB's unsynced log; without it the log keeps each record's
    first bytes (the writes cost less) and every sync syncs RocksDB's log too. ``defer`` (not
    with ``redo`` or ``sync``): a lone write of one message record goes to the redo log and
    reaches RocksDB with others later (blobstore/redolog.py); a write still returns once it
    survives a kill.

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
        redo: bool = True,
        defer: bool = False,
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
        self._lock = threading.Lock()  # the chains, the marks and the next blob id, with their writes
        self._temporary = False
        self._listeners: list[Callable[[list[str]], None]] = []
        self._since = Since()
        self._detached: list[int] = []  # blobs an earlier run detached as damaged, kept (detached())
        self._redone = 0  # writes the open made again from the change log (_redo)
        # write_messages' group commit; a lone caller's one change straight through _write_alone
        self.group: WriteGroup[MessageWrite] = WriteGroup(self._write_group, self._write_alone)
        if kv is None:
            defer = defer and wal and not (sync or redo)  # a store that syncs its writes has none to defer
            kv = self._open_directory(read_only, sync, wal, write_buffer_bytes, block_cache_bytes, redo, defer)
        self._access = Access(self.path, kv)
        self._log = ChangeLog(self._access, wal, self._lock, self.chains, redo)
        # write_message bound once (message_writer): every durable put and get calls it, and it
        # calls the change log's write of one record when alone, no layer between (issue 31).
        self._message_writer = functools.partial(self.group.alone_or_join, self._log.write_message, _message_write)
        self._reader = BlobReader(self._access, self.codec, self.stats)
        try:
            opened_at, reached = kv.at_open()  # before any write of this store's
            records, problem = kv.read_log(changes.NAME)
            logged = changes.replay(records, problem)
            if not read_only and logged.wal and logged.horizon > opened_at:
                opened_at = self._redo(kv, records, opened_at)
            if not read_only and logged.deferred > reached:
                kv.append_log(changes.NAME, changes.settled(reached))  # said lost below, once
            self._log.go_on_from(logged)
            self._load(read_only, clear, wal, logged.chains)
            self._since = self._changes_since_checkpoint(logged, opened_at, self._redone, reached)
        except BaseException:
            # A store that cannot be loaded (a format it cannot read, a failing disk) must
            # not keep the database open: its lock would refuse the next open in this
            # process, e.g. the one with repair=True that the error advises.
            let_go_of_frames()  # first: a scan they held would hold the close up
            self._access.detach()
            with contextlib.suppress(KVError):
                kv.close()
            raise
        kv.listen(self._restore)

    def _redo(self, kv: KV, records: list[bytes], opened_at: int) -> int:
        """Make again the writes past ``opened_at`` (the store's horizon) that the change log
        holds whole (``changes.redo``: a power loss under sync="commit" takes them from
        RocksDB's unsynced log, damage from a damaged one), before anything reads the store;
        then mark the log settled (``changes.opened``: the numbers past the horizon are
        reused from here on). Returns the horizon now; what it could not redo stays past it,
        and :meth:`_changes_since_checkpoint` says it was lost, as before.

        :raises StoreError: the redo or its sync failed (the next open tries again)."""
        messages, marks, writes = changes.redo(records, opened_at)
        if writes:
            ops: list[Op] = [(CF_MESSAGES, k, v) for k, v in messages]
            ops += [(CF_MARKS, mark_key(blob_id, pos), v) for blob_id, pos, v in marks]
            self._access.write(ops)
            self._redone = writes
        self._access.sync()  # the redo, and what the open found, before the record that settles them
        horizon = kv.horizon()
        kv.append_log(changes.NAME, changes.opened(horizon))
        self._access.sync()
        return horizon

    def _open_directory(
        self,
        read_only: bool,
        sync: bool,
        wal: bool,
        write_buffer_bytes: int,
        block_cache_bytes: int,
        redo: bool,
        defer: bool,
    ) -> KV:
        """RocksDB on the store's directory: made when missing, claimed, then judged (a
        directory another opener is creating is in use, not damaged: blobstore/directory.py)."""
        make_directory(self.path, read_only)
        try:
            claimed = None if read_only else claim(self.path)
        except KVError as e:
            raise store_error(e) from e
        try:
            check_directory(self.path)
            logged = changes.replay(*SideLog(self.path, changes.NAME).read())
        except BaseException:
            if claimed is not None:
                release(claimed, untouched=True)
            raise
        try:
            return RocksKV(
                self.path,
                sync=sync,
                wal=wal,
                read_only=read_only,
                write_buffer_bytes=write_buffer_bytes,
                block_cache_bytes=block_cache_bytes,
                known=changes.known(logged),
                claimed=claimed,
                redo=redo,
                defer=defer,
            )
        except KVError as e:
            raise store_error(e) from e

    def _load(self, read_only: bool, clear: bool, wal: bool, logged_chains: dict[bytes, list[int]] | None) -> None:
        """Read what the store keeps in memory (format, chains, dictionaries, marks) and
        delete the pending blobs of an interrupted sweep. Damage met here is set right as
        far as it can be (``Access.proven``, :meth:`_chains_again`) and written to the damage
        log. ``logged_chains``: what the change log says the chains hold."""
        if (self._check_format(read_only) or clear) and not read_only:
            self._clear(wal)
            logged_chains = None
        access = self._access
        damaged_before = len(access.found)
        self._chains = Chains(access.proven(CF_CHAINS))
        chains_whole = len(access.found) == damaged_before
        meta = access.proven(CF_META)
        self._dicts = Dictionaries(self.codec, access, self.stats, meta)
        self._marks = Marks(k for k, _v in access.proven(CF_MARKS))
        # Blob ids are never reused: the next one is past every blob written, even if the
        # record of the next id was lost to damage.
        manifests = [_U64.unpack(k)[0] for k, _v in access.proven(CF_MANIFESTS)]
        stored_next = dict(meta).get(b"next_id")
        self._next_id = max([_U64.unpack(stored_next)[0] if stored_next else 1, *(m + 1 for m in manifests)])
        if read_only:
            return
        if logged_chains:
            self._chains_again(logged_chains, set(manifests))
        linked = self._chains.linked()
        stale = [b for b in manifests if b not in linked]
        # A blob detached as damaged is in no chain either, but it is no sweep's leftover: the
        # messages it held are lost, and deleting it here would lose them without a word (the
        # damage fuzz's silent loss). Kept for the caller to name (detached()).
        marked = {_detached_id(k) for k, _v in access.proven(CF_QUARANTINE, DETACHED)}
        self._detached = [b for b in stale if b in marked]
        stale = [b for b in stale if b not in marked]
        if stale and not chains_whole:
            # The chains that named them may be what the damage took: kept, for inspection.
            access.found.append(
                f"{len(stale)} blob(s) are in no chain after damage to the chain records; kept, not deleted"
            )
        elif stale:
            self.delete_pending(stale)

    def _check_format(self, read_only: bool) -> bool:
        """Check (or write) the store's format; True when what it holds is not carried over.

        :raises StoreError: not a store (read only), or a newer format than this sweepq's."""
        stored = self._access.get(CF_META, b"format")
        if stored is None:
            if read_only:
                raise StoreError(f"{self.path} is not a sweepq store (no format record)")
            self._access.write([(CF_META, b"format", _U32.pack(STORE_FORMAT))])
            return False
        found = _U32.unpack(stored)[0]
        if found > STORE_FORMAT:
            raise StoreError(
                f"{self.path} holds store format {found}, newer than this sweepq's {STORE_FORMAT}; "
                "upgrade sweepq to open it"
            )
        # Format 2 stores held only swept copies of non-persistent messages, which no
        # restart keeps: there is nothing in them to carry over.
        return found < STORE_FORMAT

    def _chains_again(self, logged: dict[bytes, list[int]], blobs: set[int]) -> None:
        """Set again the chains that damage took links from (a chain record lost, a link in
        the part of a log that damage took), from the change log: every blob it shows linked
        and that is still there, in its order. A chain that holds a blob the log shows taken
        out (the unlink was lost) is left as it is: the records that blob held went back to
        their keys in the write that was lost, so the blob is the only home they have."""
        fixed: dict[bytes, list[int]] = {}
        for name, ids in logged.items():
            want = [b for b in ids if b in blobs]
            have = self._chains.get(name)
            if want != have and set(have) <= set(want):
                fixed[name] = want
        if not fixed:
            return
        try:
            self._access.write([chain_record(name, ids) for name, ids in fixed.items()])
        except StoreError as e:
            self._access.found.append(f"setting again the chains damage took links from failed ({e})")
            return
        for name, ids in fixed.items():
            self._chains.set(name, ids)
        self._access.found.append(
            f"{len(fixed)} chain(s) of blobs had lost links to damage; set again from the change log"
        )

    def _changes_since_checkpoint(self, ch: changes.Changes, opened_at: int, redone: int, reached: int) -> Since:
        """What the change log (blobstore/changes.py) says changed since the checkpoint, and
        whether writes were lost: the open found damage, or the log shows a write that the
        store no longer reaches, even after ``redone`` writes made again from it (a
        write-ahead log cut or deleted), or a deferred write past ``reached``, the last one
        the redo log gave back (that log cut, damaged or deleted)."""
        lost = bool(self.damage_log())
        if ch.wal and ch.horizon > opened_at and not lost:  # (RocksDB's files say so too: blobstore/guard.py)
            lost = True
            self._access.found.append(
                f"the store lost writes it had made: it opened at write {opened_at}, but write {ch.horizon} had "
                "been made (sweepq's change log says so): a write-ahead log was cut short or deleted"
            )
        if ch.deferred > reached:
            lost = True
            self._access.found.append(
                f"the store lost deferred writes it had made: its redo log gave back writes up to {reached}, "
                f"but write {ch.deferred} had been made (sweepq's change log says so): the redo log was cut "
                "short, damaged or deleted"
            )
        if ch.problem:
            self._access.found.append(
                f"the change log is damaged ({ch.problem}); what it held after the damage is unknown"
            )
        complete = not ch.continued and ch.problem is None
        return Since(
            written=ch.written,
            moved=ch.moved,
            unlinked=frozenset(ch.unlinked),
            removed=frozenset(ch.removed),
            marks=ch.marks,
            lost_writes=lost,
            complete=complete,
            dropped=frozenset(ch.dropped),
            logged=ch.wal,
            redone=redone,
        )

    def _restore(self, families: list[str]) -> None:
        """After the key-value layer rebuilt damaged families: write again what this store
        holds in memory of them (its chains, its meta records), then tell its listeners, who
        hold the rest (messages, marks, definitions). Runs on a thread of its own."""
        ops: list[Op] = []
        with self._lock:
            if CF_CHAINS in families:
                ops += self._chains.records()
            if CF_META in families:
                ops.append((CF_META, b"format", _U32.pack(STORE_FORMAT)))
                ops.append((CF_META, b"next_id", _U64.pack(self._next_id)))
                ops += self._dicts.records()
            try:
                if ops:
                    self._access.write(ops)
            except StoreError as e:
                self._access.found.append(f"writing back the {', '.join(families)} records after damage failed: {e}")
        for listener in list(self._listeners):
            listener(list(families))

    def damage_log(self) -> list[str]:
        """What this store found damaged and set right since it opened (DamageLog)."""
        return self._access.damage_log()

    def on_damage(self, listener: Callable[[list[str]], None]) -> None:
        """Call ``listener(families)`` after damaged families were rebuilt (DamageLog)."""
        self._listeners.append(listener)

    def checkpoint(self) -> bytes | None:
        """The last checkpoint written (Checkpointing). :raises StoreDamageError: damaged."""
        try:
            return self._access.kv().read_side(CHECKPOINT)
        except KVError as e:
            raise store_error(e) from e

    def write_checkpoint(self, data: bytes) -> None:
        """Replace the checkpoint atomically and durably, then start the change log again
        (what it held is in the checkpoint now; every write it covers is synced first).
        :raises StoreError: not replaced."""
        try:
            self._access.kv().write_side(CHECKPOINT, data)
        except KVError as e:
            raise store_error(e) from e
        self._log.restart()

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
        only they held are gone. A family the old manifest named is kept (empty when nothing
        of it could be read), with the writes its logs held when the directory opens through
        that manifest (blobstore/repairing.py). Returns the names of the files moved.

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

    def _clear(self, wal: bool) -> None:
        """Empty the store but for its format record; what the change log said is void."""
        access = self._access
        ops: list[Op] = []
        for name in (CF_BLOBS, CF_MANIFESTS, CF_CHAINS, CF_MESSAGES, CF_MARKS, CF_OBJECTS):
            ops += [(name, k, None) for k, _v in access.items(name)]
        ops += [(CF_META, k, None) for k, _v in access.items(CF_META) if k != b"format"]
        access.write(ops)
        access.write([(CF_META, b"format", _U32.pack(STORE_FORMAT))])
        with contextlib.suppress(KVError):
            kv = access.kv()
            kv.start_log(changes.NAME, changes.start(wal, kv.files(), {}))

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
        dict_id = self._dicts.for_records(scope, records) if scope is not None and self.use_dictionaries else 0
        out: list[BlobInfo] = []
        lo = 0
        for hi in ends:
            out.append(self._write_blob(owner, records[lo:hi], ids[lo:hi], dict_id))
            lo = hi
        self.stats.seconds_writing += time.perf_counter() - t0
        return out

    def _write_blob(self, owner: bytes, part: Sequence[bytes], part_ids: Sequence[bytes], dict_id: int) -> BlobInfo:
        """One pending blob of ``part``, with its manifest, under the next blob id."""
        raw = fmt.frame(list(part))
        body = self.codec.compress(raw, dict_id)
        check = fmt.ids_check(part_ids)
        manifest = self.codec.compress(_U32.pack(len(part) + 1) + fmt.frame([owner, *part_ids]))
        with self._lock:
            blob_id = self._next_id
            self._next_id += 1
        value = fmt.pack(fmt.CODEC_ZSTD, blob_id, owner, check, dict_id, len(part), len(raw), body)
        key = _U64.pack(blob_id)
        self._access.write(
            [(CF_BLOBS, key, value), (CF_MANIFESTS, key, manifest), (CF_META, b"next_id", _U64.pack(blob_id + 1))]
        )
        self._dicts.used(blob_id, dict_id)
        self.stats.blobs_written += 1
        self.stats.bytes_raw_written += len(raw)
        self.stats.bytes_compressed_written += len(value)
        return BlobInfo(blob_id, len(part), len(raw), len(value), dict_id, check)

    def delete_pending(self, blob_ids: Sequence[int]) -> None:
        """Remove blobs that never made it into a chain (an aborted sweep), atomically.

        :raises StoreError: nothing was deleted; try again later (the next open also does)."""
        if not blob_ids:
            return
        with self._lock:
            ops: list[Op] = []
            for b in blob_ids:
                ops += self._delete_blob_ops(b)
            detached = set(blob_ids) & set(self._detached)
            ops += [(CF_QUARANTINE, _detached_key(b), None) for b in sorted(detached)]
            self._access.write(ops)
            self._forget_blobs(blob_ids)
            self._detached = [b for b in self._detached if b not in detached]

    def link(self, chain: bytes, blob_ids: Sequence[int], at_head: bool, moved: Sequence[bytes] = ()) -> None:
        """Link pending blobs into ``chain`` (at its head or tail, in the order given), and
        delete the message keys ``moved`` (records the blobs now hold), atomically.

        :raises StoreError: nothing was linked or deleted; the blobs are still pending."""
        with self._lock:
            ids = self._chains.get(chain)
            ids = [*blob_ids, *ids] if at_head else [*ids, *blob_ids]
            ops: list[Op] = [chain_record(chain, ids)]
            ops += [(CF_MESSAGES, k, None) for k in moved]
            horizon = self._access.write(ops)
            self._chains.set(chain, ids)
        self._log.note(horizon, moved=(blob_ids, moved), chains=[(chain, "head" if at_head else "tail", blob_ids)])

    def unlink(self, chain: bytes, blob_id: int, restore: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Take ``blob_id`` out of ``chain`` and delete it (with its marks), writing the
        records that leave it under their message keys (``restore``), in one atomic write.

        :raises StoreError: nothing changed."""
        self._remove_from_chain(chain, blob_id, delete=True, restore=restore)

    def detach(self, chain: bytes, blob_id: int) -> None:
        """Take ``blob_id`` out of ``chain`` but keep the blob (a damaged one, for inspection),
        marked as detached in the same write: the next open keeps it, not taking it for a
        pending blob, until its caller named what it held (:meth:`detached`).

        :raises StoreError: nothing changed."""
        self._remove_from_chain(chain, blob_id, delete=False)

    def detached(self) -> list[int]:
        """Blobs an earlier run took out of their chains as damaged (:meth:`detach`) that this
        open found still kept (DamageLog); :meth:`delete_pending` deletes them."""
        with self._lock:
            return list(self._detached)

    def _remove_from_chain(
        self, chain: bytes, blob_id: int, delete: bool, restore: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        with self._lock:
            ids = [b for b in self._chains.get(chain) if b != blob_id]
            ops: list[Op] = [chain_record(chain, ids)]
            if delete:
                ops += self._delete_blob_ops(blob_id)
            else:
                ops.append((CF_QUARANTINE, _detached_key(blob_id), chain))
            ops += [(CF_MESSAGES, k, v) for k, v in restore]
            horizon = self._access.write(ops)
            if delete:
                self._forget_blobs([blob_id])
            self._chains.set(chain, ids)
        self._log.note(horizon, puts=restore, unlinked=[blob_id] if delete else (), chains=[(chain, "out", [blob_id])])

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

    def write_message(self, key: bytes, value: bytes | None) -> None:
        """``write_messages(((key, value),))``, or ``write_messages((), (key,))`` when ``value``
        is None: one record written or deleted, what every durable put and get outside a unit
        of work writes. A lone writer writes it with no tuples built and no group to take
        apart (issue 31); one that meets other writers joins their group as write_messages does.

        :raises StoreError: nothing was written. Thread-safe."""
        self._message_writer(key, value)

    def message_writer(self) -> Callable[[bytes, bytes | None], object]:
        """:meth:`write_message` as one callable, bound once (a ``functools.partial`` of the
        write group's ``alone_or_join``): the journal keeps it, so a durable put or get
        reaches the change log's write of its one record with no call of the store's between
        (issue 31)."""
        return self._message_writer

    def _write_alone(self, write: MessageWrite) -> None:
        """The write of a caller that found nobody writing or waiting (the :class:`WriteGroup`'s
        ``alone``). One record written or deleted, no marks (every durable put and get outside
        a unit of work): the write and its change-log record in one call of the key-value
        layer (``KV.write_one``), no lock taken (issue 31); anything else as a group of one."""
        puts, deletes, marks = write
        if marks or len(puts) + len(deletes) != 1:
            self._write_group([write])
            return
        if puts:
            self._log.write_message(*puts[0])
        else:
            self._log.write_message(deletes[0], None)

    def _write_group(self, writes: list[MessageWrite]) -> None:
        """One atomic write of every caller's changes, in their order, and one change-log
        record of it (the :class:`WriteGroup`'s ``write``: never two at once)."""
        ops: list[Op] = []
        marked = False
        for puts, deletes, marks in writes:
            ops += _message_ops(puts, deletes)
            if marks:
                marked = True
                ops += [(CF_MARKS, mark_key(blob_id, pos), value) for blob_id, pos, value in marks]
        whole = self._log.whole
        if not marked:
            horizon = self._access.write(ops, whole)
        else:
            with self._lock:  # the marks known in memory change with the write, not between
                horizon = self._access.write(ops, whole)
                for _puts, _deletes, marks in writes:
                    self._marks.apply(marks)
        if len(writes) == 1:
            puts, deletes, marks = writes[0]
            self._log.append(changes.write(horizon, puts, deletes, marks=marks, whole=whole))
        else:
            self._log.append(changes.write_group(horizon, writes, whole))

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
        kv = self._access.kv()
        if kv.unproven(CF_MESSAGES, prefix):
            raise StoreDamageError(f"message records under {prefix!r} were lost to damage", "messages")
        try:
            yield from kv.chunks(CF_MESSAGES, prefix, size)
        except KVError as e:
            raise store_error(e) from e
        if self._access.kv().unproven(CF_MESSAGES, prefix):
            raise StoreDamageError(f"message records under {prefix!r} were lost to damage", "messages")

    def salvage_messages(self, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> Salvage:
        """After :meth:`messages` found damage (Salvaging): the records under ``prefix`` that
        can still be proven, and the keys and ranges that cannot; ``probes`` are message
        keys (under any prefix) known to the caller, read one by one where damage hides
        them. The family is rebuilt without the damaged table files.
        :raises StoreError: unreadable at all. Thread-safe."""
        return self._access.salvage(CF_MESSAGES, prefix, probes)

    def quarantine_messages(self, keys: Sequence[bytes]) -> None:
        """Move the records under ``keys`` to the quarantine (Salvaging), atomically: kept for
        inspection, never read as data. :raises StoreError: nothing moved. Thread-safe."""
        ops: list[Op] = []
        for key in keys:
            try:
                value = self._access.get(CF_MESSAGES, key)
            except StoreDamageError:
                value = None  # unreadable: it goes all the same
            if value is not None:
                ops.append((CF_QUARANTINE, CF_MESSAGES.encode() + b"\0" + key, value))
            ops.append((CF_MESSAGES, key, None))
        if ops:
            self._log.note(self._access.write(ops), deletes=keys)

    def marks(self, blob_id: int) -> dict[int, bytes]:
        """The marks on the records of one blob: position -> value; past damage, those that
        can be proven (the damage log says what was lost).

        :raises StoreError: unreadable. Thread-safe."""
        if not self._marks.any(blob_id):
            return {}
        return {position(k): v for k, v in self._access.proven(CF_MARKS, blob_prefix(blob_id))}

    def objects(self) -> dict[bytes, bytes]:
        """Every named object (definition); past damage, those that can be proven.
        :raises StoreError: unreadable. Thread-safe."""
        return dict(self._access.proven(CF_OBJECTS))

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
                ops += [(CF_MESSAGES, k, None) for k, _v in self._access.items(CF_MESSAGES, drop_messages)]
            dropped: list[int] = []
            for chain_name in drop_chains:
                dropped += self._drop_chain_ops(chain_name, ops)
            horizon = self._access.write(ops)
            self._dropped(drop_chains, dropped)
        if drop_messages is not None or drop_chains:
            self._log.note(
                horizon, dropped=drop_messages, unlinked=dropped, chains=[(c, "drop", ()) for c in drop_chains]
            )

    def sync(self) -> None:
        """Make every write so far survive a power loss (one fsync of the log; the GIL is
        released meanwhile). :raises StoreError: it failed. Thread-safe."""
        self._access.sync()

    def drop_chain(self, chain: bytes) -> None:
        """Delete a chain and all its blobs (a queue deleted with purge), atomically.

        :raises StoreError: nothing changed."""
        with self._lock:
            ops: list[Op] = []
            ids = self._drop_chain_ops(chain, ops)
            horizon = self._access.write(ops)
            self._dropped([chain], ids)
        self._log.note(horizon, unlinked=ids, chains=[(chain, "drop", ())])

    def _drop_chain_ops(self, chain: bytes, ops: list[Op]) -> list[int]:
        """Add to ``ops`` the writes that drop ``chain`` with its blobs and with the blobs a
        get detached from it as damaged (and their marks): a deleted queue's messages are not
        lost, and the next open must not name them so (:meth:`detached`). The blob ids they
        delete. Called with ``_lock`` held."""
        detached = [_detached_id(k) for k, owner in self._access.proven(CF_QUARANTINE, DETACHED) if owner == chain]
        ids = [*self._chains.get(chain), *detached]
        ops.append(chain_record(chain, ()))
        for b in ids:
            ops += self._delete_blob_ops(b)
        ops += [(CF_QUARANTINE, _detached_key(b), None) for b in detached]
        return ids

    def _dropped(self, chains: Sequence[bytes], blob_ids: Sequence[int]) -> None:
        """The bookkeeping of a write of :meth:`_drop_chain_ops` that succeeded."""
        self._forget_blobs(blob_ids)
        gone = set(blob_ids)
        self._detached = [b for b in self._detached if b not in gone]
        for name in chains:
            self._chains.set(name, ())

    def _delete_blob_ops(self, blob_id: int) -> list[Op]:
        """The writes that delete a blob, its marks, and its dictionary if it was the last
        user (called with ``_lock`` held; bookkeeping changes only once the write succeeded)."""
        key = _U64.pack(blob_id)
        ops: list[Op] = [(CF_BLOBS, key, None), (CF_MANIFESTS, key, None)]
        return ops + self._marks.delete_ops(blob_id) + self._dicts.delete_ops(blob_id)

    def _forget_blobs(self, blob_ids: Sequence[int]) -> None:
        for b in blob_ids:
            self._marks.forget(b)
            self._dicts.forget(b)

    # -- reading (blobstore/reading.py) ------------------------------------------------------

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        """The records of one blob, verified against its key and, when given, the owner and
        the ids' check it was linked with.

        :raises BlobCorruptError: the blob is damaged, missing or not the one expected; it
            names what the blob held. :raises StoreError: the read itself failed (transient).
        """
        return self._reader.read(blob_id, owner, check)

    def read_frame(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> Frame:
        """See :meth:`Store.read_frame`."""
        return self._reader.read_frame(blob_id, owner, check)

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        """(owner, record ids) of a blob, from its separately stored manifest; (b"?", []) when
        there is none. :raises StoreError: it cannot be read."""
        return self._reader.manifest(blob_id)

    def blob_header(self, blob_id: int) -> fmt.Header:
        """The verified header of a stored blob (for inspection)."""
        return self._reader.header(blob_id)

    def raw_blob(self, blob_id: int) -> bytes | None:
        """A blob's stored bytes, unverified (inspection and fault injection)."""
        return self._access.get(CF_BLOBS, _U64.pack(blob_id))

    def replace_raw_blob(self, blob_id: int, value: bytes) -> None:
        """Overwrite a blob's stored bytes as they are (fault injection in tests: a flipped
        bit, or another blob's bytes under this key)."""
        self._access.write([(CF_BLOBS, _U64.pack(blob_id), value)])

    def chain(self, name: bytes) -> list[int]:
        """The blob ids of one chain, in order (from memory: no I/O)."""
        return self._chains.get(name)

    def chains(self) -> dict[bytes, list[int]]:
        return self._chains.all()

    def dictionaries(self) -> dict[bytes, int]:
        """Scope -> the zstd dictionary its blobs are written with (inspection)."""
        return self._dicts.by_scope()

    def dictionary_samples(self, scope: bytes) -> list[bytes]:
        """The records kept to train ``scope``'s dictionary, not yet trained (inspection)."""
        return self._dicts.samples(scope)

    def pending(self) -> list[int]:
        """Blob ids that are in no chain. (Listed from the manifests, written with each blob in
        the same write: small, so the scan does not read every blob, nor trip on a damaged one.)"""
        linked = self._chains.linked()
        return [_U64.unpack(k)[0] for k, _v in self._access.items(CF_MANIFESTS) if _U64.unpack(k)[0] not in linked]

    def memory(self) -> dict[str, int]:
        """Bytes the store holds in memory (memtables, block cache, ...), by kind, and under
        ``MEMORY_HELD`` what a memory budget counts."""
        try:
            mem = self._access.kv().memory()
        except (KVError, StoreError):
            return {MEMORY_HELD: 0}
        mem.setdefault(MEMORY_HELD, sum(mem.values()))
        return mem

    # -- lifetime ---------------------------------------------------------------------------

    def flush(self) -> None:
        """Write what is buffered in memory to the store's files (inspection and tests).

        :raises StoreError: it failed (damage is set right at the next call)."""
        self._access.flush()

    def compact(self) -> None:
        """Make RocksDB rewrite every table now (tests: damage after a compaction).

        :raises StoreError: it failed (damage is set right at the next call)."""
        self._access.compact()

    def close(self) -> None:
        """Close the database, releasing the directory even when closing fails; a
        temporary store is removed.

        :raises StoreError: what was buffered could not be written at close (a full disk);
            the log keeps every write, so the next open has them."""
        kv = self._access.current()
        if kv is None:
            return
        try:
            kv.close()  # first: a rewrite after damage still at work finishes through this store
        except KVError as e:
            raise StoreError(f"{e}; the store is released, and its log keeps every write made") from e
        finally:
            self._access.detach()
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


def _message_ops(puts: Sequence[tuple[bytes, bytes]], deletes: Sequence[bytes]) -> list[Op]:
    """The key-value operations of message records written (``puts``) and deleted."""
    ops: list[Op] = [(CF_MESSAGES, k, v) for k, v in puts]
    ops += [(CF_MESSAGES, k, None) for k in deletes]
    return ops


def _check_option(name: str, value, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise StoreError(f"store option {name}={value!r}: use an integer >= {low}")
