"""The channel agents of one queue manager: ``qm.channels`` (START, STOP, DISPLAY CHSTATUS,
RESET and RESOLVE CHANNEL).

A sender runs as a thread of this process (net/channels/sender.py); a receiver runs in the
session of this queue manager's server that its sender opened (net/channels/receiver.py),
so a queue manager that receives must be served (``qm.serve(tcp=...)`` or ``sweepq serve``).
Whether a user stopped a channel is kept in its sync record, so a stopped channel stays
stopped across restarts, as in MQ; :meth:`Channels.resume` starts every sender that is not
stopped (``sweepq serve`` does, as MQ's channel initiator does for triggered channels).

Thread-safe: any thread may call any method; the agents' own threads do the work.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from sweepq.engine import MQError, Reason
from sweepq.engine.constants import ChannelStatus, ChannelType

from .sender import Sender, status_of

STOPPING_WAIT = 30.0  # seconds a channel that stopped itself may take to let go (it takes ms)

if TYPE_CHECKING:
    from sweepq.engine import QueueManager

    from .receiver import Receiver

RESOLVE_ACTIONS = ("commit", "backout")


class Channels:
    """See the module docstring. Every method raises MQError CHANNEL_NOT_FOUND (4032) for a
    name that is not a channel of this queue manager."""

    def __init__(self, qm: QueueManager):
        self.qm = qm
        self.log = logging.getLogger("sweepq.channels")
        self._lock = threading.Lock()
        self._senders: dict[str, Sender] = {}
        self._receivers: dict[str, Receiver] = {}

    def _type(self, name: str) -> ChannelType:
        return self.qm.distributed.channel(name).type

    def start(self, name: str) -> dict:
        """START CHANNEL: a sender's agent starts (nothing changes if it runs); a receiver
        accepts its sender again. Returns the channel's status."""
        self.enable(name)
        if self._type(name) == ChannelType.SENDER:
            with self._lock:
                s = self._senders.get(name)
                if s is not None and s.alive and s.state == ChannelStatus.STOPPED:
                    # Stopped, and still ending (its link, its batch, its connection): this START
                    # is for a new agent. Taken for a running one, it would be lost.
                    s.thread.join(60)
                if s is None or not s.alive:
                    s = self._senders[name] = Sender(self.qm, name, self.log)
                    s.start()
        return self.status(name)[0]

    def enable(self, name: str) -> dict:
        """Undo a STOP without starting anything: the channel starts with the next
        :meth:`resume` (``sweepq channel start --data-dir``, when no server runs)."""
        self.qm.distributed.sync(name).set_stopped(False)
        return self.status(name)[0]

    def stop(self, name: str) -> dict:
        """STOP CHANNEL: a sender's agent ends (a batch in flight stays in doubt); a receiver's
        session ends (its batch is backed out) and it refuses its sender until started. A
        stopped channel stays stopped across restarts."""
        self.qm.distributed.sync(name).set_stopped(True)
        with self._lock:
            agent = self._senders.get(name) or self._receivers.get(name)
        if agent is not None:
            agent.stop()
        return self.status(name)[0]

    def status(self, name: str | None = None) -> list[dict]:
        """DISPLAY CHSTATUS: one dict per channel (``name`` None: every channel): ``status``
        (RUNNING, RETRYING, INDOUBT, STOPPED, INACTIVE), ``indoubt``, ``messages`` and
        ``batches`` moved by the running agent, ``seq`` (last sequence number), ``luwid``,
        and for a sender its partner, transmission queue and its depth, and why it stopped."""
        names = sorted(self.qm.distributed.channels) if name is None else [name]
        out = []
        for n in names:
            with self._lock:
                sender, receiver = self._senders.get(n), self._receivers.get(n)
            if sender is not None:
                out.append(sender.status())
            else:
                st = status_of(self.qm, n, None)
                if receiver is not None:
                    st.update(receiver.status())
                out.append(st)
        return out

    def reset(self, name: str, seq: int = 0) -> dict:
        """RESET CHANNEL: the last sequence number becomes ``seq`` (a sender's receiver takes
        it at the next start).

        :raises MQError: CHANNEL_IN_USE (4031) while the channel runs; CHANNEL_INDOUBT
            (4025) while a sender's batch is in doubt; PARM_VALUE_ERROR (3229) for ``seq``."""
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= 999_999_999:
            raise MQError(Reason.PARM_VALUE_ERROR, f"seq {seq!r}: a sequence number in 0..999999999")
        self._not_running(name)
        self.qm.distributed.sync(name).reset(seq)
        return self.status(name)[0]

    def resolve(self, name: str, action: str) -> dict:
        """RESOLVE CHANNEL: commit (``"commit"``: the receiver has the batch) or back out
        (``"backout"``: it goes again) a sender's batch in doubt, by hand. Nothing to do when
        none is in doubt.

        :raises MQError: PARM_VALUE_ERROR (3229) for another action or a receiver;
            CHANNEL_IN_USE (4031) while the channel runs; RESOURCE_PROBLEM (2102)."""
        if action not in RESOLVE_ACTIONS:
            raise MQError(Reason.PARM_VALUE_ERROR, f"resolve {action!r}: use 'commit' or 'backout'")
        if self._type(name) != ChannelType.SENDER:
            raise MQError(Reason.PARM_VALUE_ERROR, f"channel {name!r} is a receiver: resolve its sender")
        self._not_running(name)
        sync = self.qm.distributed.sync(name)
        if action == "commit":
            sync.commit()
        else:
            sync.backout()
        return self.status(name)[0]

    def _not_running(self, name: str) -> None:
        """:raises MQError: CHANNEL_IN_USE (4031) while an agent runs the channel (retrying too)."""
        with self._lock:
            sender = self._senders.get(name)
        if sender is not None and sender.alive and sender.state == ChannelStatus.STOPPED:
            # It stopped itself and shows STOPPED while it lets go of its link and its batch:
            # a reset or resolve that saw STOPPED waits for that instead of failing with 4031.
            sender.thread.join(STOPPING_WAIT)
        if (sender is not None and sender.alive) or self.qm.distributed.sync(name).active:
            raise MQError(Reason.CHANNEL_IN_USE, f"channel {name!r} is running; stop it first")

    def resume(self) -> list[str]:
        """Start every sender channel a user has not stopped; returns their names."""
        dq = self.qm.distributed
        names = [n for n, d in sorted(dq.channels.items()) if d.type == ChannelType.SENDER]
        started = [n for n in names if not dq.sync(n).stopped]
        for n in started:
            self.start(n)
        return started

    # -- receivers (net/channels/receiver.py) ---------------------------------------------------

    def attach(self, receiver: Receiver) -> None:
        with self._lock:
            self._receivers[receiver.name] = receiver

    def detach(self, receiver: Receiver) -> None:
        with self._lock:
            if self._receivers.get(receiver.name) is receiver:
                del self._receivers[receiver.name]

    def close(self) -> None:
        """The queue manager closes: every sender's agent ends (nothing is marked stopped)."""
        with self._lock:
            senders = list(self._senders.values())
        for s in senders:
            s.stop()
