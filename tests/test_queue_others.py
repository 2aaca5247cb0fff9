"""The standard library's other queues as sweepq mirrors: ``SimpleQueue`` (on the queue
manager, as ``Queue``), and ``LifoQueue``, ``PriorityQueue``, ``AsyncLifoQueue`` and
``AsyncPriorityQueue`` (their items held in this process: queues/ordered.py).

CPython's own tests for each run in tests/test_queue_stdlib.py; here is what is sweepq's:
each option a class cannot take refused with a one-line error that says what to use instead,
``repr`` and ``Class[int]`` as the standard library's, ``close()`` ending a waiting call, and
a ``SimpleQueue`` really on the queue manager (its items survive a close on a data
directory, and are swept under a memory budget).
"""

from __future__ import annotations

import asyncio
import queue as stdqueue
import threading
import types

import pytest

import sweepq
from sweepq import (
    AsyncLifoQueue,
    AsyncPriorityQueue,
    AsyncQueue,
    LifoQueue,
    PriorityQueue,
    Queue,
    SimpleQueue,
)
from sweepq.queues.arguments import _ENGINE_OPTIONS

HELD = [LifoQueue, PriorityQueue, AsyncLifoQueue, AsyncPriorityQueue]
# Each sweepq class and the standard library class it mirrors.
MIRRORS = [
    (Queue, stdqueue.Queue),
    (AsyncQueue, asyncio.Queue),
    (SimpleQueue, stdqueue.SimpleQueue),
    (LifoQueue, stdqueue.LifoQueue),
    (PriorityQueue, stdqueue.PriorityQueue),
    (AsyncLifoQueue, asyncio.LifoQueue),
    (AsyncPriorityQueue, asyncio.PriorityQueue),
]
# A value of each option of Queue that would be valid there.
ENGINE_VALUES = {
    "path": "data",
    "url": "unix:///tmp/sweepq.sock",
    "memory_budget": "100MB",
    "memory_policy": "block",
    "budget_counts": "held",
    "sync": "commit",
    "token": "t",
    "admin_token": "a",
    "serializer": "json",
    "delivery": "at-least-once",
}


