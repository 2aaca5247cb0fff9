"""What put and get return: the stored descriptor, the token, the data and any warning.

Both results decode the descriptor lazily from the message record, so a caller that only
wants the data pays for no descriptor.
"""

from __future__ import annotations

from . import record
from .constants import CC, MF, GroupStatus, Reason, SegmentStatus
from .record import MD, Identity, tail


class _Result:
    """Common read-only views of a result's record. Results have no Python __init__: they
    are built field by field on the hot path, which is several times cheaper."""

    __slots__ = ("_ident", "_rec", "reason")
    _ident: Identity
    _rec: bytes
    reason: int

    def _now(self) -> int | None:
        """The time at which remaining expiry is measured (None: as put)."""
        return None

    @property
    def completion_code(self) -> CC:
        return CC.WARNING if self.reason else CC.OK

    @property
    def record(self) -> bytes:
        """The message record (engine/record.py's layout) this result reads its fields from:
        what a client connection carries (net/protocol.py). A put's result over a client holds
        the record's header only; every field above reads from the header."""
        return self._rec

    @property
    def md(self) -> MD:
        """The full stored descriptor (decoded on each access; keep it if you reuse it)."""
        return record.decode_md(self._rec, self._ident, self._now())

    @property
    def msg_id(self) -> bytes:
        return self._ident.msg_id(self._rec)

    @property
    def correl_id(self) -> bytes:
        return record.correl_id(self._rec)

    @property
    def msg_token(self) -> bytes:
        """The MsgToken: names this message instance until it leaves the queue."""
        return self._ident.token(self._rec)

    @property
    def priority(self) -> int:
        return self._rec[record.OFF_PRIORITY]

    @property
    def persistent(self) -> bool:
        return record.is_persistent(self._rec)

    @property
    def backout_count(self) -> int:
        return record.backout_of(self._rec)


class PutResult(_Result):
    """The outcome of a put: ``md`` (as stored, with generated ids), ``msg_token``, ``reason``
    (``Reason.NONE`` or the warning ``PRIORITY_EXCEEDS_MAXIMUM``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"PutResult(msg_id={self.msg_id.hex()}, reason={Reason(self.reason).name})"

    @staticmethod
    def many(records: list[bytes], ident: Identity, reason: int = 0) -> list[PutResult]:
        """One result per record (put_many)."""
        return put_results(records, ident, reason)


class Message(_Result):
    """A message returned by get.

    ``data`` is the message data (only the prefix that fits when truncated);
    ``data_length`` the full length; ``reason`` is ``Reason.NONE`` or a warning:
    ``TRUNCATED_MSG_ACCEPTED`` (2079: the message was removed, the rest of its data is
    gone) or ``TRUNCATED_MSG_FAILED`` (2080: the buffer was too small and the message is
    still on the queue; get it again with a larger ``buffer_length``).
    """

    __slots__ = ("_now_us", "data")
    _now_us: int | None
    data: bytes

    def _now(self) -> int | None:
        return getattr(self, "_now_us", None)

    @property
    def read_at_us(self) -> int | None:
        """When the remaining expiry in ``md`` is measured (epoch microseconds), or None when
        the message has no expiry: a client connection carries it so that ``md.expiry`` reads
        the same on both sides."""
        return self._now()

    @property
    def data_length(self) -> int:
        """The full length of the message data, even when ``data`` was truncated."""
        rec = self._rec
        return len(rec) - (rec[0] or record.data_offset(rec))

    @classmethod
    def make(cls, rec: bytes, ident: Identity, data: bytes, reason: int = 0, now_us: int | None = None) -> Message:
        m = cls()
        m._rec = rec
        m._ident = ident
        m.reason = reason
        m._now_us = now_us
        m.data = data
        return m

    @staticmethod
    def many(records: list[bytes], ident: Identity) -> list[Message]:
        """One whole message per record (get_many)."""
        return messages(records, ident)

    @property
    def group_status(self) -> GroupStatus:
        flags = self.md.msg_flags
        if flags & MF.LAST_MSG_IN_GROUP:
            return GroupStatus.LAST_MSG_IN_GROUP
        if flags & MF.MSG_IN_GROUP:
            return GroupStatus.MSG_IN_GROUP
        return GroupStatus.NOT_IN_GROUP

    @property
    def segment_status(self) -> SegmentStatus:
        flags = self.md.msg_flags
        if flags & MF.LAST_SEGMENT:
            return SegmentStatus.LAST_SEGMENT
        if flags & MF.SEGMENT:
            return SegmentStatus.SEGMENT
        return SegmentStatus.NOT_A_SEGMENT

    def __repr__(self) -> str:
        return f"Message(priority={self.priority}, data_length={self.data_length}, reason={Reason(self.reason).name})"


def put_results(records: list[bytes], ident: Identity, reason: int = 0) -> list[PutResult]:
    """One result per record (put_many), built without a Python-level constructor."""
    out: list[PutResult] = []
    for rec in records:
        r = PutResult.__new__(PutResult)
        r._rec = rec
        r._ident = ident
        r.reason = reason
        out.append(r)
    return out


def messages(records: list[bytes], ident: Identity) -> list[Message]:
    """One whole message per record (get_many), built without a Python-level constructor."""
    out: list[Message] = []
    for rec in records:
        m = Message.__new__(Message)
        m._rec = rec
        m._ident = ident
        m.reason = 0
        m.data = tail(rec, rec[record.OFF_HLEN] or record.data_offset(rec))
        out.append(m)
    return out
