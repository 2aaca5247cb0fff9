"""``sweepq.Queue``: ``queue.Queue`` for threads, on a queue of a sweepq queue manager.

The same constructor, methods and exceptions as the standard library's, so that changing the
import is the whole migration; underneath, each item is a message on an MQ queue, which is
what the keyword-only options (queues/base.py) add: persistence, a memory bound, other
processes, priorities, at-least-once delivery.
"""

from __future__ import annotations

import queue as stdqueue
import time
from collections.abc import Iterable, Sequence
from typing import ClassVar

from sweepq.engine import GMO, MemoryPolicy, MQError, Reason

from . import arguments
from .base import POLL, QueueBase, T, undecodable
from .errors import map_error

_EMPTY = int(Reason.NO_MSG_AVAILABLE)  # plain ints: an enum member's lookup costs on every call
_WAIT = int(GMO.WAIT)
_SYNCPOINT = int(GMO.SYNCPOINT)
_NONE = object()  # what Handle.take_item returns for an empty queue


class Queue(QueueBase[T]):
    """A FIFO queue for threads: ``queue.Queue``, its items kept by a sweepq queue manager.

    ``Queue(maxsize=0)`` behaves as ``queue.Queue(maxsize)``: ``put``, ``get``,
    ``put_nowait``, ``get_nowait``, ``qsize``, ``empty``, ``full``, ``task_done``, ``join``,
    raising ``queue.Full`` and ``queue.Empty`` (the standard library's own classes), and it is
    thread-safe as ``queue.Queue`` is. The keyword-only options (``name``, ``serializer``,
    ``path``, ``memory_budget``, ``memory_policy``, ``url``, ``delivery``, ``sync``,
    ``token``, ``admin_token``) are ``QueueBase``'s.
    """

    _label: ClassVar[str] = "Queue"

    @property
    def unfinished_tasks(self) -> int:
        """Items put and not yet marked done with ``task_done`` (``queue.Queue``'s)."""
        return self._core.unfinished_tasks

    # -- put ---------------------------------------------------------------------------------

    def put(self, item: T, block: bool = True, timeout: float | None = None, *, priority: int | None = None) -> None:
        """Put ``item`` on the queue (``queue.Queue.put``).

        A full queue (``maxsize``; a memory budget reached with ``memory_policy="block"``)
        makes the put wait, up to ``timeout`` seconds when given, for room; with ``block``
        false, or when the wait ends, it raises ``queue.Full``. ``priority`` (0 to 9) puts it
        ahead of every item of a lower priority; items of one priority stay in put order.

        :raises queue.Full: no room (at once for ``memory_policy="fail"``).
        :raises TypeError: the serializer cannot encode ``item``.
        :raises ValueError: a negative ``timeout``, a priority outside 0..9, an item over
            100 MiB encoded, or the queue closed."""
        if priority is not None:
            priority = arguments.priority(priority)
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        if self._closed:
            raise self._closed_error()
        core = self._core
        # In memory, the hot path: one call of the engine, which counts the put itself
        # (queues/site.py). A refusal goes the general way below, which puts again (a refused
        # put placed nothing) and then waits, or says why.
        if self._items and core.put_item(item, -1 if priority is None else priority):
            if core.async_waiters:
                core.put_done()
            return
        payloads = (self._payload(item),)
        full = self._store_many(payloads, priority)
        if full is not None:
            self._put_when_room(payloads, priority, block, timeout, full)
        if core.async_waiters:  # put_done's own test, made here: no call when none waits
            core.put_done()

    def put_many(
        self, items: Iterable[T], block: bool = True, timeout: float | None = None, *, priority: int | None = None
    ) -> None:
        """Put every item of ``items``, in order, in one call of the queue manager: all or none.
        A queue without room for all of them waits as :meth:`put` does, then raises
        ``queue.Full`` with none put. Items count one task each.

        :raises queue.Full: no room for all of them. :raises TypeError: ``items`` is not
            iterable, or the serializer cannot encode one (nothing is put then).
        :raises ValueError: as :meth:`put`."""
        batch = list(items)
        if priority is not None:
            priority = arguments.priority(priority)
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        if self._closed:
            raise self._closed_error()
        if not batch:
            return
        payloads = batch if self._items else [self._codec.encode(x) for x in batch]
        full = self._store_many(payloads, priority)
        if full is not None:
            self._put_when_room(payloads, priority, block, timeout, full)
        self._core.put_done()

    def _put_when_room(
        self, payloads: Sequence[object], priority: int | None, block: bool, timeout: float | None, full: MQError
    ) -> None:
        """The put found the queue full: wait for a get here (or the poll slice: a get in
        another process, memory swept out) and try again, until ``timeout``."""
        core = self._core
        if not block or (full.reason == Reason.STORAGE_NOT_AVAILABLE and core.policy == MemoryPolicy.FAIL):
            raise stdqueue.Full(self._full_text(full))
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            seen = core.gets
            remaining = POLL if deadline is None else min(POLL, deadline - time.monotonic())
            if remaining <= 0:
                raise stdqueue.Full(self._full_text(full))
            core.wait_for_room(seen, remaining)
            again = self._store_many(payloads, priority)  # the budget counts again before it refuses (engine/budget.py)
            if again is None:
                return
            full = again

    def put_nowait(self, item: T, *, priority: int | None = None) -> None:
        """``put(item, block=False)``: ``queue.Full`` at once when there is no room."""
        self.put(item, False, priority=priority)

    # -- get ---------------------------------------------------------------------------------

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return the next item (``queue.Queue.get``): the oldest of the highest
        priority. With ``block`` (the default) wait for one, up to ``timeout`` seconds when
        given; the wait happens in the queue manager (for ``url=``, in the server), so an item
        put by any thread or process wakes it.

        With ``delivery="at-least-once"`` the item stays held for this queue until
        ``task_done``: a crash or ``close`` before then puts it back.

        :raises queue.Empty: nothing came. :raises ValueError: a negative ``timeout``, or the
            queue closed."""
        core = self._core
        if self._closed:
            raise self._closed_error()
        wait = -1
        if block and timeout is not None:
            wait = arguments.wait_ms(arguments.timeout(timeout))
        opts = _SYNCPOINT if self._once else 0
        pool = core.pool
        try:
            pair = pool.pop()
        except IndexError:
            pair = core.take()
        h = pair[1]
        m = None
        try:
            if self._items and not self._once:
                # In memory, at most once: the item itself, taken without a Message or a wait
                # built (Handle.take_item); an empty queue waits in the engine's get.
                item = h.take_item(self._decode, _NONE)
                if item is _NONE:
                    if not block:
                        raise stdqueue.Empty
                    m = h.get(_WAIT, wait)
            else:
                try:
                    m = h.get(opts)  # an item there is taken without building a wait
                except MQError as e:
                    if e.reason != _EMPTY or not block:
                        raise
                    m = h.get(opts | _WAIT, wait)
        except MQError as e:
            pool.append(pair)
            if e.reason == _EMPTY:
                raise stdqueue.Empty from None
            raise map_error(e, f"get from queue {core.name!r} {core.site.where}", core.closed) from None
        except BaseException:
            pool.append(pair)
            raise
        if self._once:
            core.hold(pair)
        else:
            pool.append(pair)
        if core.counts_puts or core.waiting_putters or core.async_waiters:
            core.got()
        else:
            core.gets += 1  # Core.got's whole work when nobody waits (queues/site.py)
        if m is None:
            return item
        if self._items and m.has_item:
            return m.item
        try:  # self._decode(m.data) written out: on a data directory, a Python call fewer per get
            return self._loads(m.data)
        except Exception as e:
            raise undecodable(self._codec, core.name, e) from e

    def get_many(self, max_items: int, block: bool = True, timeout: float | None = None) -> list[T]:
        """Remove and return up to ``max_items`` items in one call of the queue manager, in
        the order single gets would return them. With ``block`` (the default) wait, up to
        ``timeout`` seconds when given, for the first one; then take what is there, up to
        ``max_items``, without waiting more. Each item is a task (``task_done``).

        :raises queue.Empty: nothing came. :raises TypeError: ``max_items`` not an int.
        :raises ValueError: ``max_items`` below 1, a negative ``timeout``, or the queue closed."""
        n = arguments.count(max_items, "max_items")
        if self._once:  # each item is held in a unit of work until its own task_done()
            out = [self.get(block, timeout)]
            while len(out) < n:
                try:
                    out.append(self.get(False))
                except stdqueue.Empty:
                    break
            return out
        core = self._core
        if self._closed:
            raise self._closed_error()
        wait = -1
        if block and timeout is not None:
            wait = arguments.wait_ms(arguments.timeout(timeout))
        pair = core.take()
        try:
            ms = pair[1].get_many(n)
            if not ms and block:
                ms = pair[1].get_many(n, _WAIT, wait)
        except MQError as e:
            raise map_error(e, f"get from queue {core.name!r} {core.site.where}", core.closed) from None
        finally:
            core.give(pair)
        if not ms:
            raise stdqueue.Empty
        core.got(len(ms))
        item = self._item
        return [item(m) for m in ms]

    def get_nowait(self) -> T:
        """``get(block=False)``: ``queue.Empty`` at once when there is no item."""
        return self.get(False)

    # -- tasks -------------------------------------------------------------------------------

    def task_done(self) -> None:
        """Say that an item got earlier is handled (``queue.Queue.task_done``); with
        ``delivery="at-least-once"`` this is what removes it for good (the oldest item this
        thread got and has not marked done, or, when it has none, the oldest of any thread).

        :raises ValueError: called more times than there were items."""
        self._core.task_done()

    def join(self) -> None:
        """Block until every item put has been got and marked done (``queue.Queue.join``).
        On a served queue (``url=``): until this queue's gets are all done and the queue is
        empty for every process."""
        core = self._core
        if not core.site.remote:
            with core.all_tasks_done:
                while core.unfinished_tasks:
                    # In slices, as the engine's waits on the main thread: a Ctrl-C that the
                    # kernel hands to another thread still ends a join (sweeper/clock.py
                    # MAIN_THREAD_SLICE).
                    core.all_tasks_done.wait(POLL)
            return
        delay = 0.001
        while not core.finished():
            with core.all_tasks_done:
                core.all_tasks_done.wait(delay)
            delay = min(POLL, delay * 2)

    def __enter__(self) -> Queue[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
