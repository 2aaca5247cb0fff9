"""Helpers for the channel tests: queue managers joined by channels over loopback TCP, in this
process (each receiving queue manager served on 127.0.0.1), with short intervals."""

from __future__ import annotations

import contextlib
import time

from sweepq.engine import QueueManager, SweeperSettings, Usage
from sweepq.engine.constants import ChannelType

from helpers import wait_until  # the channel tests import it from here too

# Intervals short enough for tests (seconds; MQ's defaults are minutes).
FAST = {"heartbeat": 1.0, "short_retry": 200, "short_interval": 0.05, "long_retry": 5, "long_interval": 0.2}


def receiving(qm: QueueManager, channel: str, **serve) -> object:
    """``qm`` takes the receiving end of ``channel``: defined, and served on loopback TCP."""
    qm.define_channel(channel, type=ChannelType.RECEIVER)
    return qm.serve(None, tcp="127.0.0.1:0", **serve)


def sending(qm: QueueManager, channel: str, server, to_qmgr: str, **attrs) -> None:
    """``qm`` sends to ``to_qmgr`` through ``channel``, whose receiver ``server`` serves: a
    transmission queue named for the partner and a sender channel (not started)."""
    if to_qmgr not in qm.queue_names():
        qm.define_queue(to_qmgr, usage=Usage.TRANSMISSION)
    qm.define_channel(
        channel, conname=server.urls[-1], xmit_queue=to_qmgr, token=server.token or "", **{**FAST, **attrs}
    )


@contextlib.contextmanager
def pair(qm1_options: dict | None = None, qm2_options: dict | None = None, **channel):
    """QM1 -> QM2: QM2 with queue Q and a dead-letter queue DLQ serves the receiver of TO.QM2;
    QM1 has the transmission queue QM2, the remote queue TARGET (Q on QM2) and the sender
    TO.QM2 (not started: ``qm1.channels.start("TO.QM2")``)."""
    qm2 = QueueManager("QM2", sweeping=SweeperSettings(run=False), **qm2_options or {})
    qm1 = QueueManager("QM1", sweeping=SweeperSettings(run=False), **qm1_options or {})
    try:
        qm2.define_queue("Q")
        qm2.define_queue("DLQ")
        qm2.alter_qmgr(dead_letter_queue="DLQ")
        server = receiving(qm2, "TO.QM2")
        sending(qm1, "TO.QM2", server, "QM2", **channel)
        qm1.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
        yield qm1, qm2, server
    finally:
        qm1.close()
        qm2.close()


def status(qm: QueueManager, channel: str) -> dict:
    return qm.channels.status(channel)[0]


def running(qm: QueueManager, channel: str) -> bool:
    return status(qm, channel)["status"] == "RUNNING"


def sent(qm: QueueManager, channel: str = "TO.QM2") -> bool:
    """The sender ``channel`` of ``qm`` has committed every batch it sent (its transmission
    queue is empty and nothing is in doubt), so its partner will receive nothing more from it.
    The receiver commits a batch before the sender does: the sender's queue empties after."""
    st = status(qm, channel)
    return st["xmit_depth"] == 0 and not st["indoubt"]


def drain_all(qm: QueueManager, queue: str, n: int, settled, timeout: float = 30.0) -> list:
    """Get ``n`` messages from ``queue`` as they arrive; then, once ``settled()`` says nothing
    more can arrive (``sent`` of every sender on the way), every message still there: each is
    a duplicate, returned with the rest for the caller's count to find."""
    from sweepq.engine import GMO, OO, MQError, Reason

    h = qm.connect().open(queue, OO.INPUT_SHARED)
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(out)} of {n} messages arrived on {queue} within {timeout} s")
        with contextlib.suppress(MQError):
            out.append(h.get(GMO.WAIT, 200))
    wait_until(settled, timeout, "the senders' last commit")
    while True:
        try:
            out.append(h.get())
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE, e
            break
    h.close()
    return out
