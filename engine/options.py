"""Option-combination rules for MQGET, MQPUT and MQOPEN (docs/semantics.md §4), as pure functions.

Each checker returns ``None`` when the combination is valid, otherwise the text of the
MQRC_OPTIONS_ERROR (2046) that says what to change. Results are memoised per option word:
an application uses a handful of combinations, so the hot path pays one dict lookup.

No option is accepted and ignored. An option whose feature sweepq does not have is refused
with 2046 and a text that says so (``NOT_BUILT``: data conversion, signals, message context,
alternate user authority, cooperative browsing). The options accepted without any visible
effect are those whose effect is what sweepq always does: FAIL_IF_QUIESCING (a closing queue
manager ends every call and every wait at once, 2009), PMO.DEFAULT_CONTEXT / NO_CONTEXT
(there are no context fields), OO.BIND_* (no clusters: MQ ignores them for a local queue),
OO.READ_AHEAD / NO_READ_AHEAD (MQ ignores them outside client connections) and
OO.RESOLVE_LOCAL_Q (a local queue resolves to itself).
"""

from __future__ import annotations

from functools import lru_cache

from .constants import GMO, GMO_KNOWN, OO, OO_KNOWN, PMO, PMO_KNOWN


def _names(flag_type, bits: int) -> str:
    return "|".join(f.name for f in flag_type if f.value and bits & f.value == f.value) or "0"


_NOT_BUILT_GMO = {
    GMO.CONVERT: "data conversion (CONVERT) is not built: message data is bytes; convert it in the application",
    GMO.SET_SIGNAL: "signals (SET_SIGNAL) are not built: use WAIT with a wait_interval, or sweepq.aio",
}
_CONTEXT_TEXT = "message context (PASS_*/SET_*_CONTEXT, SAVE_ALL_CONTEXT) is not built: MD carries no context fields"
_NOT_BUILT_PMO = {
    PMO.PASS_IDENTITY_CONTEXT | PMO.PASS_ALL_CONTEXT | PMO.SET_IDENTITY_CONTEXT | PMO.SET_ALL_CONTEXT: _CONTEXT_TEXT,
    PMO.ALTERNATE_USER_AUTHORITY: "alternate user authority (ALTERNATE_USER_AUTHORITY) is not built",
}
_NOT_BUILT_OO = {
    OO.SAVE_ALL_CONTEXT
    | OO.PASS_IDENTITY_CONTEXT
    | OO.PASS_ALL_CONTEXT
    | OO.SET_IDENTITY_CONTEXT
    | OO.SET_ALL_CONTEXT: _CONTEXT_TEXT,
    OO.ALTERNATE_USER_AUTHORITY: "alternate user authority (ALTERNATE_USER_AUTHORITY) is not built",
    OO.CO_OP: "cooperative browsing (CO_OP, MARK_BROWSE_CO_OP) is not built: use browse locks (GMO.LOCK)",
}


def _not_built(opts: int, table: dict) -> str | None:
    for bits, text in table.items():
        if opts & bits:
            return text
    return None


