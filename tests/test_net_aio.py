"""The asyncio client (net/aio.py): the same calls awaited, async with, and a cancelled
waiting get that takes nothing."""

from __future__ import annotations

import asyncio
import os

import pytest
from net_env import served, short_dir

from sweepq import aio
from sweepq.engine import GMO, MD, OO, PMO, MQError, QueueManager, Reason, SweeperSettings

from helpers import IO, task_parked


def run(coro):
    return asyncio.run(coro)


def test_put_get_batches_and_units_of_work_awaited():
    async def body(url):
        async with await aio.connect(url) as conn:
            async with await conn.open("Q", IO) as h:
                r = await h.put(b"one", MD(priority=3))
                m = await h.get()
                assert (m.data, m.msg_id, m.priority) == (b"one", r.msg_id, 3)
                await h.put_many([b"a", b"b"], None, PMO.SYNCPOINT)
                assert await conn.uncommitted() == 2
                await conn.backout()
                assert await h.get_many(10) == []
                await h.put_many([b"a", b"b"])
                assert [m.data for m in await h.get_many(10)] == [b"a", b"b"]
                with pytest.raises(MQError) as e:
                    await h.get()
                assert e.value.reason == Reason.NO_MSG_AVAILABLE
                with pytest.raises(MQError) as e:
                    await h.put("text")
                assert e.value.reason == Reason.BUFFER_LENGTH_ERROR
            assert (await conn.inquire_queue("Q")).current_depth == 0

    with served() as (_qm, server):
        run(body(server.url))


def test_a_cancelled_waiting_get_takes_nothing_and_the_connection_goes_on():
    async def body(url, qm):
        async with await aio.connect(url) as conn:
            h = await conn.open("Q", IO)
            task = asyncio.create_task(h.get(GMO.WAIT | GMO.SYNCPOINT, wait_interval=60_000))
            await task_parked(task, "_call")  # its request sent, the server's answer awaited
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            with qm.connect() as c:
                c.open("Q", IO).put(b"after the cancel")
            assert qm.inquire_queue("Q").current_depth == 1  # nothing was taken
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await h.get(GMO.WAIT, wait_interval=-1, correl_id=b"nothing matches")
            assert (await h.get()).data == b"after the cancel"
            assert await conn.uncommitted() == 0

    with served() as (qm, server):
        run(body(server.url, qm))


def test_a_waiting_get_does_not_block_the_event_loop_or_other_clients():
    async def body(url):
        waiter = await aio.connect(url)
        wh = await waiter.open("Q", IO)
        waiting = asyncio.create_task(wh.get(GMO.WAIT, wait_interval=30_000))
        async with await aio.connect(url) as other:
            oh = await other.open("Q", IO)
            for _ in range(20):
                await asyncio.sleep(0)  # the loop runs while the get waits in the server
            assert not waiting.done()
            await oh.put(b"wake")
        assert (await asyncio.wait_for(waiting, 10)).data == b"wake"
        await waiter.disconnect()

    with served() as (_qm, server):
        run(body(server.url))


def test_a_dead_server_is_2009_and_a_refused_connect_is_2538():
    async def body():
        qm = QueueManager(sweeping=SweeperSettings(run=False))
        qm.define_queue("Q")
        server = qm.serve(os.path.join(short_dir(), "s.sock"))
        conn = await aio.connect(server.url)
        h = await conn.open("Q", OO.OUTPUT)
        qm.close()
        with pytest.raises(MQError) as e:
            await h.put(b"x")
        assert e.value.reason == Reason.CONNECTION_BROKEN
        with pytest.raises(MQError) as e:
            await aio.connect(server.url)
        assert e.value.reason == Reason.HOST_NOT_AVAILABLE

    run(body())
