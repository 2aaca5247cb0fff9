"""A plain kill -9 is no damage, nor a loss or a duplicate: the rest of the work the engine does.

tests/test_crash_false_alarms.py kills a queue manager after deletes, defines, drains, sweeps
and units of work, and checks the next open reports nothing and leaves each queue its depth.
This file goes on with every other kind of work (the sweeper at the kill, gets that bring
blobs back, gets by MsgId and CorrelId, browse with lock, groups and segments, skip backout,
backout counts, a poison message moved to its backout queue, expiry, dynamic queues, alter,
``sweepq.Queue(path=)``'s at-least-once delivery, a kill right after the open and a second
kill after the first reopen), under ``sync="commit"`` and ``sync="os"`` where they could
differ, and checks exactly what the next open must hold: each queue's messages in order, their
MsgIds and backout counts (docs/durability.md: "Uncommitted work is never written: a crash
backs it out", so an uncommitted get comes back in its place with its count as it was).

Each case starts from a closed store (its checkpoint written) with queue Q holding 40
persistent messages (data ``b"00"``..``b"39"``, CorrelId the data padded), most of them swept
into blobs of 10.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from sweepq.engine import (
    OO,
    DurabilitySettings,
    MessageSettings,
    MQError,
    Persistence,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.sweeper import ManualClock

IO = OO.INPUT_SHARED | OO.OUTPUT
P = Persistence.PERSISTENT

_HEAD = """
import os, signal, sys
from sweepq.engine import (GMO, MD, MF, OO, PMO, DurabilitySettings, MessageSettings, Persistence,
    QueueManager, SweeperSettings)
