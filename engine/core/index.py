"""A queue's index of its in-memory messages by one descriptor field (MQ's INDXTYPE).

With ``index_type`` set, a get (or browse) that selects by that field finds its in-memory
candidates in O(1) instead of walking every message (seed 002). The index maps each value
to the slots holding it; values that match anything (MsgId, CorrelId or GroupId NONE) are
not indexed. Swept messages are not in it: they are found through the per-blob summaries
(engine/core/swept.py) without reading blobs that cannot match.

It is kept exact by the lanes (engine/core/lanes.py), the only code that places and frees slots:
every slot added, freed, or renumbered passes through it, under the queue's lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import record
from ..constants import CORRELID_NONE, GROUPID_NONE, IndexType
from ..record import Identity

_GROUP_OFF = 2  # record._sections index of the group section


def key_function(kind: IndexType, ident: Identity) -> Callable[[bytes], object]:
    """What the index of ``kind`` files a record under (None: not indexed)."""
    if kind == IndexType.MSG_ID:
        return ident.msg_id
    if kind == IndexType.CORREL_ID:

        def correl(rec: bytes) -> bytes | None:
            if not rec[record.OFF_FLAGS] & record.HAS_CORREL_ID:
                return None
            cid = record.correl_id(rec)
            return None if cid == CORRELID_NONE else cid

        return correl
    if kind == IndexType.GROUP_ID:

        def group(rec: bytes) -> bytes | None:
            off = record._sections(rec)[_GROUP_OFF]
            if off < 0:
                return None
            gid = rec[off : off + 24]
            return None if gid == GROUPID_NONE else gid

        return group
    if kind == IndexType.MSG_TOKEN:
        return record.seq_of
    raise ValueError(f"no index for {kind!r}")


class SlotIndex:
    """Value -> the slot holding it (an int), or the set of slots when several do.

    Called only with the owning queue's mutex held, by the lanes."""

    __slots__ = ("key", "kind", "map")

    def __init__(self, kind: IndexType, ident: Identity):
        self.kind = kind
        self.key = key_function(kind, ident)
        # int | set[int], told apart with `type(v) is int`, on which a type checker cannot
        # narrow the set branch (int has subclasses): Any to it.
        self.map: dict[object, Any] = {}

    def add(self, slot: int, rec: bytes) -> None:
        k = self.key(rec)
        if k is None:
            return
        m = self.map
        cur = m.get(k)
        if cur is None:
            m[k] = slot
        elif type(cur) is int:
            m[k] = {cur, slot}
        else:
            cur.add(slot)

    def add_many(self, slots: Iterable[int], recs: Iterable[bytes]) -> None:
        for slot, rec in zip(slots, recs, strict=True):
            self.add(slot, rec)

    def discard(self, slot: int, rec: bytes) -> None:
        k = self.key(rec)
        m = self.map
        cur = m.get(k)  # a record without a key (None) was never added: None is no key of the map
        if cur is None:
            return
        if type(cur) is int:
            if cur == slot:
                del m[k]
        else:
            cur.discard(slot)
            if len(cur) == 1:
                m[k] = next(iter(cur))

    def slots(self, value: object) -> tuple[int, ...] | set[int]:
        cur = self.map.get(value)
        if cur is None:
            return ()
        return (cur,) if type(cur) is int else cur

    def clear(self) -> None:
        self.map.clear()

    def __len__(self) -> int:
        return sum(1 if type(v) is int else len(v) for v in self.map.values())