def _one_line(e: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(e.value)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_every_option_of_queue_is_one_the_held_queues_say_why_they_refuse():
    import inspect

    taken = {n for n, p in inspect.signature(Queue).parameters.items() if p.kind == p.KEYWORD_ONLY} - {"name"}
    assert taken == set(_ENGINE_OPTIONS) == set(ENGINE_VALUES)


@pytest.mark.parametrize("option", sorted(ENGINE_VALUES))
@pytest.mark.parametrize("cls", HELD, ids=lambda c: c.__name__)
def test_a_held_queue_refuses_an_option_that_needs_the_queue_manager(cls, option, tmp_path):
    with pytest.raises(TypeError) as e:
        cls(**{option: ENGINE_VALUES[option]})
    text = _one_line(e)
    assert text.startswith(f"{cls.__name__}() got an unexpected keyword argument {option!r}: ")
    assert "FIFO" in text and ("sweepq.Queue" in text or "never leave" in text)
    assert not list(tmp_path.iterdir())  # nothing made on the way


@pytest.mark.parametrize("cls", HELD, ids=lambda c: c.__name__)
def test_a_held_queue_refuses_an_unknown_keyword_as_python_does(cls):
    with pytest.raises(TypeError, match=r"^\w+\(\) got an unexpected keyword argument 'colour'$"):
        cls(colour="red")
    with pytest.raises(TypeError, match="maxsize must be a number"):
        cls("5")
    with pytest.raises(TypeError, match="name must be a str"):
        cls(name=5)


def test_a_simple_queue_refuses_a_bound_and_at_least_once_delivery():
    with pytest.raises(TypeError) as e:
        SimpleQueue(maxsize=5)
    assert "unbounded, as queue.SimpleQueue is; sweepq.Queue(maxsize)" in _one_line(e)
    with pytest.raises(TypeError):
        SimpleQueue(5)  # queue.SimpleQueue(5) is a TypeError too
    with pytest.raises(ValueError) as v:
        SimpleQueue(delivery="at-least-once")
    assert "use sweepq.Queue(delivery='at-least-once')" in _one_line(v)
    with pytest.raises(ValueError, match="is not one of"):
        SimpleQueue(delivery="twice")  # Queue's own check
    with pytest.raises(ValueError, match="sync= says when"):
        SimpleQueue(sync="commit")  # Queue's own check
    with SimpleQueue(delivery="at-most-once") as q:
        q.put(1)
        assert q.get() == 1


@pytest.mark.parametrize(("cls", "std"), MIRRORS, ids=lambda c: c.__module__ + "." + c.__name__)
def test_class_getitem_makes_a_generic_alias_as_the_standard_librarys(cls, std):
    alias, theirs = cls[int], std[int]
    assert type(alias) is type(theirs) is types.GenericAlias
    assert alias.__origin__ is cls and alias.__args__ == (int,) == theirs.__args__
    assert cls.__name__.removeprefix("Async") == std.__name__
    assert getattr(sweepq, cls.__name__) is cls


def _made(cls):
    return cls(name="jobs") if cls is SimpleQueue else cls(5, name="jobs")


@pytest.mark.parametrize("cls", [SimpleQueue, *HELD], ids=lambda c: c.__name__)
def test_repr_names_the_class_and_its_state_and_answers_when_closed(cls):
    """As the standard library's repr names its class (asyncio's says its maxsize too), and
    in the format of every sweepq queue's."""
    q = _made(cls)
    q.put_nowait(1)
    bound = "" if cls is SimpleQueue else " maxsize=5"
    assert repr(q) == f"<sweepq.{cls.__name__} 'jobs' depth=1{bound} in memory>"
    q.close()
    assert repr(q) == f"<sweepq.{cls.__name__} 'jobs' closed, in memory>"
    with pytest.raises(ValueError, match="closed"):
        q.put_nowait(2)
    with pytest.raises(ValueError, match="closed"):
        q.qsize()


def _waits_on(condition: threading.Condition) -> None:
    """Until a thread waits on ``condition`` (its waiters, the test's view of the waiting)."""
    while not condition._waiters:  # type: ignore[attr-defined]
        threading.Event().wait(0.001)


@pytest.mark.parametrize("cls", [LifoQueue, PriorityQueue], ids=lambda c: c.__name__)
def test_a_waiting_get_or_put_ends_with_valueerror_when_the_queue_is_closed(cls):
    """As a get waiting on a closed sweepq.Queue does: a thread never waits for ever on a
    queue that is gone."""
    errors: list[BaseException] = []

    def call(fn, *args):
        try:
            fn(*args)
        except BaseException as e:
            errors.append(e)

    empty, full = cls(1), cls(1)
    full.put(1)
    threads = [threading.Thread(target=call, args=(empty.get,)), threading.Thread(target=call, args=(full.put, 2))]
    for t in threads:
        t.start()
    _waits_on(empty._held.not_empty)
    _waits_on(full._held.not_full)
    empty.close()
    full.close()
    for t in threads:
        t.join(10)
        assert not t.is_alive()
    assert [type(e) for e in errors] == [ValueError, ValueError], errors
    assert all("in memory is closed" in str(e) for e in errors)


def test_the_held_queues_keep_the_standard_librarys_order_and_task_counts():
    q = PriorityQueue()
    for item in [(2, "b"), (1, "a"), (3, "c")]:
        q.put(item)
    assert q.unfinished_tasks == 3 and q.qsize() == 3
    assert [q.get_nowait()[1] for _ in range(3)] == ["a", "b", "c"]
    for _ in range(3):
        q.task_done()
    q.join()
    with pytest.raises(ValueError, match="too many times"):
        q.task_done()
    with pytest.raises(stdqueue.Empty):
        q.get(timeout=0)
    with pytest.raises(ValueError, match="non-negative"):
        q.get(timeout=-1)
    with LifoQueue[str](1) as lifo:
        lifo.put("x")
        with pytest.raises(stdqueue.Full):
            lifo.put("y", timeout=0)


def test_the_async_held_queues_order_and_close():
    asyncio.run(_async_held_queues())


async def _async_held_queues() -> None:
    async with AsyncPriorityQueue[int](2) as q:
        await q.put(2)
        q.put_nowait(1)
        with pytest.raises(asyncio.QueueFull):
            q.put_nowait(0)
        assert q.maxsize == 2 and q.full()
        assert [await q.get(), q.get_nowait()] == [1, 2]
        with pytest.raises(asyncio.QueueEmpty):
            q.get_nowait()
        q.task_done()
        q.task_done()
        await q.join()
    with pytest.raises(ValueError, match="closed"):
        await q.get()
    lifo = AsyncLifoQueue()
    for i in range(3):
        await lifo.put(i)
    assert [await lifo.get() for _ in range(3)] == [2, 1, 0]
    await lifo.aclose()
    with pytest.raises(ValueError, match="closed"):
        lifo.empty()


def test_a_simple_queue_is_on_the_queue_manager(tmp_path):
    """Its items are the queue manager's: kept on a data directory across a close, swept to
    disk under a memory budget, and shared by name with a Queue of the same directory."""
    with SimpleQueue(path=tmp_path / "d", name="jobs") as q:
        q.put_many(["a", "b"])
        q.put_nowait("c")
        assert q.qsize() == 3 and not q.empty()
    with SimpleQueue[str](path=tmp_path / "d", name="jobs") as again:
        assert again.get_many(2) == ["a", "b"]
        with Queue(path=tmp_path / "d", name="jobs") as same:
            assert same.get_nowait() == "c"
        assert again.empty()
        with pytest.raises(stdqueue.Empty):
            again.get_nowait()
        with pytest.raises(stdqueue.Empty):
            again.get(timeout=0.001)
        with pytest.raises(stdqueue.Empty):
            again.get_many(2, timeout=0.001)
        with pytest.raises(stdqueue.Empty):
            again.get_many(2, block=False)
        with pytest.raises(ValueError, match="max_items must be at least 1"):
            again.get_many(0)
        putter = threading.Thread(target=again.put_many, args=(["d", "e"],))
        putter.start()
        got = again.get_many(3, timeout=30)  # waits for the first, then takes what is there
        putter.join()
        assert got == ["d", "e"]  # put_many places both at once
    tiny = SimpleQueue(memory_budget="16KiB", budget_counts="held", serializer="bytes")
    for i in range(200):
        tiny.put(bytes([i % 256]) * 1024)
    assert tiny._queue._core.site.admin.inquire_queue(tiny.name).swept > 50
    assert [tiny.get() for _ in range(200)] == [bytes([i % 256]) * 1024 for i in range(200)]
    tiny.close()


def test_a_put_that_re_enters_a_put_or_get_of_a_simple_queue_is_placed_after_it_in_order(tmp_path):
    """As the C queue.SimpleQueue's put is re-entrant (bpo-14976): here a serializer puts
    from inside a put and inside a get (the way a __del__ or a signal handler may). Kept aside
    and placed when the interrupted call ends, such a put never overtakes the put it
    interrupted; from inside the queue manager's call it would otherwise wait on a lock its
    own thread holds (CPython's test_reentrancy, in tests/test_queue_stdlib.py)."""
    import pickle

    inner: list[SimpleQueue[int]] = []

    class Reenters:
        @staticmethod
        def dumps(item: int) -> bytes:
            if item in (1, 2):
                inner[0].put(item * 100)
            return pickle.dumps(item)

        @staticmethod
        def loads(data: bytes) -> int:
            item = pickle.loads(data)
            if item == 3:
                inner[0].put_many([301, 302])
            return item

    with SimpleQueue(path=tmp_path / "d", serializer=Reenters) as q:
        inner.append(q)
        q.put(1)
        q.put_many([2, 3])
        assert [q.get(timeout=10) for _ in range(4)] == [1, 100, 2, 3]  # put_many is one call: 200 after it
        assert [q.get_nowait() for _ in range(3)] == [200, 301, 302]
        assert q.empty()


@pytest.mark.parametrize(("cls", "std"), MIRRORS, ids=lambda c: c.__module__ + "." + c.__name__)
def test_every_call_of_the_standard_librarys_class_is_there_with_its_parameters(cls, std):
    """Each public method of the standard library's class, with its parameters and defaults
    (what a caller may pass it); a sweepq addition is keyword-only with a default."""
    import inspect

    names = [n for n in dir(std) if not n.startswith("_") and callable(getattr(std, n))]
    assert names
    for name in names:
        ours = getattr(cls, name)
        assert inspect.iscoroutinefunction(ours) == inspect.iscoroutinefunction(getattr(std, name)), name
        theirs = [p for p in inspect.signature(getattr(std, name)).parameters.values() if p.name != "self"]
        mine = [p for p in inspect.signature(ours).parameters.values() if p.name != "self"]
        assert [(p.name, p.default) for p in mine[: len(theirs)]] == [(p.name, p.default) for p in theirs], name
        assert all(p.kind == p.KEYWORD_ONLY and p.default is not p.empty for p in mine[len(theirs) :]), name
