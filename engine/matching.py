"""Selecting a particular message: MatchOptions against a record (docs/semantics.md §5.1).

A :class:`Match` is built once per get from the match options and the caller's field
values, and is then a pure predicate over records. ``None`` stands for "any message",
so the common get (no selection) pays nothing.

Rules kept: each MATCH_xxx given compares that field; the tests are ANDed; MsgId =
MQMI_NONE, CorrelId = MQCI_NONE and GroupId = MQGI_NONE match anything (sweepq decision
for GroupId); an undefined match bit is MQRC_MATCH_OPTIONS_ERROR (2247). The handle's
selection string (docs/semantics.md §10), when it has one, is ANDed last: the cheap id tests
run first, and the selector reads only the properties and fields it names.
"""

from __future__ import annotations

import struct

from . import checks, record
from .constants import CORRELID_NONE, GROUPID_NONE, MO, MO_KNOWN, MSGID_NONE, Reason
from .errors import MQError
from .selector import Selector

_GROUP = struct.Struct("<24sII")

# A call's match arguments as Handle.get takes them: match options, msg_id, correl_id,
# group_id, msg_seq_number, offset, msg_token (match_for_get's parameters after ``opts``).
MatchArgs = tuple[MO | int, bytes | None, bytes | None, bytes | None, int | None, int | None, bytes | None]


def _fixed(value: bytes, length: int, what: str) -> bytes:
    """MQ identifiers are fixed-length byte arrays; shorter values are padded with NULs."""
    return checks.identifier(value, length, what)


class Match:
    """A predicate over records. Fields left ``None`` are not compared.

    ``searched`` is the set of swept blobs one search has read in full without a hit
    (the core's search_chain skips them, so a search longer than the decoded-blob cache ends).
    Whoever reuses a Match for a new get or browse clears it first, as Handle.get does.
    """

    __slots__ = ("correl_id", "group_id", "ident", "msg_id", "msg_seq_number", "offset", "searched", "selector", "seq")

    def __init__(self, ident: record.Identity):
        self.ident = ident
        self.msg_id: bytes | None = None
        self.correl_id: bytes | None = None
        self.group_id: bytes | None = None
        self.msg_seq_number: int | None = None
        self.offset: int | None = None
        self.seq: int | None = None  # from a MsgToken
        self.selector: Selector | None = None
        # Swept blobs searched in full without a hit during the current get (the core's search_chain
        # skips them); cleared at the start of each get that reuses this Match.
        self.searched: set = set()

    def __call__(self, rec: bytes) -> bool:
        if self.seq is not None and record.seq_of(rec) != self.seq:
            return False
        if self.msg_id is not None and self.ident.msg_id(rec) != self.msg_id:
            return False
        if self.correl_id is not None and record.correl_id(rec) != self.correl_id:
            return False
        if self.group_id is not None or self.msg_seq_number is not None or self.offset is not None:
            gid, seqno, off = _group_fields(rec)
            if self.group_id is not None and gid != self.group_id:
                return False
            if self.msg_seq_number is not None and seqno != self.msg_seq_number:
                return False
            if self.offset is not None and off != self.offset:
                return False
        if self.selector is not None:
            return self.selector.matches(rec, self.ident)
        return True


def _group_fields(rec: bytes) -> tuple[bytes, int, int]:
    off = record._sections(rec)[2]
    if off < 0:
        return GROUPID_NONE, 1, 0
    return _GROUP.unpack_from(rec, off)


MATCH_DEFAULT = int(MO.MATCH_MSG_ID | MO.MATCH_CORREL_ID)
_MO_KNOWN = int(MO_KNOWN)
_FLAGS_MAX = checks.FLAGS_MAX
_MATCH_MSG_ID = int(MO.MATCH_MSG_ID)
_MATCH_CORREL_ID = int(MO.MATCH_CORREL_ID)
_MATCH_GROUP_ID = int(MO.MATCH_GROUP_ID)
_MATCH_MSG_SEQ_NUMBER = int(MO.MATCH_MSG_SEQ_NUMBER)
_MATCH_OFFSET = int(MO.MATCH_OFFSET)
_MATCH_MSG_TOKEN = int(MO.MATCH_MSG_TOKEN)


