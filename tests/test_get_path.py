"""Behaviours of the one get path (engine/getpath.py) that no single call's tests reach:
two consumers racing for one blob, one call at a time per connection, handles closed twice,
and wake-ups passed on between waiters."""

from __future__ import annotations

import threading

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.engine import GMO, MD, MF, OO, PMO, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock, SweepPolicy

IO = OO.INPUT_SHARED | OO.OUTPUT | OO.BROWSE


@pytest.fixture
def swept():
    """Q holds m00..m19, every one swept into three-message blobs (nothing in memory)."""
    store = MemoryStore(max_blob_records=3)
    qm = QueueManager(
        store=store,
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0), readahead_low_water=0),
    )
    qm.define_queue("Q")
    h = qm.connect().open("Q", IO)
    for i in range(20):
        h.put(b"m%02d" % i)
    while qm.sweeper.run_once().msgs_swept:
        pass
    assert qm.inquire_queue("Q").in_memory == 0
    yield qm, store
    qm.close()


def _race_first_read(store, other) -> list[bytes]:
    """Make the store's first read run ``other.get()`` before it reads (the get brings the
    blob back meanwhile); the list holds what that get took, once it has run."""
    read = store.read
    raced: list[bytes] = []

    def racing_read(*args, **kw):
        if not raced:
            raced.append(b"")
            raced[0] = other.get().data
        return read(*args, **kw)

    store.read = racing_read
    return raced


def test_a_blob_another_consumer_brought_back_meanwhile_is_no_damage(swept):
    """B6: consumer A needs the first blob and reads it without the lock; meanwhile consumer
    B brings that blob back (and its store record goes). A's read then finds no blob. That is
    no damage: A looks again and gets the next message; nothing is reported as 2101."""
    qm, store = swept
    a = qm.connect().open("Q", OO.INPUT_SHARED)
    b = qm.connect().open("Q", OO.INPUT_SHARED)
    read = store.read
    raced = _race_first_read(store, b)  # B's get brings the blob back and deletes its record
    got = a.get().data
    assert raced == [b"m00"] and got == b"m01"
    assert qm.stats()["Q"].damaged_blobs == 0
    store.read = read
    rest = [a.get().data for _ in range(18)]
    assert rest == [b"m%02d" % i for i in range(2, 20)]


def test_a_browse_whose_blob_left_meanwhile_looks_again(swept):
    """The same race for a browse, which reads blobs into its own cursor."""
    qm, store = swept
    br = qm.connect().open("Q", OO.BROWSE)
    b = qm.connect().open("Q", OO.INPUT_SHARED)
    raced = _race_first_read(store, b)
    assert br.get(GMO.BROWSE_FIRST).data == b"m01"  # m00 was taken meanwhile
    assert raced == [b"m00"] and qm.stats()["Q"].damaged_blobs == 0


def test_one_call_at_a_time_per_connection():
    """A connection serves one call at a time, as MQ's does: another thread's call on it while
    a get waits fails at once with 2219 and changes nothing; other connections are free."""
    clock = ManualClock()
    with QueueManager(clock=clock, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        conn = qm.connect()
        h = conn.open("Q", IO)
        out: list = []
        t = threading.Thread(target=lambda: out.append(h.get(GMO.WAIT, wait_interval=60_000).data))
        t.start()
        assert clock.wait_for_waiters(1)
        for call in (lambda: h.put(b"x"), lambda: conn.commit(), lambda: conn.open("Q", IO), lambda: h.get()):
            with pytest.raises(MQError) as ei:
                call()
            assert ei.value.reason == Reason.CALL_IN_PROGRESS == 2219
        assert qm.inquire_queue("Q").current_depth == 0  # the refused put changed nothing
        other = qm.connect().open("Q", OO.OUTPUT)
        other.put(b"from another connection")
        t.join(10)
        assert out == [b"from another connection"]
        h.put(b"now")  # the call ended: the connection is free again
        assert h.get().data == b"now"


def test_closing_a_handle_twice_is_2019():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", IO)
        assert h.close() == Reason.NONE
        for call in (h.close, lambda: h.put(b"x"), h.get):
            with pytest.raises(MQError) as ei:
                call()
            assert ei.value.reason == Reason.HOBJ_ERROR == 2019


def test_a_group_waiter_passes_on_a_wake_it_cannot_use_to_a_plain_getter():
    """A get waiting for a complete group (ALL_MSGS_AVAILABLE) is woken by an item of an
    incomplete group that a plain getter could take; it passes the wake on, once."""
    clock = ManualClock()
    with QueueManager(clock=clock, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        grouped = qm.connect().open("Q", IO)
        plain = qm.connect().open("Q", IO)
        out: dict = {}
        opts = GMO.WAIT | GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER
        tg = threading.Thread(target=lambda: out.setdefault("g", _reason(lambda: grouped.get(opts, 2000))))
        tg.start()
        assert clock.wait_for_waiters(1)
        tp = threading.Thread(target=lambda: out.setdefault("p", plain.get(GMO.WAIT, wait_interval=2000).data))
        tp.start()
        assert clock.wait_for_waiters(2)
        putter = qm.connect().open("Q", OO.OUTPUT)
        putter.put(b"first of three", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)
        tp.join(10)
        assert out["p"] == b"first of three"  # the plain getter was woken and took it
        clock.advance(3)
        tg.join(10)
        assert out["g"] == Reason.NO_MSG_AVAILABLE


def _reason(call) -> int:
    try:
        call()
    except MQError as e:
        return e.reason
    return 0
