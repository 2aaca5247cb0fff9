"""What a queue manager writes for its persistent messages, and when.

The rule (docs/design.md "Units of work and durability"): every change to a persistent message
is written to the store **under the queue's lock, before the change is made in memory**, as
one atomic write. The order of the writes in the store's log is then the order of the
changes, a failed write leaves memory untouched (the caller gets 2102 and may retry), and
a crash at any point leaves the store in a state that some prefix of the calls produced.

* A put outside a unit of work writes the record; a get outside one deletes it (or marks
  it removed inside its blob). Both happen under the lock, so no other thread can see a
  message whose record is not written yet, or get one whose delete is still to come.
* A commit writes all of its unit of work's puts and deletes in one write; a backout
  writes the raised backout counts. Uncommitted work writes nothing: a crash backs it
  out, and no state is ever in doubt.
* The sweep's link and the unsweep move records between their own keys and blobs
  (engine/tiering.py, engine/queue.py), each in one write.

The sync policy says when a returned call is durable:

``"commit"``  (default) a put outside a unit of work, a commit and a get outside one
              return only once the log is synced to disk: they survive a power loss.
              The writes are made unsynced under the lock; :class:`GroupSync` then syncs
              the logs (RocksDB's and the store's change log) once for every caller
              waiting at that moment, without any lock (the GIL released meanwhile), so
              concurrent committers share fsyncs.
``"os"``      the log is written (to the OS) before the call returns: survives a crash of
              the process, not of the machine.

Under either, writers of other queues writing at the same time share one store write
(the store's write group, blobstore/group.py): each still returns from its write only once
that write returned, so every rule above holds as if it had written alone.
``"none"``    no log: a crash loses what was not yet flushed to table files (the rest is
              consistent, see blobstore/kv.py).

Thread safety: the write methods are called with the owning queue's mutex held (or, for a
commit, the mutexes of every queue involved); :meth:`Journal.wait` is called with none.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from sweepq.blobstore import Store, StoreDamageError, StoreError

from ..constants import Reason
from ..errors import MQError
from ..record import OFF_FLAGS, PERSISTENT, backout_of
from . import checked
from .layout import MARK_REMOVED, backout_mark, encode_value, message_key

if TYPE_CHECKING:
    from ..core.lanes import LaneSet
    from ..core.ref import Ref

SYNC_POLICIES = ("commit", "os", "none")
SYNC_ATTEMPTS = 3
# How long a sync waits for the committers the previous one released (only when it served
# more than one): they are about to write again, and one fsync should cover them too.
COMMIT_DELAY = 0.0005


class Journaled(Protocol):
    """What the journal reads of a queue (engine/queue.py's ``LocalQueue``, which sits above
    this module): its name for errors, its key prefix and its lanes' records."""

    @property
    def name(self) -> str: ...

    @property
    def key_prefix(self) -> bytes: ...

    @property
    def lanes(self) -> LaneSet: ...


class StoreChanges:
    """The store changes of one step: records to write, keys to delete, blob marks."""

    __slots__ = ("deletes", "marks", "puts")

    def __init__(self) -> None:
        self.puts: list[tuple[bytes, bytes]] = []
        self.deletes: list[bytes] = []
        self.marks: list[tuple[int, int, bytes | None]] = []

    def __bool__(self) -> bool:
        return bool(self.puts or self.deletes or self.marks)


