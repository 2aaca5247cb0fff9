"""``LifoQueue``, ``PriorityQueue``, ``AsyncLifoQueue`` and ``AsyncPriorityQueue``: the
standard library's ordered queues, their items held in this process.

A queue manager's queue keeps FIFO order within ten priorities; last-in-first-out, and the
order of the items' own comparison (``heapq``'s, ``queue.PriorityQueue``'s), are orders of
arbitrary Python objects that its lanes cannot keep. So these four hold their items in the
door itself, in the standard library's own class (``queue.LifoQueue``, ``asyncio.LifoQueue``,
...: a list, or a heap, under the standard library's waiting, ``maxsize``, timeouts and
``task_done``/``join``), which each one keeps as its collaborator rather than a copy of its
code. What they add is sweepq's: the constructor's checks and ``name``, the ``repr`` of every
sweepq queue, ``close()`` and the context managers. The options that need the queue manager
(``path=``, ``url=``, ``memory_budget=``, ``serializer=``, ...) are refused with what to use
instead (``arguments.held_only``). docs/queue.md, "The other queues", says why.
"""

from __future__ import annotations

import asyncio
import queue as stdqueue
from types import GenericAlias
from typing import Any, ClassVar, Generic, Protocol, Self

from . import arguments
from .base import T, describe


class _Holder(Protocol[T]):
    """What the standard library's queues, thread and asyncio alike, have in common."""

    @property
    def maxsize(self) -> int: ...
    def qsize(self) -> int: ...
    def empty(self) -> bool: ...
    def full(self) -> bool: ...
    def put_nowait(self, item: T) -> None: ...
    def get_nowait(self) -> T: ...
    def task_done(self) -> None: ...


class HeldQueue(Generic[T]):
    """A queue whose items this process holds in a standard library queue (the module
    docstring): what the thread and asyncio forms share. ``maxsize`` is the standard
    library's (0 or less: unbounded); the only keyword is ``name`` (``"QUEUE"``), the label
    its ``repr`` shows. Every call after ``close()`` raises ``ValueError``."""

    __class_getitem__: ClassVar[Any] = classmethod(GenericAlias)  # LifoQueue[int], as the standard library's
    _label: ClassVar[str]
    _held: _Holder[T]

    def __init__(self, maxsize: float = 0, *, name: str = "QUEUE", **options: object) -> None:
        arguments.held_only(self._label, options)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        self._name = name
        self._held = self._hold(arguments.maxsize(maxsize))
        self._closed = False

    def _hold(self, maxsize: float) -> _Holder[T]:
        """The standard library queue that holds the items (each subclass's own)."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        """The label given at construction (``"QUEUE"``): nothing else names this queue."""
        return self._name

    def __repr__(self) -> str:
        return describe(self._label, self._name, self._held.qsize, self._held.maxsize, "in memory", self._closed)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(self._closed_text())

    def _closed_text(self) -> str:
        return f"queue {self._name!r} in memory is closed"

    def qsize(self) -> int:
        """Items on the queue now."""
        self._check_open()
        return self._held.qsize()

    def empty(self) -> bool:
        """``qsize() == 0``."""
        self._check_open()
        return self._held.empty()

    def full(self) -> bool:
        """``0 < maxsize <= qsize()``."""
        self._check_open()
        return self._held.full()

    def put_nowait(self, item: T) -> None:
        """Put ``item`` now; the standard library's ``Full`` exception when there is no room."""
        self._check_open()
        self._held.put_nowait(item)

    def get_nowait(self) -> T:
        """Remove and return the next item now; the standard library's ``Empty`` exception
        when there is none."""
        self._check_open()
        return self._held.get_nowait()

    def task_done(self) -> None:
        """Say that an item got earlier is handled (the standard library's ``task_done``).

        :raises ValueError: called more times than there were items."""
        self._check_open()
        self._held.task_done()

    def close(self) -> None:
        """Close the queue: its items are dropped, and calls after it raise ``ValueError``;
        closing twice does nothing."""
        self._closed = True


# -- threads ------------------------------------------------------------------------------------


class _Closing(stdqueue.Queue[T]):
    """A standard library queue whose waits end once its sweepq queue is closed: the
    standard library's own hooks (``_qsize``, ``_put``, ``_get``) say "-1 items" when
    closed, which ends both a get's wait for an item and a put's wait for room, and the
    put or get then raises ``ValueError``, as a get waiting on a closed ``sweepq.Queue``
    does."""

    closed_text = ""  # set, under the queue's mutex, by close()

    def _qsize(self) -> int:
        return -1 if self.closed_text else super()._qsize()

    def _put(self, item: T) -> None:
        if self.closed_text:
            raise ValueError(self.closed_text)
        super()._put(item)

    def _get(self) -> T:
        if self.closed_text:
            raise ValueError(self.closed_text)
        return super()._get()


class _Stack(_Closing[Any], stdqueue.LifoQueue[Any]):
    pass


class _Heap(_Closing[Any], stdqueue.PriorityQueue[Any]):
    pass


