"""Message groups (seed 000; docs/semantics.md §2.2, §3, §5.1, §6): logical and physical order,
PMO/GMO LOGICAL_ORDER, ALL_MSGS_AVAILABLE, a group spanning units of work with a STATUS
queue (put side and get side, interrupted and resumed), and every reason code.

The retrieval tests run twice (the ``where`` fixture): on the queue as put, and on the same
queue fully swept into blobs before the assertions. A swept group member must be found in
place: those tests also check that nothing was unswept.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweepq.blobstore import MemoryStore
from sweepq.blobstore.kv import MemoryKV
from sweepq.engine import (
    CC,
    GMO,
    MD,
    MF,
    MO,
    OO,
    PMO,
    DurabilitySettings,
    GroupStatus,
    IndexType,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SegmentStatus,
    SweeperSettings,
)
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO

NOT_IN, IN, LAST = GroupStatus.NOT_IN_GROUP, GroupStatus.MSG_IN_GROUP, GroupStatus.LAST_MSG_IN_GROUP
NOT_SEG, SEG, LAST_SEG = SegmentStatus.NOT_A_SEGMENT, SegmentStatus.SEGMENT, SegmentStatus.LAST_SEGMENT
P, NP = Persistence.PERSISTENT, Persistence.NOT_PERSISTENT
LOGICAL_PUT = PMO.LOGICAL_ORDER | PMO.SYNCPOINT


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


def new_manager(**kw) -> QueueManager:
    return QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
        **kw,
    )


@pytest.fixture(params=["memory", "swept"])
def where(request) -> str:
    return request.param


@pytest.fixture
def gqm():
    with new_manager() as qm:
        for name in ("Q", "L", "STATUS"):
            qm.define_queue(name)
        qm.define_queue("IX", index_type=IndexType.GROUP_ID)
        yield qm


def settle(qm: QueueManager, where: str, *names: str) -> None:
    """'swept': sweep every committed message of ``names`` into blobs (checked)."""
    if where != "swept":
        return
    for name in names:
        qm._queue(name).take_obtained()  # x = 0: the rule keeps nothing in memory
    qm.sweeper.run_once()
    for name in names:
        info = qm.inquire_queue(name)
        assert info.current_depth > 0
        assert qm.stats()[name].msgs_swept == info.current_depth == info.swept, name


def drain(h, opts=0, **kw) -> list:
    out = []
    while True:
        try:
            out.append(h.get(opts, **kw))
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            return out


# -- seed 000, Figure 10 --------------------------------------------------------------------------


def put_figure_10(h) -> tuple[bytes, bytes]:
    """The physical order of the seed's Figure 10; returns the GroupIds of Y and Z."""
    h.put(b"A")
    y = h.put(b"Y1", MD(msg_flags=MF.MSG_IN_GROUP)).md.group_id  # GroupId NONE: generated
    z = h.put(b"Z2", MD(msg_flags=MF.LAST_MSG_IN_GROUP, msg_seq_number=2)).md.group_id
    h.put(b"Y2", MD(group_id=y, msg_seq_number=2, msg_flags=MF.MSG_IN_GROUP))
    h.put(b"Y3s1", MD(group_id=y, msg_seq_number=3, msg_flags=MF.LAST_MSG_IN_GROUP | MF.SEGMENT))
    h.put(b"Y3s2", MD(group_id=y, msg_seq_number=3, offset=4, msg_flags=MF.LAST_MSG_IN_GROUP | MF.LAST_SEGMENT))
    h.put(b"Z1", MD(group_id=z, msg_seq_number=1, msg_flags=MF.MSG_IN_GROUP))
    h.put(b"B")
    return y, z


def test_figure_10_physical_and_logical_order(gqm, where):
    c = gqm.connect()
    hp, hl = c.open("Q", IO), c.open("L", IO)
    y, z = put_figure_10(hp)
    y2, z2 = put_figure_10(hl)
    assert len({y, z, y2, z2}) == 4 and bytes(24) not in (y, z)
    settle(gqm, where, "Q", "L")
    physical = [(m.data, m.group_status, m.segment_status) for m in drain(c.open("Q", IO))]
    assert physical == [
        (b"A", NOT_IN, NOT_SEG),  # 1. Message A (not in a group)
        (b"Y1", IN, NOT_SEG),  # 2. Logical message 1 of group Y
        (b"Z2", LAST, NOT_SEG),  # 3. Logical message 2 of group Z
        (b"Y2", IN, NOT_SEG),  # 4. Logical message 2 of group Y
        (b"Y3s1", LAST, SEG),  # 5. Segment 1 of (last) logical message 3 of group Y
        (b"Y3s2", LAST, LAST_SEG),  # 6. (Last) segment 2 of (last) logical message 3 of group Y
        (b"Z1", IN, NOT_SEG),  # 7. Logical message 1 of group Z
        (b"B", NOT_IN, NOT_SEG),  # 8. Message B (not in a group)
    ]
    logical = drain(c.open("L", IO), GMO.LOGICAL_ORDER)
    assert [(m.data, m.group_status, m.segment_status) for m in logical] == [
        (b"A", NOT_IN, NOT_SEG),  # 1. Message A (not in a group)
        (b"Y1", IN, NOT_SEG),  # 2. Logical message 1 of group Y
        (b"Y2", IN, NOT_SEG),  # 3. Logical message 2 of group Y
        (b"Y3s1", LAST, SEG),  # 4. Segment 1 of (last) logical message 3 of group Y
        (b"Y3s2", LAST, LAST_SEG),  # 5. (Last) segment 2 of (last) logical message 3 of group Y
        (b"Z1", IN, NOT_SEG),  # 6. Logical message 1 of group Z
        (b"Z2", LAST, NOT_SEG),  # 7. (Last) logical message 2 of group Z
        (b"B", NOT_IN, NOT_SEG),  # 8. Message B (not in a group)
    ]
    assert [(m.md.group_id, m.md.msg_seq_number, m.md.offset) for m in logical[1:7]] == [
        (y2, 1, 0),
        (y2, 2, 0),
        (y2, 3, 0),
        (y2, 3, 4),
        (z2, 1, 0),
        (z2, 2, 0),
    ]
    assert gqm.stats()["L"].msgs_unswept == 0  # logical order finds swept members in place


