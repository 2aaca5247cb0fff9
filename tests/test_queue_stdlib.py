"""The standard library's own queue tests, run against sweepq's queues.

CPython's ``Lib/test/test_queue.py`` (``BaseQueueTestMixin``: basic order, full and empty,
blocking put and get with a thread that unblocks them, timeouts, ``task_done``/``join`` with
worker threads, shrinking ``maxsize``) with ``type2test`` a factory of :class:`sweepq.Queue`
and ``self.queue`` the standard library's ``queue`` module, so ``queue.Full`` and
``queue.Empty`` are what it catches; in four forms: in memory, on a data directory
(``path=``), under a memory budget so small that items are swept to disk, and on a served
queue manager (``url=``, a ``sweepq serve`` started here). Its ``BaseSimpleQueueTest`` too (50
producer and 50 consumer threads), in memory. The same mixin against :class:`sweepq.LifoQueue`
and :class:`sweepq.PriorityQueue` (held in memory, their only form), as CPython runs it
against ``queue``'s; and ``BaseSimpleQueueTest`` against :class:`sweepq.SimpleQueue` in the
four forms, with the C ``SimpleQueue``'s ``test_reentrancy`` in memory.

And the behaviour tests of ``Lib/test/test_asyncio/test_queues.py`` against
:class:`sweepq.AsyncQueue`: the test functions, unchanged, see a module ``asyncio`` whose
``Queue`` is ``AsyncQueue``. Left out are only the tests that read ``asyncio.Queue``'s private
attributes (``_getters``, ``_putters``, its format helper, ...), found by the names their code
uses. asyncio's ``LifoQueueTests``, ``PriorityQueueTests`` and their join tests run the same
way, with its ``LifoQueue`` and ``PriorityQueue`` being :class:`sweepq.AsyncLifoQueue` and
:class:`sweepq.AsyncPriorityQueue`.

Both come from the interpreter's ``test`` package when it has one, else from the copies in
tests/cpython/ (PSF licence, see their headers), which a test here holds to the original.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import pickle
import queue as stdqueue
import types
import unittest

import pytest
from cpython import asyncio_queue_tests, queue_tests
from net_env import ServeProcess, short_dir

from sweepq import (
    AsyncLifoQueue,
    AsyncPriorityQueue,
    AsyncQueue,
    LifoQueue,
    PriorityQueue,
    Queue,
    SimpleQueue,
)

try:  # the interpreter's own copy, when it ships its test suite
    from test import test_queue as cpython_queue
    from test.test_asyncio import test_queues as cpython_asyncio
except ImportError:  # Debian's python3 without python3-test, a slim image: the copies
    cpython_queue = queue_tests  # type: ignore[assignment]
    cpython_asyncio = asyncio_queue_tests  # type: ignore[assignment]

_names = itertools.count()


def _factory(cls=Queue, **options):
    """``type2test``: ``cls(maxsize)`` with ``options``, each queue a new one (its own name)."""

    def make(maxsize=0):
        return cls(maxsize, name=f"Q{next(_names)}", **options)

    make.__name__ = cls.__name__
    return make


class _Form(cpython_queue.BaseQueueTestMixin):
    queue = stdqueue  # what the tests catch: queue.Full, queue.Empty
    options: dict = {}
    cls: type = Queue

    def setUp(self):
        self.type2test = _factory(self.cls, **self.options)
        super().setUp()


class TestInMemory(_Form, unittest.TestCase):
    pass


class TestOnADataDirectory(_Form, unittest.TestCase):
    def setUp(self):
        self.options = {"path": os.path.join(short_dir(), "q")}
        super().setUp()


class Padded:
    """pickle, each item padded to 1 KiB: a 16 KiB budget (the least there is) then holds a
    dozen of the tests' small ints, and the rest are swept to disk."""

    @staticmethod
    def dumps(item):
        return pickle.dumps(item).ljust(1024)

    loads = staticmethod(pickle.loads)  # it stops at pickle's end mark: the padding is ignored


class TestUnderATinyMemoryBudget(_Form, unittest.TestCase):
    options = {"memory_budget": "16KiB", "serializer": Padded}


@pytest.fixture(scope="class")
def server(request):
    with ServeProcess(os.path.join(short_dir(), "d")) as served:
        request.cls.options = {"url": served.url}
        yield


@pytest.mark.usefixtures("server")
class TestOnAServedQueueManager(_Form, unittest.TestCase):
    pass