@lru_cache(maxsize=1024)
def check_get(opts: int) -> str | None:
    """§4.1 rules 1-9, then the options sweepq does not have."""
    if opts & ~GMO_KNOWN:
        return f"get options 0x{opts:x} hold undefined bits 0x{opts & ~GMO_KNOWN:x}"
    sync = opts & (GMO.SYNCPOINT | GMO.NO_SYNCPOINT | GMO.SYNCPOINT_IF_PERSISTENT)
    if sync & (sync - 1):
        return f"give at most one of SYNCPOINT, NO_SYNCPOINT, SYNCPOINT_IF_PERSISTENT ({_names(GMO, sync)})"
    browse_opts = GMO.BROWSE_FIRST | GMO.BROWSE_NEXT | GMO.BROWSE_MSG_UNDER_CURSOR
    cursor = opts & (browse_opts | GMO.MSG_UNDER_CURSOR)
    if cursor & (cursor - 1):
        return f"give at most one browse / cursor option ({_names(GMO, cursor)})"
    if opts & GMO.SYNCPOINT and opts & (browse_opts | GMO.LOCK | GMO.UNLOCK):
        return "SYNCPOINT cannot be combined with a browse, LOCK or UNLOCK; drop SYNCPOINT"
    if opts & GMO.SYNCPOINT_IF_PERSISTENT and opts & (browse_opts | GMO.COMPLETE_MSG | GMO.UNLOCK):
        return "SYNCPOINT_IF_PERSISTENT cannot be combined with a browse, COMPLETE_MSG or UNLOCK"
    if opts & GMO.MARK_SKIP_BACKOUT and not opts & GMO.SYNCPOINT:
        return "MARK_SKIP_BACKOUT needs SYNCPOINT: only a get inside a unit of work can skip backout"
    if opts & GMO.WAIT and opts & GMO.SET_SIGNAL:
        return "WAIT and SET_SIGNAL cannot be combined"
    if opts & GMO.LOCK and not opts & browse_opts:
        return "LOCK needs BROWSE_FIRST, BROWSE_NEXT or BROWSE_MSG_UNDER_CURSOR"
    if opts & GMO.UNLOCK and opts & ~(GMO.UNLOCK | GMO.NO_SYNCPOINT):
        return "UNLOCK is a call of its own: only NO_SYNCPOINT may accompany it"
    return _not_built(opts, _NOT_BUILT_GMO)


@lru_cache(maxsize=1024)
def check_put(opts: int) -> str | None:
    """§4.2."""
    if opts & ~PMO_KNOWN:
        return f"put options 0x{opts:x} hold undefined bits 0x{opts & ~PMO_KNOWN:x}"
    if opts & PMO.SYNCPOINT and opts & PMO.NO_SYNCPOINT:
        return "give SYNCPOINT or NO_SYNCPOINT, not both"
    ctx = opts & (
        PMO.DEFAULT_CONTEXT
        | PMO.NO_CONTEXT
        | PMO.PASS_ALL_CONTEXT
        | PMO.PASS_IDENTITY_CONTEXT
        | PMO.SET_ALL_CONTEXT
        | PMO.SET_IDENTITY_CONTEXT
    )
    if ctx & (ctx - 1):
        return f"give at most one context option ({_names(PMO, ctx)})"
    return _not_built(opts, _NOT_BUILT_PMO)


INPUT_OPTS = OO.INPUT_AS_Q_DEF | OO.INPUT_SHARED | OO.INPUT_EXCLUSIVE


@lru_cache(maxsize=256)
def check_open(opts: int) -> str | None:
    """§4.3."""
    if opts & ~OO_KNOWN:
        return f"open options 0x{opts:x} hold undefined bits 0x{opts & ~OO_KNOWN:x}"
    access = INPUT_OPTS | OO.BROWSE | OO.INQUIRE | OO.OUTPUT | OO.SET
    if not opts & access:
        return "give at least one of BROWSE, INPUT_*, INQUIRE, OUTPUT, SET"
    inp = opts & INPUT_OPTS
    if inp & (inp - 1):
        return f"give at most one INPUT_* option ({_names(OO, inp)})"
    if opts & OO.SAVE_ALL_CONTEXT and not inp:
        return "SAVE_ALL_CONTEXT needs an INPUT_* option"
    ctx = OO.SET_IDENTITY_CONTEXT | OO.SET_ALL_CONTEXT | OO.PASS_IDENTITY_CONTEXT | OO.PASS_ALL_CONTEXT
    if opts & ctx and not opts & OO.OUTPUT:
        return "SET_*/PASS_*_CONTEXT need OUTPUT"
    if opts & OO.CO_OP and not opts & OO.BROWSE:
        return "CO_OP needs BROWSE"
    read_ahead = opts & (OO.READ_AHEAD | OO.NO_READ_AHEAD)
    if read_ahead & (read_ahead - 1):
        return "give at most one of READ_AHEAD, NO_READ_AHEAD"
    bind = opts & (OO.BIND_ON_OPEN | OO.BIND_NOT_FIXED | OO.BIND_ON_GROUP)
    if bind & (bind - 1):
        return "give at most one BIND_* option"
    return _not_built(opts, _NOT_BUILT_OO)
