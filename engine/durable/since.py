"""What changed since the last checkpoint, as the store's change log has it, in the terms
recovery needs: message records by queue, lane and arrival number.

The checkpoint (ledger.py) says which messages were live when it was written; the change
log (blobstore/changes.py, ``BlobStore.since_checkpoint``) says what every write of message
records did after it, each write recorded right after the store returned it and kept apart
from the store's files. When damage takes writes from the store (a log cut or deleted, a
table file set aside), the change log still has them: recovery (recovery.py) keeps dead
the messages it shows removed, sets again the marks and raised backout counts it shows
written, and names by MsgId the records it shows written that are gone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from sweepq.blobstore import Capability, Checkpointing, Since, Store

from .. import record
from .layout import key_parts, queue_prefix

_NO_SEQS = np.zeros(0, np.uint64)


class SinceCheckpoint:
    """The lookups recovery makes in a store's :class:`~sweepq.blobstore.Since` (an empty one
    for a store that keeps no change log). Built once per open; not thread-safe."""

    def __init__(self, store: Store):
        self.since = Since()
        if Capability.CHECKPOINT in store.capabilities:
            keeper: Checkpointing = store  # type: ignore[assignment]  # declared by Capability.CHECKPOINT
            self.since = keeper.since_checkpoint()
        self.removed = self.since.removed  # message keys removed for good
        self.written = self.since.written  # message key -> the first bytes of its record
        self._marks: dict[int, dict[int, bytes]] = {}
        for (blob_id, pos), value in self.since.marks.items():
            if value is not None:
                self._marks.setdefault(blob_id, {})[pos] = value
        removed = _by_lane(self.removed, lambda _k: True)
        self._removed = {at: np.array(sorted(seqs), np.uint64) for at, seqs in removed.items()}
        self._raised = _by_lane(self.written, lambda k: _backout(self.written[k]))
        self._highest = max(
            (seq for d in (removed, _by_lane(self.written, lambda _k: True)) for seqs in d.values() for seq in seqs),
            default=0,
        )

    def removed_seqs(self, queue: str, lane: int) -> np.ndarray:
        """The arrival numbers (ascending) of the records of a lane removed since."""
        return self._removed.get((queue, lane), _NO_SEQS)

    def raised_backouts(self, queue: str, lane: int) -> dict[int, int]:
        """Arrival number -> backout count, of the records of a lane written since with a
        count above 0."""
        return self._raised.get((queue, lane), {})  # type: ignore[return-value]  # _backout's ints

    def marks(self, blob_id: int) -> dict[int, bytes]:
        """Position -> the mark last written since, on the records of a blob."""
        return self._marks.get(blob_id, {})

    def gone(
        self, found: Callable[[str, int], set[int]], loaded: set[int], skip: set[tuple[str, int, int]]
    ) -> dict[tuple[str, int], list[bytes]]:
        """The MsgIds, by queue and lane, of records written since that did not come back:
        not among the arrival numbers ``found(queue, lane)``, not in ``skip``, not
        :meth:`consumed`."""
        out: dict[tuple[str, int], list[bytes]] = {}
        for key, head in self.written.items():
            try:
                queue, lane, seq = key_parts(key)
            except Exception:
                continue  # not a message key
            if (queue, lane, seq) in skip or seq in found(queue, lane) or self.consumed(key, loaded):
                continue
            mid = msg_id_in(head[4:])
            if mid:
                out.setdefault((queue, lane), []).append(mid)
        return out

    def consumed(self, key: bytes, loaded: set[int]) -> bool:
        """Whether the message of ``key``, gone from the store, was consumed since: its record
        removed, or moved into a blob that came back (``loaded``: then its position there is
        marked removed) or that was deleted since (once nothing live was left in it)."""
        if key in self.removed:
            return True
        homes = self.since.moved.get(key, ())
        return any(b in loaded or b in self.since.unlinked for b in homes)

    def highest_seq(self) -> int:
        """The highest arrival number of a record written or removed since (never drawn again)."""
        return self._highest

    def dropped(self, queue: str) -> bool:
        """Whether every record of ``queue`` was deleted at once since (the queue deleted)."""
        return queue_prefix(queue) in self.since.dropped

    def queues(self) -> set[str]:
        """The queues of the records written since."""
        return {key.partition(b"\x00")[0].decode(errors="replace") for key in self.written}


def _by_lane(keys, value: Callable[[bytes], object]) -> dict[tuple[str, int], dict[int, object]]:
    """(queue, lane) -> arrival number -> ``value(key)``, of the message keys among ``keys``
    for which it is not falsy."""
    out: dict[tuple[str, int], dict[int, object]] = {}
    for key in keys:
        v = value(key)
        if not v:
            continue
        try:
            queue, lane, seq = key_parts(key)
        except Exception:
            continue  # not a message key
        out.setdefault((queue, lane), {})[seq] = v
    return out


def _backout(head: bytes) -> int:
    """The backout count in the first bytes of a value (crc, then the record's header)."""
    return record.backout_of(head[4:]) if len(head) >= 4 + record.OFF_BACKOUT + 2 else 0


def msg_id_in(rec: bytes) -> bytes | None:
    """The MsgId a durable record (or its first bytes, or a damaged one) shows, when its
    header looks whole: a durable record carries its MsgId itself (record.pin_msg_id)."""
    if len(rec) >= record.HEAD_LEN + 24 and rec[record.OFF_FLAGS] & record.HAS_MSG_ID and rec[0] >= 45:
        return bytes(rec[record.HEAD_LEN : record.HEAD_LEN + 24])
    return None
