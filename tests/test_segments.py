"""Segments (seed 000; docs/semantics.md §3 COMPLETE_MSG / ALL_SEGMENTS_AVAILABLE, §6.2): segments
put by the application in logical order, segmentation by the queue manager, reassembly with
COMPLETE_MSG and its buffer rules, and the STATUS queue kept as segments (the seed's note).

The retrieval tests run on the queue as put and on the same queue fully swept into blobs.
"""

from __future__ import annotations

import pytest

from sweepq.engine import (
    CC,
    GMO,
    MD,
    MF,
    MO,
    PMO,
    DurabilitySettings,
    MessageSettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SegmentStatus,
    SweeperSettings,
)
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO

NOT_SEG, SEG, LAST_SEG = SegmentStatus.NOT_A_SEGMENT, SegmentStatus.SEGMENT, SegmentStatus.LAST_SEGMENT
LOGICAL_PUT = PMO.LOGICAL_ORDER | PMO.SYNCPOINT


def reason_of(fn) -> Reason:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


@pytest.fixture(params=["memory", "swept"])
def where(request) -> str:
    return request.param


@pytest.fixture
def qm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
        messages=MessageSettings(max_msg_length=64 * 1024),
    ) as qm:
        qm.define_queue("Q")
        qm.define_queue("SMALL", max_msg_length=10)
        qm.define_queue("STATUS")
        yield qm


@pytest.fixture
def conn(qm):
    with qm.connect() as c:
        yield c


def settle(qm, where: str, *names: str) -> None:
    if where != "swept":
        return
    for name in names:
        qm._queue(name).take_obtained()
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


def put_application_segments(h) -> list:
    """The seed family's "Application segmentation of logical messages": four logical
    messages, all but the third segmented by the application, in logical order."""
    IN, LAST = MF.MSG_IN_GROUP, MF.LAST_MSG_IN_GROUP
    plan = [
        (b"1a-", IN | MF.SEGMENT),
        (b"1b--", IN | MF.SEGMENT),
        (b"1c", IN | MF.LAST_SEGMENT),
        (b"2a", IN | MF.SEGMENT),
        (b"2b", IN | MF.LAST_SEGMENT),
        (b"3", IN),
        (b"4a", LAST | MF.SEGMENT),
        (b"4b", LAST | MF.SEGMENT),
        (b"4c", LAST | MF.LAST_SEGMENT),
    ]
    return [h.put(data, MD(msg_flags=flags), LOGICAL_PUT) for data, flags in plan]


def test_application_segments_get_group_seq_and_cumulative_offsets(conn):
    h = conn.open("Q", IO)
    r = put_application_segments(h)
    assert len({x.md.group_id for x in r}) == 1
    assert [(x.md.msg_seq_number, x.md.offset) for x in r] == [
        (1, 0),
        (1, 3),
        (1, 7),
        (2, 0),
        (2, 2),
        (3, 0),
        (4, 0),
        (4, 2),
        (4, 4),
    ]
    assert r[2].md.msg_flags == MF.MSG_IN_GROUP | MF.SEGMENT | MF.LAST_SEGMENT  # LAST_SEGMENT implies SEGMENT
    conn.commit()
    assert h.close() == Reason.NONE


def test_segments_in_logical_order_with_their_statuses(qm, conn, where):
    h = conn.open("Q", IO)
    put_application_segments(h)
    conn.commit()
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    opts = GMO.SYNCPOINT | GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE | GMO.WAIT
    got = []
    while True:  # do while ( GroupStatus != LAST_MSG_IN_GROUP || SegmentStatus != LAST_SEGMENT )
        m = g.get(opts, wait_interval=0)
        got.append((m.data, m.group_status.value, m.segment_status.value))
        if m.group_status == "L" and m.segment_status in ("L", " "):
            break
    conn.commit()
    assert got == [
        (b"1a-", "G", "S"),
        (b"1b--", "G", "S"),
        (b"1c", "G", "L"),
        (b"2a", "G", "S"),
        (b"2b", "G", "L"),
        (b"3", "G", " "),
        (b"4a", "L", "S"),
        (b"4b", "L", "S"),
        (b"4c", "L", "L"),
    ]
    assert qm.stats()["Q"].msgs_unswept == 0