_WAIT = 1  # GMO.WAIT


def match_for_get(
    ident: record.Identity,
    opts: int,
    match_options: int,
    msg_id: bytes | None,
    correl_id: bytes | None,
    group_id: bytes | None,
    msg_seq_number: int | None,
    offset: int | None,
    msg_token: bytes | None,
    selector: Selector | None = None,
    always: bool = False,
) -> Match | None:
    """The Match a get, browse or group call asks for with its match arguments and the
    handle's compiled ``selector`` (None: no selection), or None when they select nothing
    (MatchOptions left at their default and no id given), unless ``always`` (a browse or a
    handle with a selector; None is still returned when nothing narrows). One place for the
    argument rules the get, browse and group paths share: MATCH_MSG_TOKEN with GMO.WAIT is
    2331.

    :raises MQError: MATCH_OPTIONS_ERROR (2247), MSG_TOKEN_ERROR (2331), or the field's reason."""
    if (
        not always
        and match_options == MATCH_DEFAULT
        and msg_id is None
        and correl_id is None
        and msg_token is None
        and group_id is None
    ):
        return None
    # Plain ints from here: IntFlag arithmetic costs a microsecond a test on this hot path.
    if type(match_options) is int and 0 <= match_options <= _FLAGS_MAX:
        mo = match_options
    else:
        mo = int(checks.flags(match_options, "match options", Reason.MATCH_OPTIONS_ERROR))
    if mo & _MATCH_MSG_TOKEN and opts & _WAIT:
        raise MQError(Reason.MSG_TOKEN_ERROR, "MATCH_MSG_TOKEN cannot be combined with GMO.WAIT")
    if mo & ~_MO_KNOWN:
        raise MQError(
            Reason.MATCH_OPTIONS_ERROR,
            f"match options 0x{mo:x} hold undefined bits 0x{mo & ~MO_KNOWN:x}; use MO flags",
        )
    m: Match | None = None
    if mo & _MATCH_MSG_ID and msg_id is not None:
        v = _fixed(msg_id, 24, "msg_id")
        if v != MSGID_NONE:
            m = Match(ident)
            m.msg_id = v
    if mo & _MATCH_CORREL_ID and correl_id is not None:
        v = _fixed(correl_id, 24, "correl_id")
        if v != CORRELID_NONE:
            m = m or Match(ident)
            m.correl_id = v
    if mo & _MATCH_GROUP_ID and group_id is not None:
        v = _fixed(group_id, 24, "group_id")
        if v != GROUPID_NONE:
            m = m or Match(ident)
            m.group_id = v
    if mo & _MATCH_MSG_SEQ_NUMBER:
        if msg_seq_number is None:
            raise MQError(Reason.MSG_SEQ_NUMBER_ERROR, "MATCH_MSG_SEQ_NUMBER needs msg_seq_number")
        m = m or Match(ident)
        m.msg_seq_number = checks.integer(msg_seq_number, "msg_seq_number", Reason.MSG_SEQ_NUMBER_ERROR, 1, 999_999_999)
    if mo & _MATCH_OFFSET:
        if offset is None:
            raise MQError(Reason.OFFSET_ERROR, "MATCH_OFFSET needs offset")
        m = m or Match(ident)
        m.offset = checks.integer(offset, "offset", Reason.OFFSET_ERROR, 0, 999_999_999)
    if mo & _MATCH_MSG_TOKEN:
        if msg_token is None:
            raise MQError(Reason.MSG_TOKEN_ERROR, "MATCH_MSG_TOKEN needs msg_token")
        if not isinstance(msg_token, bytes | bytearray | memoryview) or len(msg_token) != 16:
            raise MQError(Reason.MSG_TOKEN_ERROR, "msg_token must be the 16 bytes a put or get returned")
        seq = ident.seq_of_token(bytes(msg_token))
        m = m or Match(ident)
        # A token of another run (or garbage) names no message: it simply matches nothing.
        m.seq = -1 if seq is None else seq
    if selector is not None and not selector.always_true:
        m = m or Match(ident)
        m.selector = selector
    return m
