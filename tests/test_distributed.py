"""Distributed queuing in the engine (engine/distributed/): the queue manager's name in its data
directory and its MsgIds, remote queues and MQ's name resolution order, the transmission and
dead-letter headers, definitions kept through the store, a channel's batch (its wait, its
interval, fast non-persistent messages, x counted as gets count it), what a channel hardens
and the batch in doubt brought back at open, never swept nor paged out."""

from __future__ import annotations

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.blobstore.kv import MemoryKV
from sweepq.engine import (
    GMO,
    MD,
    OO,
    DurabilitySettings,
    MemorySettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
    Usage,
    record,
)
from sweepq.engine.constants import ChannelType
from sweepq.engine.distributed import DeadLetter, Transmission, dead_letter
from sweepq.engine.distributed.sync import restore_batch
from sweepq.sweeper import ManualClock

from helpers import IO, drain

P = Persistence.PERSISTENT
NP = Persistence.NOT_PERSISTENT


def reason(fn) -> int:
    with pytest.raises(MQError) as ei:
        fn()
    return ei.value.reason


def durable(kv: MemoryKV, **kw) -> QueueManager:
    return QueueManager(
        store=MemoryStore(kv=kv),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(durable=True),
        clock=ManualClock(),
        **kw,
    )


def crashed(kv: MemoryKV) -> MemoryKV:
    """What a killed process leaves: the store as it stands."""
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}
    return copy


# -- the queue manager's name -----------------------------------------------------------------


