"""Message groups and segments (seed 000; docs/semantics.md §2.2, §3, §5.1, §5.5, §6).

A *group* (GroupId) holds logical messages numbered by MsgSeqNumber from 1; a logical
message is one physical message or several *segments* told apart by Offset. The record
keeps all of it in its optional group section (engine/record.py). This package holds
everything groups add to put and get, so that the handle only routes to it: the positions
(``position.py``), the put side (``put.py``), the search for eligible items and their
members (``search.py``, finders for the one get path of engine/getpath.py) and the calls
that use them (``calls.py``).

Put (:func:`put`)
    MsgFlags validated (2249); LAST_MSG_IN_GROUP implies MSG_IN_GROUP and LAST_SEGMENT
    implies SEGMENT in the stored copy. With PMO.LOGICAL_ORDER the queue manager assigns
    GroupId (generated, unique), MsgSeqNumber and Offset from the handle's put
    :class:`Position` (§6.2) and refuses 2242 / 2241 / 2245 / 2185 (FAILED). Without it the
    application supplies them (GroupId NONE with a group or segment flag, or with
    SEGMENTATION_ALLOWED, gets a generated one); when the previous put on the handle used
    LOGICAL_ORDER the same reasons come back as a warning on ``PutResult.reason``. Every
    group or segment put, with or without the option, moves the position, which is how the
    seed's restart works ("LOGICAL_ORDER cannot be used for the first put, but can
    thereafter"). SEGMENTATION_ALLOWED and a message longer than the queue's (or the
    manager's) max_msg_length: the message is split into segments (Offset = bytes before
    it), all put in one step; the result describes the first segment.

Get (:func:`get`)
    GMO.LOGICAL_ORDER with the handle's get :class:`Position`: no current group → only
    items with MsgSeqNumber 1 and Offset 0 are eligible (MsgId / CorrelId / GroupId may
    choose among them); a current group → only its next item. Match fields that disagree
    with the eligible item: 2247. A syncpoint mode that differs from the group's: 2245
    (FAILED with LOGICAL_ORDER, WARNING after a call that used it). A get without
    LOGICAL_ORDER after one with it, while a group or logical message is incomplete:
    WARNING 2241 / 2242. ALL_MSGS_AVAILABLE / ALL_SEGMENTS_AVAILABLE make a group /
    logical message eligible only when all its items are present and committed (ignored
    after the first item when LOGICAL_ORDER and a group is current; ALL_MSGS implies
    ALL_SEGMENTS). COMPLETE_MSG returns whole logical messages, reassembled: the
    descriptor is the first segment's, its MsgFlags say it is the only segment
    (SEGMENT | LAST_SEGMENT), ``data_length`` is the whole length; the buffer rules of
    ACCEPT_TRUNCATED_MSG (2079 / 2080) apply to the whole.

Swept messages are found in place, never unswept: the search walks front list, the
chain's blobs (through their GroupId hashes) and the rear list of every lane; a blob it
must read comes back as a Need, which the get path reads without the lock, and is kept for
the rest of the call.

Close (:func:`closed`)
    ``Handle.close()`` returns ``Reason.NONE``, or the WARNING reason 2242 / 2241 when the
    handle leaves a logical message / group incomplete (put side first, then get side).
    MQ's MQCLOSE reports the same reasons with CC WARNING; the handle is closed either way.

Browse (:func:`browse`, §5.5; Handle.get routes cursor calls here when they carry a group
option or the handle is in a logical-order browse pass, everything else to engine/browse.py)
    BROWSE_FIRST / BROWSE_NEXT with LOGICAL_ORDER: the pass keeps its own :class:`Position`
    (``BrowseState``, separate from the get position: seed 000) and the physical position
    of its current group's first item, beyond which the next group is looked for; the
    browse cursor itself is moved as engine/browse.py moves it, so BROWSE_MSG_UNDER_CURSOR
    and MSG_UNDER_CURSOR act on the item browsed. A BROWSE_NEXT that disagrees with its
    pass's BROWSE_FIRST on LOGICAL_ORDER: 2259. COMPLETE_MSG and ALL_*_AVAILABLE apply to
    browses in either order (an incomplete group is passed over). COMPLETE_MSG with
    [BROWSE_]MSG_UNDER_CURSOR returns (or takes) the logical message that starts under the
    cursor, 2246 when the cursor is on a later segment. Group options with LOCK are
    refused (2046).

    The pieces are public for other callers (a channel's batch, say): :func:`eligible`
    (2247 before looking), :func:`locate_locked` (a finder: ``after(ref, rec) -> bool``
    restricts candidates, e.g. to beyond a cursor), :func:`check_match` (2247 after
    finding), :func:`reassembled`, :meth:`Position.advance_rec`, :func:`under_cursor`
    (2246), :func:`segments_of_locked`.

Limits: the completeness checks of ALL_* / COMPLETE_MSG find a group's members through the
queue's GroupId index when it has one (INDXTYPE(GROUPID), engine/core/index.py), else by a walk
in get order that stops as soon as the members found settle it (an incomplete group is
walked to the end: O(depth)); swept blobs are skipped through their GroupId hashes.
A group a get has started to take is remembered per queue (what left is gone, not missing)
until the queue empties or a LOGICAL_ORDER get finishes it. A backout does not move a
handle's positions back (the seed's restart path uses a STATUS queue for that). Group-option
gets (and every get on a handle while a group is current) do not requeue poison messages
(BOTHRESH): that stays with the plain get. ``get_many`` and ``put_many`` take no group
options and do not move positions.
"""

from .calls import GROUP_GMO, after_get, browse, get
from .position import BrowseState, HandleGroups, Position, closed, fields, normalise
from .put import put
from .search import (
    Eligible,
    check_match,
    eligible,
    locate_locked,
    reassembled,
    segments_of_locked,
    under_cursor,
)

__all__ = [
    "GROUP_GMO",
    "BrowseState",
    "Eligible",
    "HandleGroups",
    "Position",
    "after_get",
    "browse",
    "check_match",
    "closed",
    "eligible",
    "fields",
    "get",
    "locate_locked",
    "normalise",
    "put",
    "reassembled",
    "segments_of_locked",
    "under_cursor",
]
