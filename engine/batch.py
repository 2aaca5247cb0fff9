"""A channel's batch: messages of a transmission queue assigned to one batch
(engine/getpath.py ``assign_batch`` makes it, the channel's sender confirms or releases it).
A module of its own below the get path and the connection, which both name it
(docs/design.md, "The engine's modules").
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from . import record
from .message import Message

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .queue import LocalQueue
    from .record import Identity


class Batch:
    """Messages of a transmission queue assigned to one channel batch (seed 003), in get order.

    The messages it holds stay on the queue, invisible to gets and never swept, until the
    batch is confirmed (they leave) or released (they are available again, in place). A
    non-persistent message a channel with NPMSPEED(FAST) took at assignment travels with the
    batch (``records``, and its index in ``fast``) but has already left the queue: a failure
    loses it and nothing brings it back, as in MQ.

    ``confirm`` and ``release`` take ``harden``: records written under their keys in the same
    atomic store write that deletes (or keeps) the batch's messages: the channel's
    synchronisation record (engine/distributed/sync.py). Thread-safe per call; one of the two
    ends a batch, once."""

    _ids = itertools.count(1)

    def __init__(
        self,
        queue: LocalQueue,
        ident: Identity,
        records: list[bytes],
        batch_id: int,
        fast: frozenset[int] = frozenset(),
    ):
        self.id = batch_id
        self.queue = queue
        self._ident = ident
        self.records = records
        self.fast = fast
        self.held = len(records) - len(fast)
        self._open = True

    @classmethod
    def next_id(cls) -> int:
        return next(cls._ids)

    @property
    def messages(self) -> list[Message]:
        return [Message.make(rec, self._ident, record.data_of(rec)) for rec in self.records]

    def __len__(self) -> int:
        return len(self.records)

    def confirm(self, harden: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """The batch arrived: its messages leave the queue, with ``harden`` in the same write.

        :raises MQError: 2102 when the store write fails (the batch stays assigned: confirm
            again)."""
        self._end(True, harden)

    def release(self, harden: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """The batch did not go: its messages are available again, in place; ``harden`` is
        written first. :raises MQError: 2102 when that write fails (the batch stays assigned)."""
        self._end(False, harden)

    def _end(self, confirmed: bool, harden: Sequence[tuple[bytes, bytes]]) -> None:
        if not self._open:
            return
        self.queue.batches.end(self.id, confirmed, harden)
        self._open = False
