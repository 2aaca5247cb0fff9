"""Items: Python objects a queue keeps as they are while in memory (engine/core/lanes.py,
"Items"), encoded only when the sweeper moves them to a blob (docs/queue.md).

The engine's side (``Handle.keep_items`` / ``put_item``, ``Message.has_item`` / ``item``)
with the sweeper driven by hand on a manual clock, and ``sweepq.Queue`` / ``AsyncQueue``:
identity in memory, equality after a sweep, order kept across both.
"""

from __future__ import annotations

import asyncio
import pickle
import threading
import time

import pytest

from sweepq import AsyncQueue, Queue
from sweepq.engine import GMO, MD, OO, DurabilitySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock

from helpers import IO

BLOB = 10  # messages per blob: short runs cross many blob boundaries


class Widget:
    """An item whose equality is its fields and whose identity is its own."""

    def __init__(self, n: int):
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Widget) and other.n == self.n

    def __hash__(self) -> int:
        return self.n


@pytest.fixture
def qm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": BLOB}),
    ) as qm:
        qm.define_queue("Q")
        yield qm


@pytest.fixture
def h(qm):
    h = qm.connect().open("Q", IO)
    h.keep_items(pickle.dumps)
    return h


def test_a_get_returns_the_very_object_that_was_put(h):
    items = [Widget(i) for i in range(20)] + [None, {"a": [1]}, b"bytes", lambda: 1]
    for item in items:
        h.put_item(item)
    for item in items:
        m = h.get()
        assert m.has_item and m.item is item and m.data == b""


def test_priorities_order_items_as_they_order_messages(h):
    for n, p in [(1, 0), (2, 9), (3, 4), (4, 9)]:
        h.put_item(n, p)
    assert [h.get().item for _ in range(4)] == [2, 4, 3, 1]


def test_a_swept_item_comes_back_equal_and_in_order(qm, h):
    items = [Widget(i) for i in range(50)]
    for item in items:
        h.put_item(item)
    decision = qm.sweeper.run_once().decision("Q")
    assert decision.msgs_swept == 45  # the buffer (x + 5) stays in memory
    got = [h.get() for _ in items]
    assert [m.item is item for m, item in zip(got[:5], items, strict=False)] == [True] * 5
    swept = got[5:]
    assert not any(m.has_item for m in swept)
    assert [pickle.loads(m.data) for m in swept] == items[5:]
    assert all(pickle.loads(m.data) is not item for m, item in zip(swept, items[5:], strict=True))


def test_a_batch_get_returns_items_and_swept_copies_in_order(qm, h):
    items = [Widget(i) for i in range(30)]
    for item in items:
        h.put_item(item)
    qm.sweeper.run_once()
    got = h.get_many(100)
    back = [m.item if m.has_item else pickle.loads(m.data) for m in got]
    assert back == items
    assert sum(m.has_item for m in got) == 5


def test_a_backed_out_item_is_the_same_object_again(qm, h):
    item = Widget(7)
    h.put_item(item)
    m = h.get(GMO.SYNCPOINT)
    assert m.item is item
    h.connection.backout()
    again = h.get()
    assert again.item is item and again.backout_count == 1


def test_an_item_the_serializer_cannot_encode_stays_in_memory(qm, h):
    items = [Widget(i) for i in range(20)]
    items[15] = lambda: None  # pickle cannot encode a lambda: its run is not swept
    for item in items:
        h.put_item(item)
    qm.sweeper.run_once()
    got = [h.get() for _ in items]
    assert [m.item if m.has_item else pickle.loads(m.data) for m in got][:15] == items[:15]
    assert got[15].item is items[15]


def test_items_need_a_queue_that_keeps_them_and_a_valid_priority(qm):
    h = qm.connect().open("Q", IO)
    with pytest.raises(MQError) as e:
        h.put_item(1)
    assert e.value.reason == Reason.Q_TYPE_ERROR
    h.keep_items(pickle.dumps)
    for bad in (10, -2, "1", 1.0):
        with pytest.raises(MQError) as e:
            h.put_item(1, bad)
        assert e.value.reason == Reason.PRIORITY_ERROR
    with pytest.raises(MQError) as e:
        h.keep_items(5)
    assert e.value.reason == Reason.PARM_VALUE_ERROR
    out = qm.connect().open("Q", OO.OUTPUT)
    out.put_item(3)  # the queue keeps items for every handle once one said so
    assert h.get().item == 3