class Item:
    """A picklable item (the original's is local to its test, which pickle cannot name)."""


class TestManyThreadsInMemory(cpython_queue.BaseSimpleQueueTest, unittest.TestCase):
    queue = stdqueue

    def setUp(self):
        self.type2test = Queue
        super().setUp()

    def test_references(self):
        """The original's check that the queue drops each item as it leaves, with an item
        pickle can name: sweepq keeps the item's bytes, never the item."""
        import gc
        import weakref

        for _ in range(20):
            self.q.put(Item())
        for _ in range(20):
            wr = weakref.ref(self.q.get())
            gc.collect()
            self.assertIsNone(wr())


# -- LifoQueue, PriorityQueue, SimpleQueue ------------------------------------------------------
# CPython runs BaseQueueTestMixin against queue.LifoQueue and queue.PriorityQueue (its
# basic_queue_test checks each one's order by the class's name), and BaseSimpleQueueTest, with
# CSimpleQueueTest's test_reentrancy, against queue.SimpleQueue: the same here.


class TestLifoQueue(_Form, unittest.TestCase):
    cls = LifoQueue


class TestPriorityQueue(_Form, unittest.TestCase):
    cls = PriorityQueue


def _simple(**options):
    """``type2test`` of BaseSimpleQueueTest: SimpleQueue() with ``options``, a new queue each."""

    def make():
        return SimpleQueue(name=f"S{next(_names)}", **options)

    return make


# test_reentrancy leaves objects whose __del__ puts to its queue; the collector frees them with
# the queue, which its finalizer has closed by then, and the put says so (as it should).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
class TestSimpleQueueInMemory(cpython_queue.BaseSimpleQueueTest, unittest.TestCase):
    """In memory items are kept as objects: the original test_references (the queue drops
    each item as it leaves) runs unchanged, with the local class pickle could not name."""

    queue = stdqueue
    test_reentrancy = cpython_queue.CSimpleQueueTest.test_reentrancy

    def setUp(self):
        self.type2test = _simple()
        super().setUp()


class _SimpleForm(cpython_queue.BaseSimpleQueueTest):
    """SimpleQueue where its items leave memory: test_references with an item pickle can name."""

    queue = stdqueue
    test_references = TestManyThreadsInMemory.test_references
    options: dict = {}

    def setUp(self):
        self.type2test = _simple(**self.options)
        super().setUp()


class TestSimpleQueueOnADataDirectory(_SimpleForm, unittest.TestCase):
    def setUp(self):
        self.options = {"path": os.path.join(short_dir(), "s")}
        super().setUp()


class TestSimpleQueueUnderATinyMemoryBudget(_SimpleForm, unittest.TestCase):
    options = {"memory_budget": "16KiB", "serializer": Padded}


@pytest.mark.usefixtures("server")
class TestSimpleQueueOnAServedQueueManager(_SimpleForm, unittest.TestCase):
    pass


# -- asyncio ----------------------------------------------------------------------------------

_ASYNCIO = types.ModuleType("asyncio", "asyncio, with Queue being sweepq.AsyncQueue")
_ASYNCIO.__dict__.update({k: v for k, v in vars(asyncio).items() if not k.startswith("__")})
_ASYNCIO.Queue = AsyncQueue
_ASYNCIO.LifoQueue = AsyncLifoQueue
_ASYNCIO.PriorityQueue = AsyncPriorityQueue
# asyncio.Queue's own private names: a test that uses one inspects its insides, not behaviour.
_PRIVATE = {n for n in [*vars(asyncio.Queue), *vars(asyncio.Queue())] if n.startswith("_") and not n.endswith("__")}


def _names_used(code: types.CodeType, cls: type) -> set[str]:
    """Names and strings a test's code uses, with those of the helpers it calls on its class."""
    found = set(code.co_names) | {c for c in code.co_consts if isinstance(c, str)}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names_used(const, cls)
    for name in list(found):
        helper = getattr(cls, name, None) if name.startswith("_") else None
        if isinstance(helper, types.FunctionType):
            found |= _names_used(helper.__code__, cls)
    return found


def _inspects_private(code: types.CodeType, cls: type) -> bool:
    return any(part in _PRIVATE for name in _names_used(code, cls) for part in name.replace("[", " ").split())