def test_complete_msg_reassembles_with_the_first_segments_descriptor(qm, conn, where):
    h = conn.open("Q", IO)
    r = put_application_segments(h)
    conn.commit()
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    got = drain(g, GMO.COMPLETE_MSG | GMO.LOGICAL_ORDER)
    assert [m.data for m in got] == [b"1a-1b--1c", b"2a2b", b"3", b"4a4b4c"]
    assert [m.data_length for m in got] == [9, 4, 1, 6]
    first = got[0]
    assert first.md.msg_id == r[0].md.msg_id and first.msg_token == r[0].msg_token
    assert (first.md.msg_seq_number, first.md.offset) == (1, 0)
    assert first.md.msg_flags == MF.MSG_IN_GROUP | MF.SEGMENT | MF.LAST_SEGMENT  # "the only segment"
    assert [m.segment_status for m in got] == [LAST_SEG, LAST_SEG, NOT_SEG, LAST_SEG]
    assert [m.group_status.value for m in got] == ["G", "G", "G", "L"]
    assert qm.inquire_queue("Q").current_depth == 0
    assert qm.stats()["Q"].msgs_unswept == 0


def test_complete_msg_in_physical_order_waits_for_every_segment_and_orders_by_offset(qm, conn, where):
    h = conn.open("Q", IO)
    gid = h.put(b"-tail", MD(msg_flags=MF.LAST_SEGMENT, offset=4)).md.group_id  # arrives first
    h.put(b"other")
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    assert [m.data for m in drain(g, GMO.COMPLETE_MSG | GMO.SYNCPOINT)] == [b"other"]
    for opts in (GMO.ALL_SEGMENTS_AVAILABLE, GMO.ALL_MSGS_AVAILABLE):
        assert reason_of(lambda o=opts: g.get(o)) == Reason.NO_MSG_AVAILABLE
    conn.backout()
    h.put(b"head", MD(group_id=gid, msg_flags=MF.SEGMENT), PMO.SYNCPOINT)  # not committed yet
    assert reason_of(lambda: g.get(GMO.COMPLETE_MSG, match=MO.MATCH_GROUP_ID, group_id=gid)) == Reason.NO_MSG_AVAILABLE
    conn.commit()
    m = g.get(GMO.COMPLETE_MSG, match=MO.MATCH_GROUP_ID, group_id=gid)
    assert (m.data, m.md.offset, m.segment_status) == (b"head-tail", 0, LAST_SEG)
    # ALL_SEGMENTS_AVAILABLE alone: segments one by one, in physical order, once all are there.
    h.put(b"x2", MD(group_id=gid, msg_seq_number=2, msg_flags=MF.LAST_SEGMENT, offset=2))
    only_g = {"match": MO.MATCH_GROUP_ID, "group_id": gid}
    assert reason_of(lambda: g.get(GMO.ALL_SEGMENTS_AVAILABLE, **only_g)) == Reason.NO_MSG_AVAILABLE
    assert g.get(match=MO.MATCH_GROUP_ID, group_id=gid).data == b"x2"  # without the option it is there
    h.put(b"x2", MD(group_id=gid, msg_seq_number=2, msg_flags=MF.LAST_SEGMENT, offset=2))
    h.put(b"x1", MD(group_id=gid, msg_seq_number=2, msg_flags=MF.SEGMENT))
    assert [m.data for m in drain(g, GMO.ALL_SEGMENTS_AVAILABLE)] == [b"other", b"x2", b"x1"]


def test_complete_msg_buffer_rules(qm, conn, where):
    h = conn.open("Q", IO)
    h.put(b"abc", MD(msg_flags=MF.SEGMENT), PMO.LOGICAL_ORDER)
    h.put(b"def", MD(msg_flags=MF.LAST_SEGMENT), PMO.LOGICAL_ORDER)
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    m = g.get(GMO.COMPLETE_MSG, buffer_length=4)  # too small, not accepted: 2080, nothing taken
    assert (m.reason, m.completion_code, m.data, m.data_length) == (Reason.TRUNCATED_MSG_FAILED, CC.WARNING, b"abcd", 6)
    assert qm.inquire_queue("Q").current_depth == 2
    m = g.get(GMO.COMPLETE_MSG | GMO.ACCEPT_TRUNCATED_MSG, buffer_length=0)  # 2079: all segments go
    assert (m.reason, m.data, m.data_length) == (Reason.TRUNCATED_MSG_ACCEPTED, b"", 6)
    assert qm.inquire_queue("Q").current_depth == 0


