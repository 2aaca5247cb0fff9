"""What ``Queue`` and ``AsyncQueue`` have in common: the
constructor and its options, the queue's name, size and limit, ``repr``, decoding an item,
and closing. Each subclass adds the calls of the standard library class it mirrors.
"""

from __future__ import annotations

import weakref
from types import GenericAlias
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from sweepq.engine import MD, MQError, Persistence, Reason

from . import arguments
from .errors import map_error
from .serializers import Codec, codec
from .site import Core, open_core, site_for

if TYPE_CHECKING:
    import os
    from collections.abc import Callable, Sequence

    from .serializers import Serializer

T = TypeVar("T")

POLL = 0.05  # seconds between two looks at a full queue that nothing in this process will wake
FULL = (Reason.Q_FULL, Reason.STORAGE_NOT_AVAILABLE)  # what a put to a full queue is refused with


def descriptors(persistent: bool) -> list[MD]:
    """The descriptor of a put at each priority 0..9, made once."""
    p = Persistence.PERSISTENT if persistent else Persistence.NOT_PERSISTENT
    return [MD(priority=n, persistence=p) for n in range(10)]


def _kept(item: T) -> T:
    """An in-memory queue's payload of ``item`` (its ``QueueBase._payload``): the item itself."""
    return item


def describe(label: str, name: str, qsize: Callable[[], int], maxsize: float, where: str, closed: bool) -> str:
    """The ``repr`` of every sweepq queue: its class, name, depth (``qsize()``), bound and
    where it lives: ``<sweepq.Queue 'QUEUE' depth=2 maxsize=5 in memory>``."""
    if closed:
        return f"<sweepq.{label} {name!r} closed, {where}>"
    try:
        depth = f"depth={qsize()}"
    except Exception:  # a server gone: repr still answers
        depth = "depth=?"
    size = f" maxsize={maxsize}" if maxsize > 0 else ""
    return f"<sweepq.{label} {name!r} {depth}{size} {where}>"


def decoder(c: Codec, queue: str) -> Callable[[bytes], Any]:
    """``c.decode``, its failure said as :func:`undecodable` says it."""
    decode = c.decode

    def decode_item(data: bytes) -> Any:
        try:
            return decode(data)
        except Exception as e:
            raise undecodable(c, queue, e) from e

    return decode_item


def undecodable(c: Codec, queue: str, e: Exception) -> ValueError:
    """What a get raises for data of queue ``queue`` that ``c`` could not decode (``e``): data
    put by something else than this serializer."""
    return ValueError(
        f"an item of queue {queue!r} is not {c.name} data ({e}); it was put by "
        "something else: read it with the serializer it was written with (e.g. serializer='bytes')"
    )


