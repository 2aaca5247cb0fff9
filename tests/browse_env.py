"""The two worlds every browse and lock test runs in: the queue in memory, and the same queue
with everything sweepable swept (tests/test_browse.py, tests/test_lock.py).

A test puts what it needs, then calls :meth:`Env.settle`: in the "swept" world the sweeper
runs (manual clock, buffer of x + 0, three-message blobs) until nothing more moves, so the
assertions that follow read blobs; in the "memory" world it does nothing. The assertions
are the same in both: a browse must not tell them apart.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

from sweepq.engine import OO, DeliverySequence, DurabilitySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock, SweepPolicy

BIO = OO.BROWSE | OO.INPUT_SHARED | OO.OUTPUT  # browse, get and put
WORLDS = ["memory", "swept"]


class Env:
    """One queue manager with queues Q (priority) and F (FIFO, default priority 4)."""

    def __init__(self, qm: QueueManager, clock: ManualClock, swept: bool):
        self.qm = qm
        self.clock = clock
        self.swept = swept

    def settle(self) -> None:
        """Sweep everything sweepable (swept world only): until a run moves nothing."""
        if not self.swept:
            return
        for _ in range(20):
            if self.qm.sweeper.run_once().msgs_swept == 0:
                break

    def stats(self, name: str = "Q"):
        return self.qm._queue(name).sweep.stats()

    def in_memory(self, name: str = "Q") -> int:
        return self.qm.inquire_queue(name).in_memory

    def handle(self, name: str = "Q", options=BIO):
        return self.qm.connect().open(name, options)


@contextmanager
def make_env(world: str):
    clock = ManualClock()
    with QueueManager(
        clock=clock,
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
    ) as qm:
        qm.define_queue("Q")
        qm.define_queue("F", delivery_sequence=DeliverySequence.FIFO, default_priority=4)
        yield Env(qm, clock, world == "swept")


def browse_all(h, first: bool = True, **kw) -> list[bytes]:
    """BROWSE_FIRST (or NEXT) then BROWSE_NEXT until 2033; the data in order."""
    from sweepq.engine import GMO

    out = []
    opt = GMO.BROWSE_FIRST if first else GMO.BROWSE_NEXT
    while True:
        try:
            out.append(h.get(opt, **kw).data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE, e
            return out
        opt = GMO.BROWSE_NEXT


def reason_of(fn) -> int:
    try:
        fn()
    except MQError as e:
        return e.reason
    raise AssertionError("no MQError")


def in_thread(fn):
    box: dict = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box
