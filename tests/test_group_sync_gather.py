"""GroupSync's gathering (engine/durable/journal.py): after a sync that served several callers,
the next one waits for as many to write again, and the caller that completes the group
starts the sync itself at once, with no wait for the delay and no hand-over to the leader
that gathered it; every caller still returns only after a sync that began after its write."""

from __future__ import annotations

import threading

from sweepq.engine.durable import GroupSync


class _Disk:
    """A sync that blocks while ``hold`` is clear, recording which thread ran it and how many
    callers had written when it began."""

    def __init__(self) -> None:
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Semaphore(0)
        self.written = 0  # callers that have written (counted by the test before wait())
        self.synced: list[tuple[str, int]] = []  # (thread name, written when it began)

    def sync(self) -> None:
        self.synced.append((threading.current_thread().name, self.written))
        self.entered.release()
        assert self.hold.wait(10)


def _start(group: GroupSync, disk: _Disk, name: str) -> threading.Thread:
    disk.written += 1  # "the write", before the wait as a committer makes it
    t = threading.Thread(target=group.wait, name=name)
    t.start()
    return t


def _two_share_a_sync(group: GroupSync, disk: _Disk) -> None:
    """Leave ``group`` as after a sync that served two callers (so the next one gathers)."""
    disk.hold.clear()
    a = _start(group, disk, "a")
    assert disk.entered.acquire(timeout=10)  # a syncs, blocked
    b, c = _start(group, disk, "b"), _start(group, disk, "c")
    while group.waiting < 3:  # state, not time: b and c wait for the next sync
        pass
    disk.hold.set()
    for t in (a, b, c):
        t.join(10)
        assert not t.is_alive()
    assert disk.entered.acquire(timeout=10)  # b or c synced for both


def test_the_caller_that_completes_the_group_syncs_at_once_and_covers_the_gatherer():
    disk = _Disk()
    group = GroupSync(disk.sync, delay=60.0)  # a gathering that waited for its delay would hang the test
    _two_share_a_sync(group, disk)
    syncs = group.syncs
    d = _start(group, disk, "d")  # gathers: the last sync served two
    while not group.gathering:
        pass
    e = _start(group, disk, "e")  # the second: the group is complete
    for t in (d, e):
        t.join(10)
        assert not t.is_alive()
    assert group.syncs == syncs + 1  # one sync for both
    assert disk.synced[-1] == ("e", 5)  # run by the caller that completed the group, after both writes


def test_callers_that_come_while_a_leader_gathers_wait_for_its_sync():
    disk = _Disk()
    group = GroupSync(disk.sync, delay=60.0)
    _two_share_a_sync(group, disk)
    disk.hold.clear()
    d = _start(group, disk, "d")
    while not group.gathering:
        pass
    e = _start(group, disk, "e")  # completes the group: syncs, blocked
    assert disk.entered.acquire(timeout=10)
    group.delay = 0.001  # f, alone after a sync that served two, gathers only briefly
    f = _start(group, disk, "f")  # wrote after that sync began: needs the next one
    while group.waiting < 3:
        pass
    assert d.is_alive() and e.is_alive() and f.is_alive()
    disk.hold.set()
    for t in (d, e, f):
        t.join(10)
        assert not t.is_alive()
    assert [w for _, w in disk.synced[-2:]] == [5, 6]  # f's own sync began after its write


def test_a_gathering_that_runs_out_of_time_syncs_for_those_that_came():
    disk = _Disk()
    group = GroupSync(disk.sync, delay=0.001)
    _two_share_a_sync(group, disk)
    d = _start(group, disk, "d")  # alone: its gathering ends with the delay, and it syncs
    d.join(10)
    assert not d.is_alive() and disk.synced[-1] == ("d", 4)
