"""A handle's browse cursor and browse lock, and what an UNLOCK returns: the state that
engine/browse.py moves and engine/handlestate.py holds (``HandleState.cursor``), kept below
both so that the handle's state names it without an import running up the layers
(docs/design.md, "The engine's modules"). The cursor's rules are browse's (engine/browse.py's
docstring).
"""

from __future__ import annotations

from .constants import CC, Reason
from .core.flags import N_LANES
from .core.ref import Ref
from .core.swept import SweptBlob

BEFORE_FIRST = N_LANES  # a cursor lane that sorts before every message
CACHE_BLOBS = 2  # decoded blobs a cursor keeps for itself


class Status:
    """The outcome of a get call that returns no message (GMO.UNLOCK).

    ``reason`` is ``Reason.NONE`` or the warning ``Reason.NO_MSG_LOCKED`` (2209: nothing was
    locked); warnings come back on the result, as on a :class:`~sweepq.engine.Message`."""

    __slots__ = ("reason",)

    def __init__(self, reason: int = 0):
        self.reason = reason

    @property
    def completion_code(self) -> CC:
        return CC.WARNING if self.reason else CC.OK

    def __repr__(self) -> str:
        return f"Status(reason={Reason(self.reason).name})"


class Cursor:
    """One handle's browse cursor and browse lock (engine/browse.py's module docstring).

    Position: ``lane`` and ``seq`` (``BEFORE_FIRST`` and -1 before every message);
    ``on_msg`` says whether the cursor stands on a message (a browse succeeded since the
    open or the last reset), which [BROWSE_]MSG_UNDER_CURSOR need. Lock: ``lk_seq`` (-1:
    none), its lane, and the ref that holds it (``lk_ref``).
    """

    __slots__ = (
        "blob",
        "blob_k",
        "blob_pos",
        "cache",
        "hint",
        "lane",
        "lk_lane",
        "lk_ref",
        "lk_seq",
        "on_msg",
        "passed",
        "seq",
    )

    def __init__(self) -> None:
        self.cache: list[tuple[SweptBlob, list[bytes]]] = []
        self.lk_seq = -1
        self.lk_lane = -1
        self.lk_ref: Ref | None = None
        # Within one browse call: (lane, after, match, blob) when a walk of the lane's chain
        # stopped to have ``blob`` read and every blob before it held nothing for it.
        self.passed: tuple | None = None
        self.reset()

    def reset(self) -> None:
        """Before the first message (MQOPEN's position, and BROWSE_FIRST's 2080)."""
        self.lane = BEFORE_FIRST
        self.seq = -1
        self.on_msg = False
        self.hint: Ref | None = None  # a message at or before the cursor, in memory
        self.blob: SweptBlob | None = None
        self.blob_k = -1  # its index in the chain when it was last seen
        self.blob_pos = -1  # the position in it of the last message found there

    def forget_lock(self) -> None:
        self.lk_seq = self.lk_lane = -1
        self.lk_ref = None

    def remember(self, blob: SweptBlob, records: list[bytes]) -> None:
        """Keep a blob's decoded records for this cursor (bounded: CACHE_BLOBS)."""
        self.cache.append((blob, records))
        if len(self.cache) > CACHE_BLOBS:
            del self.cache[0]

    def records(self, blob: SweptBlob) -> list[bytes] | None:
        recs = blob.records()  # read (or read ahead) for gets already: no I/O
        if recs is not None:
            return recs
        for b, recs in self.cache:
            if b is blob:
                return recs
        return None