def test_complete_msg_under_syncpoint_backs_out_every_segment(qm, conn, where):
    h = conn.open("Q", IO)
    for data, flags in ((b"a", MF.SEGMENT), (b"b", MF.SEGMENT), (b"c", MF.LAST_SEGMENT)):
        h.put(data, MD(msg_flags=flags), PMO.LOGICAL_ORDER)
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    assert g.get(GMO.COMPLETE_MSG | GMO.SYNCPOINT).data == b"abc"
    assert conn.uncommitted == 3 and qm.inquire_queue("Q").current_depth == 3
    conn.backout()
    m = g.get(GMO.COMPLETE_MSG | GMO.SYNCPOINT)
    assert (m.data, m.backout_count) == (b"abc", 1)
    conn.commit()
    assert qm.inquire_queue("Q").current_depth == 0


def test_queue_manager_segmentation(qm, conn, where):
    h = conn.open("SMALL", IO)
    data = bytes(range(256)) * 2  # 512 bytes, the queue takes 10 a message
    assert reason_of(lambda: h.put(data)) == Reason.MSG_TOO_BIG_FOR_Q
    assert reason_of(lambda: h.put(data, MD(msg_flags=MF.MSG_IN_GROUP))) == Reason.MSG_TOO_BIG_FOR_Q
    r = h.put(data, MD(msg_flags=MF.SEGMENTATION_ALLOWED, persistence=Persistence.NOT_PERSISTENT), PMO.SYNCPOINT)
    assert r.md.group_id[:4] == b"SWQG" and r.md.offset == 0
    assert r.md.msg_flags == MF.SEGMENTATION_ALLOWED | MF.SEGMENT  # the first segment
    assert conn.uncommitted == 52
    conn.commit()
    assert qm.inquire_queue("SMALL").current_depth == 52
    settle(qm, where, "SMALL")
    g = conn.open("SMALL", IO)
    first = g.get(GMO.SYNCPOINT)  # segment by segment, in order
    assert (first.data, first.md.offset, first.segment_status) == (data[:10], 0, SEG)
    conn.backout()
    m = g.get(GMO.COMPLETE_MSG)
    assert m.data == data and m.data_length == 512 and m.segment_status == LAST_SEG
    assert qm.inquire_queue("SMALL").current_depth == 0
    # A segment of the application's own is segmented further, keeping its offsets.
    r = h.put(b"0123456789abcdefghij++", MD(msg_flags=MF.SEGMENT | MF.SEGMENTATION_ALLOWED), PMO.LOGICAL_ORDER)
    r2 = h.put(b"end", MD(msg_flags=MF.LAST_SEGMENT), PMO.LOGICAL_ORDER)
    assert (r2.md.group_id, r2.md.offset) == (r.md.group_id, 22)
    segs = drain(g)
    assert [(s.md.offset, s.segment_status) for s in segs] == [(0, SEG), (10, SEG), (20, SEG), (22, LAST_SEG)]
    # The queue manager's limit splits as well (2031 without SEGMENTATION_ALLOWED).
    big = b"x" * (64 * 1024 + 1)
    hq = conn.open("Q", IO)
    assert reason_of(lambda: hq.put(big, MD(msg_flags=MF.MSG_IN_GROUP))) == Reason.MSG_TOO_BIG_FOR_Q_MGR
    hq.put(big, MD(msg_flags=MF.SEGMENTATION_ALLOWED))
    assert qm.inquire_queue("Q").current_depth == 2
    assert hq.get(GMO.COMPLETE_MSG).data == big