class GroupSync:
    """Group commit: one log sync covers every write made before it started.

    A caller that has written calls :meth:`wait`. If no sync is running it runs one itself
    (the *leader*); otherwise it waits for the next one to finish, which covers it (a sync
    that was already running when it wrote may not). Whoever writes while a sync runs is
    covered by the next, so under load each fsync serves every committer that queued up
    behind it. After a sync that served several, the next leader holds its sync back for
    them to write again (:meth:`_gather`); the caller that completes the group syncs itself.
    Nobody is woken before a sync's end, which wakes each of its callers once (issue 31: a
    gathering used to wake every follower only to put it back to sleep). Thread-safe.
    """

    def __init__(self, sync: Callable[[], None], delay: float = COMMIT_DELAY):
        self._sync = sync
        self._cond = threading.Condition(threading.Lock())
        self._started = 0
        self._finished = 0
        self._last_ok = 0  # the last generation whose sync succeeded
        self._busy = False
        self._gathering = False  # a leader holds its sync back for the group to gather (_gather)
        self._waiting = 0  # callers inside wait()
        self._arrivals = 0  # calls of wait() so far
        self._arrivals_then = 0  # ... when the last sync finished
        self._released = 0  # callers the last sync released (those waiting when it began)
        self.delay = delay
        self.syncs = 0

    @property
    def waiting(self) -> int:
        """Callers inside :meth:`wait` (what a test waits on)."""
        return self._waiting

    @property
    def gathering(self) -> bool:
        """Whether a leader holds the next sync back for the group to gather (what a test waits on)."""
        return self._gathering

    def wait(self) -> None:
        """Return once a sync that started after the caller's write has finished.

        :raises StoreError: that sync failed (the write is in the log, not known on disk)."""
        with self._cond:
            need = self._started + 1
            self._waiting += 1
            self._arrivals += 1
            try:
                self._wait_locked(need)
            finally:
                self._waiting -= 1
            if self._last_ok < need:  # no sync that covers this caller succeeded
                raise StoreError(f"syncing the log failed (generation {self._finished})")

    def _gather(self) -> bool:
        """Hold the next sync back until the callers the last one released have written again
        (at most ``delay``). Returns True when the one that completed the group took the sync
        over; False when the time ran out first (the caller syncs). Lock held."""
        self._gathering = True
        end = time.monotonic() + self.delay
        try:
            while self._gathering:
                left = end - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        except BaseException:
            self._gathering = False
            self._cond.notify_all()  # a follower leads instead
            raise
        if not self._gathering:
            return True
        self._gathering = False
        return False

    def _wait_locked(self, need: int) -> None:
        while self._finished < need:
            if self._busy:
                self._cond.wait()
                continue
            if self._gathering:
                if self._arrivals - self._arrivals_then < self._released:
                    self._cond.wait()  # a leader holds its sync back for the group: join it
                    continue
                # This caller completes the group: it syncs at once, itself. Waking the
                # leader that gathered it to do so would put a hand-over (a futex wake and
                # the GIL passed on) between the last write and the sync, every cycle; the
                # leader wakes at the sync's end with the rest (issue 31).
                self._gathering = False
            # Others shared the last sync: the callers it released are writing again right
            # now. Wait until as many have come back (at most ``delay``) so that this sync
            # covers them too, instead of leaving them to the next one: without it the
            # committers split into two groups that take turns (PostgreSQL's commit_delay,
            # ended as soon as the group has gathered). A lone caller never waits here.
            elif self._released > 1 and self.delay and self._gather():
                continue  # the caller that completed the group syncs
            self._busy = True
            self._started += 1
            gen = self._started
            group = self._waiting
            error = None
            self._cond.release()
            try:
                # A failed sync is tried again: the change is already made and in the
                # log, so the caller cannot undo it; only a sync that keeps failing is
                # reported (and the store is then likely unusable).
                for _attempt in range(SYNC_ATTEMPTS):
                    try:
                        self._sync()
                        error = None
                        break
                    except StoreError as e:
                        error = e
            finally:
                self._cond.acquire()
            self._busy = False
            self._finished = gen
            self._released = group
            self._arrivals_then = self._arrivals
            self.syncs += 1
            if error is None:
                self._last_ok = gen
            self._cond.notify_all()


