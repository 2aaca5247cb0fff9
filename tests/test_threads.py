"""Many threads on one queue: every message received exactly once, FIFO per producer within
a priority. Consumers block in unlimited WAITs (condition variables, no polling) and stop on
sentinel messages, so the test needs no clock at all."""

from __future__ import annotations

import random
import struct
import threading

from sweepq.engine import GMO, MD, PMO, DurabilitySettings, QueueManager, SweeperSettings

from helpers import IO

PRODUCERS = 4
CONSUMERS = 4
TOTAL = 200_000
REC = struct.Struct("<iii")  # producer, priority, sequence number within (producer, priority)


def test_four_producers_four_consumers_exactly_once_and_ordered():
    with QueueManager() as qm:
        qm.define_queue("T")
        per_producer = TOTAL // PRODUCERS
        received: list[list[tuple[int, int, int]]] = [[] for _ in range(CONSUMERS)]
        errors: list[BaseException] = []

        def produce(p: int) -> None:
            try:
                rng = random.Random(p)
                with qm.connect() as c:
                    h = c.open("T", IO)
                    seqs = [0] * 10
                    for n in range(per_producer):
                        prio = rng.randrange(1, 10)  # priority 0 is for the sentinels
                        sync = n % 7 == 0
                        h.put(REC.pack(p, prio, seqs[prio]), MD(priority=prio), PMO.SYNCPOINT if sync else 0)
                        if sync:
                            c.commit()
                        seqs[prio] += 1
            except BaseException as e:
                errors.append(e)

        def consume(k: int) -> None:
            try:
                with qm.connect() as c:
                    h = c.open("T", IO)
                    out = received[k]
                    while True:
                        m = h.get(GMO.WAIT | (GMO.SYNCPOINT if len(out) % 5 == 0 else 0), wait_interval=-1)
                        if m.priority == 0:
                            c.commit()
                            return
                        out.append(REC.unpack(m.data))
                        c.commit()
            except BaseException as e:
                errors.append(e)

        consumers = [threading.Thread(target=consume, args=(k,)) for k in range(CONSUMERS)]
        producers = [threading.Thread(target=produce, args=(p,)) for p in range(PRODUCERS)]
        for t in consumers + producers:
            t.start()
        for t in producers:
            t.join()
        with qm.connect() as c:
            h = c.open("T", IO)
            for _ in range(CONSUMERS):
                h.put(b"stop", MD(priority=0))
        for t in consumers:
            t.join(120)
        assert not any(t.is_alive() for t in consumers), "a consumer is stuck"
        assert not errors, errors

        everything = [r for out in received for r in out]
        assert len(everything) == TOTAL
        assert len(set(everything)) == TOTAL  # exactly once
        for out in received:  # FIFO per producer within a priority, as each consumer saw it
            last: dict[tuple[int, int], int] = {}
            for p, prio, n in out:
                assert last.get((p, prio), -1) < n
                last[(p, prio)] = n
        assert qm.inquire_queue("T").current_depth == 0


def test_producers_consumers_and_a_sweeper_on_a_short_virtual_interval():
    """The sweeper runs cycle after cycle while two producers and two consumers work; each
    message still arrives exactly once and in order per producer within a priority."""
    from sweepq.sweeper import ManualClock

    clock = ManualClock()
    total = 40_000
    with QueueManager(
        clock=clock,
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": 64}),
    ) as qm:
        qm.define_queue("S")
        received: list[list[tuple[int, int, int]]] = [[], []]
        errors: list[BaseException] = []
        producing = threading.Event()
        producing.set()

        def produce(p: int) -> None:
            try:
                with qm.connect() as c:
                    h = c.open("S", IO)
                    seqs = [0] * 10
                    for n in range(total // 2):
                        prio = (n * 7 + p) % 9 + 1
                        h.put(REC.pack(p, prio, seqs[prio]), MD(priority=prio))
                        seqs[prio] += 1
            except BaseException as e:
                errors.append(e)

        def consume(k: int) -> None:
            try:
                with qm.connect() as c:
                    h = c.open("S", IO)
                    while True:
                        m = h.get(GMO.WAIT, wait_interval=-1)
                        if m.priority == 0:
                            return
                        received[k].append(REC.unpack(m.data))
            except BaseException as e:
                errors.append(e)

        producers = [threading.Thread(target=produce, args=(p,)) for p in range(2)]
        consumers = [threading.Thread(target=consume, args=(k,)) for k in range(2)]
        for t in producers + consumers:
            t.start()
        cycles = 0
        while any(t.is_alive() for t in producers) or cycles < 5:
            clock.advance(0.05)  # a short virtual interval between cycles
            qm.sweeper.run_once()
            cycles += 1
        for t in producers:
            t.join()
        with qm.connect() as c:
            h = c.open("S", IO)
            for _ in consumers:
                h.put(b"stop", MD(priority=0))
        for t in consumers:
            t.join(120)
        assert not errors, errors
        assert not any(t.is_alive() for t in consumers)
        everything = [r for out in received for r in out]
        assert len(everything) == total and len(set(everything)) == total
        for out in received:
            last: dict[tuple[int, int], int] = {}
            for p, prio, n in out:
                assert last.get((p, prio), -1) < n
                last[(p, prio)] = n
        stats = qm.stats()["S"]
        assert stats.sweeps > 0, "the sweeper never swept: the test did not exercise it"
