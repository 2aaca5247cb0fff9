"""``sweepq.AsyncQueue``: ``asyncio.Queue`` on a queue of a sweepq queue manager.

The same constructor, coroutines, methods and exceptions as ``asyncio.Queue``
(``asyncio.QueueEmpty``, ``asyncio.QueueFull``), with the options of queues/base.py.

How it keeps the event loop free:

* A queue in memory (no ``path=``, ``memory_budget=`` or ``url=``) does no I/O: every call runs
  on the loop's thread, as ``asyncio.Queue``'s do, and waits are the loop's own futures.
* On a data directory or under a memory budget, a put or get may touch the disk (a journal
  write, a blob read back): the coroutines ``put()`` and ``get()`` run the queue manager's call
  in the loop's default executor, and ``task_done()`` of an at-least-once get commits there.
  A get cancelled while its call runs is taken back into the queue (the call gets under a
  unit of work and backs it out when it sees the cancel); if the item was already taken, the
  get returns it, as a task that finished before ``cancel()`` does.
* On a served queue manager (``url=``) the coroutines use the asyncio client
  (``sweepq.aio``): a ``get()`` waits in the server and cancelling it tells the server.
* ``put_nowait()``, ``get_nowait()``, ``qsize()``, ``empty()``, ``full()`` and
  ``task_done()`` are plain functions, as ``asyncio.Queue``'s are: on a data directory they do
  their write on the calling thread, and on a served queue manager one round trip. Use the
  coroutines where that matters.

Waiting coroutines are woken by the puts and gets of every queue object of this process on
the same queue (threads' ``Queue`` included); a full served queue is looked at
again every 50 ms for room made by other processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from sweepq.engine import GMO, MD, OO, MemoryPolicy, MQError, Reason

from . import arguments
from .base import FULL, POLL, QueueBase, T
from .errors import map_error

_EMPTY = Reason.NO_MSG_AVAILABLE
_NONE = object()  # what Handle.take_item returns for an empty queue
_BUSY = object()  # AsyncQueue._take_now: refused, the general way says why


class _Cancelled:
    """Set by a cancelled ``get()`` for the executor call still running on its behalf."""

    __slots__ = ("set",)

    def __init__(self) -> None:
        self.set = False


class AsyncQueue(QueueBase[T]):
    """A FIFO queue for asyncio: ``asyncio.Queue``, its items kept by a sweepq queue manager.

    ``AsyncQueue(maxsize=0)`` behaves as ``asyncio.Queue(maxsize)``: the coroutines ``put``,
    ``get`` and ``join``; ``put_nowait``, ``get_nowait``, ``qsize``, ``empty``, ``full``,
    ``task_done``; ``asyncio.QueueFull`` and ``asyncio.QueueEmpty``. It binds to the event loop
    that first waits on it. The keyword-only options are
    ``QueueBase``'s; the module docstring says how each kind of queue
    keeps the loop free.
    """

    _label: ClassVar[str] = "AsyncQueue"

    def __init__(self, maxsize: float = 0, **options: Any) -> None:
        super().__init__(maxsize, **options)
        site = self._core.site
        self._remote = site.remote
        self._offload = not site.remote and (site.persistent or site.budget)
        # In memory with items kept as objects: a put or get is one call of the queue manager
        # on the loop's thread, the hot path of put() and get() (a refusal or an empty queue
        # goes the general way). That call is made on a handle of this queue's own, taken once
        # and kept while it is open (given back by close()), not one taken from the pool and
        # given back around each call; ``_fast`` is the one test of the hot path (cleared by
        # close()). A call of the handle made while another thread's is in progress (an
        # AsyncQueue used from two loops at once) is refused before it changes anything
        # (engine/handle.py) and goes the general way too, on a pooled handle.
        self._inline = self._items and not self._offload and not self._remote
        self._fast = self._inline
        self._fast_get = self._inline and not self._once  # an at-least-once get holds a unit of work
        own = self._core.take() if self._inline else None
        self._own: tuple[Any, Any] | None = own
        self._handle: Any = None if own is None else own[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0  # the loop's thread
        self._lock = threading.Lock()  # a waiter's check-then-wait against another thread's wake
        self._getters: deque[asyncio.Future[None]] = deque()
        self._putters: deque[asyncio.Future[None]] = deque()
        self._joiners: list[asyncio.Future[None]] = []
        self._commits: set[asyncio.Future[Any]] = set()  # at-least-once commits under way
        self._apool: list[tuple[Any, Any]] = []  # asyncio client (connection, handle) pairs (url=)
        self._core.watch(self)

    def _get_loop(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.get_running_loop()
        if self._loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop, self._thread = loop, threading.get_ident()
        if loop is not self._loop:
            raise RuntimeError(f"{self!r} is bound to a different event loop")
        return loop

    # -- without waiting ---------------------------------------------------------------------

    def put_nowait(self, item: T, *, priority: int | None = None) -> None:
        """Put ``item`` now (``asyncio.Queue.put_nowait``); ``priority`` 0..9, higher first.

        :raises asyncio.QueueFull: no room. :raises TypeError: the serializer cannot encode
            ``item``. :raises ValueError: a priority outside 0..9, or the queue closed."""
        if priority is not None:
            priority = arguments.priority(priority)
        if self._fast and self._put_now(item, priority):
            return
        self._check_open()
        full = self._store_many((self._payload(item),), priority)
        if full is not None:
            raise asyncio.QueueFull(self._full_text(full))
        self._core.put_done()

    def _put_now(self, item: T, priority: int | None) -> bool:
        """The hot path of :meth:`put` and :meth:`put_nowait` (``_fast``: in memory, items kept
        as objects): one call of this queue's own handle. False when refused (full, or the
        handle busy in another thread): the general way then puts again, waits or says why."""
        try:
            self._handle.put_item(item, -1 if priority is None else priority)
        except MQError:
            return False
        if self._core.async_waiters:
            self._core.put_done()
        return True

    def get_nowait(self) -> T:
        """Remove and return an item now (``asyncio.Queue.get_nowait``).

        :raises asyncio.QueueEmpty: there is none. :raises ValueError: the queue closed."""
        if self._fast_get:
            item = self._take_now()
            if item is not _BUSY:
                if item is _NONE:
                    raise asyncio.QueueEmpty
                return item
        self._check_open()
        m = self._fetch(None)
        if m is None:
            raise asyncio.QueueEmpty
        self._core.got()
        return self._item(m)

    def _fetch(self, cancelled: _Cancelled | None) -> Any:
        """One get without waiting; None when the queue is empty. ``cancelled``: the executor
        form, which gets under a unit of work and backs it out if its caller was cancelled
        meanwhile (the item stays in its place)."""
        core = self._core
        opts = GMO.SYNCPOINT if (self._once or cancelled is not None) else 0
        pair = core.take()
        held = False
        try:
            m = pair[1].get(opts)
            if cancelled is not None:
                if cancelled.set:
                    pair[0].backout()
                    return None
                if not self._once:
                    pair[0].commit()
            if self._once:
                core.hold_with(self._committer(pair))
                held = True
            return m
        except MQError as e:
            if e.reason == _EMPTY:
                return None
            raise map_error(e, f"get from queue {core.name!r} {core.site.where}", core.closed) from None
        finally:
            if not held:
                core.give(pair)

    def _committer(self, pair: tuple[Any, Any]) -> Callable[[], None]:
        """What task_done() does for an at-least-once get of ``pair``: commit it, in the
        executor when that may write to disk."""
        core = self._core

        def commit() -> None:
            try:
                pair[0].commit()
            finally:
                core.give(pair)

        if not self._offload:
            return commit

        def later() -> None:
            loop = self._loop
            if loop is None or loop.is_closed():
                commit()
                return
            self._track(loop.run_in_executor(None, commit))

        return later

    def _track(self, fut: asyncio.Future[Any]) -> None:
        self._commits.add(fut)
        fut.add_done_callback(self._commits.discard)

    # -- waiting -----------------------------------------------------------------------------

    async def put(self, item: T, *, priority: int | None = None) -> None:
        """Put ``item``, waiting for room when the queue is full (``asyncio.Queue.put``);
        ``priority`` 0..9, higher first, items of one priority in put order.

        :raises TypeError: the serializer cannot encode ``item``. :raises ValueError: a
            priority outside 0..9, or the queue closed."""
        if priority is not None:
            priority = arguments.priority(priority)
        if self._fast:  # _put_now written out: its call made a pair through await a tenth slower
            try:
                self._handle.put_item(item, -1 if priority is None else priority)
            except MQError:
                pass  # full (or the handle busy): the general way below puts again, waits or says why
            else:
                if self._core.async_waiters:
                    self._core.put_done()
                return
        elif self._closed:
            raise self._closed_error()
        await self._put_payloads((self._payload(item),), priority)

    async def put_many(self, items: Iterable[T], *, priority: int | None = None) -> None:
        """Put every item of ``items``, in order, in one call of the queue manager: all or
        none, waiting for room for all of them as :meth:`put` waits for one.

        :raises TypeError: ``items`` is not iterable, or the serializer cannot encode one
            (nothing is put then). :raises ValueError: as :meth:`put`."""
        batch = list(items)
        if priority is not None:
            priority = arguments.priority(priority)
        self._check_open()
        if batch:
            await self._put_payloads(batch if self._items else [self._codec.encode(x) for x in batch], priority)

    async def _put_payloads(self, payloads: Sequence[object], priority: int | None) -> None:
        """Put ``payloads`` (each made by ``_payload``), all or none, waiting for room."""
        while True:
            if self._remote:
                full = await self._store_remote(payloads, self._md if priority is None else self._mds[priority])
            elif self._offload:
                full = await self._in_executor(self._store_many, payloads, priority)
            else:
                full = self._store_many(payloads, priority)
            if full is None:
                break
            if full.reason == Reason.STORAGE_NOT_AVAILABLE:
                if self._core.policy == MemoryPolicy.FAIL:
                    raise asyncio.QueueFull(self._full_text(full))
                await self._wait(self._putters, lambda: False, POLL)
                continue  # the budget counts again before it refuses (engine/budget.py)
            await self._wait(self._putters, lambda: not self.full(), POLL if self._remote else None)
        self._core.put_done()

    async def get(self) -> T:
        """Remove and return an item, waiting for one (``asyncio.Queue.get``)."""
        if self._fast_get:  # _take_now written out, as put() writes out _put_now
            try:
                item = self._handle.take_item(self._decode, _NONE)
            except MQError:
                pass  # the handle busy, or a refusal: the general way below says why
            else:
                if item is not _NONE:
                    core = self._core
                    if core.waiting_putters or core.async_waiters:
                        core.got()
                    else:
                        core.gets += 1  # Core.got's whole work when nobody waits (queues/site.py)
                    return item
                # empty: the general way below waits
        elif self._closed:
            raise self._closed_error()
        return await self._get_waiting()

    def _take_now(self) -> Any:
        """The hot path of :meth:`get` and :meth:`get_nowait` (``_fast_get``: in memory, items
        kept as objects, at most once): one call of this queue's own handle. The item; ``_NONE``
        when the queue is empty; ``_BUSY`` when refused (the handle busy in another thread, or
        a refusal the general way then says)."""
        try:
            item = self._handle.take_item(self._decode, _NONE)
        except MQError:
            return _BUSY
        if item is not _NONE:
            core = self._core
            if core.waiting_putters or core.async_waiters:
                core.got()
            else:
                core.gets += 1  # Core.got's whole work when nobody waits (queues/site.py)
        return item

    async def _get_waiting(self) -> T:
        """:meth:`get`'s general way, apart so that the hot path's frame holds no closure."""
        m = await self._get_remote() if self._remote else None
        while m is None:
            m = await self._fetch_in_executor() if self._offload else self._fetch(None)
            if m is None:
                await self._wait(self._getters, lambda: self.qsize() > 0, None)
        self._core.got()
        return self._item(m)

    async def get_many(self, max_items: int) -> list[T]:
        """Remove and return up to ``max_items`` items, waiting for the first one, in the order
        single gets would return them: in memory one call of the queue manager, elsewhere one
        :meth:`get` and then what :meth:`get_nowait` finds.

        :raises TypeError: ``max_items`` not an int. :raises ValueError: ``max_items`` below 1,
            or the queue closed."""
        n = arguments.count(max_items, "max_items")
        self._check_open()
        if self._once or self._remote or self._offload:
            out = [await self.get()]
            while len(out) < n:
                try:
                    out.append(self.get_nowait())
                except asyncio.QueueEmpty:
                    break
            return out
        core = self._core
        while True:
            pair = core.take()
            try:
                ms = pair[1].get_many(n)
            except MQError as e:
                raise map_error(e, f"get from queue {core.name!r} {core.site.where}", core.closed) from None
            finally:
                core.give(pair)
            if ms:
                break
            await self._wait(self._getters, lambda: self.qsize() > 0, None)
        core.got(len(ms))
        item = self._item
        return [item(m) for m in ms]

    async def _in_executor(self, fn: Callable[..., MQError | None], *args: Any) -> MQError | None:
        """A put, ``fn(*args)``, in the loop's executor; a cancel while it runs waits for it
        and, if the put was made, returns as made (the caller must not repeat it)."""
        fut = self._get_loop().run_in_executor(None, fn, *args)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            if await fut is not None:
                raise
            return None  # put before the cancel reached it: done, not to be repeated

    async def _fetch_in_executor(self) -> Any:
        cancelled = _Cancelled()
        fut = self._get_loop().run_in_executor(None, self._fetch, cancelled)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            cancelled.set = True
            m = await fut  # the call ends soon: it backs out unless it had committed
            if m is None:
                raise
            return m  # taken before the cancel reached it: delivered, not dropped

    async def _wait(
        self, waiters: deque[asyncio.Future[None]], ready: Callable[[], bool], timeout: float | None
    ) -> None:
        """Wait to be woken (a put for getters, a get for putters), as ``asyncio.Queue``
        does: a waiter woken but cancelled passes the wake on. Returns at once when ``ready()``
        already; ``timeout``: also look again after that many seconds."""
        loop = self._get_loop()
        fut = loop.create_future()
        core = self._core
        core.count_async_waiter(1)  # before the last look (Core.async_waiters)
        try:
            with self._lock:
                if ready():
                    return
                waiters.append(fut)
            timer = loop.call_later(timeout, _wake_one, fut) if timeout is not None else None
            try:
                await fut
            except BaseException:
                fut.cancel()
                with contextlib.suppress(ValueError):  # a wake took it out already
                    waiters.remove(fut)
                if not fut.cancelled() and ready():
                    _wakeup_next(waiters)
                raise
            finally:
                if timer is not None:
                    timer.cancel()
        finally:
            core.count_async_waiter(-1)

    # what Core calls (queues/site.py), from any thread

    def wake_getter(self) -> None:
        self._wake(self._getters)

    def wake_putter(self) -> None:
        self._wake(self._putters)

    def wake_joiners(self) -> None:
        loop = self._loop
        if loop is None or not self._joiners:
            return
        if threading.get_ident() == self._thread:
            self._wake_joiners()
        else:
            _call_soon(loop, self._wake_joiners)

    def _wake_joiners(self) -> None:
        joiners, self._joiners = self._joiners, []
        for fut in joiners:
            _wake_one(fut)

    def _wake(self, waiters: deque[asyncio.Future[None]]) -> None:
        loop = self._loop
        if loop is None:
            return
        if threading.get_ident() == self._thread:
            if waiters:
                _wakeup_next(waiters)
            return
        with self._lock:  # against a waiter between its look and its wait
            if waiters:
                _call_soon(loop, _wakeup_next, waiters)

    # -- a served queue manager --------------------------------------------------------------

    async def _apair(self) -> tuple[Any, Any]:
        try:
            return self._apool.pop()
        except IndexError:
            pass
        core = self._core
        aconnect = core.site.aconnect
        assert aconnect is not None
        try:
            conn = await aconnect()
            return conn, await conn.open(core.name, OO.OUTPUT | OO.INPUT_SHARED)
        except MQError as e:
            raise map_error(e, f"queue {core.name!r} {core.site.where}", core.closed) from None

    async def _store_remote(self, datas: Sequence[Any], md: MD | None) -> MQError | None:
        core = self._core
        pair = await self._apair()
        try:
            if len(datas) == 1:
                await pair[1].put(datas[0], md)
            else:
                await pair[1].put_many(datas, md)
            return None
        except MQError as e:
            if e.reason not in FULL:
                raise map_error(e, f"put to queue {core.name!r} {core.site.where}", core.closed) from None
            return e
        finally:
            self._apool.append(pair)

    async def _get_remote(self) -> Any:
        core = self._core
        pair = await self._apair()
        opts = GMO.WAIT | (GMO.SYNCPOINT if self._once else 0)
        try:
            m = await pair[1].get(opts, -1)
        except BaseException as e:
            self._apool.append(pair)
            if isinstance(e, MQError):
                raise map_error(e, f"get from queue {core.name!r} {core.site.where}", core.closed) from None
            raise
        if self._once:
            core.hold_with(lambda: self._track(asyncio.ensure_future(self._acommit(pair))))
        else:
            self._apool.append(pair)
        return m

    async def _acommit(self, pair: tuple[Any, Any]) -> None:
        try:
            await pair[0].commit()
        finally:
            self._apool.append(pair)

    # -- tasks -------------------------------------------------------------------------------

    def task_done(self) -> None:
        """Say that an item got earlier is handled (``asyncio.Queue.task_done``); with
        ``delivery="at-least-once"`` this commits its removal (in the executor, or through
        the asyncio client, when that writes).

        :raises ValueError: called more times than there were items."""
        self._core.task_done()

    async def join(self) -> None:
        """Wait until every item put has been got and marked done (``asyncio.Queue.join``).
        On a served queue (``url=``): until this queue's gets are all done and the queue is
        empty for every process."""
        core = self._core
        loop = self._get_loop()
        delay = 0.001
        while True:
            while self._commits:
                await asyncio.gather(*list(self._commits), return_exceptions=True)
            if core.site.remote:
                if core.finished():
                    return
                await asyncio.sleep(delay)
                delay = min(POLL, delay * 2)
                continue
            fut = loop.create_future()
            with core.mutex:
                if core.unfinished_tasks == 0:
                    return
                self._joiners.append(fut)
            await fut

    # -- the end -----------------------------------------------------------------------------

    def close(self) -> None:
        """``QueueBase.close``; this queue's own handle (the hot path's) goes back first."""
        self._fast = self._fast_get = False
        own, self._own, self._handle = self._own, None, None
        if own is not None and not self._closed:
            self._core.give(own)
        super().close()

    async def aclose(self) -> None:
        """``close``, and the asyncio client's connections ended cleanly first (url=)."""
        pool, self._apool = self._apool, []
        for conn, _ in pool:
            with contextlib.suppress(MQError):
                await conn.disconnect()
        self.close()

    async def __aenter__(self) -> AsyncQueue[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _wakeup_next(waiters: deque[asyncio.Future[None]]) -> None:
    """Wake the first waiter not already done (``asyncio.Queue._wakeup_next``)."""
    while waiters:
        fut = waiters.popleft()
        if not fut.done():
            fut.set_result(None)
            break


def _wake_one(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args: Any) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nothing waits on it any more
        loop.call_soon_threadsafe(fn, *args)
