"""Index types (seed 002, issue 9 §2): a queue with ``index_type`` finds messages by that
field through an index of its in-memory messages and through the per-blob summaries for
swept ones, and returns exactly what an unindexed queue returns, through put, get,
backout, sweep and unsweep.

The main test runs one random sequence of operations on two queues at once, one indexed
and one not, and requires the same answer to every call; after every step the index must
hold exactly the in-memory messages that carry a value.
"""

from __future__ import annotations

import random

import pytest

from sweepq.engine import (
    GMO,
    MD,
    MO,
    DurabilitySettings,
    MessageSettings,
    MQError,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.engine.constants import IndexType
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO

KINDS = [IndexType.MSG_ID, IndexType.CORREL_ID, IndexType.GROUP_ID, IndexType.MSG_TOKEN]
CORRELS = [b"c%d" % i for i in range(6)]
GROUPS = [b"g%d" % i for i in range(4)]


@pytest.fixture
def qm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 4}),
        messages=MessageSettings(max_uncommitted=10_000),
    ) as qm:
        yield qm


def _index_is_exact(qm, name):
    q = qm._queue(name)
    assert q.lanes.index is not None
    q.check()  # the core's check: the index names exactly the messages in memory


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("seed", range(3))
def test_an_indexed_queue_answers_exactly_as_an_unindexed_one(qm, kind, seed):
    rnd = random.Random(seed)
    qm.define_queue("IX", index_type=kind)
    qm.define_queue("PLAIN")
    c = qm.connect()
    hx, hp = c.open("IX", IO), c.open("PLAIN", IO)
    ids: list[tuple[bytes, bytes]] = []  # (msg id on IX, msg id on PLAIN)
    tokens: list[tuple[bytes, bytes]] = []
    for step in range(400):
        op = rnd.random()
        if op < 0.45:
            md = dict(priority=rnd.choice([0, 0, 3, 9]), correl_id=rnd.choice([*CORRELS, b""]))
            if rnd.random() < 0.5:
                md.update(group_id=rnd.choice(GROUPS), msg_seq_number=rnd.randint(1, 3))
            rx, rp = hx.put(b"m%d" % step, MD(**md)), hp.put(b"m%d" % step, MD(**md))
            ids.append((rx.msg_id, rp.msg_id))
            tokens.append((rx.msg_token, rp.msg_token))
        elif op < 0.8:
            sync = GMO.SYNCPOINT if rnd.random() < 0.3 else GMO.NO_SYNCPOINT
            args_x, args_p = {}, {}
            pick = rnd.random()
            if pick < 0.25 and ids:
                args_x["msg_id"], args_p["msg_id"] = rnd.choice(ids)
            elif pick < 0.5:
                args_x["correl_id"] = args_p["correl_id"] = rnd.choice(CORRELS)
            elif pick < 0.75:
                g = rnd.choice(GROUPS)
                args_x = dict(match=MO.MATCH_GROUP_ID, group_id=g)
                args_p = dict(args_x)
            elif tokens:
                tx, tp = rnd.choice(tokens)
                args_x = dict(match=MO.MATCH_MSG_TOKEN, msg_token=tx)
                args_p = dict(match=MO.MATCH_MSG_TOKEN, msg_token=tp)
            out = []
            for h, args in ((hx, args_x), (hp, args_p)):
                try:
                    m = h.get(sync, **args)
                    out.append((m.data, m.backout_count))
                except MQError as e:
                    assert e.reason == Reason.NO_MSG_AVAILABLE
                    out.append(None)
            assert out[0] == out[1], f"step {step}: {args_x}"
        elif op < 0.88:
            (c.backout if rnd.random() < 0.5 else c.commit)()
        else:
            qm.sweeper.run_once()
        _index_is_exact(qm, "IX")
    c.commit()
    assert qm.stats()["IX"].total_msgs_swept  # the sequence did sweep


def test_a_swept_message_is_found_by_its_index_value_without_unsweeping(qm):
    qm.define_queue("Q", index_type=IndexType.CORREL_ID)
    h = qm.connect().open("Q", IO)
    for i in range(40):
        h.put(b"m%02d" % i, MD(correl_id=CORRELS[i % 6]))
    qm.sweeper.run_once()
    assert qm.stats()["Q"].msgs_swept >= 30
    assert [h.get(correl_id=b"c5").data for _ in range(6)] == [b"m%02d" % i for i in range(5, 40, 6)]
    assert qm.stats()["Q"].unsweeps == 0


def test_altering_the_index_type_indexes_what_is_queued(qm):
    qm.define_queue("Q")
    h = qm.connect().open("Q", IO)
    for i in range(30):
        h.put(b"m%02d" % i, MD(correl_id=CORRELS[i % 6], priority=i % 2))
    qm.alter_queue("Q", index_type=IndexType.CORREL_ID)
    _index_is_exact(qm, "Q")
    assert len(qm._queue("Q").lanes.index) == 30
    assert h.get(correl_id=b"c2").data == b"m02"
    assert h.get(correl_id=b"c1").data == b"m01"
    qm.alter_queue("Q", index_type=IndexType.NONE)
    assert qm._queue("Q").lanes.index is None
    assert h.get(correl_id=b"c1").data == b"m07"  # the same answers without it


@pytest.mark.parametrize("kind", [IndexType.CORREL_ID, IndexType.GROUP_ID], ids=lambda k: k.name)
def test_front_chain_and_rear_candidates_come_in_get_order(kind):
    """The buffer keeps five in the front list, the chain holds the next, later puts go to the
    rear list: a get by the indexed value must walk them in exactly that order."""
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=5)),
        durability=DurabilitySettings(store_options={"max_blob_records": 4}),
    ) as qm:
        qm.define_queue("Q", index_type=kind)
        h = qm.connect().open("Q", IO)
        md = MD(correl_id=b"c1") if kind == IndexType.CORREL_ID else MD(group_id=b"g1")
        sel = dict(correl_id=b"c1") if kind == IndexType.CORREL_ID else dict(match=MO.MATCH_GROUP_ID, group_id=b"g1")
        for i in range(20):
            h.put(b"m%02d" % i, md)
        qm.sweeper.run_once()
        assert qm.stats()["Q"].msgs_swept == 15
        h.put(b"m20", md)  # behind the chain
        h.put(b"x", MD(priority=9))  # another value, higher priority: not selected
        assert [h.get(**sel).data for _ in range(21)] == [b"m%02d" % i for i in range(21)]