def _rebound(cls: type) -> type:
    """``cls`` whose test functions see ``_ASYNCIO`` as ``asyncio``; private-reading tests out."""
    namespace = {}
    for name, f in vars(cls).items():
        if not isinstance(f, types.FunctionType):
            if not name.startswith("__"):
                namespace[name] = f  # q_class
            continue
        if name.startswith("test") and _inspects_private(f.__code__, cls):
            continue
        g = {**f.__globals__, "asyncio": _ASYNCIO}
        namespace[name] = types.FunctionType(f.__code__, g, name, f.__defaults__, f.__closure__)
    bases = tuple(b for b in cls.__bases__ if b not in (object, unittest.IsolatedAsyncioTestCase))
    return type(f"AsyncQueue{cls.__name__}", (*bases, unittest.IsolatedAsyncioTestCase), namespace)


AsyncQueueBasicTests = _rebound(cpython_asyncio.QueueBasicTests)
AsyncQueueGetTests = _rebound(cpython_asyncio.QueueGetTests)
AsyncQueuePutTests = _rebound(cpython_asyncio.QueuePutTests)


def _join_tests(name, q_class):
    """CPython's _QueueJoinTestMixin with ``q_class``: its own classes bind asyncio's at import."""
    return _rebound(type(name, (), {**vars(cpython_asyncio._QueueJoinTestMixin), "q_class": q_class}))


AsyncQueueJoinTests = _join_tests("QueueJoinTests", AsyncQueue)
# asyncio's LifoQueue and PriorityQueue have their order test and the join tests in CPython.
AsyncLifoQueueTests = _rebound(cpython_asyncio.LifoQueueTests)
AsyncPriorityQueueTests = _rebound(cpython_asyncio.PriorityQueueTests)
AsyncLifoQueueJoinTests = _join_tests("LifoQueueJoinTests", AsyncLifoQueue)
AsyncPriorityQueueJoinTests = _join_tests("PriorityQueueJoinTests", AsyncPriorityQueue)


def test_the_private_tests_left_out_are_those_that_read_insides():
    """What the filter leaves out is exactly what reads asyncio.Queue's insides: repr's
    ``_getters[1]``, ``q._putters``, its format helper; every other test runs."""
    left_out = {
        f"{cls.__name__}.{name}"
        for cls in (
            cpython_asyncio.QueueBasicTests,
            cpython_asyncio.QueueGetTests,
            cpython_asyncio.QueuePutTests,
            cpython_asyncio._QueueJoinTestMixin,
        )
        for name, f in vars(cls).items()
        if name.startswith("test") and isinstance(f, types.FunctionType) and _inspects_private(f.__code__, cls)
    }
    assert left_out == {
        "QueueBasicTests.test_repr",
        "QueueBasicTests.test_str",
        "QueueGetTests.test_get_with_putters",
        "QueueGetTests.test_cancelled_getters_not_being_held_in_self_getters",
        "QueuePutTests.test_cancelled_puts_not_being_held_in_self_putters",
        "_QueueJoinTestMixin.test_format",
    }
    assert "test_maxsize" in vars(AsyncQueueBasicTests) and "test_get_cancel_drop_one_pending_reader" in vars(
        AsyncQueuePutTests
    )


def test_the_forms_really_are_what_they_say(tmp_path):
    """The data-directory form keeps items across a close; the budget form sweeps them."""
    q = Queue(path=tmp_path / "d")
    q.put("kept")
    q.close()
    assert Queue(path=tmp_path / "d").get_nowait() == "kept"
    tiny = Queue(memory_budget="16KiB", serializer=Padded)
    for i in range(100):
        tiny.put(i)
    info = tiny._core.site.admin.inquire_queue(tiny.name)
    assert info.swept > 50, info
    assert [tiny.get() for _ in range(100)] == list(range(100))


def test_the_copies_in_tests_cpython_are_cpythons_own():
    """The fallback copies are the very classes of the interpreter's files (where it has
    them), so a machine without the test package runs the same tests."""
    import inspect

    copies = {
        queue_tests: [
            "_TriggerThread",
            "BlockingTestMixin",
            "BaseQueueTestMixin",
            "BaseSimpleQueueTest",
            "CSimpleQueueTest",
        ],
        asyncio_queue_tests: [
            "QueueBasicTests",
            "QueueGetTests",
            "QueuePutTests",
            "LifoQueueTests",
            "PriorityQueueTests",
            "_QueueJoinTestMixin",
        ],
    }
    for copy, names in copies.items():
        original = cpython_queue if copy is queue_tests else cpython_asyncio
        for name in names:
            assert inspect.getsource(getattr(copy, name)) == inspect.getsource(getattr(original, name)), name