def test_figure_10_logical_order_with_complete_msg(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO)
    put_figure_10(h)
    settle(gqm, where, "L")
    got = drain(h, GMO.LOGICAL_ORDER | GMO.COMPLETE_MSG)
    assert [m.data for m in got] == [b"A", b"Y1", b"Y2", b"Y3s1Y3s2", b"Z1", b"Z2", b"B"]
    y3 = got[3]
    assert (y3.group_status, y3.segment_status, y3.data_length) == (LAST, LAST_SEG, 8)
    assert y3.md.msg_flags == MF.LAST_MSG_IN_GROUP | MF.MSG_IN_GROUP | MF.SEGMENT | MF.LAST_SEGMENT
    assert (y3.md.msg_seq_number, y3.md.offset) == (3, 0)  # the first segment's descriptor
    assert gqm.inquire_queue("L").current_depth == 0
    assert gqm.stats()["L"].msgs_unswept == 0


def test_a_group_whose_first_item_is_missing_is_not_in_the_logical_sequence(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO)
    g = h.put(b"g2", MD(msg_seq_number=2, msg_flags=MF.LAST_MSG_IN_GROUP)).md.group_id
    h.put(b"plain")
    settle(gqm, where, "L")
    assert [m.data for m in drain(h, GMO.LOGICAL_ORDER)] == [b"plain"]
    h.put(b"g1", MD(group_id=g, msg_flags=MF.MSG_IN_GROUP))  # now the group has its first item
    assert [m.data for m in drain(h, GMO.LOGICAL_ORDER)] == [b"g1", b"g2"]


# -- seed 000, "Grouping logical messages" ----------------------------------------------------------


def test_group_put_in_logical_order_and_got_when_all_are_available(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    # PMO.Options = MQPMO_LOGICAL_ORDER | MQPMO_SYNCPOINT
    r = [h.put(b"m%d" % i, MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT) for i in (1, 2, 3)]
    r.append(h.put(b"m4", MD(msg_flags=MF.LAST_MSG_IN_GROUP), LOGICAL_PUT))
    gid = r[0].md.group_id
    assert gid != bytes(24) and {x.md.group_id for x in r} == {gid}
    assert [x.md.msg_seq_number for x in r] == [1, 2, 3, 4] and {x.md.offset for x in r} == {0}
    assert r[3].md.msg_flags == MF.LAST_MSG_IN_GROUP | MF.MSG_IN_GROUP  # the stored copy
    getter = gqm.connect()
    g = getter.open("Q", IO)
    opts = GMO.SYNCPOINT | GMO.WAIT | GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER
    assert reason_of(lambda: g.get(opts, wait_interval=0)) == Reason.NO_MSG_AVAILABLE  # not committed
    c.commit()
    settle(gqm, where, "Q")
    got = []
    status = IN
    while status == IN:  # do while ( GroupStatus == MQGS_MSG_IN_GROUP )
        m = g.get(opts, wait_interval=0)
        got.append(m.data)
        status = m.group_status
    getter.commit()
    assert got == [b"m1", b"m2", b"m3", b"m4"]
    assert gqm.inquire_queue("Q").current_depth == 0


@pytest.mark.parametrize("name", ["Q", "IX"])  # IX: a queue indexed by GroupId
def test_all_msgs_available_passes_over_incomplete_groups(gqm, where, name):
    c = gqm.connect()
    h = c.open(name, IO)
    a = h.put(b"a1", MD(msg_flags=MF.MSG_IN_GROUP)).md.group_id  # group a: its last is missing
    b = h.put(b"b1", MD(msg_flags=MF.MSG_IN_GROUP)).md.group_id
    h.put(b"b2", MD(group_id=b, msg_seq_number=2, msg_flags=MF.LAST_MSG_IN_GROUP))
    h.put(b"a3", MD(group_id=a, msg_seq_number=3, msg_flags=MF.LAST_MSG_IN_GROUP))  # a2 is missing
    h.put(b"solo")
    settle(gqm, where, name)
    g = c.open(name, IO)
    for opts in (GMO.ALL_MSGS_AVAILABLE, GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER):
        m = g.get(opts | GMO.SYNCPOINT)
        assert m.data == b"b1"
        c.backout()
        g.close()
        g = c.open(name, IO)
    # An uncommitted member does not complete the group.
    h.put(b"a2", MD(group_id=a, msg_seq_number=2, msg_flags=MF.MSG_IN_GROUP), PMO.SYNCPOINT)
    got = [m.data for m in drain(g, GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER)]
    assert got == [b"b1", b"b2", b"solo"]
    c.commit()
    assert [m.data for m in drain(g, GMO.ALL_MSGS_AVAILABLE)] == [b"a1", b"a3", b"a2"]  # physical order


def test_all_msgs_available_is_ignored_inside_a_current_group(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    gid = h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER).md.group_id
    h.put(b"2", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    h.put(b"3", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    settle(gqm, where, "Q")
    g = c.open("Q", IO)
    opts = GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER
    assert g.get(opts).data == b"1"
    # The rest of the group is no longer "all available" from message 1, but the group is current.
    assert g.get(opts).data == b"2"
    assert g.get(opts).data == b"3"
    assert gid


def test_a_waiting_logical_get_is_woken_by_the_commit_that_completes_the_group(gqm):
    import threading

    c = gqm.connect()
    h = c.open("Q", IO)
    h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)
    c.commit()
    out = []
    getter = gqm.connect().open("Q", IO)
    t = threading.Thread(
        target=lambda: out.append(getter.get(GMO.WAIT | GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER).data)
    )
    t.start()
    gqm.clock.wait_for_waiters(1)
    h.put(b"2", MD(msg_flags=MF.LAST_MSG_IN_GROUP), LOGICAL_PUT)
    c.commit()
    t.join(10)
    assert out == [b"1"]


# -- seed 000, "Putting and getting a group that spans units of work" -----------------------------

STATUS = struct.Struct("<24sI")


def put_side(qm, total: int, per_uow: int, stop_after_uows: int | None = None, persistence=NP) -> None:
    """The seed's putting program: the group in several units of work, its GroupId and
    MsgSeqNumber recorded in the STATUS queue with each; the restart path first. Stops (the
    application dies: nothing committed after) after ``stop_after_uows`` units of work plus
    the puts of the next."""
    c = qm.connect()
    data = c.open("Q", IO)
    status = c.open("STATUS", IO)
    put = PMO.LOGICAL_ORDER | PMO.SYNCPOINT
    # Restart processing: MQGET (StatusInfo from STATUS queue) GMO.Options = MQGMO_SYNCPOINT
    try:
        info = status.get(GMO.SYNCPOINT)
        gid, seq = STATUS.unpack(info.data)
        # Group was terminated prematurely: set GroupId, MsgSeqNumber in the MQMD from the
        # status message. (The seed prints "values from Status message"; the last committed
        # MsgSeqNumber is recorded, so the next message is that plus 1, as its get side says.)
        r = data.put(
            b"m%d" % (seq + 1),
            MD(group_id=gid, msg_seq_number=seq + 1, msg_flags=MF.MSG_IN_GROUP, persistence=persistence),
            PMO.SYNCPOINT,
        )
        assert r.md.msg_seq_number == seq + 1
        done = seq + 1
        in_uow = 1
    except MQError as e:
        assert e.reason == Reason.NO_MSG_AVAILABLE  # proceed to normal processing
        done, in_uow, info = 0, 0, None
    uows = 0
    while done < total:
        last = done + 1 == total
        flags = MF.LAST_MSG_IN_GROUP if last else MF.MSG_IN_GROUP
        r = data.put(b"m%d" % (done + 1), MD(msg_flags=flags, persistence=persistence), put)
        done += 1
        in_uow += 1
        assert r.md.msg_seq_number == done
        if in_uow == per_uow or last:
            if stop_after_uows is not None and uows == stop_after_uows:
                return  # the application dies here: this unit of work is not committed
            if uows:  # (the restart's unit of work got it at its start)
                # MQGET (from STATUS queue) GMO.Options = MQGMO_SYNCPOINT
                status.get(GMO.SYNCPOINT)
            if not last:
                # StatusInfo = GroupId,MsgSeqNumber from MQMD
                status.put(STATUS.pack(r.md.group_id, r.md.msg_seq_number), MD(persistence=persistence), PMO.SYNCPOINT)
            c.commit()
            uows += 1
            in_uow = 0
    c.disconnect()


def check_whole_group(qm, where, total: int) -> None:
    assert qm.inquire_queue("STATUS").current_depth == 0  # a complete group: STATUS is empty
    settle(qm, where, "Q")
    h = qm.connect().open("Q", IO)
    got = drain(h, GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE)
    assert [m.data for m in got] == [b"m%d" % i for i in range(1, total + 1)]
    assert [m.md.msg_seq_number for m in got] == list(range(1, total + 1))
    assert len({m.md.group_id for m in got}) == 1
    assert [m.group_status for m in got] == [IN] * (total - 1) + [LAST]


def test_put_side_of_a_group_spanning_units_of_work(gqm, where):
    put_side(gqm, total=10, per_uow=3)
    check_whole_group(gqm, where, 10)


@pytest.mark.parametrize("stop", [0, 1, 2])
def test_put_side_interrupted_by_a_backout_and_resumed(gqm, where, stop):
    put_side(gqm, total=10, per_uow=3, stop_after_uows=stop)  # then the connection is dropped:
    for conn in list(gqm._connections):
        conn.disconnect()  # implicit backout of the unit of work in progress
    assert gqm.inquire_queue("Q").current_depth == 3 * stop
    assert gqm.inquire_queue("STATUS").current_depth == (1 if stop else 0)
    put_side(gqm, total=10, per_uow=3)  # the restart path
    check_whole_group(gqm, where, 10)


def durable_manager(kv: MemoryKV) -> QueueManager:
    return QueueManager(
        store=MemoryStore(kv=kv, max_blob_records=3),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0), readahead_low_water=0),
        durability=DurabilitySettings(durable=True),
        clock=ManualClock(),
    )


