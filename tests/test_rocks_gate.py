"""blobstore/rocks.py's _Gate: callers come and go without a lock, and ``alone()`` still runs
with nobody inside and keeps newcomers out until it is done (issue 31)."""

from __future__ import annotations

import threading

from sweepq.blobstore.rocks import _Gate


def test_alone_never_overlaps_a_caller_inside() -> None:
    gate = _Gate()
    stop = threading.Event()
    inside = [0]  # callers between enter and leave, as they count themselves
    overlaps: list[int] = []
    lock = threading.Lock()

    def caller() -> None:
        while not stop.is_set():
            gate.enter()
            with lock:
                inside[0] += 1
            with lock:
                inside[0] -= 1
            gate.leave()

    def lone() -> None:
        for _ in range(300):
            with gate.alone(), lock:
                if inside[0]:
                    overlaps.append(inside[0])

    callers = [threading.Thread(target=caller) for _ in range(4)]
    lones = [threading.Thread(target=lone) for _ in range(2)]
    for t in callers + lones:
        t.start()
    for t in lones:
        t.join(timeout=60)
    stop.set()
    for t in callers:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in callers + lones)
    assert overlaps == []
    assert gate.inside == [] and not gate.shut


def test_a_caller_arriving_while_shut_waits_for_the_end() -> None:
    gate = _Gate()
    entered = threading.Event()

    def caller() -> None:
        gate.enter()
        entered.set()
        gate.leave()

    with gate.alone():
        t = threading.Thread(target=caller)
        t.start()
        assert not entered.wait(0.2)  # kept out while alone() runs
        assert gate.inside == []  # it backed out again
    t.join(timeout=10)
    assert entered.is_set() and gate.inside == []


def test_alone_waits_for_a_caller_inside() -> None:
    gate = _Gate()
    done = threading.Event()
    gate.enter()

    def lone() -> None:
        with gate.alone():
            done.set()

    t = threading.Thread(target=lone)
    t.start()
    assert not done.wait(0.2)
    gate.leave()
    t.join(timeout=10)
    assert done.is_set()
