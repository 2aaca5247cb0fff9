"""``sweepq.SimpleQueue``: ``queue.SimpleQueue`` on a queue of a sweepq queue manager.

``queue.SimpleQueue`` is an unbounded FIFO queue without task tracking: ``put``, ``get``,
their ``_nowait`` forms, ``empty`` and ``qsize``. FIFO is what a queue manager's queue keeps,
so this one is on the same engine path as ``Queue``, with its options (``path=``,
``memory_budget=``, ``url=``, ``serializer=``, ...). It is made of a ``Queue``, its
collaborator, and each call is that ``Queue``'s: no code of the put and get paths is
repeated here. What this class adds is the narrower API, and puts that may re-enter a call of
the queue in the same thread, as the C ``queue.SimpleQueue``'s may (``SimpleQueue.put``).
"""

from __future__ import annotations

import queue as stdqueue
import time
from collections import deque
from collections.abc import Callable, Iterable
from threading import get_ident
from types import GenericAlias
from typing import Any, ClassVar, Generic, Self, TypeVar

from . import arguments
from .base import POLL, T
from .threadqueue import Queue

R = TypeVar("R")


class _Fifo(Queue[T]):
    """The ``Queue`` a ``SimpleQueue`` is made of: its ``repr`` names the ``SimpleQueue``."""

    _label: ClassVar[str] = "SimpleQueue"


class SimpleQueue(Generic[T]):
    """An unbounded FIFO queue for threads: ``queue.SimpleQueue``, its items kept by a sweepq
    queue manager.

    ``SimpleQueue()`` behaves as ``queue.SimpleQueue()``: ``put``, ``put_nowait``, ``get``,
    ``get_nowait``, ``empty``, ``qsize``, raising ``queue.Empty``, and thread-safe. The
    keyword-only options are ``Queue``'s (queues/base.py) but ``maxsize`` (there is no bound)
    and ``delivery="at-least-once"`` (there is no ``task_done()`` to end one): each is
    refused with a ``TypeError`` or ``ValueError`` that says what to use instead.

    A put never waits, as the standard library's does not, and ``block`` and ``timeout`` are
    ignored as there, except where an option makes the queue manager refuse room: a memory
    budget with ``memory_policy="block"`` (the put waits) or ``"fail"`` (``queue.Full``), a
    served queue whose ``maxsize`` another process set (the put waits).
    """

    __class_getitem__: ClassVar[Any] = classmethod(GenericAlias)  # SimpleQueue[int], as the standard library's

    def __init__(self, **options: Any) -> None:
        arguments.simple_only(options)
        self._queue: Queue[T] = _Fifo(0, **options)
        self._inside: set[int] = set()  # the threads in a call of this queue now
        self._late: dict[int, deque[T]] = {}  # each such thread's puts made inside its call, kept aside

    @property
    def name(self) -> str:
        """The queue's name in its queue manager."""
        return self._queue.name

    def __repr__(self) -> str:
        return repr(self._queue)

    def put(self, item: T, block: bool = True, timeout: float | None = None) -> None:
        """Put ``item`` on the queue (``queue.SimpleQueue.put``; ``block`` and ``timeout``
        are ignored, as there: the class docstring says when a put may wait). Re-entrant,
        as the standard library's: a put made from a ``__del__`` or a signal handler that
        runs inside a call of this queue in the same thread is kept aside and placed when
        that call ends, in the order made (the queue manager's lock may be held there, and
        it is not re-entrant).

        :raises TypeError: the serializer cannot encode ``item``. :raises ValueError: an item
            over 100 MiB encoded, or the queue closed."""
        me = get_ident()
        inside = self._inside
        if me in inside:
            self._late.setdefault(me, deque()).append(item)
            return
        inside.add(me)
        try:
            self._queue.put(item)
        finally:
            if me in self._late:
                self._flush(me)
            inside.discard(me)

    def put_nowait(self, item: T) -> None:
        """``put(item)``, for compatibility with ``Queue.put_nowait``."""
        self.put(item)

    def put_many(self, items: Iterable[T]) -> None:
        """Put every item of ``items``, in order, in one call of the queue manager
        (``Queue.put_many``); re-entrant as :meth:`put` is."""
        batch = list(items)
        me = get_ident()
        if me in self._inside:
            self._late.setdefault(me, deque()).extend(batch)
            return
        self._call(self._queue.put_many, batch)

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return the oldest item (``queue.SimpleQueue.get``), waiting for one, up
        to ``timeout`` seconds when given, unless ``block`` is false.

        :raises queue.Empty: nothing came. :raises ValueError: a negative ``timeout``, or
            the queue closed."""
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        me = get_ident()
        inside = self._inside
        if me in inside:  # a get inside a call of this thread: no waiting for what is kept aside
            return self._queue.get(block, timeout)
        inside.add(me)
        try:
            try:
                return self._queue.get(False)  # an item there is taken without a wait's set-up
            except stdqueue.Empty:
                if not block:
                    raise
            return self._wait(me, timeout)
        finally:
            if me in self._late:
                self._flush(me)
            inside.discard(me)

    def get_nowait(self) -> T:
        """``get(block=False)``: ``queue.Empty`` at once when there is no item."""
        return self.get(False)

    def get_many(self, max_items: int, block: bool = True, timeout: float | None = None) -> list[T]:
        """Remove and return up to ``max_items`` items (``Queue.get_many``): in one call of
        the queue manager when there are items; else the first waited for as :meth:`get`
        waits, and then what is there.

        :raises queue.Empty: nothing came. :raises TypeError: ``max_items`` not an int.
        :raises ValueError: ``max_items`` below 1, a negative ``timeout``, or the queue
            closed."""
        n = arguments.count(max_items, "max_items")
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        return self._call(self._get_many, n, block, timeout)

    def _get_many(self, n: int, block: bool, timeout: float | None) -> list[T]:
        q = self._queue
        try:
            return q.get_many(n, False)
        except stdqueue.Empty:
            if not block:
                raise
        first = [self._wait(get_ident(), timeout)]
        try:
            return first + q.get_many(n - 1, False) if n > 1 else first
        except stdqueue.Empty:
            return first

    def _call(self, fn: Callable[..., R], *args: Any) -> R:
        """``fn(*args)`` as a call of this queue in this thread: a put that re-enters it is
        kept aside, and placed when it ends."""
        me = get_ident()
        inside = self._inside
        inside.add(me)
        try:
            return fn(*args)
        finally:
            if me in self._late:
                self._flush(me)
            inside.discard(me)

    def _wait(self, me: int, timeout: float | None) -> T:
        """A get that waits, in slices of at most POLL seconds: a put kept aside during this
        very call (see ``put``) is placed between two slices, so the get never waits for an
        item that only its own thread could place."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            slice_ = POLL if deadline is None else max(0.0, min(POLL, deadline - time.monotonic()))
            try:
                return self._queue.get(True, slice_)
            except stdqueue.Empty:
                if self._flush(me):
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    def _flush(self, me: int) -> bool:
        """Place the puts thread ``me`` kept aside, in the order made (those its own
        placing makes included); whether there were any."""
        flushed = False
        while (late := self._late.pop(me, None)) is not None:
            flushed = True
            for item in late:
                self._queue.put(item)
        return flushed

    def empty(self) -> bool:
        """``qsize() == 0``."""
        return self._queue.empty()

    def qsize(self) -> int:
        """Items on the queue now; another thread or process may change it at once."""
        return self._queue.qsize()

    def close(self) -> None:
        """Close the queue (``Queue.close``): calls after it raise ``ValueError``."""
        self._queue.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