def crash(kv: MemoryKV) -> MemoryKV:
    """What a killed process leaves: the store as it stands (tests/test_durability.py)."""
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}
    return copy


def test_put_side_interrupted_by_a_crash_and_resumed_on_a_durable_manager(where):
    kv = MemoryKV()
    qm = durable_manager(kv)
    for name in ("Q", "STATUS"):
        qm.define_queue(name, default_persistence=P)
    put_side(qm, total=10, per_uow=3, stop_after_uows=2, persistence=P)
    kv = crash(kv)  # the process is killed with the third unit of work uncommitted
    with durable_manager(kv) as qm2:
        assert qm2.inquire_queue("Q").current_depth == 6
        assert qm2.inquire_queue("STATUS").current_depth == 1
        put_side(qm2, total=10, per_uow=3, persistence=P)
        check_whole_group(qm2, where, 10)


def get_side(qm, limit: int = 4, stop_after: int | None = None) -> list[bytes]:
    """The seed's getting program: at most ``limit`` messages of the group a unit of work,
    the position recorded in the STATUS queue; the restart path first. Returns the data
    processed in committed units of work. ``stop_after``: the application dies after that
    many gets of its last unit of work (nothing more is committed)."""
    c = qm.connect()
    data = c.open("Q", IO)
    status = c.open("STATUS", IO)
    processed: list[bytes] = []
    pending: list[bytes] = []
    msgs = 0
    group_status = IN
    # Restart processing: MQGET (from STATUS queue) GMO.Options = MQGMO_SYNCPOINT
    try:
        info = status.get(GMO.SYNCPOINT)
    except MQError as e:
        assert e.reason == Reason.NO_MSG_AVAILABLE  # proceed to normal processing
        info = None
    if info is not None:
        gid, seq = STATUS.unpack(info.data)
        # The next message of the group: matched by GroupId and MsgSeqNumber + 1.
        m = data.get(
            GMO.COMPLETE_MSG | GMO.SYNCPOINT | GMO.WAIT,
            wait_interval=0,
            match=MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER,
            group_id=gid,
            msg_seq_number=seq + 1,
        )
        msgs = 1
        pending.append(m.data)
        group_status = m.group_status
        status_was_got = True
    else:
        status_was_got = False
    gets = 0
    while group_status == IN:
        opts = GMO.SYNCPOINT | GMO.WAIT | GMO.LOGICAL_ORDER | (GMO.COMPLETE_MSG if info is not None else 0)
        while group_status == IN and msgs < limit:
            if stop_after is not None and gets == stop_after:
                return processed  # dies: the unit of work in progress is not committed
            m = data.get(opts, wait_interval=0)
            gets += 1
            msgs += 1
            pending.append(m.data)
            group_status = m.group_status
        # MQGET (from STATUS queue) GMO.Options = MQGMO_SYNCPOINT
        if not status_was_got:
            try:
                status.get(GMO.SYNCPOINT)
            except MQError as e:
                assert e.reason == Reason.NO_MSG_AVAILABLE  # the first unit of work has none
        status_was_got = False
        if group_status == IN:
            status.put(STATUS.pack(m.md.group_id, m.md.msg_seq_number), MD(persistence=m.md.persistence), PMO.SYNCPOINT)
        c.commit()
        processed += pending
        pending = []
        msgs = 0
    c.disconnect()
    return processed