_NONE = object()


def test_take_item_returns_items_swept_copies_and_says_empty_in_order(qm, h):
    """Handle.take_item, the in-memory doors' get: the very object while in memory, the
    decoded copy of a swept one, in the order get() gives, and its ``empty`` when there is
    none (where get() raises 2033)."""
    items = [Widget(i) for i in range(30)]
    for item in items:
        h.put_item(item)
    qm.sweeper.run_once()  # 25 swept into blobs: take_item goes get()'s whole way for those
    got = [h.take_item(pickle.loads, _NONE) for _ in items]
    assert got == items
    assert [g is item for g, item in zip(got, items, strict=True)].count(True) == 5
    assert h.take_item(pickle.loads, _NONE) is _NONE
    assert h.take_item(pickle.loads) is None  # the default empty


def test_take_item_decodes_data_and_leaves_expired_messages_behind(qm, h):
    out = qm.connect().open("Q", OO.OUTPUT)
    out.put(pickle.dumps("data"))
    out.put(pickle.dumps("gone"), MD(expiry=1))  # a tenth of a second
    h.put_item("item")
    assert h.take_item(pickle.loads, _NONE) == "data"
    qm.clock.advance(1.0)
    assert h.take_item(pickle.loads, _NONE) == "item"  # the expired one was discarded on the way
    assert h.take_item(pickle.loads, _NONE) is _NONE


def test_take_item_keeps_get_s_refusals(qm, h):
    h.put_item(1)
    qm.alter_queue("Q", inhibit_get=True)
    with pytest.raises(MQError) as e:
        h.take_item(pickle.loads, _NONE)
    assert e.value.reason == Reason.GET_INHIBITED
    qm.alter_queue("Q", inhibit_get=False)
    h.close()
    with pytest.raises(MQError) as e:
        h.take_item(pickle.loads, _NONE)
    assert e.value.reason == Reason.HOBJ_ERROR


def test_queue_in_memory_returns_the_object_itself():
    q: Queue[object] = Queue()
    items = [Widget(1), {"order": 1}, None, [1, 2]]
    for item in items:
        q.put(item)
    assert all(q.get() is item for item in items)
    q.put(items[0], priority=5)
    assert q.get_nowait() is items[0]


def test_queue_with_a_memory_budget_returns_equal_copies_of_what_was_swept():
    q: Queue[list[int]] = Queue(memory_budget="64KiB", budget_counts="resident")
    admin = q._core.site.admin
    items = [[i] * 256 for i in range(2000)]  # about 2 KiB each pickled: 4 MB in all
    for item in items:
        q.put(item)
    admin.sweeper.run_once()
    assert admin.inquire_queue(q.name).swept > 0
    got = [q.get() for _ in items]
    assert got == items
    assert any(g is not item for g, item in zip(got, items, strict=True))  # copies came back


def test_queue_on_a_data_directory_returns_copies(tmp_path):
    with Queue(path=tmp_path / "d") as q:
        item = {"a": 1}
        q.put(item)
        got = q.get()
        assert got == item and got is not item


def test_async_queue_in_memory_returns_the_object_itself():
    async def main() -> None:
        q: AsyncQueue[object] = AsyncQueue()
        item = Widget(3)
        await q.put(item)
        assert await q.get() is item
        q.put_nowait(item)
        assert q.get_nowait() is item

    asyncio.run(main())


def test_put_many_and_get_many_keep_order_identity_and_tasks():
    q: Queue[object] = Queue()
    items = [Widget(i) for i in range(250)]
    q.put_many(items[:100])
    q.put_many(iter(items[100:]))  # any iterable
    assert q.qsize() == 250 and q.unfinished_tasks == 250
    got = q.get_many(100) + q.get_many(1000)
    assert len(got) == 250 and all(g is item for g, item in zip(got, items, strict=True))
    with pytest.raises(__import__("queue").Empty):
        q.get_many(5, block=False)
    for _ in got:
        q.task_done()
    q.join()