from sweepq.sweeper import ManualClock
P, IO = Persistence.PERSISTENT, OO.INPUT_SHARED | OO.OUTPUT
clock = ManualClock(start=float(sys.argv[4]))
qm = QueueManager.open(
    sys.argv[1],
    clock=clock if sys.argv[5] == "1" else None,
    sweeping=SweeperSettings(run=False),
    durability=DurabilitySettings(sync=sys.argv[3], store_options={"max_blob_records": 10}),
    messages=MessageSettings(backout_handling=True),
)
ids = [bytes.fromhex(i) for i in sys.argv[2].split(",")]
"""
_KILL = "\nos.kill(os.getpid(), signal.SIGKILL)\n"


def _correl(i: int) -> bytes:
    return b"%02d" % i + bytes(22)


def _open(d, sync: str = "commit", clock: ManualClock | None = None) -> QueueManager:
    return QueueManager.open(
        d,
        clock=clock,
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(sync=sync, store_options={"max_blob_records": 10}),
        messages=MessageSettings(backout_handling=True),
    )


def _setup(qm: QueueManager) -> list[bytes]:
    from sweepq.engine import MD

    qm.define_queue("Q", default_persistence=P)
    h = qm.connect().open("Q", IO)
    ids = [h.put(b"%02d" % i, MD(correl_id=_correl(i))).msg_id for i in range(40)]
    qm.sweeper.run_once()
    assert qm.blob_store().chain(b"Q/0")  # some of them swept
    return ids


def _drain(qm: QueueManager, name: str, options: int = 0) -> list[Any]:
    h = qm.connect().open(name, IO)
    out = []
    while True:
        try:
            out.append(h.get(options))
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE, e
            return out


def _q(qm: QueueManager, ids: list[bytes], expect: list[int], counts: dict[int, int] | None = None) -> None:
    """Q holds exactly the messages numbered ``expect``, in that order, with their own MsgIds
    and backout counts (0 but those in ``counts``)."""
    got = _drain(qm, "Q")
    assert [m.data for m in got] == [b"%02d" % i for i in expect]
    assert [m.msg_id for m in got] == [ids[i] for i in expect]
    assert [m.backout_count for m in got] == [(counts or {}).get(i, 0) for i in expect]


@dataclass
class Case:
    works: list[str]  # one child per item, each killed at its end
    check: Callable[[QueueManager, list[bytes]], None]
    syncs: tuple[str, ...] = ("commit",)
    clock: bool = False  # the child (and the checking open) run on a ManualClock
    setup: Callable[[QueueManager], None] | None = None  # more, after Q's 40 messages
    extra: dict = field(default_factory=dict)


def _setup_groups(qm: QueueManager) -> None:
    from sweepq.engine import MD, MF

    qm.define_queue("G", default_persistence=P)
    h = qm.connect().open("G", IO)
    for g in range(2):
        gid = bytes([g + 1]) * 24
        for n in range(1, 6):
            last = MF.LAST_MSG_IN_GROUP if n == 5 else MF.MSG_IN_GROUP
            if n == 3:  # the third logical message in two segments
                h.put(b"g%d.3a" % g, MD(group_id=gid, msg_seq_number=3, msg_flags=last | MF.SEGMENT))
                h.put(b"g%d.3b" % g, MD(group_id=gid, msg_seq_number=3, offset=5, msg_flags=last | MF.LAST_SEGMENT))
            else:
                h.put(b"g%d.%d" % (g, n), MD(group_id=gid, msg_seq_number=n, msg_flags=last))
    qm.sweeper.run_once()


def _check_groups(expect: list[bytes]) -> Callable[[QueueManager, list[bytes]], None]:
    def check(qm: QueueManager, ids: list[bytes]) -> None:
        got = _drain(qm, "G")
        assert [m.data for m in got] == expect
        assert all(m.md.group_id == bytes([int(m.data[1:2]) + 1]) * 24 for m in got)
        _q(qm, ids, list(range(40)))

    return check


def _setup_poison(qm: QueueManager) -> None:
    qm.define_queue("BOQ", default_persistence=P)
    qm.alter_queue("Q", backout_threshold=1, backout_requeue_q="BOQ")


def _check_poison(q: list[int], counts: dict[int, int], boq: list[int]) -> Callable[[QueueManager, list[bytes]], None]:
    def check(qm: QueueManager, ids: list[bytes]) -> None:
        moved = [(m.msg_id, m.backout_count) for m in _drain(qm, "BOQ")]
        assert moved == [(ids[i], counts.get(i, 0)) for i in boq]
        qm.alter_queue("Q", backout_threshold=0)  # drain Q without moving anything more
        _q(qm, ids, q, counts)

    return check


def _setup_expiry(qm: QueueManager) -> None:
    from sweepq.engine import MD

    qm.define_queue("E", default_persistence=P)
    h = qm.connect().open("E", IO)
    for i in range(12):
        h.put(b"dies%d" % i, MD(expiry=10))  # a second, counted on the ManualClock's wall from 0
    for i in range(3):
        h.put(b"lives%d" % i)
    qm.sweeper.run_once()


def _check_expiry(expect: list[bytes]) -> Callable[[QueueManager, list[bytes]], None]:
    def check(qm: QueueManager, ids: list[bytes]) -> None:
        assert [m.data for m in _drain(qm, "E")] == expect
        _q(qm, ids, list(range(40)))

    return check


ALL = list(range(40))
# A monkeypatch in the child: the kill inside the sweep, between writing its blobs and
# linking them (QueueTier.link takes the written, pending blobs), or after its first link.
_KILL_BEFORE_LINK = """
from sweepq.engine import tiering
tiering.QueueTier.link = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)
"""
_KILL_AFTER_ONE_LINK = """
from sweepq.engine import tiering
_one, _n = tiering.QueueTier._link_one, [0]
def _link_one(self, *a):
    _n[0] += 1
    if _n[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return _one(self, *a)
tiering.QueueTier._link_one = _link_one
"""
_PUT40 = "h = qm.connect().open('Q', IO)\nfor i in range(40, 80): h.put(b'%02d' % i)\n"

# The kill between a write of the store and its record in the change log (blobstore/rocks.py
# appends the record once RocksDB's write returned): the write is made, the log never says so.
_KILL_BEFORE_LOG = """
from sweepq.blobstore import changes
def _kill(*a, **k):
    os.kill(os.getpid(), signal.SIGKILL)
changes.one = changes.write = _kill
"""
CASES: dict[str, Case] = {
    "no work": Case([""], lambda qm, ids: _q(qm, ids, ALL), syncs=("commit", "os")),
    "a second kill after the first reopen": Case(
        ["h = qm.connect().open('Q', IO)\nfor _ in range(12): h.get()", ""],
        lambda qm, ids: _q(qm, ids, list(range(12, 40))),
    ),
    "gets that bring blobs back": Case(
        ["h = qm.connect().open('Q', IO)\nfor _ in range(25): h.get()"],
        lambda qm, ids: _q(qm, ids, list(range(25, 40))),
        syncs=("commit", "os"),
    ),
    "sweep killed before it linked its blobs": Case(
        [_KILL_BEFORE_LINK + _PUT40 + "qm.sweeper.run_once()\nraise SystemExit('not killed')"],
        lambda qm, ids: _sweep_check(qm, ids),
        syncs=("commit", "os"),
    ),
    "sweep killed after its first link": Case(
        [_KILL_AFTER_ONE_LINK + _PUT40 + "qm.sweeper.run_once()\nraise SystemExit('not killed')"],
        lambda qm, ids: _sweep_check(qm, ids),
        syncs=("commit", "os"),
    ),
    "get by CorrelId from a blob, committed and not": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\n"
            "h.get(GMO.SYNCPOINT, correl_id=b'17' + bytes(22)); c.commit()\n"
            "h.get(GMO.SYNCPOINT, correl_id=b'23' + bytes(22))\n"
            "h.get(msg_id=ids[4])"
        ],
        lambda qm, ids: _q(qm, ids, [i for i in ALL if i not in (4, 17)]),
        syncs=("commit", "os"),
    ),
    "browse with lock": Case(
        [
            "h = qm.connect().open('Q', IO | OO.BROWSE)\n"
            "h.get(GMO.BROWSE_FIRST | GMO.LOCK)\nh.get(GMO.BROWSE_NEXT | GMO.LOCK)"
        ],
        lambda qm, ids: _q(qm, ids, ALL),
    ),
    "a group half consumed in logical order": Case(
        ["h = qm.connect().open('G', IO)\nfor _ in range(8): h.get(GMO.LOGICAL_ORDER)"],
        _check_groups([b"g1.3a", b"g1.3b", b"g1.4", b"g1.5"]),
        setup=_setup_groups,
    ),
    "a group half consumed under syncpoint, committed in part": Case(
        [
            "c = qm.connect(); h = c.open('G', IO)\n"
            "for _ in range(3): h.get(GMO.LOGICAL_ORDER | GMO.SYNCPOINT)\n"
            "c.commit()\n"
            "for _ in range(2): h.get(GMO.LOGICAL_ORDER | GMO.SYNCPOINT)"
        ],
        _check_groups([b"g0.3b", b"g0.4", b"g0.5", b"g1.1", b"g1.2", b"g1.3a", b"g1.3b", b"g1.4", b"g1.5"]),
        setup=_setup_groups,
    ),
    "skip backout, then a backout": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\n"
            "h.get(GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT); h.get(GMO.SYNCPOINT); h.get(GMO.SYNCPOINT)\n"
            "c.backout()"  # 1 and 2 back with their counts raised; 0 stays got, in a new unit of work
        ],
        lambda qm, ids: _q(qm, ids, ALL, {1: 1, 2: 1}),
        syncs=("commit", "os"),
    ),
    "backout counts raised twice": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\n"
            "for _ in range(2):\n"
            "    for _ in range(15): h.get(GMO.SYNCPOINT)\n"
            "    c.backout()\n"
            "for _ in range(3): h.get(GMO.SYNCPOINT)"  # uncommitted at the kill: their counts stay 2
        ],
        lambda qm, ids: _q(qm, ids, ALL, dict.fromkeys(range(15), 2)),
        syncs=("commit", "os"),
    ),
    "a poison message moved to its backout queue": Case(
        ["c = qm.connect(); h = c.open('Q', IO)\nh.get(GMO.SYNCPOINT); c.backout()\nassert h.get().data == b'01'"],
        _check_poison(list(range(2, 40)), {0: 1}, [0]),
        setup=_setup_poison,
    ),
    "a poison message moved under syncpoint, not committed": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\nh.get(GMO.SYNCPOINT); c.backout()\n"
            "assert h.get(GMO.SYNCPOINT).data == b'01'"
        ],
        _check_poison(ALL, {0: 1}, []),
        setup=_setup_poison,
    ),
    "expired messages discarded by a get": Case(
        ["clock.advance(5)\nassert qm.connect().open('E', IO).get().data == b'lives0'"],
        _check_expiry([b"lives1", b"lives2"]),
        clock=True,
        setup=_setup_expiry,
        syncs=("commit", "os"),
    ),
    "a temporary dynamic queue": Case(
        [
            "c = qm.connect(); t = c.open('SYSTEM.DEFAULT.MODEL.QUEUE', OO.INPUT_EXCLUSIVE | OO.OUTPUT)\n"
            "t.put(b'reply'); qm.connect().open('Q', IO).get()"
        ],
        lambda qm, ids: (_assert(qm.queue_names() == ["Q"]), _q(qm, ids, list(range(1, 40)))),
    ),
    "a get, killed before its change-log record": Case(
        ["h = qm.connect().open('Q', IO)\n" + _KILL_BEFORE_LOG + "h.get()\nraise SystemExit('not killed')"],
        lambda qm, ids: _q(qm, ids, list(range(1, 40))),
        syncs=("commit", "os"),
    ),
    "a commit of gets, killed before its change-log record": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(25): h.get(GMO.SYNCPOINT)\n"
            + _KILL_BEFORE_LOG
            + "c.commit()\nraise SystemExit('not killed')"
        ],
        lambda qm, ids: _q(qm, ids, list(range(25, 40))),
    ),
    "a get by MsgId from a blob, killed before its change-log record": Case(
        [
            "h = qm.connect().open('Q', IO)\n"
            + _KILL_BEFORE_LOG
            + "h.get(msg_id=ids[17])\nraise SystemExit('not killed')"
        ],
        lambda qm, ids: _q(qm, ids, [i for i in ALL if i != 17]),
    ),
    "a backout, killed before its change-log record": Case(
        [
            "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(15): h.get(GMO.SYNCPOINT)\n"
            + _KILL_BEFORE_LOG
            + "c.backout()\nraise SystemExit('not killed')"
        ],
        lambda qm, ids: _q(qm, ids, ALL, dict.fromkeys(range(15), 1)),
    ),
    "a sweep's link, killed before its change-log record": Case(
        [_PUT40 + _KILL_BEFORE_LOG + "qm.sweeper.run_once()\nraise SystemExit('not killed')"],
        lambda qm, ids: _sweep_check(qm, ids),
    ),
    "a delete with purge, killed before its change-log record": Case(
        [_KILL_BEFORE_LOG + "qm.delete_queue('Q', purge=True)\nraise SystemExit('not killed')"],
        lambda qm, ids: _assert(qm.queue_names() == []),
    ),
    "alter of attributes": Case(
        [
            "qm.alter_queue('Q', max_depth=77, backout_threshold=3, backout_requeue_q='ELSEWHERE')\n"
            "qm.alter_queue('Q', inhibit_get=True)"
        ],
        lambda qm, ids: _altered(qm, ids),
    ),
}


def _assert(ok: bool) -> None:
    assert ok


def _sweep_check(qm: QueueManager, ids: list[bytes]) -> None:
    got = _drain(qm, "Q")
    assert [m.data for m in got] == [b"%02d" % i for i in range(80)]
    assert [m.msg_id for m in got[:40]] == ids and len({m.msg_id for m in got}) == 80


def _altered(qm: QueueManager, ids: list[bytes]) -> None:
    a = qm.inquire_queue("Q").attributes
    assert (a.max_depth, a.backout_threshold, a.backout_requeue_q, a.inhibit_get) == (77, 3, "ELSEWHERE", True)
    qm.alter_queue("Q", inhibit_get=False)
    _q(qm, ids, ALL)


_RUNS = [(name, sync) for name, case in CASES.items() for sync in case.syncs]


def _kill(script: str, args: list[str]) -> None:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, timeout=120)
    assert out.returncode == -signal.SIGKILL, out.stderr.decode()[-2000:]


@pytest.mark.parametrize("name,sync", _RUNS, ids=[f"{n}-{s}" for n, s in _RUNS])
def test_a_kill_after_the_work_loses_nothing_and_reports_nothing(tmp_path, name, sync):
    case = CASES[name]
    d = tmp_path / "d"
    clock = ManualClock() if case.clock else None
    with _open(d, sync, clock) as qm:
        ids = _setup(qm)
        if case.setup:
            case.setup(qm)
    for n, work in enumerate(case.works):
        # Each child's clock starts where the last left off (the wall time goes on).
        _kill(
            _HEAD + work + _KILL,
            [str(d), ",".join(i.hex() for i in ids), sync, str(n * 5.0), "1" if case.clock else "0"],
        )
    with _open(d, sync, ManualClock(start=5.0 * len(case.works)) if case.clock else None) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        case.check(qm, ids)


_QUEUE_CHILD = """
import os, signal, sys
from sweepq import Queue
q = Queue(path=sys.argv[1], delivery="at-least-once", sync=sys.argv[2])
for i in range(10): q.put(i)
assert [q.get() for _ in range(4)] == [0, 1, 2, 3]
q.task_done()  # 0 is done; 1, 2 and 3 are held at the kill
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("sync", ["commit", "os"])
def test_queue_path_at_least_once_items_held_at_a_kill_come_back_in_place(tmp_path, sync):
    from sweepq import Queue

    d = tmp_path / "d"
    _kill(_QUEUE_CHILD, [str(d), sync])
    with QueueManager.open(d) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        assert sum(qm.inquire_queue(n).current_depth for n in qm.queue_names()) == 9
    with Queue(path=str(d), delivery="at-least-once") as q:
        assert [q.get_nowait() for _ in range(9)] == list(range(1, 10))
        assert q.empty()
