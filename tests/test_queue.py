"""sweepq.Queue and sweepq.AsyncQueue beyond the standard library's own tests
(tests/test_queue_stdlib.py): what their options add, and every bad argument.

Each bad argument is the standard library's exception (TypeError for a wrong type,
ValueError for a wrong value), raised by the call given it, for both classes; priorities,
serializers, persistence, at-least-once delivery, the memory policies, repr, closing, sharing
one data directory, a served queue, and Ctrl-C in a blocked get.
"""

from __future__ import annotations

import asyncio
import json
import os
import queue as stdqueue
import signal
import subprocess
import sys
import threading
from types import GenericAlias

import pytest
from net_env import ServeProcess, short_dir

import sweepq
from sweepq import AsyncQueue, Queue

from helpers import reaped, task_parked, wait_parked

CLASSES = [Queue, AsyncQueue]


# -- arguments ---------------------------------------------------------------------------------

BAD_CONSTRUCTOR = [
    ({"maxsize": "5"}, TypeError, "maxsize must be a number"),
    ({"maxsize": None}, TypeError, "maxsize must be a number"),
    ({"maxsize": True}, TypeError, "maxsize must be a number"),
    ({"maxsize": 10**12}, ValueError, "more than a queue holds"),
    ({"name": 5}, TypeError, "name must be a str"),
    ({"name": "no spaces allowed"}, ValueError, "queue name"),
    ({"name": "x" * 49}, ValueError, "queue name"),
    ({"serializer": "yaml"}, ValueError, "serializer 'yaml' is not one of"),
    ({"serializer": 3}, TypeError, "serializer must be one of"),
    ({"path": 3}, TypeError, "path must be a str or os.PathLike"),
    ({"url": 3}, TypeError, "url must be a str"),
    ({"url": "http://x"}, ValueError, "http://x"),
    ({"memory_budget": 100}, ValueError, "did you mean 100 MB"),
    # A size with its unit is not second-guessed (it was asked "did you mean 1000 MB?")
    (
        {"memory_budget": "1KB"},
        ValueError,
        r"memory_budget 1000 bytes is too small \(at least 16KiB\) \(0: no budget\)$",
    ),
    ({"memory_budget": "lots"}, ValueError, "is not a size"),
    ({"memory_budget": 1.5}, TypeError, "memory_budget must be a size"),
    ({"memory_budget": -1}, ValueError, "outside"),
    ({"memory_policy": "drop"}, ValueError, "memory_policy 'drop' is not one of"),
    ({"memory_policy": 1}, TypeError, "memory_policy must be one of"),
    ({"delivery": "exactly-once"}, ValueError, "delivery 'exactly-once' is not one of"),
    ({"delivery": True}, TypeError, "delivery must be one of"),
    ({"sync": "always"}, ValueError, "sync"),
    ({"sync": "os"}, ValueError, "needs path="),
    ({"token": "t"}, ValueError, "goes with url="),
    ({"admin_token": 5}, TypeError, "admin_token must be a str"),
    ({"path": "p", "url": "unix:///x"}, ValueError, "not both"),
    ({"url": "unix:///x", "memory_budget": "1MB"}, ValueError, "served queue manager has its own"),
    ({"budget_counts": "rss"}, ValueError, "give a memory_budget too|not 'resident' or 'held'"),
    ({"memory_budget": "1MB", "budget_counts": "rss"}, ValueError, "not 'resident' or 'held'"),
    ({"memory_budget": "1MB", "budget_counts": 1}, TypeError, "budget_counts must be"),
    ({"budget_counts": "held"}, ValueError, "give a memory_budget too"),
]


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize(("kwargs", "error", "text"), BAD_CONSTRUCTOR, ids=lambda v: repr(v)[:40])
def test_every_bad_constructor_argument_is_a_type_or_value_error(cls, kwargs, error, text, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=text):
        cls(**kwargs)


def test_a_path_that_is_a_file_or_under_no_directory_is_an_os_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError, match="is a file"):
        Queue(path=tmp_path / "file")
    with pytest.raises(FileNotFoundError, match="parent directory"):
        Queue(path=tmp_path / "no" / "such")


def test_an_unreachable_server_is_a_connection_error(tmp_path):
    with pytest.raises(ConnectionError, match=r"nothing|connect"):
        Queue(url=f"unix://{tmp_path}/none.sock")