def test_logical_order_get_of_segments_checks_the_offset(qm, conn, where):
    h = conn.open("Q", IO)
    r = h.put(b"aa", MD(msg_flags=MF.SEGMENT), PMO.LOGICAL_ORDER)
    h.put(b"bb", MD(msg_flags=MF.LAST_SEGMENT), PMO.LOGICAL_ORDER)
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    L = GMO.LOGICAL_ORDER
    assert g.get(L, match=MO.MATCH_OFFSET, offset=0).data == b"aa"
    assert reason_of(lambda: g.get(L, match=MO.MATCH_OFFSET, offset=0)) == Reason.MATCH_OPTIONS_ERROR
    assert g.close() == Reason.INCOMPLETE_MSG  # closed in the middle of a logical message
    g = conn.open("Q", IO)
    assert reason_of(lambda: g.get(L)) == Reason.NO_MSG_AVAILABLE  # bb is not a first item
    m = g.get(match=MO.MATCH_GROUP_ID | MO.MATCH_OFFSET, group_id=r.md.group_id, offset=2)
    assert (m.data, m.reason) == (b"bb", Reason.NONE)


def test_status_queue_kept_as_segments(qm, conn, where):
    """The seed's note: each intermediate unit of work puts its status as a segment of one
    message; the last puts the last segment and clears the status with a COMPLETE_MSG get.
    After a restart, the status is read by browsing... here by getting it in logical order
    under syncpoint and backing out (browse cursors arrive with the browse work)."""
    status = conn.open("STATUS", IO)
    data = conn.open("Q", IO)
    offset = 0
    for uow in range(3):
        data.put(b"m%d" % uow, MD(msg_flags=MF.MSG_IN_GROUP), LOGICAL_PUT)
        r = status.put(b"uow%d;" % uow, MD(msg_flags=MF.SEGMENT), LOGICAL_PUT)
        assert r.md.offset == offset
        offset += 5
        conn.commit()
    settle(qm, where, "STATUS")
    # Restart: read the status segments in logical order until no further segments come.
    reader = conn.open("STATUS", IO)
    seen = drain(reader, GMO.LOGICAL_ORDER | GMO.SYNCPOINT)
    assert b"".join(m.data for m in seen) == b"uow0;uow1;uow2;"
    conn.backout()
    reader.close()
    # The last unit of work: the last segment, then the whole status goes with COMPLETE_MSG.
    data.put(b"last", MD(msg_flags=MF.LAST_MSG_IN_GROUP), LOGICAL_PUT)
    status.put(b"done", MD(msg_flags=MF.LAST_SEGMENT), LOGICAL_PUT)
    conn.commit()
    m = conn.open("STATUS", IO).get(GMO.COMPLETE_MSG | GMO.SYNCPOINT)
    assert m.data == b"uow0;uow1;uow2;done"
    conn.commit()
    assert qm.inquire_queue("STATUS").current_depth == 0
    assert [m.data for m in drain(conn.open("Q", IO), GMO.LOGICAL_ORDER)] == [b"m0", b"m1", b"m2", b"last"]


def test_browse_helpers_for_a_cursor_on_a_segment(qm, conn, where):
    """The entry points a caller of the group search uses (engine/groups/ docstring): a
    finder for the one get path (engine/getpath.py), which reads the blobs it needs."""
    from sweepq.engine import getpath, groups
    from sweepq.engine.groups.search import pin

    h = conn.open("Q", IO)
    h.put(b"ab", MD(msg_flags=MF.SEGMENT), PMO.LOGICAL_ORDER)
    second = h.put(b"cd", MD(msg_flags=MF.LAST_SEGMENT), PMO.LOGICAL_ORDER)
    settle(qm, where, "Q")
    with pytest.raises(MQError) as ei:
        groups.under_cursor(second._rec, GMO.COMPLETE_MSG)
    assert ei.value.reason == Reason.INVALID_MSG_UNDER_CURSOR == 2246
    groups.under_cursor(second._rec, 0)  # without COMPLETE_MSG any segment will do
    q = qm._queue("Q")
    pos = groups.Position()
    elig = groups.eligible(pos, GMO.LOGICAL_ORDER | GMO.COMPLETE_MSG, None, qm.ident)
    pinned: dict = {}

    def load(need):
        q.load(need)
        pin(pinned, need)

    with q.mutex:
        find = lambda: groups.locate_locked(q, elig, GMO.LOGICAL_ORDER | GMO.COMPLETE_MSG, pos, pinned)  # noqa: E731
        found = getpath.obtain_locked(q, find, None, "", load)
        refs, recs = found.refs, found.recs
        assert groups.reassembled(recs)[-4:] == b"abcd" and len(refs) == 2
        assert (
            getpath.obtain_locked(q, lambda: groups.segments_of_locked(q, recs[0], pinned), None, "", load).recs == recs
        )
    pos.advance_rec(groups.reassembled(recs), in_uow=False)
    assert not pos.current  # a whole logical message: nothing is current after it
    assert qm.inquire_queue("Q").current_depth == 2  # nothing was taken