def put_group(qm, total: int, persistence=NP) -> None:
    c = qm.connect()
    h = c.open("Q", IO)
    for i in range(1, total + 1):
        h.put(
            b"m%d" % i,
            MD(msg_flags=MF.LAST_MSG_IN_GROUP if i == total else MF.MSG_IN_GROUP, persistence=persistence),
            LOGICAL_PUT,
        )
    c.commit()
    c.disconnect()


def test_get_side_of_a_group_spanning_units_of_work(gqm, where):
    put_group(gqm, 10)
    settle(gqm, where, "Q")
    assert get_side(gqm) == [b"m%d" % i for i in range(1, 11)]
    assert gqm.inquire_queue("Q").current_depth == gqm.inquire_queue("STATUS").current_depth == 0
    assert gqm.stats()["Q"].msgs_unswept == 0


@pytest.mark.parametrize("stop", [2, 5, 9])
def test_get_side_interrupted_by_a_backout_and_resumed(gqm, where, stop):
    put_group(gqm, 10)
    settle(gqm, where, "Q")
    first = get_side(gqm, stop_after=stop)
    for conn in list(gqm._connections):
        conn.disconnect()  # implicit backout: the gets of the last unit of work come back
    assert len(first) == 4 * (stop // 4)
    rest = get_side(gqm)
    assert first + rest == [b"m%d" % i for i in range(1, 11)]
    assert gqm.inquire_queue("Q").current_depth == gqm.inquire_queue("STATUS").current_depth == 0


def test_get_side_interrupted_by_a_crash_and_resumed_on_a_durable_manager(where):
    kv = MemoryKV()
    qm = durable_manager(kv)
    for name in ("Q", "STATUS"):
        qm.define_queue(name, default_persistence=P)
    put_group(qm, 10, persistence=P)
    first = get_side(qm, stop_after=6)  # two units of work committed, the third in progress
    assert first == [b"m%d" % i for i in range(1, 5)]
    kv = crash(kv)
    with durable_manager(kv) as qm2:
        assert qm2.inquire_queue("Q").current_depth == 6
        settle(qm2, where, "Q")
        rest = get_side(qm2)
        assert first + rest == [b"m%d" % i for i in range(1, 11)]
        assert qm2.inquire_queue("STATUS").current_depth == 0


# -- put side: reason codes ------------------------------------------------------------------------


@pytest.fixture
def h(gqm):
    return gqm.connect().open("Q", IO)


@pytest.mark.parametrize(
    "md,reason",
    [
        (MD(msg_flags=0x20), Reason.MSG_FLAGS_ERROR),
        (MD(msg_flags=-1), Reason.MSG_FLAGS_ERROR),
        (MD(msg_flags="group"), Reason.MSG_FLAGS_ERROR),
        (MD(msg_flags=1.5), Reason.MSG_FLAGS_ERROR),
        (MD(msg_flags=MF.MSG_IN_GROUP, msg_seq_number=0), Reason.MSG_SEQ_NUMBER_ERROR),
        (MD(msg_flags=MF.MSG_IN_GROUP, msg_seq_number=1_000_000_000), Reason.MSG_SEQ_NUMBER_ERROR),
        (MD(msg_flags=MF.MSG_IN_GROUP, msg_seq_number="1"), Reason.MSG_SEQ_NUMBER_ERROR),
        (MD(msg_flags=MF.SEGMENT, offset=-1), Reason.OFFSET_ERROR),
        (MD(msg_flags=MF.SEGMENT, offset=1_000_000_000), Reason.OFFSET_ERROR),
        (MD(msg_flags=MF.SEGMENT, offset=None), Reason.OFFSET_ERROR),
        (MD(msg_flags=MF.MSG_IN_GROUP, group_id=42), Reason.MD_ERROR),
        (MD(msg_flags=MF.MSG_IN_GROUP, group_id=b"x" * 25), Reason.MD_ERROR),
    ],
)
@pytest.mark.parametrize("opts", [0, PMO.LOGICAL_ORDER])
def test_bad_group_fields_are_mq_errors(h, md, reason, opts):
    assert reason_of(lambda: h.put(b"xy", md, opts)) == reason
    assert h.queue.depth == 0
    assert h._s.groups is None


def test_an_offset_whose_data_passes_the_largest_logical_message_is_2251(h):
    assert reason_of(lambda: h.put(b"xy", MD(msg_flags=MF.SEGMENT, offset=999_999_999))) == Reason.OFFSET_ERROR
    h.put(b"x", MD(msg_flags=MF.LAST_SEGMENT, offset=999_999_999))  # the very last byte


def test_bad_put_types_are_mq_errors(h):
    assert reason_of(lambda: h.put("text", MD(msg_flags=MF.MSG_IN_GROUP))) == Reason.BUFFER_LENGTH_ERROR
    assert reason_of(lambda: h.put(b"x", {"msg_flags": 8}, PMO.LOGICAL_ORDER)) == Reason.MD_ERROR
    assert reason_of(lambda: h.put(b"x", MD(msg_flags=8), "LOGICAL")) == Reason.OPTIONS_ERROR
    assert reason_of(lambda: h.put_many([b"a"], MD(), PMO.LOGICAL_ORDER)) == Reason.OPTIONS_ERROR


def test_last_msg_in_group_implies_msg_in_group_and_none_gets_a_group_id(h):
    r = h.put(b"x", MD(msg_flags=MF.LAST_MSG_IN_GROUP))
    assert r.md.msg_flags == MF.LAST_MSG_IN_GROUP | MF.MSG_IN_GROUP
    assert r.md.group_id[:4] == b"SWQG"
    r2 = h.put(b"y", MD(msg_flags=MF.SEGMENTATION_ALLOWED))
    assert r2.md.group_id[:4] == b"SWQG" and r2.md.group_id != r.md.group_id
    assert h.put(b"z").md.group_id == bytes(24)
    mine = b"G".ljust(24, b"\0")
    assert h.put(b"w", MD(group_id=mine, msg_flags=MF.MSG_IN_GROUP)).md.group_id == mine


def test_logical_order_put_failures(gqm):
    c = gqm.connect()
    h = c.open("Q", IO)
    h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)
    # Not in a group while the group is incomplete: 2241, FAILED.
    with pytest.raises(MQError) as ei:
        h.put(b"x", None, LOGICAL_PUT)
    assert (ei.value.reason, ei.value.completion_code) == (Reason.INCOMPLETE_GROUP, CC.FAILED)
    assert reason_of(lambda: h.put(b"x", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)) == Reason.INCONSISTENT_UOW
    assert reason_of(lambda: h.put(b"x", MD(msg_flags=MF.MSG_IN_GROUP, persistence=P), LOGICAL_PUT)) == (
        Reason.INCONSISTENT_PERSISTENCE
    )
    # A segment starts logical message 2: now a non-segment is 2242 (before 2241).
    r = h.put(b"s1", MD(msg_flags=MF.MSG_IN_GROUP | MF.SEGMENT), LOGICAL_PUT)
    assert (r.md.msg_seq_number, r.md.offset) == (2, 0)
    assert reason_of(lambda: h.put(b"x", MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)) == Reason.INCOMPLETE_MSG
    assert reason_of(lambda: h.put(b"x", None, LOGICAL_PUT)) == Reason.INCOMPLETE_MSG
    # Changing the LAST_MSG_IN_GROUP setting inside a logical message: 2242.
    assert reason_of(lambda: h.put(b"x", MD(msg_flags=MF.LAST_MSG_IN_GROUP | MF.SEGMENT), LOGICAL_PUT)) == (
        Reason.INCOMPLETE_MSG
    )
    r = h.put(b"s2", MD(msg_flags=MF.MSG_IN_GROUP | MF.LAST_SEGMENT), LOGICAL_PUT)
    assert (r.md.msg_seq_number, r.md.offset) == (2, 2)
    r = h.put(b"3", MD(msg_flags=MF.LAST_MSG_IN_GROUP), LOGICAL_PUT)
    assert (r.md.msg_seq_number, r.md.offset, r.reason) == (3, 0, Reason.NONE)
    assert gqm.inquire_queue("Q").current_depth == 4  # the failed puts put nothing
    assert h.close() == Reason.NONE