def test_every_bad_call_argument_is_what_the_standard_library_raises(tmp_path):
    q = Queue(2)
    for call, error in [
        (lambda: q.put(1, timeout=-1), ValueError),
        (lambda: q.put(1, timeout="1"), TypeError),
        (lambda: q.get(timeout=-0.5), ValueError),
        (lambda: q.get(timeout=[]), TypeError),
        (lambda: q.put(1, priority=10), ValueError),
        (lambda: q.put(1, priority=-1), ValueError),
        (lambda: q.put(1, priority="high"), TypeError),
        (lambda: q.put(1, priority=5.0), TypeError),
        (lambda: q.task_done(), ValueError),
        (lambda: setattr(q, "maxsize", "3"), TypeError),
    ]:
        with pytest.raises(error):
            call()
    assert q.qsize() == 0  # nothing was put by a refused call
    # Items are encoded where they leave memory: on a data directory, at the put.
    disk = Queue(path=tmp_path / "d")
    with pytest.raises(TypeError, match="cannot encode an item of type function"):
        disk.put(lambda: 1)  # pickle cannot name a lambda
    with pytest.raises(TypeError, match="bytes, bytearray or memoryview, not str"):
        Queue(path=tmp_path / "d", name="b", serializer="bytes").put("text")
    with pytest.raises(TypeError, match="cannot encode an item of type set"):
        Queue(path=tmp_path / "d", name="j", serializer="json").put({1, 2})
    assert disk.qsize() == 0
    q.put(lambda: 1)  # in memory, as queue.Queue: any object, never encoded


def test_an_item_over_the_largest_message_is_a_value_error(tmp_path):
    q = Queue(path=tmp_path / "d", serializer="bytes")
    with pytest.raises(ValueError, match=r"2030|2031|MSG_TOO_BIG"):
        q.put(b"x" * (100 * 1024 * 1024 + 1))
    q.put(b"fits")
    assert q.get() == b"fits"


async def _async_bad_calls():
    q = AsyncQueue(1)
    with pytest.raises(ValueError):
        await q.put(1, priority=11)
    with pytest.raises(TypeError):
        q.put_nowait(1, priority="9")
    with pytest.raises(ValueError):
        q.task_done()
    assert q.empty()
    await q.put(lambda: 0)  # in memory, as asyncio.Queue: any object, never encoded


def test_async_bad_calls_are_what_asyncio_queue_raises():
    asyncio.run(_async_bad_calls())


# -- the standard library's shape -----------------------------------------------------------


def test_the_exceptions_are_the_standard_librarys_own():
    q = Queue(1)
    q.put(1)
    with pytest.raises(stdqueue.Full):
        q.put_nowait(2)
    q.get()
    with pytest.raises(stdqueue.Empty):
        q.get_nowait()
    a = AsyncQueue(1)
    a.put_nowait(1)
    with pytest.raises(asyncio.QueueFull):
        a.put_nowait(2)
    a.get_nowait()
    with pytest.raises(asyncio.QueueEmpty):
        a.get_nowait()


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_generic_like_the_standard_librarys(cls):
    alias = cls[int]
    assert isinstance(alias, GenericAlias) and alias.__args__ == (int,) and alias.__origin__ is cls


def test_import_sweepq_engine_loads_neither_net_nor_queues():
    code = "import sys, sweepq.engine; print([m for m in sys.modules if m.startswith(('sweepq.net', 'sweepq.queues'))])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert sweepq.Queue is Queue and sweepq.AsyncQueue is AsyncQueue and "Queue" in dir(sweepq)
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        sweepq.Nope  # noqa: B018


def test_queues_uses_the_engines_public_api_only():
    """queues/ is an application of the engine: it imports sweepq.engine's public names (and
    engine/sizes.py's one parser of sizes), never a module of the engine's insides."""
    import re
    from pathlib import Path

    inside = re.compile(r"^\s*(from|import)\s+sweepq\.engine\.(?!sizes\b)", re.M)
    folder = Path(__file__).resolve().parents[1] / "queues"
    offenders = [p.name for p in folder.glob("*.py") if inside.search(p.read_text())]
    assert not offenders and list(folder.glob("*.py")), offenders