def test_the_name_is_kept_in_the_data_directory_and_carried_by_msg_ids(tmp_path):
    with QueueManager.open(tmp_path / "d", name="EAST.HUB", sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        mid = qm.connect().open("Q", IO).put(b"x").msg_id
    assert mid[:4] == b"SWQ " and mid[4:12] == b"EAST.HUB"  # as MQ's "AMQ " + queue manager name
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm:
        assert qm.name == "EAST.HUB"
        again = qm.connect().open("Q", IO).put(b"y").msg_id
        assert again[4:12] == b"EAST.HUB" and again != mid
    assert (
        reason(lambda: QueueManager.open(tmp_path / "d", name="WEST", sweeping=SweeperSettings(run=False)))
        == Reason.Q_MGR_NAME_ERROR
    )


@pytest.mark.parametrize("bad", ["", "a b", "x" * 49, 5])
def test_a_bad_queue_manager_name_is_2058(bad):
    assert reason(lambda: QueueManager(bad, sweeping=SweeperSettings(run=False))) == Reason.Q_MGR_NAME_ERROR


def test_runs_of_one_queue_manager_never_make_the_same_msg_id():
    ids = set()
    for _ in range(3):
        with QueueManager("QM1", sweeping=SweeperSettings(run=False)) as qm:
            qm.define_queue("Q")
            ids.add(qm.connect().open("Q", IO).put(b"x").msg_id)  # seq 1 in every run
    assert len(ids) == 3


# -- name resolution ---------------------------------------------------------------------------


@pytest.fixture
def qm():
    with QueueManager("QM1", sweeping=SweeperSettings(run=False)) as q:
        q.define_queue("LOCAL")
        q.define_queue("QM2", usage=Usage.TRANSMISSION)
        q.define_queue("VIA.HUB", usage=Usage.TRANSMISSION)
        q.define_queue("NOT.XMIT")
        yield q


def route(qm, queue, qmgr=""):
    r = qm.distributed.resolve(queue, qmgr)
    return (r.queue, r.remote_queue, r.remote_qmgr)


def test_resolution_follows_mqs_order(qm):
    qm.define_remote_queue("R.PLAIN", remote_queue="ORDERS", remote_qmgr="QM2")
    qm.define_remote_queue("R.VIA", remote_queue="ORDERS", remote_qmgr="QM9", xmit_queue="VIA.HUB")
    qm.define_remote_queue("QM7", remote_qmgr="QM2")  # a queue-manager alias: QM7 is reached as QM2
    qm.define_remote_queue("QM8", xmit_queue="VIA.HUB")  # an alias that names the way only
    qm.define_remote_queue("HOME", remote_qmgr="QM1")  # an alias that leads back here
    assert route(qm, "LOCAL") == ("LOCAL", "", "")
    assert route(qm, "LOCAL", "QM1") == ("LOCAL", "", "")  # our own name is here
    assert route(qm, "R.PLAIN") == ("QM2", "ORDERS", "QM2")  # 1: a remote queue definition
    assert route(qm, "R.VIA") == ("VIA.HUB", "ORDERS", "QM9")  # 2: its transmission queue named
    assert route(qm, "X", "QM7") == ("QM2", "X", "QM2")  # 3: a queue-manager alias
    assert route(qm, "X", "QM8") == ("VIA.HUB", "X", "QM8")
    assert route(qm, "LOCAL", "HOME") == ("LOCAL", "", "")  # ... back to this queue manager
    assert route(qm, "X", "QM2") == ("QM2", "X", "QM2")  # 4: a transmission queue named for it
    assert reason(lambda: route(qm, "X", "QM5")) == Reason.UNKNOWN_REMOTE_Q_MGR  # 6
    qm.alter_qmgr(default_xmit_queue="VIA.HUB")
    assert route(qm, "X", "QM5") == ("VIA.HUB", "X", "QM5")  # 5: the default transmission queue
    assert route(qm, "X", "QM2") == ("QM2", "X", "QM2")  # a named one still comes first


def test_resolution_errors_say_which_object_is_wrong(qm):
    qm.define_remote_queue("R.GONE", remote_queue="Q", remote_qmgr="QM2", xmit_queue="NOPE")
    qm.define_remote_queue("R.NOTX", remote_queue="Q", remote_qmgr="QM2", xmit_queue="NOT.XMIT")
    qm.define_remote_queue("LOOP1", remote_qmgr="LOOP2")
    qm.define_remote_queue("LOOP2", remote_qmgr="LOOP1")
    assert reason(lambda: route(qm, "R.GONE")) == Reason.UNKNOWN_XMIT_Q
    assert reason(lambda: route(qm, "R.NOTX")) == Reason.XMIT_Q_USAGE_ERROR
    assert reason(lambda: route(qm, "X", "LOOP1")) == Reason.UNKNOWN_REMOTE_Q_MGR
    assert reason(lambda: route(qm, "NOWHERE")) == Reason.UNKNOWN_OBJECT_NAME
    assert reason(lambda: route(qm, "LOOP1")) == Reason.UNKNOWN_OBJECT_NAME  # an alias is no queue
    qm.alter_qmgr(default_xmit_queue="MISSING")
    assert reason(lambda: route(qm, "X", "QM5")) == Reason.UNKNOWN_DEF_XMIT_Q
    qm.alter_qmgr(default_xmit_queue="NOT.XMIT")
    assert reason(lambda: route(qm, "X", "QM5")) == Reason.DEF_XMIT_Q_USAGE_ERROR


def test_a_put_to_a_remote_queue_carries_a_transmission_header(qm):
    qm.define_remote_queue("ORDERS", remote_queue="ORDERS.IN", remote_qmgr="QM2")
    c = qm.connect()
    h = c.open("ORDERS", OO.OUTPUT)
    md = MD(priority=7, persistence=P, correl_id=b"C1", properties={"k": "v"}, expiry=600, reply_to_q="R")
    put = h.put(b"payload", md)
    x = c.open("QM2", OO.INPUT_SHARED | OO.BROWSE)
    m = x.get(GMO.BROWSE_FIRST)
    assert (m.msg_id, m.correl_id, m.priority, m.persistent) == (put.msg_id, put.correl_id, 7, True)
    t = Transmission.parse(m.data)
    assert (t.remote_queue, t.remote_qmgr) == ("ORDERS.IN", "QM2")
    inner = qm.connect().open("LOCAL", OO.OUTPUT | OO.INPUT_SHARED)
    inner.put_as_received(t.record)  # what the receiving queue manager does
    got = inner.get()
    assert got.data == b"payload" and got.msg_id == put.msg_id and got.md.properties == {"k": "v"}
    assert got.md.reply_to_q == "R" and 0 < got.md.expiry <= 600
    assert reason(lambda: c.open("ORDERS", OO.INPUT_SHARED)) == Reason.OPTION_NOT_VALID_FOR_TYPE
    assert reason(lambda: c.open("ORDERS", OO.OUTPUT | OO.BROWSE)) == Reason.OPTION_NOT_VALID_FOR_TYPE
    c.open("ANY", OO.OUTPUT, qmgr="QM2").put(b"z")  # MQOD's ObjectQMgrName
    t = Transmission.parse(x.get(GMO.BROWSE_NEXT).data)
    assert (t.remote_queue, t.remote_qmgr) == ("ANY", "QM2")


def test_headers_refuse_what_is_not_theirs():
    assert Transmission.parse(b"plain data") is None
    assert Transmission.parse(b"XQH \x01\x05ab") is None  # a name that runs past the end
    assert DeadLetter.parse(b"DLH ") is None and DeadLetter.parse(b"data") is None


def test_a_dead_letter_header_keeps_the_descriptor_and_says_why(qm):
    h = qm.connect().open("LOCAL", IO)
    m = h.put(b"lost", MD(priority=3, correl_id=b"C"))
    h.put_as_received(dead_letter(m.record, Reason.Q_FULL, "FULL.Q", "QM2", 123))
    h.get()
    dl = h.get()
    d = DeadLetter.parse(dl.data)
    assert (d.reason, d.dest_queue, d.dest_qmgr, d.put_us, d.data) == (2053, "FULL.Q", "QM2", 123, b"lost")
    assert dl.correl_id.rstrip(b"\0") == b"C" and dl.priority == 3 and dl.msg_id == m.msg_id


def test_a_received_record_that_is_not_one_is_2026(qm):
    h = qm.connect().open("LOCAL", IO)
    assert reason(lambda: h.put_as_received(b"short")) == Reason.MD_ERROR
    assert reason(lambda: h.put_as_received("text")) == Reason.BUFFER_LENGTH_ERROR
    m = h.put(b"x", MD(properties={"a": 1}))
    damaged = bytearray(m.record)
    damaged[-3] = 0xFF  # inside the properties section (the payload is 1 byte)
    assert reason(lambda: h.put_as_received(bytes(damaged))) == Reason.MD_ERROR


# -- definitions -----------------------------------------------------------------------------------


def test_definitions_survive_a_restart_and_share_the_queue_namespace():
    kv = MemoryKV()
    qm = durable(kv, name="QM1")
    qm.define_queue("QM2", usage=Usage.TRANSMISSION)
    qm.define_remote_queue("R", remote_queue="Q", remote_qmgr="QM2")
    qm.define_channel("TO.QM2", conname="tcp://127.0.0.1:1", xmit_queue="QM2", batch_size=7, heartbeat=0.5)
    qm.define_channel("FROM.QM2", type=ChannelType.RECEIVER)
    qm.alter_qmgr(dead_letter_queue="DLQ")
    assert reason(lambda: qm.define_queue("R")) == Reason.OBJECT_ALREADY_EXISTS
    assert reason(lambda: qm.define_remote_queue("QM2", remote_qmgr="X")) == Reason.OBJECT_ALREADY_EXISTS
    assert reason(lambda: qm.define_channel("TO.QM2", type="RECEIVER")) == Reason.OBJECT_ALREADY_EXISTS
    kv = crashed(kv)
    again = durable(kv)
    assert again.name == "QM1" and again.distributed.attrs.dead_letter_queue == "DLQ"
    assert again.distributed.remote("R").remote_qmgr == "QM2"
    d = again.distributed.channel("TO.QM2")
    assert (d.batch_size, d.heartbeat, d.type) == (7, 0.5, ChannelType.SENDER)
    assert again.queue_names() == ["QM2"]  # the other objects are not queues
    again.delete_channel("FROM.QM2")
    again.delete_remote_queue("R")
    third = durable(crashed(kv))
    assert list(third.distributed.channels) == ["TO.QM2"] and not third.distributed.remotes


@pytest.mark.parametrize(
    ("attrs", "field"),
    [
        ({"conname": "127.0.0.1:1414", "xmit_queue": "X"}, "conname"),
        ({"conname": "tcp://h:1"}, "xmit_queue"),
        ({"conname": "tcp://h:1", "xmit_queue": "X", "batch_size": 0}, "batch_size"),
        ({"conname": "tcp://h:1", "xmit_queue": "X", "batch_size": "50"}, "batch_size"),
        ({"conname": "tcp://h:1", "xmit_queue": "X", "heartbeat": -1}, "heartbeat"),
        ({"conname": "tcp://h:1", "xmit_queue": "X", "np_speed": "SLOW"}, "np_speed"),
        ({"conname": "tcp://h:1", "xmit_queue": "X", "colour": 1}, "colour"),
        ({"type": "CLUSTER"}, "type"),
    ],
)
def test_a_bad_channel_definition_is_3229_naming_the_field(qm, attrs, field):
    with pytest.raises(MQError) as ei:
        qm.define_channel("C", **attrs)
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and field in ei.value.text
    assert reason(lambda: qm.define_channel("way.too.long.a.channel.name", type="RECEIVER")) == Reason.PARM_VALUE_ERROR


def test_a_channel_keeps_its_type_and_unknown_ones_are_4032(qm):
    qm.define_channel("C", type=ChannelType.RECEIVER)
    assert reason(lambda: qm.alter_channel("C", type="SENDER")) == Reason.PARM_VALUE_ERROR
    assert reason(lambda: qm.alter_channel("NOPE", batch_size=3)) == Reason.CHANNEL_NOT_FOUND
    assert reason(lambda: qm.delete_channel("NOPE")) == Reason.CHANNEL_NOT_FOUND
    assert reason(lambda: qm.alter_qmgr(name="OTHER")) == Reason.PARM_VALUE_ERROR


# -- a channel's batch -----------------------------------------------------------------------------


def test_batch_gets_count_in_x_exactly_as_application_gets(qm):
    app = qm.connect().open("LOCAL", IO)
    xq = qm.connect().open("QM2", IO)
    for h in (app, xq):
        h.put_many([b"m"] * 30)
    app_q, x_q = qm.queue_named("LOCAL"), qm.queue_named("QM2")
    app_q.take_obtained(), x_q.take_obtained()
    app.get_many(12)
    xq.assign_batch(12).confirm()
    assert app_q.sweep.sweep_counts()[:2] == x_q.sweep.sweep_counts()[:2] == (18, 12)
    app.get(GMO.SYNCPOINT)
    app.connection.backout()
    xq.assign_batch(1).release()  # a batch that goes back counts, as a backed-out get does
    assert app_q.take_obtained() == x_q.take_obtained() == 1


def test_a_batch_waits_for_its_first_message_and_stays_open_for_its_interval(qm):
    import threading

    x = qm.connect().open("QM2", IO)
    out = qm.connect().open("QM2", OO.OUTPUT)
    assert len(x.assign_batch(10)) == 0  # no wait: an empty batch at once
    t = threading.Timer(0.05, lambda: out.put_many([b"1", b"2"]))
    t.start()
    b = x.assign_batch(10, wait_interval=5000, batch_interval=300)
    t.join()
    assert [m.data for m in b.messages] == [b"1", b"2"]  # the second came within the interval
    b.confirm()
    out.put_many([b"3", b"4", b"5"])
    b = x.assign_batch(2, batch_interval=60_000)  # full before the interval ends: it goes at once
    assert len(b) == 2
    b.release()
    assert reason(lambda: x.assign_batch(1, wait_interval=-2)) == Reason.WAIT_INTERVAL_ERROR
    assert reason(lambda: x.assign_batch(1, batch_interval=-1)) == Reason.PARM_VALUE_ERROR
    assert reason(lambda: x.assign_batch(1, fast_nonpersistent="yes")) == Reason.PARM_VALUE_ERROR


def test_fast_nonpersistent_messages_leave_at_once_and_the_batch_holds_the_rest(qm):
    x = qm.connect().open("QM2", IO)
    for i in range(6):
        x.put(b"%d" % i, MD(persistence=P if i % 2 else NP))
    b = x.assign_batch(10, fast_nonpersistent=True)
    assert len(b) == 6 and b.fast == frozenset({0, 2, 4}) and b.held == 3
    assert qm.inquire_queue("QM2").current_depth == 3  # the fast ones are gone already
    b.release()
    assert drain(x) == [b"1", b"3", b"5"]  # a failure loses the fast ones, never doubles them


# -- in doubt ---------------------------------------------------------------------------------------


def in_doubt_sender(kv: MemoryKV) -> tuple[QueueManager, list[bytes]]:
    """A sender whose batch of 4 (of 10 messages) is hardened in doubt, then the process dies."""
    qm = durable(kv, name="QM1")
    qm.define_queue("QM2", usage=Usage.TRANSMISSION, default_persistence=P)
    qm.define_channel("TO.QM2", conname="tcp://127.0.0.1:1", xmit_queue="QM2")
    x = qm.connect().open("QM2", IO)
    sent = [x.put(b"m%d" % i).msg_id for i in range(10)]
    batch = x.assign_batch(4)
    qm.distributed.sync("TO.QM2").begin(batch)
    return qm, sent


def test_a_batch_in_doubt_comes_back_assigned_and_is_never_swept_or_got():
    kv = MemoryKV()
    in_doubt_sender(kv)
    kv = crashed(kv)
    qm = durable(kv)
    sync = qm.distributed.sync("TO.QM2")
    assert sync.indoubt is not None and sync.indoubt.batch.held == 4
    q = qm.queue_named("QM2")
    assert q.batches.count == 4 and q.depth == 10
    x = qm.connect().open("QM2", IO)
    assert [m.data for m in x.get_many(100, GMO.SYNCPOINT)] == [b"m%d" % i for i in range(4, 10)]
    x.connection.backout()
    q.take_obtained()
    qm.sweeper.run_once()  # y counts the 6 others only; the batch stays in memory
    assert q.lanes[0].mem >= 4 and all(q.lanes._batched(r) for r in q.batches.refs(sync.indoubt.batch.id))
    sync.commit()  # resolved: the receiver had it
    assert q.batches.count == 0 and drain(x) == [b"m%d" % i for i in range(4, 10)]
    after = durable(crashed(kv))
    assert after.distributed.sync("TO.QM2").indoubt is None and after.distributed.sync("TO.QM2").seq == 4
    assert after.inquire_queue("QM2").current_depth == 0


def test_a_batch_in_doubt_backed_out_goes_again_in_place():
    kv = MemoryKV()
    in_doubt_sender(kv)
    kv = crashed(kv)
    qm = durable(kv)
    qm.distributed.sync("TO.QM2").backout()
    x = qm.connect().open("QM2", IO)
    assert drain(x) == [b"m%d" % i for i in range(10)]
    assert durable(crashed(kv)).distributed.sync("TO.QM2").seq == 0


def test_a_batch_in_doubt_is_never_paged_out_under_the_memory_budget():
    kv = MemoryKV()
    in_doubt_sender(kv)
    qm = QueueManager(
        store=MemoryStore(kv=crashed(kv)),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(durable=True),
        memory=MemorySettings(budget=50_000),
    )
    try:
        q = qm.queue_named("QM2")
        held = q.batches.refs(qm.distributed.sync("TO.QM2").indoubt.batch.id)
        out = qm.connect().open("QM2", OO.OUTPUT)
        for _ in range(300):
            out.put(b"x" * 1000)  # over the budget: the queue pages its surplus out
        qm.sweeper.run_once()
        assert sum(lane.swept for lane in q.lanes) > 0
        assert all(q.lanes._batched(r) for r in held)  # still in memory, still batched
    finally:
        qm.close()


def test_a_receivers_record_is_written_with_its_commit():
    kv = MemoryKV()
    qm = durable(kv, name="QM2")
    qm.define_queue("Q", default_persistence=P)
    qm.define_channel("FROM.QM1", type=ChannelType.RECEIVER)
    c = qm.connect()
    h = c.open("Q", OO.OUTPUT)
    h.put(b"a", None, 2)  # PMO.SYNCPOINT
    qm.distributed.sync("FROM.QM1").commit(c, 1, b"L" * 8)
    kv = crashed(kv)
    again = durable(kv)
    s = again.distributed.sync("FROM.QM1")
    assert (s.seq, s.luwid) == (1, b"L" * 8) and again.inquire_queue("Q").current_depth == 1
    c2 = again.connect()
    c2.open("Q", OO.OUTPUT).put(b"b", None, 2)
    again.distributed.sync("FROM.QM1").commit(c2, 2, b"M" * 8)
    assert durable(crashed(kv)).distributed.sync("FROM.QM1").seq == 2


def test_restore_skips_what_is_no_longer_there(qm):
    x = qm.connect().open("QM2", IO)
    x.put_many([b"a", b"b"])
    q = qm.queue_named("QM2")
    with q.mutex:
        keys = [(0, record.seq_of(rec)) for _ref, rec in q.lanes._messages()]
    batch, missing = restore_batch(q, [(0, 999_999), *keys])
    assert missing == 1 and batch.held == 2 and x.get_many(10) == []
    batch.release()
    assert drain(x) == [b"a", b"b"]
