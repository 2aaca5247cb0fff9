"""A plain kill -9 is no damage: after each kind of work a queue manager does, killed at its
end, the next open reports nothing (``recovery.damaged`` and ``damaged_msg_ids`` empty) and
every queue holds what the work left it.

Each case starts from a closed store (its checkpoint written) with queue Q holding 40
persistent messages, most of them swept into blobs of 10, so that the open after the kill has
a checkpoint that lists what the work changed. A false alarm here invites an application to
send again what it already has (docs/damage.md). The first one found this way: DELETE QLOCAL
then a kill brought the queue back as "its definition was lost to damage".
"""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings

IO = OO.INPUT_SHARED | OO.OUTPUT

_SETUP = """
import os, signal, sys
from sweepq.engine import GMO, OO, PMO, DurabilitySettings, Persistence, QueueManager, SweeperSettings
P, IO = Persistence.PERSISTENT, OO.INPUT_SHARED | OO.OUTPUT
qm = QueueManager.open(
    sys.argv[1],
    sweeping=SweeperSettings(run=False),
    durability=DurabilitySettings(store_options={"max_blob_records": 10}),
)
ids = [bytes.fromhex(i) for i in sys.argv[2].split(",")]
"""

# The work, then the depth of each queue the next open must find.
CASES = {
    "delete with purge": ("qm.delete_queue('Q', purge=True)", {}),
    "delete, define again": (
        "qm.delete_queue('Q', purge=True); qm.define_queue('Q', default_persistence=P)",
        {"Q": 0},
    ),
    "delete, define again, put": (
        "qm.delete_queue('Q', purge=True); qm.define_queue('Q', default_persistence=P)\n"
        "h = qm.connect().open('Q', IO)\nfor i in range(5): h.put(b'n')",
        {"Q": 5},
    ),
    "drain": ("h = qm.connect().open('Q', IO)\nfor _ in range(40): h.get()", {"Q": 0}),
    "drain, sweep": ("h = qm.connect().open('Q', IO)\nfor _ in range(40): h.get()\nqm.sweeper.run_once()", {"Q": 0}),
    "get by MsgId from blobs": (
        "h = qm.connect().open('Q', IO); h.get(msg_id=ids[17]); h.get(msg_id=ids[3])",
        {"Q": 38},
    ),
    "put, sweep": ("h = qm.connect().open('Q', IO)\nfor i in range(40): h.put(b'x')\nqm.sweeper.run_once()", {"Q": 80}),
    "alter": ("qm.alter_queue('Q', max_depth=1000)", {"Q": 40}),
    "gets under syncpoint, uncommitted": (
        "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(25): h.get(GMO.SYNCPOINT)",
        {"Q": 40},
    ),
    "gets under syncpoint, backed out": (
        "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(25): h.get(GMO.SYNCPOINT)\nc.backout()",
        {"Q": 40},
    ),
    "gets under syncpoint, committed": (
        "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(25): h.get(GMO.SYNCPOINT)\nc.commit()",
        {"Q": 15},
    ),
    "puts under syncpoint, uncommitted": (
        "c = qm.connect(); h = c.open('Q', IO)\nfor _ in range(5): h.put(b'u', options=PMO.SYNCPOINT)",
        {"Q": 40},
    ),
    "another queue defined and put to": (
        "qm.define_queue('R', default_persistence=P); qm.connect().open('R', IO).put(b'r')",
        {"Q": 40, "R": 1},
    ),
    "another queue defined and deleted": ("qm.define_queue('R'); qm.delete_queue('R')", {"Q": 40}),
    "closed, then killed": ("qm.close()", {"Q": 40}),
}


def _settings() -> dict:
    return {
        "sweeping": SweeperSettings(run=False),
        "durability": DurabilitySettings(store_options={"max_blob_records": 10}),
    }


# The change log starts again (continued) once it grew past its limit, with no checkpoint:
# what it knew of the work must carry over. A small limit, then writes to another queue.
_AGAIN = """
import sweepq.blobstore.changes
sweepq.blobstore.changes.LIMIT = 2000
"""
_AFTER = """
qm.define_queue('ZZ', default_persistence=P)
hz = qm.connect().open('ZZ', IO)
for i in range(50): hz.put(b'z' * 100)
"""


@pytest.mark.parametrize("again", [False, True], ids=["", "log started again"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_kill_after_the_work_reports_nothing(tmp_path, case, again):
    work, depths = CASES[case]
    restarted = again and case != "closed, then killed"  # a closed one writes nothing more
    if restarted:
        work, depths = work + _AFTER, {**depths, "ZZ": 50}
    d = tmp_path / "d"
    with QueueManager.open(d, **_settings()) as qm:
        qm.define_queue("Q", default_persistence=Persistence.PERSISTENT)
        h = qm.connect().open("Q", IO)
        ids = [h.put(b"%02d" % i).msg_id for i in range(40)]
        qm.sweeper.run_once()
        assert qm.blob_store().chain(b"Q/0")  # some of them swept
    script = _SETUP.replace("qm = Queue", (_AGAIN if again else "") + "qm = Queue") + work
    script += "\nos.kill(os.getpid(), signal.SIGKILL)\n"
    out = subprocess.run(
        [sys.executable, "-c", script, str(d), ",".join(i.hex() for i in ids)], capture_output=True, timeout=120
    )
    assert out.returncode == -signal.SIGKILL, out.stderr.decode()[-2000:]
    with QueueManager.open(d, **_settings()) as qm:
        assert qm.recovery.damaged == [] and qm.recovery.damaged_msg_ids == []
        assert qm.blob_store().since_checkpoint().complete is not restarted  # it did start again
        assert {n: qm.inquire_queue(n).current_depth for n in qm.queue_names()} == depths
