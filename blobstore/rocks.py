"""RocksDB under the blob store, through rocksdict: the one place for its options and its
error texts (blobstore/kv.py holds the families).

Durability: a write is in the write-ahead log (the OS has it) when :meth:`RocksKV.write`
returns, so it survives a crash of the process; :meth:`RocksKV.sync` makes every write
made so far survive a power loss (one sync of the log, and at the same time one of the
change log: group commit, see engine/durable/journal.py). ``wal=False`` writes no log at all (sync policy "none"):
then a crash loses the writes since the last flush, and ``atomic_flush`` keeps what is
left consistent across the column families.

Memory is bounded (issue: RocksDB's memtables grew to 123 MB beside 36 MB of messages): one
``WriteBufferManager`` caps the memtables of every column family together
(``write_buffer_bytes``, 16 MiB by default) and one LRU ``Cache`` holds the data blocks
(``block_cache_bytes``, 8 MiB); :meth:`RocksKV.memory` reports both.

**Failures while open** (docs/damage.md). RocksDB stops accepting writes for good after a
failed write or a compaction that met damage (its "background error"); nothing but a
reopen clears that. So a failed write marks the database *broken*; it is reopened at once
and the write tried again (every write here is idempotent), or, when the reopen fails too
(a full disk), by the next call, at most every :data:`RETRY_SECONDS`: calls fail fast
meanwhile, and the first after space is freed works. When the failure was damage, the
reopen also *heals*: every family holding a damaged table file is copied, record by
record, into a new generation of itself (named ``family.N``), each value proven by
checksum-verified reads only (blobstore/heal.py: RocksDB never parses a block it cannot
verify); the keys known to have been in a damaged range are named in ``quarantine``;
the old generation is dropped with its files. A rebuild cut short by a crash leaves a newer
generation beside the old one, which the next open drops. Listeners then rewrite what they
hold in memory of the families rebuilt (:meth:`RocksKV.listen`). While a reopen runs every
other call waits (a gate: many callers at once, or the reopen alone).

**Deferred message writes** (``defer``, the engine's sync="os"): a lone write of one message
record is not written to RocksDB when made but to the redo log (blobstore/redolog.py), one
append, and kept in memory (its last state per key: reads see it) until a *drain* writes the
states of up to :data:`~sweepq.blobstore.redolog.DRAIN_WRITES` writes at once. A drain comes
before every other write, scan, flush, sync of the files, the change log's start and the
close; the open replays into RocksDB what the redo log has past the last drain. A store that
defers writes its side logs (the redo log and the change log), which it never syncs after a
call, through a map of their ends (blobstore/sidelog.py: ``mapped``).

Every method is thread-safe.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from itertools import chain, islice
from typing import Any

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

from . import changes, guard, heal, redolog
from .files import (
    check_manifest,
    claim,
    make_private,
    mend_logs,
    read_side_file,
    release,
    unheld,
    write_side_file,
)
from .kv import (
    CF_BLOBS,
    CF_MANIFESTS,
    CF_MESSAGES,
    CF_META,
    CF_QUARANTINE,
    CFS,
    DEFAULT_BLOCK_CACHE_BYTES,
    DEFAULT_WRITE_BUFFER_BYTES,
    KVCorruption,
    KVError,
    Listener,
    Op,
)
from .rocksfiles import first_bad_header
from .sidelog import SideLog

# The store options that are RocksDB's (the rest are the blob store's own).
ROCKSDB_OPTIONS = frozenset({"write_buffer_bytes", "block_cache_bytes"})
# A sweep deletes the records of the run it moved into blobs, and every get deletes one: a
# table file of the messages' family with at least DELETES_TO_COMPACT deletions among any
# DELETION_WINDOW entries in a row is compacted by RocksDB in the background (its
# CompactOnDeletionCollector). Left in level 0, such tombstones sat above the dead records
# and every scan stepped over both: a reopen of 1,000,000 messages, half swept, spent about
# 0.2 s of its 1 s on them (docs/performance.md, "Reopening a million messages").
DELETION_WINDOW = 1024
DELETES_TO_COMPACT = 512
RETRY_SECONDS = 0.2  # a broken database is reopened at most this often while reopening fails
_DRAIN_WRITES = redolog.DRAIN_WRITES  # the compiled form's C copies (rocks.pxd types them)
_DRAIN_BYTES = redolog.DRAIN_BYTES
_REDO_LIMIT = redolog.LIMIT
_COPY_BATCH = 512  # records per write while a family is copied into its new generation


def _db_options(
    write_buffer_bytes: int, cache: Cache, wal: bool, compactions: bool
) -> tuple[Options, Callable[[str], Options]]:
    manager = WriteBufferManager(write_buffer_bytes, False)

    def base() -> Options:
        o = Options(raw_mode=True)
        o.set_write_buffer_manager(manager)
        # Each family's memtable is a share of the cap, and at most two exist per family.
        o.set_write_buffer_size(max(1 << 20, write_buffer_bytes // 4))
        o.set_max_write_buffer_number(2)
        o.set_disable_auto_compactions(not compactions)
        table = BlockBasedOptions()
        table.set_block_cache(cache)
        o.set_block_based_table_factory(table)
        return o

    db = base()
    db.create_if_missing(True)
    db.create_missing_column_families(True)
    # RocksDB starts a new info log at every open, and a reopen after a failure is an open:
    # keep few and small ones, so that a full disk is not filled further by them.
    db.set_keep_log_file_num(2)
    db.set_max_log_file_size(1 << 20)
    # A torn last write of the log (a crash mid-write, or a truncated file) is dropped and
    # the store opens at the last whole write, instead of refusing to open.
    db.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
    if not wal:
        db.set_atomic_flush(True)

    def family(name: str) -> Options:
        o = base()
        if _family(name) in (CF_BLOBS, CF_MESSAGES, CF_QUARANTINE):
            # Blobs are zstd-compressed already. Message records stay uncompressed so that a
            # damaged block can still be read past record by record (each has its own crc).
            o.set_compression_type(DBCompressionType.none())
        if _family(name) == CF_MESSAGES:
            o.add_compact_on_deletion_collector_factory(DELETION_WINDOW, DELETES_TO_COMPACT, 0.0)
        return o

    return db, family


def _family(name: str) -> str:
    """The family a column family name stands for ("messages.3" -> "messages")."""
    return name.split(".", 1)[0]


def _generation(name: str) -> int:
    _head, _, gen = name.partition(".")
    return int(gen) if gen.isdigit() else 0


class _Gate:
    """Many callers at once, or one alone: calls :meth:`enter` and :meth:`leave`; :meth:`alone`
    waits until every caller inside has left and keeps new ones out until it is done.

    The way in and out takes no lock (the hot path of every write, issue 31: two ``with`` of a
    lock cost a durable write about 5,000 instructions): a caller counts itself in by appending
    to :attr:`inside` and out by popping from it, each one call the GIL makes atomic, and
    looks at :attr:`shut` *after* counting itself in, while :meth:`alone` sets :attr:`shut`
    *before* it counts who is inside. So a caller that came in after that count sees the gate
    shut and backs out, and one that left after it wakes :meth:`alone` (which waits under
    the condition, so no wake-up is lost). Every caller goes through :meth:`enter` and
    :meth:`leave`, the one statement of that order (written out in the hot writes instead,
    they saved about 1,750 instructions a durable put+get: docs/durable-bench.md)."""

    __slots__ = ("_cond", "inside", "shut")

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self.inside: list[None] = []  # one item per caller inside
        self.shut = False

    def enter(self) -> None:
        self.inside.append(None)
        if self.shut:
            self._back_out()

    def _back_out(self) -> None:
        """A caller that counted itself in found the gate shut: out again, wait until it opens,
        and in again."""
        while True:
            self.leave()
            with self._cond:
                while self.shut:
                    self._cond.wait()
            self.inside.append(None)
            if not self.shut:
                return

    def leave(self) -> None:
        self.inside.pop()
        if self.shut:  # alone() may wait for this caller
            self._wake()

    def _wake(self) -> None:
        """Wake :meth:`alone`, which waits for the callers inside to leave."""
        with self._cond:
            self._cond.notify_all()

    @contextlib.contextmanager
    def alone(self):
        cond = self._cond
        with cond:
            while self.shut:  # another alone() first
                cond.wait()
            self.shut = True
            while self.inside:
                cond.wait()
        try:
            yield
        finally:
            with cond:
                self.shut = False
                cond.notify_all()


class _Hot:
    """The hot half of :class:`RocksKV`: the way in through the gate to an open database
    (:meth:`_enter`) and the lone write (:meth:`write_one`), every durable put and get (issue
    31). Compiled, it is a C type whose fields (rocks.pxd) these read without a look-up, and
    it calls the gate's ``enter`` and ``leave`` in C; :class:`RocksKV`, a normal class on it,
    holds the rest (its methods stay patchable) and sets these fields in its ``__init__``.

    Invariant of a store that defers (``_defer_log`` not None): every deferred write numbered
    past the last drain's is in the redo log and in ``_view`` (key -> (its number, its
    state)), or in ``_stuck`` while a drain writes it; one writer at a time defers (the
    store's write group: blobstore/group.py), so the numbers go up in the log's order."""

    def _enter(self: Any) -> None:  # Any: RocksKV, which holds the rest (a self must be a supertype)
        if self._broken is not None and not self._closed:
            self._recover()
        self._gate.enter()
        if self._db is None:
            self._gate.leave()
            raise self._unavailable()

    def write_one(self: Any, cf: str, key: bytes, value: bytes | None, log: str, whole: bool) -> int:  # Any: as _enter
        # Every lone durable put and get: write() of one change and append_log() written out
        # in one call (issue 31). A failure, or a database to reopen first, takes write() (its
        # reopen and retry: a write of a whole record is idempotent), then appends.
        redo = self._defer_log
        if redo is not None and self._broken is None and cf == CF_MESSAGES:
            if self._undrained >= _DRAIN_WRITES or self._view_bytes >= _DRAIN_BYTES:
                self._drain()  # :raises KVError: nothing of this write made
            number = self._deferred + 1
            self._view[key] = (number, value)  # before the number: a drain that takes the
            self._deferred = number  # number has the state (the interpreted form can switch here)
            self._undrained += 1
            self._view_bytes += len(key) + (0 if value is None else len(value))
            whole_record = changes.one(number, key, value, True)
            redo.append(whole_record)
            if redo.failed is None:
                record = changes.one(number, key, value, whole, True)
                (self._logs.get(log) or self._log(log)).append(record)
                self._redo_bytes += len(whole_record)
                if self._redo_bytes > _REDO_LIMIT:
                    self._restart_redo()
                return len(record)
            # The redo log takes no more records (a full disk) until it starts again: this
            # write, and the next ones, go to RocksDB's log as without defer (after a drain,
            # which has this one too: the write below makes it again).
        if self._view or self._stuck:
            self._drain()  # an older state of the key must not land after this write
        if self._broken is None and not self._read_only:
            self._enter()
            gate, db = self._gate, self._db
            assert db is not None  # open inside the gate (_enter)
            try:
                if value is None:
                    self._cf[cf].delete(key, self._wopts)
                else:
                    self._cf[cf].put(key, value, self._wopts)
                horizon = db.latest_sequence_number()
            except Exception as e:
                self._failed(e, f"write to {self.path} failed", True)
                horizon = -1
            finally:
                gate.leave()
            if horizon < 0:
                horizon = self.write(((cf, key, value),), whole)
            elif not whole and self._redo:
                self._owed()  # by its head: the next sync takes RocksDB's log too
        else:
            horizon = self.write(((cf, key, value),), whole)
        record = changes.one(horizon, key, value, whole)
        (self._logs.get(log) or self._log(log)).append(record)
        return len(record)


class RocksKV(_Hot):
    """RocksDB through rocksdict, in the layout of the module docstring.

    ``sync`` makes every write durable (fsync) before it returns; ``wal=False`` writes no
    log (see the module docstring). ``read_only`` opens for inspection beside nothing
    else. ``known``: what the caller recorded of the directory's files (:meth:`files`, at its
    last checkpoint; the horizon raised to the last write it knows of): an open that would
    destroy data, or that cannot reach that horizon, is told by it (blobstore/guard.py).
    ``claimed``: the caller's claim of the directory (:func:`~sweepq.blobstore.files.claim`),
    taken before it judged the directory, given back at close; without it the open claims.
    ``redo``: the change log holds the message writes whole (BlobStore's ``redo``), so
    :meth:`sync` takes RocksDB's log only after a write it cannot make again, and side logs
    are written in place over zeros kept ahead (a sync of them commits no filesystem journal,
    though each write over a zero page costs a few microseconds more than an append).
    ``defer``: lone writes of message records are deferred (see the module docstring); a
    store opened without it still replays what its redo log holds.
    Failures while open: see the module docstring."""

    def __init__(
        self,
        path: str,
        *,
        sync: bool = False,
        wal: bool = True,
        read_only: bool = False,
        write_buffer_bytes: int = DEFAULT_WRITE_BUFFER_BYTES,
        block_cache_bytes: int = DEFAULT_BLOCK_CACHE_BYTES,
        known: dict | None = None,
        claimed: str | None = None,
        redo: bool = False,
        defer: bool = False,
    ):
        self.path = path
        self._redo = redo
        self._known = known
        self._cache = Cache(block_cache_bytes)
        self.write_buffer_bytes = write_buffer_bytes
        self.block_cache_bytes = block_cache_bytes
        self._read_only = read_only
        self._wal = wal
        self._wopts = WriteOptions()
        self._wopts.sync = sync
        self._wopts.disable_wal = not wal  # type: ignore[method-assign, assignment]  # a property; the stub says method
        self._gate = _Gate()
        self._broken: KVError | None = None  # why the database must be reopened first
        self._heal: set[str] = set()  # families to rebuild at that reopen
        self._retry_at = 0.0
        self._listeners: list[Listener] = []
        self._restorers: list[threading.Thread] = []  # listeners at work (close waits for them)
        self._events: list[str] = []
        self._unproven: dict[str, tuple[list, list]] = {}  # family -> what its last rebuild could not prove
        self._wanted: dict[str, set[bytes]] = {}  # family -> keys a caller wants probed at its rebuild
        # Before anything in the directory is touched (``claimed``: the caller's, taken before it judged the directory).
        self._claim = None if read_only else claimed or claim(path)
        self._shadow = _shadow_of(path) if read_only else None
        self._db: Rdict | None = None
        self._closed = False
        self._cf: dict = {}
        self._h: dict = {}
        self._logs: dict[str, SideLog] = {}
        # Writes the change log cannot redo (not ``logged``, a rebuild's copy, a reopen), each
        # counted once it was made, and how many of them the last sync of RocksDB's log took:
        # while they differ, a sync takes RocksDB's log too (_sync). Counts under a lock, not a
        # flag a sync clears: a write that lands between a sync's look and its clear is kept.
        self._unlogged = 1  # the open itself
        self._wal_synced = 0
        self._counts = threading.Lock()
        self._syncer: ThreadPoolExecutor | None = None  # syncs the side logs beside RocksDB's log
        self._syncer_lock = threading.Lock()
        # Deferred writes (see _Hot): the redo log while this store defers, each deferred
        # key's (number, state) since the last drain, the states a drain is writing (or one
        # that failed left), the last number given, and what the next drain waits for.
        self._defer_log: SideLog | None = None
        self._mapped = defer and wal and not read_only  # its side logs written through a map (sidelog.py)
        self._view: dict[bytes, tuple[int, bytes | None]] = {}
        self._stuck: dict[bytes, tuple[int, bytes | None]] = {}
        self._deferred = 0
        self._undrained = 0
        self._view_bytes = 0
        self._redo_bytes = 0  # appended to the redo log since it started
        self._drain_lock = threading.Lock()  # one drain at a time: RocksDB takes them in order
        self._at_open = (0, 0)  # (horizon RocksDB opened at, last deferred write it then had)
        try:
            self._open()
            self._catch_up(defer)
        except BaseException as e:
            with contextlib.suppress(KVError):
                self._release()
            self._drop_shadow()
            if isinstance(e, KVError) or not isinstance(e, Exception):
                raise
            raise _open_error(e, path) from e
        if not read_only:
            make_private(path)

    # -- opening --------------------------------------------------------------------------------

    def _open(self, compactions: bool = True) -> None:
        """Open the database and map each family to its current generation (dropping the
        newer generations an interrupted rebuild left)."""
        self._owed()  # a reopen may have rebuilt families: their copies are no logged writes
        opts, family = _db_options(self.write_buffer_bytes, self._cache, self._wal, compactions)
        self._family_options = family  # a rebuilt family shares the memtable cap of the others
        where = self._shadow or self.path
        check_manifest(self.path)
        if self._read_only:
            bad = [n for n in os.listdir(self.path) if n.endswith(".log") and n[:-4].isdigit()]
            if any(first_bad_header(os.path.join(self.path, n)) is not None for n in bad):
                raise KVCorruption(
                    f"a write-ahead log of {self.path} is damaged: open it with a queue manager", self.path
                )
        else:
            lost = guard.before_open(self.path, self._known)  # first: a refused open changes nothing
            self._events += mend_logs(self.path) + lost
        existing = (
            {n for n in Rdict.list_cf(where, Options(raw_mode=True)) if n != "default"} if _is_db(where) else set()
        )
        names = existing | {f for f in CFS if not any(_family(n) == f for n in existing)}
        # In a fixed order: RocksDB numbers the families and their files as they are made, and
        # a set's order follows the process's hash seed (the damage fuzz replays by file name).
        cf_opts = {n: family(n) for n in sorted(names)}
        if self._read_only:
            db = unheld(lambda: Rdict(where, options=opts, column_families=cf_opts, access_type=AccessType.read_only()))
        else:
            db = self._open_checking_the_log(opts, cf_opts)
        current: dict[str, str] = {}
        for n in sorted(names, key=_generation):
            current.setdefault(_family(n), n)
        self._db = db
        self._names = current
        self._cf = {f: db.get_column_family(n) for f, n in current.items()}
        self._h = {f: db.get_column_family_handle(n) for f, n in current.items()}
        stale = [n for n in names if n not in current.values()]
        for n in stale if not self._read_only else ():
            db.drop_column_family(n)  # a rebuild that a crash cut short: the old one stands
            self._events.append(f"dropped {n}, the unfinished rebuild of the {_family(n)} records")

    def _open_checking_the_log(self, opts: Options, cf_opts: dict) -> Rdict:
        """Open so that damage in the write-ahead log is noticed, not silently cut away.

        The log is first replayed strictly (absolute consistency). If that finds damage and a
        replay up to the last whole write (point in time) opens, the damage was in the log:
        the writes after it cannot be trusted and are dropped, as RocksDB's point-in-time
        recovery does, and the damage log says so for the open's report."""
        access = AccessType.read_write()
        opts.set_wal_recovery_mode(DBRecoveryMode.absolute_consistency())
        try:
            return unheld(lambda: Rdict(self.path, options=opts, column_families=cf_opts, access_type=access))
        except Exception as e:
            if not _is_corruption(str(e)):
                raise
            first = e
        opts.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
        try:
            db = unheld(lambda: Rdict(self.path, options=opts, column_families=cf_opts, access_type=access))
        except Exception:
            raise _error(first, f"cannot open the store at {self.path}") from None
        self._events.append(
            f"the write-ahead log was damaged ({first}); the store was opened at the last whole write "
            "before the damage, and the writes after it are lost"
        )
        return db

    # -- deferred writes (blobstore/redolog.py) ----------------------------------------------------

    def _catch_up(self, defer: bool) -> None:
        """Replay into RocksDB the deferred writes its redo log has past the last drain, in one
        write, before anything reads the store (whatever the store's sync policy now), then
        start the log afresh when this store defers; read-only, hold them in memory instead
        (reads see them). :raises KVError: the replay or the log's start failed."""
        log = SideLog(self.path, redolog.NAME, mapped=self._mapped)
        kept = False
        try:
            horizon = self.horizon()
            applied = redolog.applied(
                self._call(
                    lambda: self._cf[CF_META].get(redolog.APPLIED), lambda: "reading the redo mark failed", False
                )
            )
            records, _why = log.read()  # damage ends the replay: the change log names what it took
            state, reached = redolog.replay(records, applied)
            if state and self._read_only:
                self._view = {key: (reached, value) for key, value in state}
            elif state:
                self.write([*((CF_MESSAGES, key, value) for key, value in state), redolog.applied_op(reached)])
            self._at_open = (horizon, reached)
            self._deferred = reached
            if defer and self._wal and not self._read_only:
                log.start(redolog.start(reached))
                self._defer_log, kept = log, True
        finally:
            if not kept:
                log.close()

    def _drain(self) -> None:
        """Write the deferred writes' last states to RocksDB, with the number of the last of them
        (redolog.APPLIED), in one write. :raises KVError: not written (they stay, and the next
        drain writes them)."""
        with self._drain_lock:
            view, self._view = self._view, {}  # at once (the GIL): a write meanwhile goes to the next
            self._undrained = 0
            self._view_bytes = 0
            stuck = self._stuck  # what a drain that failed left, older than view
            if stuck:
                stuck.update(view)
                view = stuck
            if not view:
                return
            self._stuck = view  # reads see it until it is written
            last = max(number for number, _state in view.values())
            ops: list[Op] = [(CF_MESSAGES, key, state) for key, (_number, state) in view.items()]
            ops.append(redolog.applied_op(last))
            horizon = self._write_retrying(ops)
            self._stuck = {}
            # Said in the change log: RocksDB's files must reach it (blobstore/guard.py), once
            # the redo log that holds its writes too starts again.
            self.append_log(changes.NAME, changes.write(horizon))

    def _restart_redo(self) -> None:
        """Start the redo log again (past redolog.LIMIT, or with the change log): after a drain
        made with its appends held, so that it drops no write RocksDB does not have. The numbers
        go on (the change log's V records keep naming writes). One that fails leaves the old
        log, which only grows."""
        redo = self._defer_log
        if redo is not None:
            with contextlib.suppress(KVError):
                redo.start(redolog.start(self._deferred), self._drain)
                self._redo_bytes = 0

    def _drained(self) -> None:
        """Drain first when anything is deferred (a write, scan or sync that must come after it)."""
        if (self._view or self._stuck) and not self._read_only:
            self._drain()

    def at_open(self) -> tuple[int, int]:
        """(RocksDB's horizon when it opened, before the redo log's replay; the number of the
        last deferred write the store had after it): what the change log's records are judged
        against (blobstore/store.py)."""
        return self._at_open

    @staticmethod
    def column_families(path: str) -> set[str]:
        """The families of an existing RocksDB directory. :raises KVError: not one."""
        check_manifest(path)
        try:
            return {_family(n) for n in Rdict.list_cf(path, Options(raw_mode=True))}
        except Exception as e:
            raise _open_error(e, path) from e

    # -- every call goes through the gate ---------------------------------------------------------

    def _unavailable(self) -> KVError:
        """Why a call cannot reach the database: closed, or not reopened yet."""
        return KVError(
            f"the store at {self.path} is closed" if self._closed else f"the store at {self.path} is unavailable"
        )

    def _failed(self, e: Exception, what: str, write: bool) -> KVError:
        """Classify a RocksDB failure; a failed write, or damage, breaks the database until
        the next call reopens it (RocksDB accepts no write after either)."""
        err = _error(e, what)
        if self._read_only:
            return err
        if isinstance(err, KVCorruption):
            self._heal |= self._families_of(str(e))
            self._broken = err
        elif write:
            self._broken = err
        return err

    def _families_of(self, text: str) -> set[str]:
        """The families holding the table files an error names (every family when it names none)."""
        numbers = {int(n) for n in re.findall(r"(\d+)\.sst", text)}
        if not numbers:
            return set(CFS) - {CF_QUARANTINE}
        found = set()
        for fam, cf in list(self._cf.items()):
            try:
                listing = cf.property_value("rocksdb.sstables") or ""
            except Exception:
                continue
            if numbers & {int(n) for n in re.findall(r"^\s*(\d+):", listing, re.M)}:
                found.add(fam)
        return found or set(CFS) - {CF_QUARANTINE}

    def _recover(self) -> None:
        """Reopen a broken database (and heal the damaged families), alone; rate-limited.

        :raises KVError: it cannot be reopened yet (the calls fail until it can)."""
        with self._gate.alone():
            broken = self._broken
            if broken is None or self._closed:
                return  # another caller did it
            if time.monotonic() < self._retry_at:
                raise KVError(f"the store at {self.path} is unavailable until it can be reopened ({broken})")
            healed: list[str] = []
            try:
                with contextlib.suppress(KVError):
                    self._release()  # a database that failed may fail to close: it is released all the same
                self._open(compactions=not self._heal)
                if self._heal:
                    healed = self._rebuild(sorted(self._heal))
                    self._set_compactions(True)
            except Exception as e:
                self._retry_at = time.monotonic() + RETRY_SECONDS
                with contextlib.suppress(Exception):
                    self._release()
                raise KVError(f"reopening the store at {self.path} after a failure ({broken}) failed: {e}") from e
            self._broken = None
            self._heal = set()
            self._events.append(f"reopened after: {broken}")
        if healed and self._listeners:
            t = threading.Thread(target=self._tell, args=(healed,), name="sweepq-restore", daemon=True)
            self._restorers = [*(r for r in self._restorers if r.is_alive()), t]
            t.start()

    def _tell(self, healed: list[str]) -> None:
        for listener in list(self._listeners):
            listener(healed)

    def _copy(self, steps, h, aside, fam: str) -> tuple[int, list, list]:
        """Write the proven records of a :func:`heal.prove` run under ``h`` in batches, the
        damaged ones to the quarantine (``aside``); return (records copied, damaged, gaps).
        The damaged records' bytes are kept for the messages family only (its caller can
        prove them by their own checksum); of the others, their keys."""
        copied, damaged, gaps = 0, [], []
        wb, n = WriteBatch(raw_mode=True), 0
        for kind, a, b in steps:
            if kind == heal.PROVEN:
                wb.put(a, b, h)
                copied += 1
            elif kind == heal.DAMAGED:
                if aside is not None:
                    wb.put(fam.encode() + b"\0" + a, b or b"", aside)
                damaged.append((a, b if fam == CF_MESSAGES else None))
            else:
                gaps.append((a, b))
            n += 1
            if n >= _COPY_BATCH:
                self._db.write(wb, self._wopts)  # type: ignore[union-attr]  # open inside the gate
                wb, n = WriteBatch(raw_mode=True), 0
        if n:
            self._db.write(wb, self._wopts)  # type: ignore[union-attr]  # open inside the gate
        return copied, damaged, gaps

    def _probes(self, fam: str) -> set[bytes]:
        """Keys of ``fam`` known from elsewhere, to read one by one where its scan had to step
        over damage: a blob's key is its manifest's and the other way round; keys a caller
        named (:meth:`salvage`)."""
        twin = {CF_BLOBS: CF_MANIFESTS, CF_MANIFESTS: CF_BLOBS}.get(fam)
        keys = set(self._wanted.pop(fam, ()))
        if twin is not None:
            keys |= {k for kind, k, _v in heal.scan(self._cf[twin], b"") if kind == heal.PROVEN}
        return keys

    def _set_compactions(self, on: bool) -> None:
        for cf in self._cf.values():
            cf.set_options({"disable_auto_compactions": "false" if on else "true"})

    # -- healing ---------------------------------------------------------------------------------

    def _rebuild(self, families: list[str]) -> list[str]:
        """Copy each family into a new generation of itself, proving every value; drop the old."""
        done = []
        for fam in families:
            old = self._names[fam]
            new = f"{fam}.{_generation(old) + 1}"
            cf = self._db.create_column_family(new, self._family_options(new))  # type: ignore[union-attr]  # open
            h = self._db.get_column_family_handle(new)  # type: ignore[union-attr]  # open
            aside = self._h[CF_QUARANTINE] if fam != CF_QUARANTINE else None
            steps = heal.prove(self._cf[fam], b"", self._probes(fam))
            copied, damaged, gaps = self._copy(steps, h, aside, fam)
            self._cf.pop(fam, None)
            self._h.pop(fam, None)
            cf.flush()  # the copy on disk before the old generation goes
            self._db.drop_column_family(old)  # type: ignore[union-attr]  # open
            self._names[fam] = new
            self._cf[fam] = cf
            self._h[fam] = h
            self._unproven[fam] = (damaged, gaps)
            self._events.append(
                f"the {fam} records were damaged: rebuilt from {copied} proven record(s); "
                f"{len(damaged)} could not be proven (quarantined) and {len(gaps)} unreadable range(s) were lost"
            )
            done.append(fam)
        return done

    # -- the KV protocol ---------------------------------------------------------------------------

    def _call(self, work: Callable[[], object], what: Callable[[], str], write: bool):
        """Run ``work`` inside the gate; a RocksDB failure becomes a KVError (and may break
        the database, see :meth:`_failed`). ``what`` names the call, built only on failure."""
        self._enter()
        try:
            return work()
        except Exception as e:
            err = self._failed(e, what(), write)
        finally:
            self._gate.leave()
        raise err

    def get(self, cf: str, key: bytes) -> bytes | None:
        if cf == CF_MESSAGES and (self._view or self._stuck):
            held = self._view.get(key) or self._stuck.get(key)
            if held is not None:
                return held[1]
        self._enter()  # written out, not through _call: the hot path of every blob read
        try:
            return self._cf[cf].get(key)
        except Exception as e:
            err = self._failed(e, f"reading {cf} key {key.hex()} failed", False)
        finally:
            self._gate.leave()
        raise err

    def items(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        self._drained()
        return self._call(lambda: self._items(cf, prefix), lambda: f"scanning {cf} failed", False)

    def chunks(self, cf: str, prefix: bytes, size: int) -> Iterator[list[tuple[bytes, bytes]]]:
        self._drained()
        self._enter()  # left when the scan ends or its taker drops it (the generator's close)
        try:
            scan = self._scan(cf, prefix, size)
            while True:
                err = None
                try:
                    part = next(scan, None)
                except Exception as e:
                    err = self._failed(e, f"scanning {cf} failed", False)
                if err is not None:
                    # Raised outside the handler, as _call does: the RocksDB error's traceback
                    # would keep the scan's iterators, and with them the database, open.
                    raise err
                if part is None:
                    return
                yield part
        finally:
            self._gate.leave()

    def _items(self, cf: str, prefix: bytes) -> list[tuple[bytes, bytes]]:
        return list(chain.from_iterable(self._scan(cf, prefix, 1 << 20)))

    def _scan(self, cf: str, prefix: bytes, size: int) -> Iterator[list[tuple[bytes, bytes]]]:
        # rocksdict's items() is the fast scan, but it ends silently at a damaged block: a
        # checked iterator then looks just past the last key it gave, where its status
        # says whether the scan really ended or was cut short.
        upper = _successor(prefix)
        ro = ReadOptions()
        # A scan reads each block once: keeping them would evict the blocks the gets use (and
        # a reopen's scan of a million records spent a tenth of its time filling the cache).
        ro.fill_cache(False)  # type: ignore[call-arg]  # rocksdict 0.3.29's stub omits its argument
        if upper is not None:  # RocksDB stops at the bound itself: no prefix test per key here
            ro.set_iterate_upper_bound(upper)
        items = self._cf[cf].items(from_key=prefix, read_opt=ro)
        if cf == CF_MESSAGES and self._view:  # read-only: the deferred writes the open found
            items = iter(_overlaid(items, self._view, prefix))
        last = None
        while part := list(islice(items, size)):
            last = part[-1][0]
            yield part
        it = self._cf[cf].iter(ro)
        if last is None:
            it.seek(prefix)
        else:
            it.seek(last)
            if it.valid():
                it.next()
        it.status()

    def salvage(self, cf: str, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> tuple[list, list, list]:
        """See :meth:`KV.salvage`. A writable store rebuilds the family first (once per
        damage), so the damaged table files are gone when this returns."""
        self._drained()
        if not self._read_only:
            self._wanted.setdefault(cf, set()).update(probes)
            self._heal.add(cf)
            self._broken = self._broken or KVCorruption(f"damage found in the {cf} records", cf)
            with contextlib.suppress(KVError):
                self._recover()  # if it cannot, the proof below runs over the damaged files
        return self._call(lambda: self._salvaged(cf, prefix, probes), lambda: f"salvaging {cf} failed", False)

    def _salvaged(self, cf: str, prefix: bytes, probes: Sequence[bytes]) -> tuple[list, list, list]:
        if cf in self._unproven and cf not in self._heal:  # rebuilt: what the rebuild could not prove
            damaged, gaps = self._unproven[cf]
            return (
                self._items(cf, prefix),
                [(k, v) for k, v in damaged if k.startswith(prefix)],
                [(lo, hi) for lo, hi in gaps if _overlaps(lo, hi, prefix)],
            )
        return heal.collect(heal.prove(self._cf[cf], prefix, probes))

    def write(self, ops: Sequence[Op], logged: bool = False) -> int:
        self._drained()
        horizon = self._write_retrying(ops)
        if not logged and self._redo:
            self._owed()  # made: a sync that starts from now on takes RocksDB's log
        return horizon

    def _write_retrying(self, ops: Sequence[Op]) -> int:
        """:meth:`_write`, and once more after a reopen when the write broke the database."""
        try:
            horizon = self._write(ops)
        except KVError as first:
            if self._broken is None or self._closed:
                raise
            first.__traceback__ = None  # its frames hold the database: the reopen must find it closed
            # The write broke the database (a full disk, damage met by a compaction): reopen
            # it now and try once more. Every write here is idempotent (puts and deletes of
            # whole records), so one that did reach the log before failing is harmless to repeat.
            try:
                self._recover()
            except KVError:
                raise first from None
            horizon = self._write(ops)
        return horizon

    def _owed(self) -> None:
        """Count a write the change log cannot make again (see ``_unlogged``)."""
        with self._counts:
            self._unlogged += 1

    def _write(self, ops: Sequence[Op]) -> int:
        # The hot path of every durable put and get: the apply is written out here.
        self._enter()
        gate, db = self._gate, self._db
        assert db is not None  # open inside the gate (_enter)
        try:
            if len(ops) == 1:
                # One change (a durable put or get): a single put or delete is atomic by
                # itself and skips building a WriteBatch.
                cf, key, value = ops[0]
                if value is None:
                    self._cf[cf].delete(key, self._wopts)
                else:
                    self._cf[cf].put(key, value, self._wopts)
            else:
                wb = WriteBatch(raw_mode=True)
                h = self._h
                for cf, key, value in ops:
                    if value is None:
                        wb.delete(key, h[cf])
                    else:
                        wb.put(key, value, h[cf])
                db.write(wb, self._wopts)
            return db.latest_sequence_number()
        except Exception as e:
            err = self._failed(e, f"write to {self.path} failed", True)
        finally:
            gate.leave()
        raise err

    def sync(self) -> None:
        self._drained()  # a deferred write is in the redo log, which is not synced: in RocksDB's, which is
        self._sync(False)

    def _sync(self, everything: bool) -> None:
        """:meth:`sync`; ``everything``: RocksDB's log too, whatever was written since."""
        # rocksdict releases the GIL while the log is synced: other threads go on writing,
        # and the next sync covers them all. The side logs (the change log) that took records
        # since their last sync are synced at the same time, on the syncing thread (two syncs
        # in turn cost a single producer under sync="commit" half its rate: issue 31).
        # RocksDB's log is synced only when a write since the last sync is one the change log
        # does not hold whole (``_unlogged``), or a log failed to take a record: every durable put
        # and get alone syncs one file, the change log, and the next open redoes from it what
        # a power loss took from RocksDB's unsynced log (blobstore/changes.py ``redo``).
        # (Synced in turn or together, a power loss during a sync may leave the change log a
        # write ahead of RocksDB's log, a write no call returned from.)
        logs = list(self._logs.values())
        with self._counts:
            unlogged = self._unlogged  # every one made so far: this sync of RocksDB's log takes them
            owed = unlogged != self._wal_synced
        failed = any(log.failed is not None for log in logs)
        wal = self._wal and (everything or not self._redo or owed or failed)
        logs = [log for log in logs if log.unsynced]
        if not wal:
            _sync_all(logs)  # the change log alone: on this thread, no hand-over
            return
        side = self._syncing().submit(_sync_all, logs) if logs else None
        try:
            self._sync_wal()
            with self._counts:
                self._wal_synced = max(self._wal_synced, unlogged)
        finally:
            if side is not None:
                side.result()  # raises the side log's KVError (after RocksDB's, if both failed)

    def _sync_wal(self) -> None:
        """Sync RocksDB's log alone. :raises KVError: it failed."""
        self._call(
            lambda: self._db.flush_wal(True),  # type: ignore[union-attr]  # open inside the gate
            lambda: f"syncing the log of {self.path} failed",
            True,
        )

    def _syncing(self) -> ThreadPoolExecutor:
        pool = self._syncer
        if pool is None:
            with self._syncer_lock:
                if self._syncer is None:
                    self._syncer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sweepq-logsync")
                pool = self._syncer
        return pool

    def flush(self) -> None:
        """Write the memtables to table files (tests use it to reach the files; the change log
        starts again after it). :raises KVError: it failed (damage heals at the next call)."""

        def work() -> None:
            for cf in self._cf.values():
                cf.flush()

        self._drained()
        self._call(work, lambda: f"flushing {self.path} failed", True)

    def compact(self) -> None:
        """Compact every family now (tests use it to make RocksDB rewrite its tables).

        :raises KVError: the compaction failed (on damage: the database heals at the next call)."""

        def work() -> None:
            for cf in self._cf.values():
                cf.compact_range(None, None)

        self._drained()
        self._call(work, lambda: f"compacting {self.path} failed", True)

    def read_side(self, name: str) -> bytes | None:
        return read_side_file(self.path, name)

    def write_side(self, name: str, data: bytes) -> None:
        if self._read_only:
            raise KVError(f"the store at {self.path} is open read-only")
        write_side_file(self.path, name, data)

    def horizon(self) -> int:
        self._enter()
        try:
            h = self._db.latest_sequence_number()  # type: ignore[union-attr]  # open inside the gate
        finally:
            self._gate.leave()
        return h

    def files(self) -> dict:
        """What blobstore/guard.py checks at the next open (``known``): the manifest now, and
        the horizon reached, the log synced first. :raises KVError: the sync failed."""
        self._drained()
        h = self.horizon()
        self._sync(True)
        return guard.files(self.path, h, self._wal)

    def _log(self, name: str) -> SideLog:
        log = self._logs.get(name)
        if log is None:
            log = self._logs.setdefault(name, SideLog(self.path, name, self._redo, self._mapped))
        return log

    def read_log(self, name: str) -> tuple[list[bytes], str | None]:
        return self._log(name).read()

    def start_log(self, name: str, record: bytes) -> None:
        if self._read_only:
            raise KVError(f"the store at {self.path} is open read-only")
        if name == changes.NAME:
            self._restart_redo()  # it need not, but the writes before a checkpoint are settled
        # RocksDB's log synced first, appends held: a record the old log drops may be the only
        # synced copy of its write (sync="commit" syncs the change log alone).
        self._log(name).start(record, self._sync_wal if self._wal else None)

    def append_log(self, name: str, record: bytes) -> str | None:
        log = self._logs.get(name) or self._log(name)
        if not self._read_only:
            log.append(record)
        return log.failed

    def unproven(self, cf: str, prefix: bytes = b"") -> bool:
        damaged, gaps = self._unproven.get(cf, ((), ()))
        return any(k.startswith(prefix) for k, _v in damaged) or any(_overlaps(lo, hi, prefix) for lo, hi in gaps)

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def damage_log(self) -> list[str]:
        return list(self._events)

    def memory(self) -> dict[str, int]:
        def prop(name: str) -> int:
            try:
                return sum(int(cf.property_int_value(name) or 0) for cf in self._cf.values())
            except Exception:  # a property this RocksDB does not report
                return 0

        self._gate.enter()  # never while a reopen swaps the families
        try:
            memtables = prop("rocksdb.cur-size-all-mem-tables")
            readers = prop("rocksdb.estimate-table-readers-mem")
        finally:
            self._gate.leave()
        cache = int(self._cache.get_usage())
        deferred = self._view_bytes + sum(len(k) + len(v or b"") for k, (_n, v) in list(self._stuck.items()))
        return {
            "deferred_bytes": deferred,
            "memtable_bytes": memtables,
            "block_cache_bytes": cache,
            "table_readers_bytes": readers,
            "write_buffer_limit": self.write_buffer_bytes,
            "block_cache_limit": self.block_cache_bytes,
            "held_bytes": memtables + cache + deferred,
        }

    def close(self) -> None:
        """Close the database, once the listeners told of a rebuild are done. The directory's
        lock is released even when closing fails (a full disk).

        :raises KVError: the memtables could not be written, or the database had failed and
            could not be reopened since; either way its log has every write that returned."""
        with contextlib.suppress(KVError):
            self._drained()  # else the redo log has them: the next open replays them
        for t in self._restorers:
            if t is not threading.current_thread():
                t.join()
        with contextlib.suppress(KVError):
            self._drained()  # what the listeners wrote again (a drain above may have met damage)
        with self._gate.alone():
            self._closed = True
            broken = self._broken
            try:
                self._release()
            finally:
                self._drop_shadow()
                if self._syncer is not None:
                    self._syncer.shutdown(wait=True)
                    self._syncer = None
                for log in self._logs.values():
                    log.close()
                if self._defer_log is not None:
                    self._defer_log.close()
                if not self._read_only:
                    make_private(self.path)
        if broken is not None:
            raise KVError(f"the store at {self.path} had failed and could not be reopened since ({broken})")

    def _release(self) -> None:
        db, self._db = self._db, None
        # rocksdict keeps the database locked while column-family objects are alive.
        self._cf = {}
        self._h = {}
        if db is None:
            return
        try:
            db.close()
        except Exception as e:
            raise _error(e, f"closing the store at {self.path}") from e
        finally:
            del db

    def _drop_shadow(self) -> None:
        """Give back what the open took of the directory: the shadow of a read-only open, the
        claim of a read-write one (net of the database itself, closed by then)."""
        if self._claim is not None:
            release(self._claim)
            self._claim = None
        if self._shadow is not None:
            shutil.rmtree(self._shadow, ignore_errors=True)
            self._shadow = None


def _overlaid(
    items: Iterator[tuple[bytes, bytes]], view: dict[bytes, tuple[int, bytes | None]], prefix: bytes
) -> list[tuple[bytes, bytes]]:
    """A scan's pairs under ``prefix`` with the deferred writes of ``view`` laid over them."""
    merged = dict(items)
    for key, (_number, state) in view.items():
        if key.startswith(prefix):
            if state is None:
                merged.pop(key, None)
            else:
                merged[key] = state
    return sorted(merged.items())


def _sync_all(logs: list[SideLog]) -> None:
    for log in logs:
        log.sync()


def _successor(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: there is none)."""
    p = bytearray(prefix)
    while p:
        if p[-1] < 0xFF:
            p[-1] += 1
            return bytes(p)
        p.pop()
    return None


def _overlaps(lo: bytes, hi: bytes, prefix: bytes) -> bool:
    """Whether the gap between keys ``lo`` and ``hi`` (b"": the end) may hold keys under ``prefix``."""
    upper = _successor(prefix)
    return (upper is None or lo < upper) and (not hi or hi > prefix)


def _is_db(path: str) -> bool:
    return os.path.isfile(os.path.join(path, "CURRENT"))


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


def _is_corruption(text: str) -> bool:
    low = text.lower()
    return "corrupt" in low or "checksum" in low


def _open_error(e: Exception, path: str) -> KVError:
    """Why a store could not be opened: in use, the system's refusal (permissions, a full
    disk), or else, for a directory that holds a database, damage (repair may help)."""
    text = str(e)
    low = text.lower()
    what = f"cannot open the store at {path}"
    if "lock" in low:
        return KVError(f"{what}: another queue manager (in this or another process) has it open ({text})")
    if any(s in low for s in ("permission denied", "no space left", "read-only file system", "too many open files")):
        return KVError(f"{what}: {text}")
    if _is_db(path) or _is_corruption(text):
        return KVCorruption(f"{what}: its files are damaged or missing ({text})", path)
    return KVError(f"{what}: {text}")


def _error(e: Exception, what: str) -> KVError:
    """RocksDB reports failures as exceptions whose text carries its status: damage (a
    checksum, a corrupt block) is told apart from every other failure here, and only here."""
    text = str(e)
    if _is_corruption(text):
        files = re.findall(r"[\w./-]*\d+\.sst", text)
        return KVCorruption(f"{what}: {text}", files[0] if files else what)
    return KVError(f"{what}: {text}")