class _ThreadQueue(HeldQueue[T]):
    """The thread form: ``queue.Queue``'s calls, which block, with ``timeout``."""

    _held: _Closing[T]
    _kind: ClassVar[type[_Closing[Any]]]

    def _hold(self, maxsize: float) -> _Closing[T]:
        # A fractional maxsize works as in the standard library (qsize() >= maxsize is full),
        # whose annotations say int.
        return self._kind(maxsize)  # type: ignore[arg-type]

    @property
    def maxsize(self) -> float:
        """The most items the queue holds (0: no limit); settable, as ``queue.Queue``'s is."""
        return self._held.maxsize

    @maxsize.setter
    def maxsize(self, value: float) -> None:
        self._check_open()
        size = arguments.maxsize(value)
        held = self._held
        with held.not_full:
            held.maxsize = size  # type: ignore[assignment]  # a float bound works as an int one
            held.not_full.notify_all()  # a larger maxsize lets waiting puts go

    @property
    def unfinished_tasks(self) -> int:
        """Items put and not yet marked done with ``task_done`` (``queue.Queue``'s)."""
        return self._held.unfinished_tasks

    def put(self, item: T, block: bool = True, timeout: float | None = None) -> None:
        """Put ``item`` (``queue.Queue.put``): on a full queue wait for room, up to ``timeout``
        seconds when given, unless ``block`` is false.

        :raises queue.Full: no room. :raises ValueError: a negative ``timeout``, or the
            queue closed (also while the put waits)."""
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        self._check_open()
        self._held.put(item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> T:
        """Remove and return the next item (``queue.Queue.get``), waiting for one, up to
        ``timeout`` seconds when given, unless ``block`` is false.

        :raises queue.Empty: nothing came. :raises ValueError: a negative ``timeout``, or
            the queue closed (also while the get waits)."""
        if block and timeout is not None:
            timeout = arguments.timeout(timeout)
        self._check_open()
        return self._held.get(block, timeout)

    def join(self) -> None:
        """Block until every item put has been got and marked done (``queue.Queue.join``)."""
        self._check_open()
        self._held.join()

    def close(self) -> None:
        """Close the queue; a put or get waiting in another thread raises ``ValueError``."""
        super().close()
        held = self._held
        with held.mutex:
            held.closed_text = self._closed_text()
            held.not_empty.notify_all()
            held.not_full.notify_all()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LifoQueue(_ThreadQueue[T]):
    """``queue.LifoQueue``: the last item put is the first got; the same constructor, calls
    and exceptions (``queue.Full``, ``queue.Empty``), and thread-safe as it is. Its items are
    held in this process (the module docstring): the keyword options are ``name`` only."""

    _label: ClassVar[str] = "LifoQueue"
    _kind = _Stack


class PriorityQueue(_ThreadQueue[T]):
    """``queue.PriorityQueue``: the lowest item first, by the items' own comparison (a heap,
    as ``heapq``); typically ``(priority, data)`` tuples. Otherwise as :class:`LifoQueue`."""

    _label: ClassVar[str] = "PriorityQueue"
    _kind = _Heap


# -- asyncio ------------------------------------------------------------------------------------


class _AsyncQueue(HeldQueue[T]):
    """The asyncio form: ``asyncio.Queue``'s coroutines; it binds to the event loop that first
    waits on it, as the standard library's does. A coroutine waiting when the queue is closed
    stays waiting, as one on a closed in-memory ``sweepq.AsyncQueue`` does: cancel it."""

    _held: asyncio.Queue[T]
    _kind: ClassVar[type[asyncio.Queue[Any]]]

    def _hold(self, maxsize: float) -> asyncio.Queue[T]:
        return self._kind(maxsize)  # type: ignore[arg-type]  # a float works: asyncio's test_float_maxsize

    @property
    def maxsize(self) -> float:
        """The most items the queue holds (0: no limit), as ``asyncio.Queue``'s: read-only."""
        return self._held.maxsize

    async def put(self, item: T) -> None:
        """Put ``item``, waiting for room when the queue is full (``asyncio.Queue.put``).

        :raises ValueError: the queue closed."""
        self._check_open()
        await self._held.put(item)

    async def get(self) -> T:
        """Remove and return the next item, waiting for one (``asyncio.Queue.get``).

        :raises ValueError: the queue closed."""
        self._check_open()
        return await self._held.get()

    async def join(self) -> None:
        """Wait until every item put has been got and marked done (``asyncio.Queue.join``)."""
        self._check_open()
        await self._held.join()

    async def aclose(self) -> None:
        """``close()``, for ``async with`` and code that closes every queue the same way."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncLifoQueue(_AsyncQueue[T]):
    """``asyncio.LifoQueue``: the last item put is the first got; the same constructor,
    coroutines and exceptions (``asyncio.QueueFull``, ``asyncio.QueueEmpty``). Its items are
    held in this process (the module docstring): the keyword options are ``name`` only."""

    _label: ClassVar[str] = "AsyncLifoQueue"
    _kind = asyncio.LifoQueue


class AsyncPriorityQueue(_AsyncQueue[T]):
    """``asyncio.PriorityQueue``: the lowest item first, by the items' own comparison (a
    heap). Otherwise as :class:`AsyncLifoQueue`."""

    _label: ClassVar[str] = "AsyncPriorityQueue"
    _kind = asyncio.PriorityQueue