class QueueBase(Generic[T]):
    """A queue of a sweepq queue manager, as the standard library's queues are built on.

    ``maxsize`` is the standard library's (0 or less: unbounded); the queue's MQ depth limit
    (MAXDEPTH) enforces it, so on a data directory or a server it holds for every user of the
    queue, and with at-least-once delivery an item counts against it until ``task_done()``.

    In memory (no ``path=`` or ``url=``) a queue keeps each item as the object it is, as
    ``queue.Queue`` does: a get returns the very object that was put. Items leave the process
    through ``serializer``: ``"pickle"`` (the default: any picklable object), ``"json"``,
    ``"msgpack"``, ``"bytes"`` (the item is the message, nothing encoded) or an object with
    ``dumps`` and ``loads`` — every item at its put on a data directory (``path=``) or a
    served queue manager (``url=``), and under a ``memory_budget`` only the items the sweeper
    moves to disk, when it moves them; what a get returns of those is an equal copy.

    Keyword-only options, each optional:

    * ``name``: the queue's name in its queue manager (``"QUEUE"``): several queues share a
      data directory or a server by name.
    * ``path``: a data directory. Items are kept there: they survive ``close()``, a restart
      and a kill -9 of the process (``sync="os"``, the default: every put and get is written
      to the OS before it returns) or a power loss too (``sync="commit"``: synced to disk
      first). One queue manager per data directory and process: queues of one directory
      share it.
    * ``memory_budget``: a size (``"100MB"``, ``"512MiB"`` or bytes, at least 16 KiB) that
      the items in memory and the store's own memory stay within: the backlog beyond it is
      swept into compressed blobs on disk and brought back, in order, as gets reach it.
      ``memory_policy`` says what a put does once the budget itself is reached: ``"page"``
      (the default: the producer writes the backlog out itself), ``"block"`` (the put waits
      for room, as on a full queue) or ``"fail"`` (the queue counts as full at once).
      ``budget_counts`` says what the budget bounds: ``"resident"`` (the default: the
      process's resident memory above what it was when the queue opened, what ``top`` and a
      container's limit see) or ``"held"`` (only what the queue and its store hold: faster,
      but the allocator's slack is not bounded). Counting resident memory counts the whole
      process: give one queue manager (one in-memory queue, or one data directory) the budget.
    * ``url``: a served queue manager (``sweepq serve``; ``unix:///path/sweepq.sock``,
      ``tcp://host:port``) that many processes share; ``token`` / ``admin_token`` as
      ``sweepq.client.connect`` takes them, else ``$SWEEPQ_TOKEN`` /
      ``$SWEEPQ_ADMIN_TOKEN``, else read from beside a Unix socket. Defining a missing queue
      or setting ``maxsize`` needs the admin token.
    * ``delivery``: ``"at-most-once"`` (the default: a get removes the item for good, so a
      crash after ``get()`` and before the item is handled loses it, and nothing is ever
      delivered twice) or ``"at-least-once"`` (a get holds the item in a unit of work until
      ``task_done()`` commits it: after a crash, or ``close()``, an item not yet done is back
      on the queue, in its place, to be delivered again).

    Every bad argument is a ``TypeError`` or ``ValueError`` raised by the call given it.
    Use the queue as a context manager, or call ``close``; one that is garbage-collected
    or left at exit is closed then.
    """

    __class_getitem__: ClassVar[Any] = classmethod(GenericAlias)  # Queue[int], as the standard library's
    _label: ClassVar[str] = "Queue"

    def __init__(
        self,
        maxsize: float = 0,
        *,
        name: str = "QUEUE",
        serializer: str | Serializer = "pickle",
        path: str | os.PathLike[str] | None = None,
        memory_budget: int | str | None = None,
        memory_policy: str = "page",
        url: str | None = None,
        delivery: str = "at-most-once",
        sync: str | None = None,
        token: str | None = None,
        admin_token: str | None = None,
        budget_counts: str | None = None,
    ) -> None:
        size = arguments.maxsize(maxsize)
        w = arguments.where(
            name, path, url, memory_budget, memory_policy, delivery, sync, token, admin_token, budget_counts
        )
        self._codec = codec(serializer)
        key, make, options = site_for(w)
        self._core: Core = open_core(key, make, w.name, size, w.policy, options)
        # What a get decodes an item's data with: a function made once, not a bound method made
        # on every get (the in-memory gets hand it to the engine's take_item each time).
        self._decode: Callable[[bytes], T] = decoder(self._codec, self._core.name)
        self._loads: Callable[[bytes], T] = self._codec.decode  # _decode without its guard, for a get that guards it
        # In memory: items kept as objects (engine/core/lanes.py, "Items"), encoded only when
        # swept. Not under a budget that counts what the queue holds: an object's size is not
        # known before it is encoded, and only resident memory sees it.
        site = self._core.site
        self._items = not (site.persistent or site.remote or (site.budget and w.budget_counts == "held"))
        if self._items:
            self._core.keep_items(self._codec.encode)
        # What a put hands the queue manager for an item: the item itself in memory, else its
        # encoding (raising TypeError when the serializer cannot encode it). The codec's own
        # function where items are encoded, so that a durable put calls it and nothing between.
        self._payload: Callable[[T], object] = _kept if self._items else self._codec.encode
        self._once = w.delivery == "at-least-once"
        self._mds = descriptors(self._core.site.persistent)
        # A put without a descriptor is the engine's fastest: used where the queue's default
        # persistence is the one wanted.
        self._md: MD | None = None if self._core.default_persistence else MD(persistence=self._mds[0].persistence)
        self._closed = False
        self._closer = weakref.finalize(self, self._core.release, True)

    # -- what it is ------------------------------------------------------------------------

    @property
    def name(self) -> str:
        """The queue's name in its queue manager."""
        return self._core.name

    @property
    def maxsize(self) -> float:
        """The most items the queue holds (0: no limit); settable, as ``queue.Queue``'s is."""
        return self._core.maxsize

    @maxsize.setter
    def maxsize(self, value: float) -> None:
        self._check_open()
        self._core.set_maxsize(arguments.maxsize(value))

    def __repr__(self) -> str:
        core = self._core
        return describe(self._label, core.name, self.qsize, core.maxsize, core.site.where, self._closed or core.closed)

    # -- sizes -------------------------------------------------------------------------------

    def qsize(self) -> int:
        """Items on the queue now, not counting those got and not yet done (at-least-once).
        Another thread or process may change it at once."""
        self._check_open()
        core = self._core
        return max(0, core.depth() - len(core.pending))

    def empty(self) -> bool:
        """``qsize() == 0``."""
        return self.qsize() == 0

    def full(self) -> bool:
        """``0 < maxsize <= qsize()``."""
        m = self._core.maxsize
        return 0 < m <= self.qsize()

    # -- what the subclasses share -----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> ValueError:
        return ValueError(f"queue {self._core.name!r} {self._core.site.where} is closed")

    def _store_many(self, payloads: Sequence[object], priority: int | None) -> MQError | None:
        """One put of ``payloads`` (each made by ``_payload``) at ``priority`` (None: the queue's
        default) through a pooled connection, in one call of the queue manager, all or none:
        None when made, or the refusal of a full queue (MAXDEPTH 2053, the memory budget
        2071). A served queue's tasks are counted first, so that a get and ``task_done()`` of
        an item in another thread never find the count behind (a local queue's engine counts
        them as it places them: queues/site.py).

        :raises: what ``map_error`` (queues/errors.py) maps any other refusal to."""
        core = self._core
        n = len(payloads)
        counted = core.counts_puts
        if counted:  # a served queue's; a local one's engine counts its puts (queues/site.py)
            core.putting(n)
        try:
            pool = core.pool  # Core.take and Core.give written out, as Core.put_item has them
            try:
                pair = pool.pop()
            except IndexError:
                pair = core.take()
            try:
                h = pair[1]
                if self._items:
                    p = -1 if priority is None else priority
                    if n == 1:
                        h.put_item(payloads[0], p)
                    else:
                        h.put_items(payloads, p)
                else:
                    md = self._md if priority is None else self._mds[priority]
                    if n == 1:
                        h.put(payloads[0], md)
                    else:
                        h.put_many(payloads, md)
                return None
            finally:
                pool.append(pair)
        except MQError as e:
            if counted:
                core.put_failed(n)
            if e.reason not in FULL:
                raise map_error(e, f"put to queue {core.name!r} {core.site.where}", core.closed) from None
            return e
        except BaseException:
            if counted:
                core.put_failed(n)
            raise

    def _full_text(self, e: MQError) -> str:
        core = self._core
        if e.reason == Reason.Q_FULL:
            return f"queue {core.name!r} is full: maxsize {core.maxsize}"
        policy = core.policy.name.lower()
        return (
            f"queue {core.name!r}: the memory budget {core.site.where} is full (memory_policy={policy!r}); "
            "get items, raise memory_budget=, or use memory_policy='page'"
        )

    def _item(self, m: Any) -> T:
        """The item a got message holds: the object itself while it was in memory, else
        decoded from its data (swept, on a data directory, or served)."""
        if self._items and m.has_item:
            return m.item
        return self._decode(m.data)

    def close(self) -> None:
        """Close the queue: its connections end (with ``delivery="at-least-once"`` the items
        got and not yet done go back on the queue, in place) and, the last queue of its queue
        manager in this process, the queue manager (a data directory is then released). Items
        of a persistent queue stay; an in-memory queue's are gone. Calls after it raise
        ``ValueError``; closing twice does nothing."""
        self._closed = True
        if self._closer.detach() is not None:
            self._core.release()