def test_repr_says_name_depth_and_where(tmp_path):
    q = Queue(3, name="jobs")
    q.put("a")
    assert repr(q) == "<sweepq.Queue 'jobs' depth=1 maxsize=3 in memory>"
    d = Queue(path=tmp_path / "d", name="orders")
    assert repr(d) == f"<sweepq.Queue 'orders' depth=0 at {os.path.realpath(tmp_path / 'd')}>"
    d.close()
    assert repr(d) == f"<sweepq.Queue 'orders' closed, at {os.path.realpath(tmp_path / 'd')}>"
    assert repr(AsyncQueue()).startswith("<sweepq.AsyncQueue 'QUEUE' depth=0 in memory")


# -- what the options add -----------------------------------------------------------------------


def test_priority_higher_first_and_fifo_within_one():
    q = Queue()
    for item, p in [("a", None), ("b", 5), ("c", 9), ("d", 5), ("e", 0), ("f", 9)]:
        q.put(item, priority=p)
    assert [q.get() for _ in range(6)] == ["c", "f", "b", "d", "a", "e"]


@pytest.mark.parametrize(
    ("serializer", "item", "back"),
    [
        ("pickle", {"a": (1, 2), "b": {3}}, {"a": (1, 2), "b": {3}}),
        ("json", {"a": (1, 2)}, {"a": [1, 2]}),
        ("msgpack", {"a": (1, 2), "b": b"\0"}, {"a": [1, 2], "b": b"\0"}),
        ("bytes", bytearray(b"raw"), b"raw"),
        (json, {"a": 1}, {"a": 1}),  # any object with dumps() and loads(): here one returning str
    ],
    ids=["pickle", "json", "msgpack", "bytes", "module-json"],
)
def test_each_serializer_round_trips(serializer, item, back, tmp_path):
    q = Queue(path=tmp_path / "d", serializer=serializer)  # encoded at the put: it leaves memory
    if serializer is json:
        with pytest.raises(TypeError, match="returned str, not bytes"):
            q.put(item)
        return
    q.put(item)
    assert q.get() == back


def test_an_item_another_serializer_wrote_is_a_value_error_that_says_so(tmp_path):
    Queue(path=tmp_path / "d", serializer="bytes").put(b"not a pickle")
    with pytest.raises(ValueError, match=r"is not pickle data.*serializer='bytes'"):
        Queue(path=tmp_path / "d").get()


def test_path_keeps_items_across_close_and_reopen(tmp_path):
    with Queue(path=tmp_path / "d", name="a") as a, Queue(path=tmp_path / "d", name="b") as b:
        assert a._core.site is b._core.site  # one queue manager per data directory and process
        a.put("one", priority=3)
        b.put("two")
        a.put("zero")
    with Queue(path=tmp_path / "d", name="a") as a:
        assert a.qsize() == 2 and a.unfinished_tasks == 2  # what is kept is unfinished
        assert [a.get(), a.get()] == ["one", "zero"]
        a.task_done()
        a.task_done()
        a.join()
    with pytest.raises(ValueError, match="other options"), Queue(path=tmp_path / "d"):
        Queue(path=tmp_path / "d", sync="commit")


def test_maxsize_is_the_queue_depth_limit_and_settable(tmp_path):
    q = Queue(2, path=tmp_path / "d")
    q.put(1)
    q.put(2)
    assert q.full()
    with pytest.raises(stdqueue.Full, match="maxsize 2"):
        q.put(3, timeout=0.01)
    q.maxsize = 3
    q.put(3)
    q.maxsize = 0
    for i in range(100):
        q.put(i)
    assert q.qsize() == 103 and not q.full()


def test_at_least_once_an_item_not_done_comes_back_in_place(tmp_path):
    d = tmp_path / "d"
    with Queue(path=d, delivery="at-least-once") as q:
        for item in "abc":
            q.put(item)
        assert q.get() == "a"
        q.task_done()  # a is gone for good
        assert q.get() == "b"  # b is held, never done
        assert q.qsize() == 1  # c; b is not counted while held
    with Queue(path=d, delivery="at-least-once") as q:
        assert [q.get(), q.get()] == ["b", "c"]  # b back in its place, before c
    with Queue(path=d) as q:
        assert q.qsize() == 2  # neither was done: both back again