@pytest.mark.parametrize(
    "md,opts,reason",
    [
        (None, 0, Reason.INCOMPLETE_GROUP),  # not in a group
        (MD(msg_flags=MF.MSG_IN_GROUP), 0, Reason.INCOMPLETE_GROUP),  # another group (GroupId NONE: new)
        ("same", PMO.NO_SYNCPOINT, Reason.INCONSISTENT_UOW),
        ("same-persistent", PMO.SYNCPOINT, Reason.INCONSISTENT_PERSISTENCE),
    ],
)
def test_dropping_logical_order_midway_gives_a_warning_and_puts(h, md, opts, reason):
    first = h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)
    if md == "same":
        md = MD(group_id=first.md.group_id, msg_seq_number=2, msg_flags=MF.MSG_IN_GROUP)
    elif md == "same-persistent":
        md = MD(group_id=first.md.group_id, msg_seq_number=2, msg_flags=MF.MSG_IN_GROUP, persistence=P)
    r = h.put(b"2", md, opts)
    assert (r.reason, r.completion_code) == (reason, CC.WARNING)
    assert h.queue.depth == 2
    r = h.put(b"3", md if md is not None else None, opts)  # the previous put did not use LOGICAL_ORDER
    assert r.reason == Reason.NONE


def test_close_with_an_incomplete_group_or_logical_message_warns(gqm):
    c = gqm.connect()
    h = c.open("Q", IO)
    h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)
    assert h.close() == Reason.INCOMPLETE_GROUP
    h = c.open("Q", IO)
    h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP | MF.SEGMENT), LOGICAL_PUT)
    assert h.close() == Reason.INCOMPLETE_MSG
    with pytest.raises(MQError) as ei:  # already closed: MQ's MQCLOSE says the handle is not valid
        h.close()
    assert ei.value.reason == Reason.HOBJ_ERROR == 2019
    h = c.open("Q", IO)
    assert h.close() == Reason.NONE


def test_msg_seq_number_limit_with_logical_order(h):
    h.put(b"x", MD(msg_flags=MF.MSG_IN_GROUP, msg_seq_number=999_999_999))
    assert (
        reason_of(lambda: h.put(b"y", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)) == Reason.MSG_SEQ_NUMBER_ERROR
    )


def test_restart_put_without_logical_order_sets_the_position(h):
    gid = h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP)).md.group_id
    h.close()
    h2 = h.connection.open("Q", IO)
    h2.put(b"5", MD(group_id=gid, msg_seq_number=5, msg_flags=MF.MSG_IN_GROUP))
    r = h2.put(b"6", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    assert (r.md.group_id, r.md.msg_seq_number) == (gid, 6)
    assert h2.close() == Reason.NONE


# -- get side: reason codes --------------------------------------------------------------------


def put_two_groups(h):
    a = h.put(b"a1", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER).md
    h.put(b"a2", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    b = h.put(b"b1", MD(msg_flags=MF.MSG_IN_GROUP, correl_id=b"C"), PMO.LOGICAL_ORDER).md
    h.put(b"b2", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    return a, b


def test_logical_get_match_rules(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    a, b = put_two_groups(h)
    settle(gqm, where, "Q")
    g = c.open("Q", IO)
    L = GMO.LOGICAL_ORDER
    # No current group: seq 1 / offset 0 only; MsgId, CorrelId, GroupId choose among them.
    assert reason_of(lambda: g.get(L, match=MO.MATCH_MSG_SEQ_NUMBER, msg_seq_number=2)) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: g.get(L, match=MO.MATCH_OFFSET, offset=3)) == Reason.MATCH_OPTIONS_ERROR
    assert g.get(L, match=MO.MATCH_CORREL_ID, correl_id=b"C").data == b"b1"
    # A current group: only its next item; fields that disagree are 2247, even MsgId.
    assert reason_of(lambda: g.get(L, match=MO.MATCH_GROUP_ID, group_id=a.group_id)) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: g.get(L, match=MO.MATCH_MSG_ID, msg_id=a.msg_id)) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: g.get(L, match=MO.MATCH_MSG_SEQ_NUMBER, msg_seq_number=1)) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: g.get(L, match=0x40)) == Reason.MATCH_OPTIONS_ERROR  # an undefined bit
    m = g.get(L, match=MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER, group_id=b.group_id, msg_seq_number=2)
    assert m.data == b"b2"
    assert [m.data for m in drain(g, L)] == [b"a1", b"a2"]


