"""Group commit of writes: callers that write at the same time share one write.

RocksDB's write thread is the model (db/write_thread.cc, "leader/follower"): each caller
joins a queue; the first one finding no write under way becomes the *leader*, takes every
item queued so far (its own first among them, in the order they were handed in) and writes
them with one call; the others (*followers*) sleep until the write holding their item
returned, then return (or raise what it raised). Items handed in while a write runs wait for
the next one, which their first caller to wake leads. A lone caller takes no turn and sleeps
on nothing: it writes its own item at once.

What a caller is promised does not change: it returns only after the write holding its item
returned, so whatever that write makes durable (the OS has it; the caller syncs after) holds
for it; a write that fails fails for every item it held, and being atomic it wrote none of
them (so each caller may retry, or report that nothing changed).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")

_PENDING = object()  # a follower's outcome before its group was written


def _call(f: Callable[[T], None], item: T) -> None:
    """``f(item)``: :meth:`WriteGroup.run`'s lone write in :meth:`WriteGroup.alone_or_join`'s form."""
    f(item)


class _Waiter(Generic[T]):
    __slots__ = ("item", "outcome")

    def __init__(self, item: T):
        self.item = item
        self.outcome: object = _PENDING  # None (written) or the exception the write raised


class _Right:
    """The hot half of :class:`WriteGroup`: a lone caller's right to write
    (:meth:`alone_or_join`), every durable put and get (issue 31). Compiled, it is a C type
    whose fields (group.pxd) it reads without a look-up; :class:`WriteGroup`, a normal
    (generic) class on it, holds the rest and sets these fields in its ``__init__``."""

    def alone_or_join(
        self: Any,  # Any: WriteGroup, which holds the rest (a self's type must be a supertype of its class)
        write: Callable[[A, B], None],
        item: Callable[[A, B], T] | None,
        a: A,
        b: B,
    ) -> bool:
        """``write(a, b)`` now, when nobody writes or waits; otherwise the item ``item(a, b)``
        joins the next group and this returns once it is written (as :meth:`run`). True when
        written either way; False (nothing written) when it was not alone and ``item`` is
        None. The one statement of a lone caller's right to write: :meth:`run`'s lone caller
        comes this way, and a lone durable put or get, which builds no item (issue 31), in
        one call from its caller (BlobStore.message_writer binds it once). :raises: what the
        write that held it raised (nothing of it written)."""
        # No lock on the way (every durable put and get passes here, issue 31): the right to
        # write is claimed by a pop of the token. A caller that queues meanwhile finds it
        # taken and waits; this one gives it back *before* it looks at the queue, and the
        # waiter queued *before* it looked at the token, so either this one sees the waiter
        # and wakes it (under the condition, after it began waiting) or the waiter saw the
        # token back and led.
        if not self._queue:
            token = self._token
            try:
                token.pop()
            except IndexError:  # a write runs
                pass
            else:
                try:
                    write(a, b)
                finally:
                    self.writes += 1  # while the token is held: no other writer counts meanwhile
                    self.items += 1
                    token.append(None)
                    if self._queue:
                        cond = self._cond
                        with cond:
                            cond.notify_all()  # one queued meanwhile leads the next write
                return True
        if item is None:
            return False
        self._join(item(a, b))
        return True


class WriteGroup(_Right, Generic[T]):
    """Hands the items of concurrent callers of :meth:`run` to ``write`` in groups (see the
    module docstring). ``write(items)`` gets them in the order their callers handed them in and
    must write all of them or none. Thread-safe; ``write`` never runs twice at once.

    ``writes`` counts the calls of ``write``, ``items`` the items they took: ``items / writes``
    is the mean size of a group. ``alone(item)``, when given, writes the item of a caller
    that found nobody writing or waiting (as ``write([item])`` would: the same promise)."""

    def __init__(self, write: Callable[[list[T]], None], alone: Callable[[T], None] | None = None):
        self._write = write
        # A lone caller's write of its one item: no list built, no group to take apart.
        self._alone: Callable[[T], None] = alone if alone is not None else (lambda item: write([item]))
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Waiter[T]] = []
        # The right to write: one item, taken by a pop and given back by an append (each one
        # call the GIL makes atomic), so that a lone caller claims it without the condition's
        # lock (alone_or_join). Empty while a write runs.
        self._token: list[None] = [None]
        self.writes = 0
        self.items = 0

    @property
    def queued(self) -> int:
        """Items waiting for the next write (what a test waits on)."""
        return len(self._queue)

    def run(self, item: T) -> None:
        """Return once ``item`` is written. :raises: what ``write`` raised for its group."""
        if not self.alone_or_join(_call, None, self._alone, item):  # written alone when nobody writes or waits
            self._join(item)

    def _join(self, item: T) -> None:
        """Queue ``item`` for the next group and return once it is written: as its leader
        (the first to find no write under way) or as a follower. Others write or wait, or
        did a moment ago: then this caller leads a group of one."""
        cond = self._cond
        token = self._token
        cond.acquire()
        try:
            me = _Waiter(item)
            self._queue.append(me)
            while me.outcome is _PENDING:
                try:
                    token.pop()  # lead: every item queued so far, this one first among them
                    break
                except IndexError:  # a write runs (a group's, or a lone caller's): its end wakes this one
                    cond.wait()
            else:  # a leader wrote it
                if me.outcome is None:
                    return
                raise copy.copy(me.outcome)  # type: ignore[misc]  # an exception; a copy per follower
            waiters, self._queue = self._queue, []
            items = [w.item for w in waiters]
        finally:
            cond.release()
        error: BaseException | None = None
        try:
            self._write(items)
        except BaseException as e:
            error = e
        cond.acquire()
        self.writes += 1
        self.items += len(items)
        for w in waiters:
            w.outcome = error
        token.append(None)
        if waiters or self._queue:
            cond.notify_all()  # the followers written, and one queued since to lead next
        cond.release()
        if error is not None:
            raise error