def test_at_least_once_task_done_commits_this_threads_oldest_get(tmp_path):
    q = Queue(path=tmp_path / "d", delivery="at-least-once")
    for i in range(4):
        q.put(i)
    assert q.get() == 0
    other = []
    t = threading.Thread(target=lambda: other.append(q.get()))
    t.start()
    t.join()
    assert other == [1]
    q.task_done()  # this thread's get: 0
    q.close()
    q = Queue(path=tmp_path / "d", delivery="at-least-once")
    assert q.get() == 1  # the other thread's, never done, is back
    q.task_done()
    threading.Thread(target=q.task_done).start()  # no get of its own: the oldest of any thread
    q.close()
    with pytest.raises(ValueError, match="closed"):
        q.get()


def test_at_most_once_a_got_item_is_gone_whatever_follows(tmp_path):
    with Queue(path=tmp_path / "d") as q:
        q.put("x")
        assert q.get() == "x"  # never task_done
    assert Queue(path=tmp_path / "d").qsize() == 0


def test_memory_budget_sweeps_the_backlog_and_brings_it_back_in_order():
    q = Queue(memory_budget="64KiB", serializer="bytes")
    items = [i.to_bytes(4, "big") * 256 for i in range(500)]  # 1 KiB each: 500 KiB in all
    for item in items:
        q.put(item)
    info = q._core.site.admin.inquire_queue(q.name)
    assert info.swept > 400 and info.mem_bytes < 64 * 1024, info
    assert [q.get() for _ in items] == items


def test_the_budget_counts_resident_memory_unless_told_held():
    resident = Queue(memory_budget="64MB")._core.site.admin.memory_use()
    assert resident.baseline > 0  # resident memory above the open's baseline is what counts
    held = Queue(memory_budget="64MB", budget_counts="held")._core.site.admin.memory_use()
    assert held.baseline == 0 and held.resident == 0


def test_memory_policy_fail_is_full_at_once_and_block_waits_for_room():
    fail = Queue(memory_budget="16KiB", memory_policy="fail", serializer="bytes")
    with pytest.raises(stdqueue.Full, match=r"memory budget in memory is full.*'fail'"):
        for _ in range(100):
            fail.put(b"x" * 1024)  # block=True: FAIL refuses all the same
    # A budget the store's own memory (its memtable, a 1 MiB floor) leaves room in.
    block = Queue(memory_budget="4MiB", memory_policy="block", serializer="bytes")
    block._core.site.admin.sweeper.stop()  # else its relief sweeps keep the budget from filling
    with pytest.raises(stdqueue.Full, match="'block'"):
        for i in range(100):  # distinct items: in memory one object put twice is held once
            block.put(bytes([i]) * 256 * 1024, timeout=0.2)
    held = block.qsize()
    drain = threading.Timer(0.2, lambda: [block.get() for _ in range(held)])
    drain.start()
    block.put(b"y", timeout=30)  # room made by the gets: the put goes through
    drain.join()
    assert block.get_nowait() == b"y"


def test_a_closed_queue_refuses_every_call_with_value_error():
    q = Queue()
    q.put(1)
    q.close()
    q.close()  # twice: nothing
    for call in (q.put_nowait, lambda _: q.get(), lambda _: q.qsize()):
        with pytest.raises(ValueError, match="closed"):
            call(1)


def test_close_ends_a_blocked_get_with_value_error():
    q = Queue()
    errors = []

    def wait():
        try:
            q.get(timeout=30)
        except ValueError as e:
            errors.append(e)

    t = threading.Thread(target=wait, daemon=True)
    t.start()
    wait_parked(t, "get")  # blocked in its get: a close before the get began would prove nothing
    q.close()
    t.join(10)
    assert not t.is_alive() and errors and "closed" in str(errors[0])


# The child's last line is the blocking call; it says it waits only once its main thread is
# parked in that call, in a threading wait (its own stack, read by a thread of its own; -u:
# unbuffered), so the SIGINT lands in the call and the traceback names its line; one before
# the call would name another. "process": the SIGINT is sent to the process, as Ctrl-C does
# (the kernel hands it to any of its threads); "thread": it is raised in the child's other
# thread, so the main thread's wait is never cut short by the kernel and must end by itself
# (sweeper/clock.py MAIN_THREAD_SLICE).
_CTRL_C_CHILD = (
    "import signal, sys, threading, time\nfrom sweepq import Queue\nq = Queue(path='d')\n"
    "main = threading.main_thread().ident\n"
    "def parked():\n    while True:\n"
    "        f = top = sys._current_frames()[main]\n"
    "        while top.f_back: top = top.f_back\n"
    "        if top.f_lineno == 14 and f.f_code.co_filename == threading.__file__:\n"
    "            print('waiting')\n"
    "            return sys.argv[1] == 'thread' and signal.pthread_kill(threading.get_ident(), signal.SIGINT)\n"
    "        time.sleep(0.005)\n"
    "threading.Thread(target=parked, daemon=True).start()\n"
)
_BLOCKING = {"get": "q.get()\n", "join": "q.put(1); q.get(); q.join()\n", "put": "r = Queue(1); r.put(1); r.put(2)\n"}