def test_queue_manager_segments_inside_a_logical_order_group(qm, conn, where):
    h = conn.open("SMALL", IO)
    put = PMO.LOGICAL_ORDER | PMO.SYNCPOINT
    r1 = h.put(b"first", MD(msg_flags=MF.MSG_IN_GROUP), put)
    r2 = h.put(b"x" * 25, MD(msg_flags=MF.MSG_IN_GROUP | MF.SEGMENTATION_ALLOWED), put)  # 3 segments
    r3 = h.put(b"last", MD(msg_flags=MF.LAST_MSG_IN_GROUP), put)
    assert {r1.md.group_id, r2.md.group_id, r3.md.group_id} == {r1.md.group_id}
    assert [r.md.msg_seq_number for r in (r1, r2, r3)] == [1, 2, 3]
    conn.commit()
    assert qm.inquire_queue("SMALL").current_depth == 5
    settle(qm, where, "SMALL")
    g = conn.open("SMALL", IO)
    got = drain(g, GMO.LOGICAL_ORDER | GMO.ALL_MSGS_AVAILABLE)
    assert [(m.md.msg_seq_number, m.md.offset, m.data_length) for m in got] == [
        (1, 0, 5),
        (2, 0, 10),
        (2, 10, 10),
        (2, 20, 5),
        (3, 0, 4),
    ]
    assert [m.segment_status for m in got] == [NOT_SEG, SEG, SEG, LAST_SEG, NOT_SEG]


def test_segments_survive_a_crash_and_reassemble():
    from sweepq.blobstore import MemoryStore
    from sweepq.blobstore.kv import MemoryKV

    def manager(kv):
        return QueueManager(
            store=MemoryStore(kv=kv, max_blob_records=3),
            sweeping=SweeperSettings(run=False),
            durability=DurabilitySettings(durable=True),
            clock=ManualClock(),
        )

    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("SMALL", max_msg_length=4, default_persistence=Persistence.PERSISTENT)
    r = qm.connect().open("SMALL", IO).put(b"persistent segments", MD(msg_flags=MF.SEGMENTATION_ALLOWED))
    copy = MemoryKV()  # what a killed process leaves (tests/test_durability.py crash())
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}
    with manager(copy) as qm2:
        assert qm2.inquire_queue("SMALL").current_depth == 5
        m = qm2.connect().open("SMALL", IO).get(GMO.COMPLETE_MSG)
        assert (m.data, m.md.group_id, m.persistent) == (b"persistent segments", r.md.group_id, True)
        assert qm2.inquire_queue("SMALL").current_depth == 0


def test_incomplete_logical_message_warnings_when_logical_order_is_dropped(qm, conn, where):
    h = conn.open("Q", IO)
    r = h.put(b"aa", MD(msg_flags=MF.SEGMENT), PMO.LOGICAL_ORDER)
    w = h.put(b"other")  # put side: the logical message is incomplete
    assert (w.reason, w.completion_code) == (Reason.INCOMPLETE_MSG, CC.WARNING)
    h.put(b"bb", MD(group_id=r.md.group_id, offset=2, msg_flags=MF.LAST_SEGMENT))
    assert h.close() == Reason.NONE  # the explicit last segment completed it
    settle(qm, where, "Q")
    g = conn.open("Q", IO)
    assert g.get(GMO.LOGICAL_ORDER).data == b"aa"
    m = g.get()  # get side: physical order, without LOGICAL_ORDER, mid logical message
    assert (m.data, m.reason, m.completion_code) == (b"other", Reason.INCOMPLETE_MSG, CC.WARNING)
    assert g.get(GMO.LOGICAL_ORDER).data == b"bb"  # the position is still on the logical message
    assert g.close() == Reason.NONE