def test_logical_get_syncpoint_mode_and_dropping_logical_order(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    put_two_groups(h)
    h.put(b"solo")
    settle(gqm, where, "Q")
    g = c.open("Q", IO)
    L = GMO.LOGICAL_ORDER
    assert g.get(L | GMO.SYNCPOINT).data == b"a1"
    with pytest.raises(MQError) as ei:
        g.get(L | GMO.NO_SYNCPOINT)
    assert (ei.value.reason, ei.value.completion_code) == (Reason.INCONSISTENT_UOW, CC.FAILED)
    # Without LOGICAL_ORDER after a call with it: a warning, and the message is got.
    m = g.get(GMO.SYNCPOINT, match=MO.MATCH_CORREL_ID, correl_id=b"C")
    assert (m.data, m.reason, m.completion_code) == (b"b1", Reason.INCOMPLETE_GROUP, CC.WARNING)
    c.commit()
    # The position followed the physical get into group b; it is current there.
    assert g.get(L | GMO.SYNCPOINT).data == b"b2"
    # Group a's first item is gone: a2 is not in the logical sequence any more.
    assert g.get(L | GMO.SYNCPOINT).data == b"solo"
    assert drain(g, L) == []
    assert g.get().data == b"a2"
    c.commit()
    assert g.close() == Reason.NONE


def test_a_logical_get_that_stops_midway_warns_at_close_and_on_a_physical_get(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    put_two_groups(h)
    settle(gqm, where, "Q")
    g = c.open("Q", IO)
    assert g.get(GMO.LOGICAL_ORDER).data == b"a1"
    assert g.close() == Reason.INCOMPLETE_GROUP
    g = c.open("Q", IO)
    assert g.get(GMO.LOGICAL_ORDER, match=MO.MATCH_CORREL_ID, correl_id=b"C").data == b"b1"
    m = g.get()  # physical order: a2 comes first
    assert (m.data, m.reason) == (b"a2", Reason.INCOMPLETE_GROUP)


def test_bad_get_arguments_with_group_options_are_mq_errors(h):
    h.put(b"x", MD(msg_flags=MF.LAST_MSG_IN_GROUP))
    L = GMO.LOGICAL_ORDER
    assert reason_of(lambda: h.get(L, match="any")) == Reason.MATCH_OPTIONS_ERROR
    assert reason_of(lambda: h.get(L, match=MO.MATCH_GROUP_ID, group_id=7)) == Reason.MD_ERROR
    assert reason_of(lambda: h.get(L, match=MO.MATCH_MSG_SEQ_NUMBER, msg_seq_number="1")) == Reason.MSG_SEQ_NUMBER_ERROR
    assert reason_of(lambda: h.get(L, buffer_length=-1)) == Reason.BUFFER_LENGTH_ERROR
    assert reason_of(lambda: h.get(L | GMO.WAIT, wait_interval=-2)) == Reason.WAIT_INTERVAL_ERROR
    assert reason_of(lambda: h.get(GMO.COMPLETE_MSG | GMO.SYNCPOINT_IF_PERSISTENT)) == Reason.OPTIONS_ERROR
    assert reason_of(lambda: h.get(GMO.COMPLETE_MSG | GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT)) == Reason.OPTIONS_ERROR
    assert reason_of(lambda: h.get_many(5, GMO.LOGICAL_ORDER)) == Reason.OPTIONS_ERROR
    ro = h.connection.open("Q", OO.OUTPUT)
    assert reason_of(lambda: ro.get(L)) == Reason.NOT_OPEN_FOR_INPUT
    assert h.get(L).data == b"x"


def test_a_wake_a_group_waiter_cannot_use_is_passed_to_another_waiter(gqm):
    import threading

    c = gqm.connect()
    h = c.open("Q", IO)
    g = h.put(b"g1", MD(msg_flags=MF.MSG_IN_GROUP)).md.group_id  # a group still incomplete
    out: dict[str, list] = {"group": [], "plain": []}
    group_getter = gqm.connect().open("Q", IO)
    plain_getter = gqm.connect().open("Q", IO)

    def wait_group():
        out["group"].append(
            group_getter.get(GMO.WAIT | GMO.ALL_MSGS_AVAILABLE, match=MO.MATCH_GROUP_ID, group_id=g).data
        )

    def wait_plain():
        out["plain"].append(plain_getter.get(GMO.WAIT, match=MO.MATCH_CORREL_ID, correl_id=b"C").data)

    t1 = threading.Thread(target=wait_group)
    t1.start()
    gqm.clock.wait_for_waiters(1)
    t2 = threading.Thread(target=wait_plain)
    t2.start()
    gqm.clock.wait_for_waiters(2)
    # A member of another incomplete group that the plain waiter wants: the group waiter is
    # woken first (it may complete a group), cannot use it, and passes the wake on.
    h.put(b"other", MD(msg_flags=MF.MSG_IN_GROUP, correl_id=b"C"))
    t2.join(10)
    assert out["plain"] == [b"other"] and not t2.is_alive()
    h.put(b"g2", MD(group_id=g, msg_seq_number=2, msg_flags=MF.LAST_MSG_IN_GROUP))
    t1.join(10)
    assert out["group"] == [b"g1"]


def test_get_side_2245_warning_after_logical_order_and_state_dropped_when_idle(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    gid = h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER).md.group_id
    h.put(b"2", MD(msg_flags=MF.MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    h.put(b"3", MD(msg_flags=MF.LAST_MSG_IN_GROUP), PMO.LOGICAL_ORDER)
    assert h._s.groups is None  # the group is complete: the put path is the fast one again
    settle(gqm, where, "Q")
    g = c.open("Q", IO)
    assert g.get(GMO.LOGICAL_ORDER | GMO.SYNCPOINT).data == b"1"
    m = g.get(GMO.NO_SYNCPOINT, match=MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER, group_id=gid, msg_seq_number=2)
    assert (m.data, m.reason, m.completion_code) == (b"2", Reason.INCONSISTENT_UOW, CC.WARNING)
    m = g.get(GMO.LOGICAL_ORDER | GMO.SYNCPOINT)
    assert (m.data, m.reason) == (b"3", Reason.NONE)
    assert g._s.groups is None
    c.commit()
    assert gqm.inquire_queue("Q").current_depth == 0


# -- random arguments: only MQError comes out ------------------------------------------------------


WEIRD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.binary(max_size=30),
    st.lists(st.integers(0, 3), max_size=2),
)
GROUP_MD = st.builds(
    MD,
    msg_flags=st.one_of(st.integers(0, 0x1F), WEIRD),
    msg_seq_number=st.one_of(st.integers(1, 4), WEIRD),
    offset=st.one_of(st.integers(0, 8), WEIRD),
    group_id=st.one_of(st.just(bytes(24)), st.binary(min_size=24, max_size=24), WEIRD),
    persistence=st.one_of(st.integers(0, 2), WEIRD),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    calls=st.lists(
        st.tuples(
            st.sampled_from(["put", "get"]),
            GROUP_MD,
            st.one_of(st.sampled_from([0, PMO.LOGICAL_ORDER, PMO.LOGICAL_ORDER | PMO.SYNCPOINT]), WEIRD),
            st.one_of(
                st.sampled_from(
                    [
                        GMO.LOGICAL_ORDER,
                        GMO.COMPLETE_MSG,
                        GMO.ALL_MSGS_AVAILABLE | GMO.LOGICAL_ORDER | GMO.SYNCPOINT,
                        GMO.ALL_SEGMENTS_AVAILABLE,
                        0,
                    ]
                ),
                WEIRD,
            ),
            st.one_of(st.sampled_from([MO.NONE, MO.MATCH_GROUP_ID | MO.MATCH_MSG_SEQ_NUMBER, MO.MATCH_OFFSET]), WEIRD),
            st.one_of(st.none(), st.integers(0, 6), WEIRD),
        ),
        max_size=8,
    )
)
def test_random_group_calls_raise_only_mq_errors(calls):
    with new_manager() as qm:
        qm.define_queue("Q", max_msg_length=5)
        c = qm.connect()
        h = c.open("Q", IO)
        for kind, md, popts, gopts, match, number in calls:
            try:
                if kind == "put":
                    h.put(b"0123456789"[: (number if isinstance(number, int) and 0 <= number <= 10 else 3)], md, popts)
                else:
                    h.get(
                        gopts,
                        wait_interval=0,  # a WAIT bit among random options must not wait for ever
                        buffer_length=number,
                        match=match,
                        group_id=md.group_id,
                        msg_seq_number=md.msg_seq_number,
                        offset=md.offset,
                    )
            except MQError:
                pass
        c.backout()
        h.close()


def test_a_selection_string_narrows_logical_order_and_properties_ride_with_group_members(gqm, where):
    c = gqm.connect()
    h = c.open("Q", IO)
    for colour in (b"red", b"blue"):
        name = colour.decode()
        h.put(colour + b"1", MD(msg_flags=MF.MSG_IN_GROUP, properties={"Colour": name}), PMO.LOGICAL_ORDER)
        h.put(colour + b"2", MD(msg_flags=MF.LAST_MSG_IN_GROUP, properties={"Colour": name}), PMO.LOGICAL_ORDER)
    big = {"Note": "x" * 300}  # a header longer than 255 bytes
    h.put(b"s1", MD(msg_flags=MF.SEGMENT, properties=big), PMO.LOGICAL_ORDER)
    h.put(b"s2", MD(msg_flags=MF.LAST_SEGMENT, properties=big), PMO.LOGICAL_ORDER)
    settle(gqm, where, "Q")
    blue = c.open("Q", IO, selector="Colour = 'blue'")
    got = drain(blue, GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE)
    assert [m.data for m in got] == [b"blue1", b"blue2"]
    assert got[0].md.properties == {"Colour": "blue"}
    m = c.open("Q", IO).get(GMO.COMPLETE_MSG, match=MO.MATCH_OFFSET, offset=0)
    assert m.data == b"red1"  # COMPLETE_MSG in physical order: red1 is whole
    rest = drain(c.open("Q", IO), GMO.COMPLETE_MSG)
    assert [x.data for x in rest] == [b"red2", b"s1s2"]
    assert rest[1].data_length == 4 and rest[1].md.properties == big


def test_a_logical_wait_times_out_on_the_clock_and_inhibit_cancels_it(gqm):
    import threading

    c = gqm.connect()
    h = c.open("Q", IO)
    h.put(b"1", MD(msg_flags=MF.MSG_IN_GROUP))  # its group never completes
    g = gqm.connect().open("Q", IO)
    out = []

    def wait(interval):
        try:
            g.get(GMO.WAIT | GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE, wait_interval=interval)
        except MQError as e:
            out.append(e.reason)

    t = threading.Thread(target=wait, args=(1000,))
    t.start()
    gqm.clock.wait_for_waiters(1)
    gqm.clock.advance(1.0)
    t.join(10)
    assert out == [Reason.NO_MSG_AVAILABLE]
    t = threading.Thread(target=wait, args=(-1,))
    t.start()
    gqm.clock.wait_for_waiters(1)
    gqm.alter_queue("Q", inhibit_get=True)
    t.join(10)
    assert out == [Reason.NO_MSG_AVAILABLE, Reason.GET_INHIBITED]


@pytest.mark.parametrize(
    "opts",
    [
        GMO.BROWSE_MSG_UNDER_CURSOR | GMO.ALL_MSGS_AVAILABLE,
        GMO.MSG_UNDER_CURSOR | GMO.LOGICAL_ORDER,
        GMO.BROWSE_MSG_UNDER_CURSOR | GMO.COMPLETE_MSG | GMO.LOCK,
        GMO.UNLOCK | GMO.LOGICAL_ORDER,
    ],
)
def test_group_options_with_the_cursor_calls_are_refused_for_now(gqm, opts):
    h = gqm.connect().open("Q", IO | OO.BROWSE)
    h.put(b"x", MD(msg_flags=MF.LAST_MSG_IN_GROUP))
    assert h.get(GMO.BROWSE_FIRST).data == b"x"
    assert reason_of(lambda: h.get(opts)) == Reason.OPTIONS_ERROR
    assert h.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"x"  # the cursor calls work beside groups


# -- browse in logical order (docs/semantics.md §5.5) ------------------------------------------------


def test_figure_10_browsed_in_logical_order_then_got(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO | OO.BROWSE)
    put_figure_10(h)
    settle(gqm, where, "L")
    first = h.get(GMO.BROWSE_FIRST | GMO.LOGICAL_ORDER)
    rest = drain(h, GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER)
    assert [m.data for m in [first, *rest]] == [b"A", b"Y1", b"Y2", b"Y3s1", b"Y3s2", b"Z1", b"Z2", b"B"]
    assert gqm.inquire_queue("L").current_depth == 8  # a browse takes nothing
    # The browse position is separate from the get position: gets start afresh.
    assert [m.data for m in drain(h, GMO.LOGICAL_ORDER | GMO.COMPLETE_MSG)] == [
        b"A",
        b"Y1",
        b"Y2",
        b"Y3s1Y3s2",
        b"Z1",
        b"Z2",
        b"B",
    ]
    assert gqm.stats()["L"].msgs_unswept == 0


def test_inconsistent_browse_2259(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO | OO.BROWSE)
    put_figure_10(h)
    settle(gqm, where, "L")
    assert h.get(GMO.BROWSE_FIRST | GMO.LOGICAL_ORDER).data == b"A"
    assert h.get(GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER).data == b"Y1"
    with pytest.raises(MQError) as ei:
        h.get(GMO.BROWSE_NEXT)
    assert (ei.value.reason, ei.value.completion_code) == (Reason.INCONSISTENT_BROWSE, CC.FAILED)
    assert h.get(GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER).data == b"Y2"  # the pass goes on
    assert h.get(GMO.BROWSE_FIRST).data == b"A"  # a new pass, physical
    assert h.get(GMO.BROWSE_NEXT).data == b"Y1"
    assert reason_of(lambda: h.get(GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER)) == Reason.INCONSISTENT_BROWSE
    assert h.get(GMO.BROWSE_NEXT).data == b"Z2"  # physical order
    # BROWSE_NEXT straight after the open behaves as BROWSE_FIRST, with or without the option.
    h2 = c.open("L", OO.BROWSE)
    assert h2.get(GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER).data == b"A"
    assert h2.get(GMO.BROWSE_MSG_UNDER_CURSOR).data == b"A"  # the cursor stands on it


def test_ibm_pattern_for_browsing_groups(gqm, where):
    """§5.5: BROWSE_NEXT|COMPLETE_MSG|LOGICAL_ORDER|ALL_MSGS_AVAILABLE|WAIT matching
    MsgSeqNumber 1, then BROWSE_NEXT|COMPLETE_MSG|LOGICAL_ORDER while GroupStatus is
    MSG_IN_GROUP; repeat until 2033. An incomplete group is passed over."""
    c = gqm.connect()
    h = c.open("L", IO | OO.BROWSE)
    put_figure_10(h)
    h.put(b"I1", MD(msg_flags=MF.MSG_IN_GROUP))  # a group whose last message never comes
    settle(gqm, where, "L")
    groups_seen = []
    while True:
        try:
            m = h.get(
                GMO.BROWSE_NEXT | GMO.COMPLETE_MSG | GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE | GMO.WAIT,
                wait_interval=0,
                match=MO.MATCH_MSG_SEQ_NUMBER,
                msg_seq_number=1,
            )
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            break
        group = [m.data]
        while m.group_status == IN:
            m = h.get(GMO.BROWSE_NEXT | GMO.COMPLETE_MSG | GMO.LOGICAL_ORDER)
            group.append(m.data)
        groups_seen.append(group)
    assert groups_seen == [[b"A"], [b"Y1", b"Y2", b"Y3s1Y3s2"], [b"Z1", b"Z2"], [b"B"]]
    assert gqm.inquire_queue("L").current_depth == 9


def test_physical_browse_with_complete_msg_reassembles_beyond_the_cursor(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO | OO.BROWSE)
    put_figure_10(h)
    settle(gqm, where, "L")
    got = [h.get(GMO.BROWSE_FIRST | GMO.COMPLETE_MSG).data]
    got += [m.data for m in drain(h, GMO.BROWSE_NEXT | GMO.COMPLETE_MSG)]
    assert got == [b"A", b"Y1", b"Z2", b"Y2", b"Y3s1Y3s2", b"Z1", b"B"]
    assert reason_of(lambda: h.get(GMO.BROWSE_NEXT | GMO.LOCK | GMO.LOGICAL_ORDER)) == Reason.OPTIONS_ERROR


def test_complete_msg_under_the_cursor_and_2246(gqm, where):
    c = gqm.connect()
    h = c.open("L", IO | OO.BROWSE)
    put_figure_10(h)
    settle(gqm, where, "L")
    seen = [h.get(GMO.BROWSE_FIRST).data]
    while seen[-1] != b"Y3s2":
        seen.append(h.get(GMO.BROWSE_NEXT).data)
    with pytest.raises(MQError) as ei:  # the cursor is on a segment past the first
        h.get(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.COMPLETE_MSG)
    assert (ei.value.reason, ei.value.completion_code) == (Reason.INVALID_MSG_UNDER_CURSOR, CC.FAILED)
    assert reason_of(lambda: h.get(GMO.MSG_UNDER_CURSOR | GMO.COMPLETE_MSG)) == Reason.INVALID_MSG_UNDER_CURSOR
    h.get(GMO.BROWSE_FIRST)
    while h.get(GMO.BROWSE_NEXT).data != b"Y3s1":
        pass
    m = h.get(GMO.BROWSE_MSG_UNDER_CURSOR | GMO.COMPLETE_MSG)
    assert (m.data, m.segment_status) == (b"Y3s1Y3s2", LAST_SEG)
    assert gqm.inquire_queue("L").current_depth == 8
    m = h.get(GMO.MSG_UNDER_CURSOR | GMO.COMPLETE_MSG | GMO.SYNCPOINT, buffer_length=4)
    assert (m.reason, m.data, m.data_length) == (Reason.TRUNCATED_MSG_FAILED, b"Y3s1", 8)
    m = h.get(GMO.MSG_UNDER_CURSOR | GMO.COMPLETE_MSG | GMO.SYNCPOINT)
    assert m.data == b"Y3s1Y3s2" and c.uncommitted == 2
    c.backout()
    assert gqm.inquire_queue("L").current_depth == 8
    h.get(GMO.BROWSE_FIRST | GMO.LOGICAL_ORDER)
    while h.get(GMO.BROWSE_NEXT | GMO.LOGICAL_ORDER).data != b"Y3s1":
        pass
    assert h.get(GMO.MSG_UNDER_CURSOR | GMO.COMPLETE_MSG).data == b"Y3s1Y3s2"
    assert gqm.inquire_queue("L").current_depth == 6


def test_a_group_being_put_does_not_change_how_the_same_handle_gets():
    """Found by the browse model with group rules: after a put in a group, the handle's plain
    get went the group way and no longer saw the message its own browse had locked."""
    from sweepq.engine import GMO, MD, MF, OO, QueueManager, SweeperSettings

    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED | OO.BROWSE)
        for i in range(3):
            h.put(b"m%d" % i)
        assert h.get(GMO.BROWSE_NEXT | GMO.LOCK).data == b"m0"
        h.put(b"g", MD(group_id=b"g1", msg_seq_number=1, msg_flags=MF.MSG_IN_GROUP))
        assert [h.get().data for _ in range(4)] == [b"m0", b"m1", b"m2", b"g"]
