"""Where a queue lives, and what the queue objects of one process share about it.

A ``Site`` is one queue manager seen from this process: a private in-memory one (each
``Queue()`` without ``path=`` or ``url=`` has its own), the one of a data directory
(``path=``; opened once per process however many queues use it, closed with the last), or a
served one (``url=``). A ``Core`` is one queue of a site, shared by every
``Queue`` and ``AsyncQueue`` of this process that names it: its
connections, the count of unfinished tasks, the gets waiting for ``task_done()``
(at-least-once) and the asyncio waiters to wake.

Connections serve one call at a time (engine/connection.py), so a core keeps a pool of
(connection, handle) pairs: a call takes one, and gives it back when it returns; a get waiting
in ``GMO.WAIT`` holds its own. A get made at-least-once keeps its pair, whose unit of work
holds the message, until ``task_done()`` commits it.

Thread safety: every method may be called from any thread. ``Core.mutex`` guards the
conditions and the counts of a served queue (never held across a call to the queue manager);
the pool is a deque whose ``pop`` and ``append`` are atomic. A queue of this process's own
queue manager takes no lock of its own to count a put or a get: its unfinished tasks are the
puts the engine counted (``LocalQueue.puts``, in the step that places a message, so a get
never sees an item before it is counted) less the ``task_done()`` calls, and its count of
gets is only a "something changed" mark for a waiting putter, which a lost update leaves
changed all the same.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from sweepq.engine import OO, MemoryPolicy, MQError, Persistence, Reason

from .errors import map_error

if TYPE_CHECKING:
    from .arguments import Where

MAX_DEPTH = 999_999_999  # the engine's MAXDEPTH limit: "unbounded"
MAX_ITEM = 100 * 1024 * 1024  # the engine's largest message (MAXMSGL)
_OPEN = OO.OUTPUT | OO.INPUT_SHARED
_EMPTY = int(Reason.NO_MSG_AVAILABLE)  # a plain int: an enum member's lookup costs on every call

Pair = tuple[Any, Any]  # (connection, handle): the engine's or a client's


def max_depth(maxsize: float) -> int:
    """The queue's MAXDEPTH for ``maxsize``: unbounded at 0 or less, as ``queue.Queue`` reads
    it; a fraction rounds up, as ``qsize() >= maxsize`` does."""
    if maxsize <= 0:
        return MAX_DEPTH
    return min(MAX_DEPTH, math.ceil(maxsize))


class Site:
    """One queue manager and the cores of its queues opened in this process.

    ``admin`` is the queue manager's administration (a ``QueueManager``,
    or a ``RemoteQueueManager``), ``connect`` makes a connection to it,
    ``where`` says where it lives (for ``repr``). ``persistent``: the queues it defines keep
    their items on disk."""

    def __init__(
        self,
        admin: Any,
        connect: Callable[[], Any],
        where: str,
        persistent: bool,
        remote: bool,
        budget: bool,
    ):
        self.admin = admin
        self.connect = connect
        self.where = where
        self.persistent = persistent
        self.remote = remote
        self.budget = budget  # a memory budget: gets may read blobs back from the disk
        self.cores: dict[str, Core] = {}
        self.users = 0
        self.closed = False
        self.on_close: Callable[[], None] = lambda: None
        self.options: tuple = ()  # what a second opener of a data directory must ask for too
        self.aconnect: Callable[[], Awaitable[Any]] | None = None  # a served one's asyncio connection

    def close(self) -> None:
        """Close the queue manager (a client's administration connection); once."""
        if self.closed:
            return
        self.closed = True
        self.on_close()
        try:
            self.admin.close()
        except MQError as e:
            raise map_error(e, f"closing the queue manager {self.where}") from None


_sites: dict[tuple, Site] = {}
_sites_lock = threading.RLock()  # re-entrant: a queue garbage-collected while another opens closes then
# Cores whose queue was garbage-collected (release(quietly=True), from weakref.finalize) while
# another thread held _sites_lock: the collector runs finalizers in whatever thread it runs in,
# e.g. a queue manager's sweeper thread starting while open_core, holding the lock, waits for it
# to start; waiting for the lock there would never end. The next open_core or release, once
# it lets go of the lock, releases them.
_orphans: list[Core] = []


def open_core(
    site_key: tuple,
    make_site: Callable[[], Site],
    name: str,
    maxsize: float,
    policy: MemoryPolicy,
    options: tuple = (),
) -> Core:
    """The core of queue ``name`` on the site ``site_key`` (made by ``make_site`` when this
    process has none open), defined there if missing, its MAXDEPTH set from ``maxsize``; one
    more user of both. :raises: what ``map_error`` maps the engine's refusal to."""
    with _sites_lock:
        site = _sites.get(site_key)
        if site is None:
            site = make_site()
            site.options = options
            if site_key[0] != "memory":  # a private in-memory manager is nobody else's
                _sites[site_key] = site
                site.on_close = lambda: _forget(site_key)
        elif site.options != options:
            raise ValueError(
                f"the queue manager {site.where} is open in this process with other options "
                f"({', '.join(map(str, site.options))}); open it with the same"
            )
        site.users += 1
        try:
            core = site.cores.get(name)
            if core is None:
                core = Core(site, name, maxsize, policy)
                site.cores[name] = core
            elif maxsize != core.maxsize:
                core.set_maxsize(maxsize)
            core.users += 1
        except BaseException:
            site.users -= 1
            if not site.users:
                with contextlib.suppress(Exception):
                    site.close()
            raise
    _release_orphans()
    return core


def _release_orphans() -> None:
    """Release the cores of queues collected while another thread held ``_sites_lock``."""
    while _orphans:
        try:
            core = _orphans.pop()
        except IndexError:
            return  # another thread took the last one
        core.release(True)


def _forget(key: tuple) -> None:
    _sites.pop(key, None)


class Core:
    """One queue of a site, as every queue object of this process on it shares it (see the
    module docstring)."""

    def __init__(self, site: Site, name: str, maxsize: float, policy: MemoryPolicy):
        self.site = site
        self.name = name
        self.users = 0
        self.closed = False
        self.mutex = threading.Lock()
        self.not_full = threading.Condition(self.mutex)  # a get made room (or the poll slice ended)
        self.all_tasks_done = threading.Condition(self.mutex)
        self._unfinished = 0  # a served queue's unfinished tasks; a local one's at open
        self._done = 0  # a local queue's task_done() calls
        self._engine_queue: Any = None  # a local queue's engine queue (LocalQueue): its puts
        self._puts_at_open = 0
        self.gets = 0  # gets so far: a putter that saw the queue full waits only if none came since
        self.waiting_putters = 0
        # At-least-once gets awaiting task_done(): (thread, the function that commits the get).
        self.pending: deque[tuple[int, Callable[[], None]]] = deque()
        self.done_gets = 0  # task_done() calls on a served queue's gets (its join rule)
        # The idle pairs. A deque, not a list: a call pops the one idle pair and appends it back,
        # and a list emptied and refilled freed and reallocated its array each time, about 350
        # instructions of every put and get (sweepq.bench.instructions "durable Queue").
        self.pool: deque[Pair] = deque()
        self.pairs: list[Pair] = []
        # The AsyncQueues to tell of puts and gets, as weak references in a tuple: read on every
        # put and get, rebuilt only when one comes or goes.
        self.async_refs: tuple[weakref.ref[Any], ...] = ()
        # Coroutines of those AsyncQueues waiting for a put or a get: a put or get in memory
        # tells them only when there is one. A waiter counts itself before it looks at the
        # queue a last time, so a put that read 0 here came before that look (it sees the item).
        self.async_waiters = 0
        self._watching = threading.RLock()
        self.maxsize = maxsize
        self.policy = policy
        self.default_persistence = True  # puts without a descriptor have the persistence wanted
        self._define(maxsize, policy)
        self.counts_puts = site.remote  # only a served queue's puts are counted here (module docstring)
        if not site.remote:
            pair = self.take()
            self.give(pair)
            self._engine_queue = pair[1].queue
            self._puts_at_open = self._engine_queue.puts
            self._unfinished = self.depth()  # what a data directory still holds is unfinished

    @property
    def unfinished_tasks(self) -> int:
        """Items put and not yet done (``queue.Queue.unfinished_tasks``): on a served queue
        those put here less the tasks done here (below 0 in a process that gets what others
        put); on a local one, what it held at open and every put since, less the tasks done."""
        q = self._engine_queue
        if q is None:
            return self._unfinished
        return self._unfinished + q.puts - self._puts_at_open - self._done

    # -- the queue's definition --------------------------------------------------------------

    def _define(self, maxsize: float, policy: MemoryPolicy) -> None:
        """Define the queue where it is missing; set its MAXDEPTH from ``maxsize`` (on a served
        queue only when ``maxsize`` is given: every process's default must not unbound it)."""
        site = self.site
        persistence = Persistence.PERSISTENT if site.persistent else Persistence.NOT_PERSISTENT
        attrs: dict[str, object] = {"max_depth": max_depth(maxsize)}
        if not site.remote:
            attrs.update(memory_policy=policy, memory_wait_ms=0, default_persistence=persistence)
        try:
            try:
                info = site.admin.inquire_queue(self.name)
            except MQError as e:
                if e.reason != Reason.UNKNOWN_OBJECT_NAME:
                    raise
                attrs["default_persistence"] = persistence
                site.admin.define_queue(self.name, max_msg_length=MAX_ITEM, **attrs)
                return
            a = info.attributes
            # A put without a descriptor takes the queue's persistence (and is the engine's
            # fastest); a served queue defined otherwise gets an explicit descriptor instead.
            self.default_persistence = a.default_persistence == persistence
            if site.remote and maxsize <= 0:
                return
            changes = {k: v for k, v in attrs.items() if getattr(a, k) != v}
            if a.max_msg_length < MAX_ITEM:
                changes["max_msg_length"] = MAX_ITEM
            if changes:
                site.admin.alter_queue(self.name, **changes)
        except MQError as e:
            raise map_error(e, f"queue {self.name!r} {site.where}") from None

    def set_maxsize(self, maxsize: float) -> None:
        """``q.maxsize = n``: the queue's MAXDEPTH becomes ``n`` (what is queued stays)."""
        try:
            self.site.admin.alter_queue(self.name, max_depth=max_depth(maxsize))
        except MQError as e:
            raise map_error(e, f"setting maxsize of queue {self.name!r} {self.site.where}") from None
        self.maxsize = maxsize
        with self.not_full:
            self.not_full.notify_all()  # a larger maxsize lets waiting puts go

    def depth(self) -> int:
        """Messages on the queue, got at-least-once and not yet done included (CURDEPTH)."""
        try:
            return int(self.site.admin.inquire_queue(self.name).current_depth)
        except MQError as e:
            raise map_error(e, f"queue {self.name!r} {self.site.where}") from None

    # -- connections -------------------------------------------------------------------------

    def take(self) -> Pair:
        """A (connection, handle) pair for one call: an idle one, or a new one."""
        try:
            return self.pool.pop()
        except IndexError:
            pass
        if self.closed:
            raise ValueError(f"queue {self.name!r} is closed")
        try:
            conn = self.site.connect()
            try:
                h = conn.open(self.name, _OPEN)
            except BaseException:
                conn.disconnect()
                raise
        except MQError as e:
            raise map_error(e, f"queue {self.name!r} {self.site.where}") from None
        pair = (conn, h)
        self.pairs.append(pair)
        return pair

    def give(self, pair: Pair) -> None:
        self.pool.append(pair)

    # The in-memory hot paths of the doors: one engine call on a pooled pair each (the pool's
    # pop and append written out: a call of take() and give() was a tenth of a pair's cost).

    def put_item(self, item: Any, priority: int) -> bool:
        """Put ``item``, kept as the object it is, at ``priority`` (-1: the queue's default):
        True when made; False when refused (full: the door's general way puts again and
        waits, or says why). Only for a queue that keeps items (:meth:`keep_items`)."""
        pool = self.pool
        try:
            pair = pool.pop()
        except IndexError:
            pair = self.take()
        try:
            pair[1].put_item(item, priority)
            return True
        except MQError:
            return False
        finally:
            pool.append(pair)

    def get_now(self) -> Any:
        """Get the next message without waiting, outside any unit of work: the message, or
        None when the queue is empty.

        :raises: what ``map_error`` (queues/errors.py) maps any other refusal to."""
        pool = self.pool
        try:
            pair = pool.pop()
        except IndexError:
            pair = self.take()
        try:
            return pair[1].get(0)
        except MQError as e:
            if e.reason == _EMPTY:
                return None
            raise map_error(e, f"get from queue {self.name!r} {self.site.where}", self.closed) from None
        finally:
            pool.append(pair)

    def keep_items(self, encode: Callable[[Any], bytes]) -> None:
        """The queue keeps items as objects (an in-memory site's: engine/core/lanes.py,
        "Items"); ``encode`` makes the bytes of one the sweeper moves to disk."""
        pair = self.take()
        try:
            pair[1].keep_items(encode)
        except MQError as e:
            raise map_error(e, f"queue {self.name!r} {self.site.where}") from None
        finally:
            self.give(pair)

    def watch(self, waiter: Any) -> None:
        """Tell ``waiter`` (an AsyncQueue) of puts, gets and tasks done, while it lives."""
        with self._watching:
            self.async_refs = (*self.async_refs, weakref.ref(waiter, self._unwatch))

    def count_async_waiter(self, n: int) -> None:
        """One more (``n`` = 1) or one fewer (-1) AsyncQueue coroutine waiting (any loop's)."""
        with self._watching:
            self.async_waiters += n

    def _unwatch(self, ref: weakref.ref[Any]) -> None:
        with self._watching:  # re-entrant: the collector may call this inside watch()
            self.async_refs = tuple(r for r in self.async_refs if r is not ref)

    # -- waking ------------------------------------------------------------------------------

    def got(self, n: int = 1) -> None:
        """A get took ``n`` items: wake a put waiting for room, here and in every AsyncQueue."""
        if self.counts_puts:  # a served queue's gets bound its task_done() calls: exact
            with self.mutex:
                self.gets += n
                if self.waiting_putters:
                    self.not_full.notify()
        else:
            self.gets += n  # a mark (module docstring); a putter counts itself waiting first
            if self.waiting_putters:
                with self.mutex:
                    self.not_full.notify()
        if self.async_waiters:  # none waits: nothing to tell (async_waiters above)
            for ref in self.async_refs:
                w = ref()
                if w is not None:
                    w.wake_putter()

    def putting(self, n: int = 1) -> None:
        """A put of ``n`` items is about to be made: as many more unfinished tasks, counted
        first so that a get and task_done() of an item in another thread never find the count
        behind."""
        with self.mutex:
            self._unfinished += n

    def put_failed(self, n: int = 1) -> None:
        """The put counted by ``putting(n)`` did not happen."""
        with self.mutex:
            self._unfinished -= n
            if self._unfinished == 0:
                self.all_tasks_done.notify_all()

    def put_done(self) -> None:
        """An item was put: wake an asyncio getter."""
        if self.async_waiters:  # none waits: nothing to tell (async_waiters above)
            for ref in self.async_refs:
                w = ref()
                if w is not None:
                    w.wake_getter()

    def wait_for_room(self, gets_seen: int, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a get, unless one came since ``gets_seen``."""
        with self.not_full:
            self.waiting_putters += 1
            try:
                if self.gets == gets_seen:
                    self.not_full.wait(timeout)
            finally:
                self.waiting_putters -= 1

    # -- tasks -------------------------------------------------------------------------------

    def hold(self, pair: Pair) -> None:
        """An at-least-once get: its pair's unit of work holds the item until task_done()
        commits it, in the thread that calls it."""

        def commit() -> None:
            try:
                pair[0].commit()
            finally:
                self.give(pair)

        self.hold_with(commit)

    def hold_with(self, done: Callable[[], None]) -> None:
        """An at-least-once get whose ``done()`` task_done() calls (an AsyncQueue's schedules
        the commit off the event loop)."""
        self.pending.append((threading.get_ident(), done))

    def task_done(self) -> None:
        """Count one task done (``queue.Queue.task_done``); commit the oldest at-least-once get
        of this thread (of any thread when this one has none).

        :raises ValueError: called more times than there were items."""
        with self.mutex:
            if self.site.remote:  # items may come from other processes: gets here bound the calls
                if self.done_gets >= self.gets:
                    raise ValueError("task_done() called too many times")
                self.done_gets += 1
                self._unfinished -= 1  # below 0 in a process that gets what others put
            else:
                if self.unfinished_tasks <= 0:
                    raise ValueError("task_done() called too many times")
                self._done += 1
            done = self._pending_of(threading.get_ident())
        if done is not None:
            try:
                done()
            except MQError as e:
                raise map_error(e, f"task_done() on queue {self.name!r} {self.site.where}", self.closed) from None
        with self.mutex:
            if self.site.remote or self.unfinished_tasks == 0:
                self.all_tasks_done.notify_all()
        for ref in self.async_refs:
            w = ref()
            if w is not None:
                w.wake_joiners()

    def _pending_of(self, ident: int) -> Callable[[], None] | None:
        pending = self.pending
        if not pending:
            return None
        for i, (who, done) in enumerate(pending):
            if who == ident:
                del pending[i]
                return done
        return pending.popleft()[1]

    def finished(self) -> bool:
        """Whether join() may return: every task done here; on a served queue, every item put
        and every item got here done, and the queue itself empty (a depth that counts every
        process's at-least-once gets not yet done)."""
        if not self.site.remote:
            return self.unfinished_tasks == 0
        # Each item put here must be done too: the server takes an item out of the depth
        # before its get returns here, so depth and gets alone can both look finished.
        return self.unfinished_tasks <= 0 and self.done_gets >= self.gets and self.depth() == 0

    # -- the end -----------------------------------------------------------------------------

    def release(self, quietly: bool = False) -> None:
        """One user fewer: the last closes every connection (at-least-once gets not done go
        back to the queue, in place) and, the last of its site, the queue manager.
        ``quietly``: a queue garbage-collected or left at exit, whose close nobody can see
        fail (a data directory's log keeps every write made all the same)."""
        if not _sites_lock.acquire(blocking=not quietly):
            _orphans.append(self)  # a finalizer in a thread other than the lock's holder (_orphans)
            return
        try:
            self.users -= 1
            site = self.site
            site.users -= 1
            last_here = self.users == 0
            last_site = site.users == 0
            if last_here:
                self.closed = True
                site.cores.pop(self.name, None)
        finally:
            _sites_lock.release()
        if last_here:
            self._disconnect()
        if last_site:
            try:
                site.close()
            except Exception:
                if not quietly:
                    raise
        _release_orphans()

    def _disconnect(self) -> None:
        for conn, _ in self.pairs:
            abort = getattr(conn, "abort", None)
            with contextlib.suppress(Exception):
                if abort is not None and (conn, _) not in self.pool:
                    abort()  # a client's call blocked in a wait ends now
                conn.disconnect()
        self.pool.clear()
        self.pending.clear()
        self.pairs.clear()


# -- the three kinds of site --------------------------------------------------------------------


def site_for(w: Where) -> tuple[tuple, Callable[[], Site], tuple]:
    """(key, factory, options) of the site ``w`` names: a private in-memory queue manager,
    a data directory's (one per process), or a served one's (one per URL)."""
    if w.url is not None:
        return ("url", w.url, w.token, w.admin_token), lambda: _remote_site(w), ()
    if w.path is None:
        return ("memory", object()), lambda: _local_site(w, "in memory"), ()
    path = os.path.realpath(w.path)
    options = (f"memory_budget={w.memory_budget}", f"sync={w.sync!r}", f"budget_counts={w.budget_counts!r}")
    return ("path", path), lambda: _local_site(w, f"at {path}"), options


def _local_site(w: Where, where: str) -> Site:
    from sweepq.engine import DurabilitySettings, MemorySettings, MessageSettings, QueueManager, SweeperSettings

    if w.path is not None:
        parent = os.path.dirname(os.path.abspath(w.path))
        if os.path.exists(w.path) and not os.path.isdir(w.path):
            raise NotADirectoryError(f"path={w.path!r} is a file: give a directory for the queue's data")
        if not os.path.isdir(parent):
            raise FileNotFoundError(f"path={w.path!r}: its parent directory {parent!r} does not exist")
    try:
        qm = QueueManager(
            path=w.path,
            sweeping=SweeperSettings(run=w.path is not None or bool(w.memory_budget)),
            durability=DurabilitySettings(sync=w.sync),
            memory=MemorySettings(budget=w.memory_budget, counts=w.budget_counts if w.memory_budget else "held"),
            messages=MessageSettings(max_msg_length=MAX_ITEM),
        )
    except MQError as e:
        raise map_error(e, f"opening the queue manager {where}") from None
    return Site(
        admin=qm,
        connect=qm.connect,
        where=where,
        persistent=w.path is not None,
        remote=False,
        budget=bool(w.memory_budget),
    )


def _remote_site(w: Where) -> Site:
    """A served queue manager's site. Every connection of it (the administration's and each
    pair's) reconnects on its own after a break, for up to the URL's ``?reconnect=SECONDS``
    (30 by default, 0 to fail fast), and goes on: a put or get under way is done once
    (net/once.py), so a restart of the server is a pause, never a lost or doubled item; an
    at-least-once get whose unit of work the break backed out went back to the queue, to be
    delivered again, and its task_done() says nothing (``redeliver``)."""
    from sweepq.net import RemoteQueueManager, auth
    from sweepq.net import connect as client_connect
    from sweepq.net.calls import url_reconnect

    url = w.url
    assert url is not None
    near_token, near_admin = auth.beside_socket(url)
    token = w.token or os.environ.get("SWEEPQ_TOKEN") or near_token
    admin_token = w.admin_token or os.environ.get("SWEEPQ_ADMIN_TOKEN") or near_admin
    try:
        bound = url_reconnect(url)
        admin = RemoteQueueManager(url, token, admin_token, client="sweepq.Queue", reconnect=bound)
    except MQError as e:
        raise map_error(e, f"connecting to {url}") from None

    def connect() -> Any:
        return client_connect(url, token, client="sweepq.Queue", reconnect=bound, redeliver=True)

    async def aconnect() -> Any:
        from sweepq.net.aio import connect as aio_connect

        return await aio_connect(url, token, client="sweepq.AsyncQueue", reconnect=bound, redeliver=True)

    site = Site(admin=admin, connect=connect, where=f"on {url}", persistent=True, remote=True, budget=False)
    site.aconnect = aconnect
    return site
