"""The engine's record of one open handle (MQOPEN's Hobj), which the paths that serve a
handle's calls work on: the put path (engine/putpath.py), the get path (engine/getpath.py),
browse (engine/browse.py) and groups (engine/groups/). A module of its own, importing nothing
of those, so that each of them (and their compiled forms, which need the type at import) can
name it without an import circle. What it holds of the modules above it is typed by what
sits below: the connection as :class:`Owner` (a protocol here), the queue manager as
engine/internals.py's ``Manager``, the cursor (engine/cursor.py) and the group positions
(engine/groups/position.py) by their own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .api import QueueConnection
from .constants import OO, Reason
from .errors import MQError
from .matching import MATCH_DEFAULT, Match, MatchArgs, match_for_get

if TYPE_CHECKING:
    from .cursor import Cursor
    from .distributed.resolve import Route
    from .groups.position import BrowseState, HandleGroups
    from .internals import Manager
    from .queue import LocalQueue
    from .selector import Selector
    from .uow import UnitOfWork


class Owner(QueueConnection, Protocol):
    """The connection that opened a handle, as the handle and the paths use it: the
    connection API (engine/api.py) and the members below (engine/connection.py's
    ``Connection``, which sits above this module)."""

    @property
    def qm(self) -> Manager: ...

    @property
    def uow(self) -> UnitOfWork:
        """The connection's one unit of work, which its handles share."""
        ...

    @property
    def token(self) -> list[bool]:
        """The one-call-at-a-time token its handles' calls take (2219 otherwise)."""
        ...

    def check(self) -> None:
        """:raises MQError: 2018 once disconnected, 2009 once the queue manager is closed."""
        ...

    def close_handle(self, h: Any) -> Reason:
        """MQCLOSE of ``h`` (an engine/handle.py ``Handle``, above this module)."""
        ...


class HandleState:
    """The engine's record of one open handle: the queue, what the handle may do, its unit
    of work (its connection's), its selection string, its browse cursor and lock
    (engine/browse.py) and its group positions (engine/groups/).

    Invariants: ``closed`` only ever goes from False to True; ``cursor`` is None until the
    first browse; ``groups`` is None while no group or logical message is current on the
    handle (so the put and get hot paths test one attribute); ``match`` is the Match of the
    selection string (None: the handle selects every message); ``xmit`` is None, or, for a
    handle opened on a remote queue, the route its puts take (``queue`` is then the
    transmission queue, and each message gets a transmission header:
    engine/distributed/headers.py).
    """

    __slots__ = (
        "can_browse",
        "can_get",
        "can_put",
        "closed",
        "conn",
        "cursor",
        "gbrowse",
        "groups",
        "ident",
        "match",
        "max_msg_length",
        "qm",
        "queue",
        "recorder",
        "selector",
        "sequence",
        "uow",
        "wall",
        "xmit",
    )

    def __init__(self, conn: Owner, queue: LocalQueue, options: int, input_mode: int, selector: Selector | None):
        self.conn = conn
        qm = self.qm = conn.qm
        # What the put and get paths read of the queue manager on every call, kept here (none
        # of it changes while the queue manager is open).
        self.ident = qm.ident
        self.sequence = qm.sequence
        self.wall = qm.clock.wall
        self.max_msg_length = qm.max_msg_length
        self.recorder = qm.recorder
        self.uow = conn.uow
        self.queue = queue
        self.selector = selector
        no_ids = (None, None, None, None, None, None)
        self.match: Match | None = match_for_get(self.qm.ident, 0, 0, *no_ids, selector, always=True)
        self.can_get = bool(input_mode)
        self.can_browse = bool(options & OO.BROWSE)
        self.can_put = bool(options & OO.OUTPUT)
        self.closed = False
        self.cursor: Cursor | None = None
        self.groups: HandleGroups | None = None
        self.gbrowse: BrowseState | None = None
        self.xmit: Route | None = None

    def closed_error(self) -> MQError:
        """The error of a call on this handle once it (or its connection, or the queue
        manager) is closed: 2009, 2018 or 2019, whichever applies first."""
        self.conn.check()
        return MQError(Reason.HOBJ_ERROR, f"handle for {self.queue.name!r} is closed; open it again")

    def match_for(self, opts: int, match_args: MatchArgs) -> Match | None:
        """The Match of a call with get's match arguments ``(match, msg_id, correl_id,
        group_id, msg_seq_number, offset, msg_token)``, narrowed by the selection string."""
        if match_args[0] == MATCH_DEFAULT and not any(a is not None for a in match_args[1:]):
            m = self.match
            if m is not None:
                m.searched.clear()  # a new call searches every blob again
            return m
        return match_for_get(self.qm.ident, opts, *match_args, self.selector)