def test_put_many_is_all_or_none_and_get_many_checks_its_count(tmp_path):
    import queue as stdqueue

    q: Queue[int] = Queue(3)
    with pytest.raises(stdqueue.Full):
        q.put_many([1, 2, 3, 4], block=False)
    assert q.qsize() == 0 and q.unfinished_tasks == 0
    q.put_many([1, 2, 3])
    for bad, error in ((0, ValueError), ("2", TypeError), (True, TypeError)):
        with pytest.raises(error):
            q.get_many(bad)
    assert q.get_many(2) == [1, 2]
    with Queue(path=tmp_path / "d") as disk:  # encoded at the put: nothing put when one fails
        with pytest.raises(TypeError):
            disk.put_many([1, lambda: 2])
        assert disk.qsize() == 0
        disk.put_many([{"a": 1}, {"b": 2}], priority=3)
        assert disk.get_many(10) == [{"a": 1}, {"b": 2}]


def test_async_put_many_and_get_many_keep_order_and_identity(tmp_path):
    async def main() -> None:
        q: AsyncQueue[object] = AsyncQueue()
        items = [Widget(i) for i in range(50)]
        await q.put_many(items)
        got = await q.get_many(20) + await q.get_many(100)
        assert all(g is item for g, item in zip(got, items, strict=True))
        waiter = asyncio.ensure_future(q.get_many(3))  # waits for the first item
        await asyncio.sleep(0)
        assert not waiter.done()
        await q.put_many([1, 2])
        assert await asyncio.wait_for(waiter, 10) == [1, 2]
        with pytest.raises(ValueError):
            await q.get_many(0)
        disk: AsyncQueue[dict] = AsyncQueue(path=tmp_path / "d")
        await disk.put_many([{"a": 1}, {"b": 2}])
        assert await disk.get_many(5) == [{"a": 1}, {"b": 2}]
        await disk.aclose()

    asyncio.run(main())


def test_an_item_s_put_time_is_its_queue_manager_s_clock(qm, h):
    """put_item reads the put time (PutDate and PutTime) from the queue manager's clock: a
    manual clock's time exactly (the compiled form reads the C library's clock only when the
    manager's clock is the system's)."""
    qm.clock.advance(12.5)
    h.put_item("item")
    m = h.get()
    assert m.has_item and m.md.put_time == pytest.approx(qm.clock.wall(), abs=1e-6)


def test_an_item_s_put_time_on_the_system_clock_is_now():
    """On the system's clock the compiled put_item reads the coarse clock (engine/putpath.py):
    the put time is at most one kernel tick, below MQ's centisecond, before the put."""
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        h.keep_items(pickle.dumps)
        before = time.time()
        h.put_item("item")
        after = time.time()
        m = h.get()
        assert before - 0.01 <= m.md.put_time <= after + 1e-6


def test_take_item_takes_items_in_get_order_across_priorities_and_messages(qm, h):
    """The in-memory get's one step (the head's item) and get()'s way agree: priorities,
    items beside messages of data, the head taken each time, empty after."""
    out = qm.connect().open("Q", OO.OUTPUT)
    h.put_item("low", 1)
    out.put(pickle.dumps("data"), MD(priority=5))
    h.put_item("high", 9)
    h.put_item("high again", 9)
    h.put_item("default")  # the queue's default priority, 0
    got = [h.take_item(pickle.loads, _NONE) for _ in range(6)]
    assert got == ["high", "high again", "data", "low", "default", _NONE]
    assert qm.inquire_queue("Q").current_depth == 0


def test_put_item_to_a_full_queue_is_refused_and_puts_nothing(qm, h):
    qm.alter_queue("Q", max_depth=2)
    h.put_item(1)
    h.put_item(2)
    with pytest.raises(MQError) as e:
        h.put_item(3)
    assert e.value.reason == Reason.Q_FULL
    assert [h.take_item(pickle.loads, _NONE) for _ in range(3)] == [1, 2, _NONE]


def test_a_queue_collected_in_a_thread_while_another_opens_one_is_released_later():
    """A queue's finalizer may run in any thread the collector runs in, such as a sweeper
    thread starting while the opener holds the sites' lock and waits for it: it must not wait
    for that lock (a deadlock, seen in CPython's queue tests on a data directory); the next
    open releases the queue instead."""
    from sweepq.queues import site

    q: Queue[int] = Queue()
    core = q._core
    finished = threading.Event()
    with site._sites_lock:
        t = threading.Thread(target=lambda: (q._closer(), finished.set()))
        t.start()
        assert finished.wait(30), "the finalizer waited for the sites' lock"
        t.join()
        assert not core.closed  # handed over, not yet released
    Queue().close()  # the next open (and close) releases it
    assert core.closed