@pytest.mark.parametrize("landing", ["process", "thread"])
@pytest.mark.parametrize("call", sorted(_BLOCKING))
def test_ctrl_c_ends_a_blocked_call(tmp_path, call, landing):
    code = _CTRL_C_CHILD + _BLOCKING[call]
    assert code.count("\n") == 14  # the blocking call is on line 14, which parked() looks for
    p = subprocess.Popen(
        [sys.executable, "-uc", code, landing], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    with reaped(p):
        assert p.stdout.readline() == b"waiting\n"
        if landing == "process":
            p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert p.returncode != 0 and b"KeyboardInterrupt" in err, err
    assert b'File "<string>", line 14, in <module>' in err, err  # interrupted in the call, not before it
    assert Queue(path=tmp_path / "d").qsize() == 0  # and the data directory opens again


# -- AsyncQueue on a data directory: the executor path -------------------------------------------


async def _async_on_disk(path):
    q = AsyncQueue(2, path=path, delivery="at-least-once")
    await q.put("a")
    await q.put("b", priority=9)
    assert q.full()
    waiting = asyncio.create_task(q.put("c"))
    await task_parked(waiting, "_wait")  # the put waits for room
    assert await q.get() == "b"
    q.task_done()
    await asyncio.wait_for(waiting, 5)
    assert [await q.get(), await q.get()] == ["a", "c"]
    q.task_done()
    q.task_done()
    await asyncio.wait_for(q.join(), 5)  # the commits ran in the executor, and are done
    getter = asyncio.create_task(q.get())
    await task_parked(getter, "_wait")  # cancelled while it waits, not before it began
    getter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await getter
    q.put_nowait("d")
    assert q.qsize() == 1  # the cancelled get took nothing
    await q.aclose()


def test_async_queue_on_a_data_directory(tmp_path):
    asyncio.run(_async_on_disk(tmp_path / "d"))
    assert Queue(path=tmp_path / "d").get_nowait() == "d"


def test_async_and_thread_queues_on_one_queue_wake_each_other(tmp_path):
    d = tmp_path / "d"

    async def main():
        a = AsyncQueue(path=d)
        t = Queue(path=d)
        getter = asyncio.create_task(a.get())
        await task_parked(getter, "_wait")  # the thread's put must wake it, not find it not begun
        threading.Thread(target=t.put, args=("from a thread",)).start()
        return await asyncio.wait_for(getter, 10)

    assert asyncio.run(main()) == "from a thread"


def test_an_in_memory_put_from_another_threads_loop_wakes_an_async_getter():
    """AsyncQueue's in-memory put is one engine call that tells waiting coroutines only when
    one waits (Core.async_waiters): a getter parked in one loop is woken by a put of the same
    queue from a coroutine in another thread's loop, twice (the count went back down)."""

    async def main():
        a = AsyncQueue()
        got = []
        for text in ("first", "second"):
            getter = asyncio.create_task(a.get())
            await task_parked(getter, "_wait")
            threading.Thread(target=asyncio.run, args=(a.put(text),)).start()
            got.append(await asyncio.wait_for(getter, 10))
        return got

    assert asyncio.run(main()) == ["first", "second"]


def test_an_in_memory_async_queue_s_nowait_calls_answer_as_its_coroutines():
    """put_nowait() and get_nowait() in memory take the coroutines' hot path (one call of the
    queue's own handle): the very object back, priorities first, QueueFull at maxsize and
    QueueEmpty on an empty queue, a waiting getter woken by put_nowait() and a waiting putter
    by get_nowait(), and the tasks counted; at-least-once, get_nowait() holds the item until
    task_done()."""

    async def main() -> None:
        a: AsyncQueue[object] = AsyncQueue(maxsize=2)
        item = {"order": 1}
        a.put_nowait(item)
        a.put_nowait("urgent", priority=9)
        with pytest.raises(asyncio.QueueFull):
            a.put_nowait("no room")
        assert a.get_nowait() == "urgent"
        assert a.get_nowait() is item
        with pytest.raises(asyncio.QueueEmpty):
            a.get_nowait()
        a.task_done()
        a.task_done()
        await asyncio.wait_for(a.join(), 10)

        getter = asyncio.create_task(a.get())
        await task_parked(getter, "_wait")
        a.put_nowait("woken")
        assert await asyncio.wait_for(getter, 10) == "woken"
        a.put_nowait(1)
        a.put_nowait(2)
        putter = asyncio.create_task(a.put(3))
        await task_parked(putter, "_wait")
        assert a.get_nowait() == 1
        await asyncio.wait_for(putter, 10)
        assert [a.get_nowait(), a.get_nowait()] == [2, 3]
        a.close()
        with pytest.raises(ValueError, match="closed"):
            a.put_nowait(1)
        with pytest.raises(ValueError, match="closed"):
            a.get_nowait()

        held: AsyncQueue[str] = AsyncQueue(delivery="at-least-once")
        held.put_nowait("job")
        assert held.get_nowait() == "job"
        assert held.qsize() == 0
        with pytest.raises(asyncio.QueueEmpty):
            held.get_nowait()
        held.task_done()
        held.close()

    asyncio.run(main())


def test_an_in_memory_async_queue_used_from_two_threads_loops_at_once_loses_nothing():
    """AsyncQueue's in-memory put and get call the engine on a handle of the queue's own; two
    threads' loops using one queue at once may find it busy (the engine refuses such a call
    before it changes anything, 2219), and that call then goes the general way: every item
    put comes back once."""
    a: AsyncQueue[int] = AsyncQueue()
    got: list[int] = []

    async def work(base: int) -> None:
        for i in range(base, base + 2000):
            await a.put(i)
            got.append(await a.get())

    threads = [threading.Thread(target=asyncio.run, args=(work(k * 10_000),)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(got) == [*range(2000), *range(10_000, 12_000)]
    a.close()
    with pytest.raises(ValueError, match="closed"):
        asyncio.run(a.put(1))
    with pytest.raises(ValueError, match="closed"):
        asyncio.run(a.get())


# -- a served queue manager ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    with ServeProcess(os.path.join(short_dir(), "d")) as served:
        yield served


def test_a_served_queue_is_shared_by_processes(server):
    q = Queue(url=server.url, name="shared")
    code = (
        "import sys\nfrom sweepq import Queue\n"
        "q = Queue(url=sys.argv[1], name='shared')\n"
        "for i in range(100): q.put(i)\n"
        "q.put(None)\n"
    )
    subprocess.run([sys.executable, "-c", code, server.url], check=True, timeout=60)
    got = []
    while (item := q.get(timeout=30)) is not None:
        got.append(item)
        q.task_done()
    q.task_done()
    assert got == list(range(100))
    q.join()  # the queue is empty and this process's gets are done


def test_a_served_queue_at_least_once_comes_back_when_the_process_dies(server):
    code = (
        "import os, sys\nfrom sweepq import Queue\n"
        "q = Queue(url=sys.argv[1], name='held', delivery='at-least-once')\n"
        "q.put('job')\nprint(q.get(), flush=True)\nos._exit(9)\n"
    )
    out = subprocess.run([sys.executable, "-c", code, server.url], capture_output=True, text=True, timeout=60)
    assert out.stdout == "job\n"
    q = Queue(url=server.url, name="held")
    assert q.get(timeout=10) == "job"  # the server backed the dead client's get out


def test_a_wrong_admin_token_is_a_permission_error(server):
    with pytest.raises(PermissionError, match="admin token"):
        Queue(url=server.url, name="new", admin_token="wrong")


async def _async_served(url):
    q = AsyncQueue(url=url, name="aio")
    getter = asyncio.create_task(q.get())  # waits in the server
    await task_parked(getter, "get")  # its request sent, its answer awaited
    await q.put({"n": 1})
    assert await asyncio.wait_for(getter, 10) == {"n": 1}
    cancelled = asyncio.create_task(q.get())
    await task_parked(cancelled, "get")
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    q.put_nowait("after")
    assert await q.get() == "after"  # the cancelled wait took nothing
    await q.aclose()


def test_async_queue_on_a_served_queue_manager(server):
    asyncio.run(_async_served(server.url))