class Journal:
    """The durable side of one queue manager's persistent messages (see the module docstring).

    ``store`` returns the manager's store (opened on first use); ``sync`` is the policy.
    """

    def __init__(self, store: Callable[[], Store], sync: str = "commit"):
        # ``sync`` is one of SYNC_POLICIES: a queue manager's DurabilitySettings checked it.
        self._store = store
        self._write_one: Callable[[bytes, bytes | None], object] | None = None  # store.message_writer(), once opened
        self.policy = sync
        self.group = GroupSync(lambda: self._store().sync()) if sync == "commit" else None
        self.owed = False  # a sync failed: some made change may not be on disk yet

    # -- building a step's changes (no I/O) ---------------------------------------------------

    @staticmethod
    def homes(prefix: bytes, lane: int, recs: list[bytes]) -> list[tuple[bytes, bytes]]:
        """(key, value) of each persistent record of ``recs`` in lane ``lane``: what a put, or
        an unsweep (the records leaving a blob), writes as their own durable homes."""
        return [(message_key(prefix, lane, r), encode_value(r)) for r in recs if r[OFF_FLAGS] & PERSISTENT]

    @staticmethod
    def home_keys(prefix: bytes, lane: int, recs: list[bytes]) -> list[bytes]:
        """The keys of the persistent records of ``recs``: what a sweep's link deletes, their
        records now being in the blob."""
        return [message_key(prefix, lane, r) for r in recs if r[OFF_FLAGS] & PERSISTENT]

    @staticmethod
    def add_put(batch: StoreChanges, q: Journaled, lane: int, rec: bytes) -> None:
        batch.puts += Journal.homes(q.key_prefix, lane, [rec])

    @staticmethod
    def add_removal(batch: StoreChanges, q: Journaled, ref: Ref) -> None:
        """The change that takes the message ``ref`` off the queue for good (mutex held): its
        own record deleted, or its position in its blob marked removed and its own key
        deleted too (it holds nothing: the change log then names the message consumed, which a
        mark alone cannot when damage takes the blob, its link and the mark: issue 32)."""
        removal = _removal(q, ref)
        if removal is not None:
            key, mark = removal
            batch.deletes.append(key)
            if mark is not None:
                batch.marks.append(mark)

    @staticmethod
    def add_backout(batch: StoreChanges, q: Journaled, ref: Ref, rec: bytes) -> None:
        """The change that hardens the raised backout count of ``rec`` (now restored at ``ref``)."""
        if not rec[OFF_FLAGS] & PERSISTENT:
            return
        home = q.lanes.home(ref)
        if home is None:
            return
        lane, blob_id, pos = home
        if blob_id < 0:
            batch.puts.append((message_key(q.key_prefix, lane, rec), encode_value(rec)))
        else:
            batch.marks.append((blob_id, pos, backout_mark(backout_of(rec))))

    # -- writing (mutex held) --------------------------------------------------------------------

    def write(self, batch: StoreChanges, what: str) -> None:
        """Write ``batch`` atomically. :raises MQError: RESOURCE_PROBLEM (2102) when the store
        failed; nothing was written and the caller changes nothing in memory."""
        if not batch:
            return
        try:
            self._store().write_messages(batch.puts, batch.deletes, batch.marks)
        except StoreError as e:
            raise _failed(e, what) from e

    def put(self, q: Journaled, lane: int, recs: list[bytes]) -> None:
        """Write new persistent records before they join lane ``lane`` (mutex held)."""
        try:
            if len(recs) == 1:  # a put of one message (the most common call): no list made
                rec = recs[0]
                if rec[OFF_FLAGS] & PERSISTENT:  # its key and value made in C (checked.py: layout's, faster)
                    key, value = checked.stored_key(q.key_prefix, lane, rec), checked.stored_value(rec)
                    (self._write_one or self._writer())(key, value)
            else:
                self._store().write_messages(Journal.homes(q.key_prefix, lane, recs))
        except StoreError as e:
            raise _failed(e, f"putting to {q.name!r}") from e

    def remove(self, q: Journaled, refs: list) -> None:
        """Delete the records of messages about to leave the queue (mutex held)."""
        if len(refs) == 1:
            self.remove_one(q, refs[0])
            return
        b = StoreChanges()
        for ref in refs:
            Journal.add_removal(b, q, ref)
        self.write(b, f"getting from {q.name!r}")

    def remove_one(self, q: Journaled, ref: Ref) -> None:
        """:meth:`remove` of the one message ``ref`` (mutex held): a get of one message, the
        most common call, its change handed on as it is made (no list, no StoreChanges)."""
        removal = _removal(q, ref)
        if removal is None:
            return
        key, mark = removal
        try:
            if mark is None:  # its own record only: the store's one-record write
                (self._write_one or self._writer())(key, None)
            else:
                self._store().write_messages((), (key,), (mark,))
        except StoreError as e:
            raise _failed(e, f"getting from {q.name!r}") from e

    def _writer(self) -> Callable[[bytes, bytes | None], object]:
        """The store's ``write_message`` as its ``message_writer()`` binds it, kept from the
        first durable put or get on: looking the store up cost every one a call, and the
        store's method another (issue 31). The store is the queue manager's for its whole
        life (closed with it: a write then fails as closed)."""
        w = self._write_one = self._store().message_writer()
        return w

    # -- after the locks -------------------------------------------------------------------------

    def wait(self) -> bool:
        """With ``sync="commit"``: return once what the caller wrote is on disk (no lock held).

        Returns True, or False when the sync failed even after its retries: the change is
        made and in the log, not known to be on disk. The caller reports that as the warning
        OUTCOME_PENDING (2124), never as a failure (the change cannot be undone, and a caller
        told "failed" would repeat it). :meth:`harden` (and every later sync) makes it durable.
        Never raises."""
        if self.group is None:
            return True
        try:
            self.group.wait()
            self.owed = False
            return True
        except StoreError:
            self.owed = True
            return False

    def harden(self) -> bool:
        """Sync what a failed sync left unsynced (the sweeper calls this each interval, and
        close). Returns whether nothing is owed any more. Never raises."""
        if not self.owed or self.group is None:
            return True
        return self.wait()


def _removal(q: Journaled, ref: Ref) -> tuple[bytes, tuple[int, int, bytes] | None] | None:
    """What takes the message ``ref`` off the queue for good (see :meth:`Journal.add_removal`):
    the key to delete and the removal mark on its blob position (None: it is in no blob);
    None when nothing is written (not persistent, or its blob was found damaged)."""
    lanes = q.lanes
    rec = lanes.record(ref)
    if not rec[OFF_FLAGS] & PERSISTENT:
        return None
    home = lanes.home(ref)
    if home is None:
        return None  # its blob was found damaged: nothing of it to change
    lane, blob_id, pos = home
    return checked.stored_key(q.key_prefix, lane, rec), (blob_id, pos, MARK_REMOVED) if blob_id >= 0 else None


def _failed(e: StoreError, what: str) -> MQError:
    """A failed write as the caller hears of it. Nothing changed either way. A transient
    failure is 2102 (try again); damage the store met and could not set right by itself
    (it rebuilds what it can, blobstore/kv.py) is 2101: trying again will not help before
    the store is opened again, with ``repair=True`` if the open asks for it."""
    if isinstance(e, StoreDamageError):
        return MQError(
            Reason.OBJECT_DAMAGED,
            f"{what}: the store is damaged ({e}) and could not set it right; nothing changed. Close the queue "
            "manager and open it again (the open says whether repair=True is needed)",
        )
    return MQError(Reason.RESOURCE_PROBLEM, f"{what}: the store failed ({e}); nothing changed, try again")
