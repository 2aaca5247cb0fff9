"""The seed's channel rules in the sweeper (issue 20 §3, seed 003), with a real channel.

A transmission queue's messages in a batch of an active channel are never swept; a sweep
that finds a message assigned to a batch after writing its blob aborts as ``batch_changed``;
a channel's batch gets count in the queue's service rate x exactly as application gets do.
The sweeper is driven by hand (``run_once``) or by the injected clock, never by sleeping.
"""

from __future__ import annotations

import threading

import pytest
from channel_env import drain_all, pair, sent, wait_until

from sweepq.engine import MD, OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings, Usage
from sweepq.net.channels.receiver import Receiver
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO

P = Persistence.PERSISTENT
SMALL_BLOBS = {"durability": DurabilitySettings(store_options={"max_blob_records": 10})}


@pytest.fixture
def held_receiver(monkeypatch):
    """The receiver holds the last frame of every batch until ``gate`` is set: the sender's
    batch stays active (assigned, sent, unconfirmed) for as long as the test needs."""
    gate, entered = threading.Event(), threading.Event()
    real = Receiver.batch

    def batch(self, luwid, first_seq, records, end):
        if end and not gate.is_set():
            entered.set()
            gate.wait(60)
        return real(self, luwid, first_seq, records, end)

    monkeypatch.setattr(Receiver, "batch", batch)
    yield gate, entered
    gate.set()


def put_to_target(qm1: QueueManager, n: int) -> list[bytes]:
    h = qm1.connect().open("TARGET", OO.OUTPUT)
    return [h.put(b"%04d" % i, MD(persistence=P)).msg_id for i in range(n)]


def batched_slots(q) -> list:
    return q.batches.refs()


def in_memory_and_batched(q, refs: list) -> bool:
    return all(q.lanes._batched(r) for r in refs)


def test_an_active_batch_stays_in_memory_and_the_rest_of_the_transmission_queue_is_swept(held_receiver):
    gate, entered = held_receiver
    with pair(qm1_options=SMALL_BLOBS, batch_size=50) as (qm1, qm2, _):
        ids = put_to_target(qm1, 500)
        q = qm1.queue_named("QM2")
        q.take_obtained()
        qm1.channels.start("TO.QM2")
        assert entered.wait(30), "the sender sent no batch"
        slots = batched_slots(q)
        assert len(slots) == 50 and q.batches.count == 50
        d = qm1.sweeper.run_once().decision("QM2")
        # The batch counts in x (50 obtained) and not in y (450 others): y > 2x, keep x + 5.
        assert (d.y, d.x, d.keep) == (450, 50, 55)
        assert d.msgs_swept == 450 - 55 and not d.aborts
        assert in_memory_and_batched(q, slots)  # the batch of an active channel is never swept
        assert sum(lane.swept for lane in q.lanes) == 395
        gate.set()
        got = drain_all(qm2, "Q", 500, lambda: sent(qm1))
        assert [m.msg_id for m in got] == ids  # drained from the chain in order, each once
        wait_until(lambda: qm1.inquire_queue("QM2").current_depth == 0, what="the sender's last commit")


def test_a_batch_assigned_while_the_sweep_writes_its_blobs_aborts_it_as_batch_changed(held_receiver):
    gate, entered = held_receiver
    with pair(qm1_options=SMALL_BLOBS, batch_size=50) as (qm1, qm2, _):
        ids = put_to_target(qm1, 100)
        q = qm1.queue_named("QM2")
        q.take_obtained()

        def channel_starts_after_the_write(queue, target):
            if queue is q.sweep and not entered.is_set():
                qm1.channels.start("TO.QM2")  # its first batch takes messages 0-49 of the run
                assert entered.wait(30), "the sender sent no batch"

        qm1.sweeper.after_write = channel_starts_after_the_write
        try:
            d = qm1.sweeper.run_once().decision("QM2")
        finally:
            qm1.sweeper.after_write = None
        # The run 5-99, in blobs of 10 (5-14, ..., 85-94, 95-99), is linked from its tail: 55-99
        # moved, then the blob 45-54 found 45-49 batched and the sweep stopped there.
        assert d.aborts == {"batch_changed": 1} and d.msgs_swept == 45
        assert qm1.blob_store().pending() == []
        assert in_memory_and_batched(q, batched_slots(q))
        gate.set()
        assert [m.msg_id for m in drain_all(qm2, "Q", 100, lambda: sent(qm1))] == ids


def test_a_channels_batch_gets_are_its_queues_service_rate():
    """What the channel sent in an interval is x at the interval's end, as gets would be."""
    with pair(batch_size=20) as (qm1, qm2, _):
        put_to_target(qm1, 130)
        qm1.queue_named("QM2").take_obtained()
        qm1.channels.start("TO.QM2")
        assert len(drain_all(qm2, "Q", 130, lambda: sent(qm1))) == 130
        wait_until(lambda: qm1.inquire_queue("QM2").current_depth == 0, what="the sender's last commit")
        assert qm1.sweeper.run_once().decision("QM2").x == 130


def test_batch_gets_and_application_gets_lead_the_clock_driven_cycle_to_the_same_sweep():
    clock = ManualClock()
    with QueueManager(clock=clock, sweeping=SweeperSettings(policy=SweepPolicy(interval=5)), **SMALL_BLOBS) as qm:
        qm.define_queue("LOCAL")
        qm.define_queue("XMIT", usage=Usage.TRANSMISSION)
        app, xmit = qm.connect().open("LOCAL", IO), qm.connect().open("XMIT", IO)
        for h in (app, xmit):
            h.put_many([b"m"] * 300)
        app.get_many(50)
        for _ in range(2):
            xmit.assign_batch(20).confirm()  # a channel's two batches, sent
        open_batch = xmit.assign_batch(10)  # and one in flight: obtained, not sweepable
        assert clock.wait_for_background(1)  # the sweeper thread waits for its interval's end
        cycles = qm.sweeper.cycles
        clock.advance(5)
        assert qm.sweeper.wait_cycles(cycles + 1)
        report = qm.sweeper.reports[-1]
        local, x = report.decision("LOCAL"), report.decision("XMIT")
        assert (local.y, local.x, local.keep) == (x.y, x.x, x.keep) == (250, 50, 55)
        assert local.msgs_swept == x.msgs_swept == 195
        assert in_memory_and_batched(qm.queue_named("XMIT"), batched_slots(qm.queue_named("XMIT")))
        open_batch.release()
