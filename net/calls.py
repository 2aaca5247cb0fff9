"""What the thread client (net/client.py) and the asyncio client (net/aio.py) share: the
address forms, the handshake, turning replies into the engine's result objects, and the
client-side rules of a connection (closed handles, a unit of work lost to a reconnect).

Pure functions and small state objects: no I/O here.
"""

from __future__ import annotations

import inspect
import math
import os
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sweepq.engine import GMO, MD, OO, PMO, Message, MQError, PutResult, Reason
from sweepq.engine.cursor import Status
from sweepq.engine.handle import Handle
from sweepq.engine.record import Identity, data_of

from . import protocol as P

_PUT_SYNC = int(PMO.SYNCPOINT)
_GET_SYNC = int(GMO.SYNCPOINT | GMO.SYNCPOINT_IF_PERSISTENT)
_WAIT = int(GMO.WAIT)
_BROWSE = int(GMO.BROWSE_FIRST | GMO.BROWSE_NEXT | GMO.BROWSE_MSG_UNDER_CURSOR | GMO.LOCK | GMO.UNLOCK)

RECONNECT = 30.0  # seconds a reconnecting client tries for (``reconnect=True``)
FIRST_DELAY = 0.02  # the backoff between attempts: doubling from this ...
MAX_DELAY = 1.0  # ... up to this
# What a connect may meet while the server restarts: worth another attempt.
RETRY_CONNECT = frozenset({Reason.HOST_NOT_AVAILABLE, Reason.CONNECTION_BROKEN, Reason.MAX_CONNS_LIMIT_REACHED})


def reconnect_bound(value: object) -> float:
    """Seconds a client tries to connect again after a break: ``True`` is :data:`RECONNECT`,
    ``False`` or 0 none (the call fails fast with 2009).

    :raises MQError: PARM_VALUE_ERROR (3229) for anything but a bool or seconds >= 0."""
    if value is True:
        return RECONNECT
    if value is False or value is None:
        return 0.0
    if isinstance(value, int | float) and math.isfinite(value) and value >= 0:
        return float(value)
    raise MQError(Reason.PARM_VALUE_ERROR, f"reconnect={value!r}: give True, False or the seconds to try for (>= 0)")


def url_reconnect(url: str, default: float = RECONNECT) -> float:
    """The reconnect bound a URL names (``tcp://host:port?reconnect=5``; how
    ``Queue(url=)`` is given one), else ``default``.

    :raises MQError: PARM_VALUE_ERROR (3229) for a value that is not seconds >= 0."""
    from urllib.parse import parse_qs

    values = parse_qs(urlsplit(url).query).get("reconnect") if isinstance(url, str) else None
    if not values:
        return default
    try:
        seconds = float(values[-1])
    except ValueError:
        seconds = -1.0
    return reconnect_bound(seconds)


def backoff(delay: float) -> float:
    """The wait after ``delay`` between two connect attempts."""
    return min(MAX_DELAY, delay * 2)


class Attempts:
    """The connect attempts of one reconnect after a break, for both clients (the thread
    client sleeps, the asyncio one awaits): the wait after each failed attempt, doubling
    from :data:`FIRST_DELAY` up to :data:`MAX_DELAY`, for up to ``bound`` seconds of the
    ``clock``. Invariant: a wait is given only when the attempt after it starts within
    the bound.

    :raises MQError: CONNECTION_BROKEN (2009) at once when ``bound`` is 0 (no reconnect)."""

    __slots__ = ("_address", "_bound", "_clock", "_deadline", "_delay", "_why")

    def __init__(self, address: Address, why: object, bound: float, clock: Callable[[], float]):
        if not bound:
            raise broken(address, why, 0)
        self._address = address
        self._why = why
        self._bound = bound
        self._clock = clock
        self._deadline = clock() + bound
        self._delay = FIRST_DELAY

    def wait_after(self, e: MQError) -> float:
        """The seconds to wait before the next attempt, after one that failed with ``e``.

        :raises MQError: CONNECTION_BROKEN (2009): ``e`` is not worth another attempt (not
            one of :data:`RETRY_CONNECT`), or the next attempt would start past the bound."""
        delay = self._delay
        if e.reason not in RETRY_CONNECT or self._clock() + delay > self._deadline:
            raise broken(self._address, self._why, self._bound) from None
        self._delay = backoff(delay)
        return delay


def closes_on_reopen(e: MQError) -> bool:
    """Whether a handle whose reopen after a reconnect failed with ``e`` is closed for good
    (its queue is gone: a temporary queue opened by name), rather than kept for the next
    reconnect (the server went again: ``e`` is one of :data:`RETRY_CONNECT`)."""
    return e.reason not in RETRY_CONNECT


@dataclass(frozen=True)
class Address:
    """Where a server listens: ``unix:///path/to/sock``, ``tcp://host:port``, ``tls://host:port``."""

    scheme: str
    path: str = ""
    host: str = ""
    port: int = 0

    @classmethod
    def parse(cls, url: str) -> Address:
        """:raises MQError: PARM_VALUE_ERROR (3229) naming the forms that work."""
        forms = "use unix:///path/to/sweepq.sock, tcp://host:port or tls://host:port"
        if not isinstance(url, str):
            raise MQError(Reason.PARM_VALUE_ERROR, f"the server address must be a str; {forms}")
        parts = urlsplit(url)
        if parts.scheme == "unix" and (parts.path or parts.netloc):
            return cls("unix", path=parts.netloc + parts.path)
        if parts.scheme in ("tcp", "tls"):
            try:
                port = parts.port
            except ValueError:
                port = None
            if parts.hostname and port is not None:
                return cls(parts.scheme, host=parts.hostname, port=port)
        raise MQError(Reason.PARM_VALUE_ERROR, f"server address {url!r}: {forms}")

    def __str__(self) -> str:
        return f"unix://{self.path}" if self.scheme == "unix" else f"{self.scheme}://{self.host}:{self.port}"


def tls_context(address: Address, tls: ssl.SSLContext | None, cafile: str | None) -> ssl.SSLContext | None:
    """The client's TLS context for a ``tls://`` address (None for the others)."""
    if address.scheme != "tls":
        return None
    return tls if tls is not None else ssl.create_default_context(cafile=cafile)


@dataclass(frozen=True)
class Endpoint:
    """What a client's ``connect`` was given: where, with which tokens, how (both clients)."""

    address: Address
    token: str | None
    admin_token: str | None
    reconnect: float  # seconds to try to connect again after a break (0: never)
    tls: ssl.SSLContext | None
    client: str | None
    timeout: float

    @classmethod
    def of(cls, url, token, admin_token, reconnect, tls, cafile, client, timeout) -> Endpoint:
        address = Address.parse(url)
        bound = reconnect_bound(reconnect)
        return cls(address, token, admin_token, bound, tls_context(address, tls, cafile), client, timeout)

    def hello(self, cancel: bool) -> bytes:
        """The handshake frame: the tokens, who this is, and whether it may cancel a waiting get."""
        args = {"token": self.token, "admin_token": self.admin_token, "pid": os.getpid(), "cancel": cancel}
        return P.request(P.HELLO, {**args, "client": self.client or ""})


@dataclass
class ServerInfo:
    """What the handshake told: the queue manager's name, its run's identity (for MsgIds and
    tokens), this connection's number, the limits, and whether it may administer."""

    qm: str
    ident: Identity
    conn: int
    max_frame: int
    max_handles: int
    admin: bool

    @classmethod
    def from_reply(cls, value: dict) -> ServerInfo:
        return cls(
            value["qm"],
            Identity(bytes(value["run_id"])),
            value["conn"],
            value["max_frame"],
            value["max_handles"],
            bool(value.get("admin")),
        )


def connect_error(address: Address, e: BaseException) -> MQError:
    return MQError(
        Reason.HOST_NOT_AVAILABLE,
        f"cannot connect to {address}: {getattr(e, 'strerror', None) or e}; is 'sweepq serve' running there?",
    )


def broken(address: Address, why: object, reconnect: float) -> MQError:
    if reconnect:
        then = f"it did not come back within reconnect={reconnect:g} s; the next call tries again"
    else:
        then = "connect again, or connect with reconnect=True"
    return MQError(
        Reason.CONNECTION_BROKEN,
        f"the connection to {address} broke ({why}): the server stopped or the network failed; any unit of "
        f"work it held was backed out in the server; {then}",
    )


class FateUnknown(MQError):
    """A put or get sent before its connection broke, whose reply never came, and which could
    not be sent again within the reconnect bound: it may or may not have been done (reason
    CONNECTION_BROKEN, 2009). Sent again on a connection made later, it is done at most once
    (net/once.py) — but that is this object's producer id's, which a new connection lacks."""


def fate_unknown(address: Address, why: object, reconnect: float) -> FateUnknown:
    return FateUnknown(
        Reason.CONNECTION_BROKEN,
        f"the connection to {address} broke ({why}) before this call's reply came, and the server was not back "
        f"within reconnect={reconnect:g} s: the call may or may not have been done",
    )


def lost_unit_of_work() -> MQError:
    """A call under syncpoint that met a break while a unit of work was open."""
    return MQError(
        Reason.BACKED_OUT,
        "the connection broke and was made again: the unit of work it held was backed out in the server; "
        "call backout() (or commit(), which reports this) before new work under syncpoint",
    )


# What a reconnected client does with the request whose reply it never read.
RESEND = 0  # send it again (as it is, or ONCE with ``again``): nothing of it was done twice
DONE = 1  # nothing to do: the broken connection did it (a backout, a close)


def after_break(op: int, args: list, uow: UnitOfWork) -> int:
    """What to do with request ``op`` after a reconnect (see :data:`RESEND`, :data:`DONE`).

    :raises MQError: BACKED_OUT (2003) for work under syncpoint in a unit of work the break
        backed out (the caller holds a unit of work and must hear of it)."""
    if op == P.ONCE:
        args[2] = True  # again: the server answers from its record if it was done
        return RESEND
    if op in (P.BACKOUT, P.CLOSE, P.BYE):
        return DONE
    if uow.lost and op in _SYNC_AT and _sync(op, args):
        raise lost_unit_of_work()
    return RESEND


_SYNC_AT = {P.PUT: (3, _PUT_SYNC), P.PUT_MANY: (3, _PUT_SYNC), P.GET: (1, _GET_SYNC), P.GET_MANY: (2, _GET_SYNC)}


def _sync(op: int, args: list) -> bool:
    at, bits = _SYNC_AT[op]
    options = args[at]
    return isinstance(options, int) and bool(int(options) & bits)


def once_op(op: int, args: list, syncpoint: bool) -> bool:
    """Whether a reconnecting client sends this handle call as ONCE: a put or a get that
    takes a message, outside syncpoint (under syncpoint a break backs it out)."""
    if syncpoint:
        return False
    if op in (P.GET, P.GET_MANY):
        options = args[1 if op == P.GET else 2]
        return isinstance(options, int) and not int(options) & _BROWSE
    return op in (P.PUT, P.PUT_MANY)


def disconnected() -> MQError:
    return MQError(Reason.HCONN_ERROR, "this connection is disconnected; connect again")


def closed_twice(name: str) -> MQError:
    return MQError(Reason.HOBJ_ERROR, f"handle for {name!r} is already closed")


def handle_closed(name: str) -> MQError:
    return MQError(Reason.HOBJ_ERROR, f"handle for {name!r} is closed; open it again")


# -- the calls of a handle: (op, arguments, under syncpoint?, how to read the reply) ---------------
# Both clients run these with their own transport (``_run``), so each call is written once.


def put(hid: int, data, md, options) -> tuple:
    return P.PUT, [hid, data, md, options], put_sync(options), put_result


def put_many(hid: int, datas, md, options) -> tuple:
    return P.PUT_MANY, [hid, datas, md, options], put_sync(options), put_results


def get(hid: int, args: tuple, named: dict) -> tuple:
    """A get's request: its arguments bound by the engine's own signature (``bind_get``)."""
    wire = bind_get(args, named)
    return P.GET, [hid, *wire], get_sync(wire[0]), message


# The parameters of a get, read from the one implementation (engine/handle.py ``Handle._get``;
# engine/api.py ``GetCall`` is its type): the request carries all ten, in this order.
_GET_SIGNATURE = inspect.signature(Handle._get)
_GET_NAMES = tuple(_GET_SIGNATURE.parameters)[1:]  # after self
_GET_DEFAULTS = tuple(p.default for p in _GET_SIGNATURE.parameters.values())[1:]
_GET_INDEX = {name: i for i, name in enumerate(_GET_NAMES)}


def bind_get(args: tuple, named: dict) -> list:
    """The ten arguments of ``get(*args, **named)`` in order, defaults filled in: what
    Python's binding of ``Handle._get`` gives, with its TypeErrors, without its cost."""
    n = len(args)
    if n > len(_GET_NAMES):
        raise TypeError(f"get() takes at most {len(_GET_NAMES)} arguments ({n} given)")
    wire = [*args, *_GET_DEFAULTS[n:]]
    for name, value in named.items():
        i = _GET_INDEX.get(name, -1)
        if i < 0:
            raise TypeError(f"get() got an unexpected keyword argument {name!r}")
        if i < n:
            raise TypeError(f"get() got multiple values for argument {name!r}")
        wire[i] = value
    return wire


def get_many(hid: int, max_messages, options, wait_interval) -> tuple:
    return P.GET_MANY, [hid, max_messages, options, wait_interval], get_sync(options), messages


class HandleCalls:
    """A client handle's message calls, written once for both clients: each builds its request
    (the functions above) and hands it to its connection's ``_run``, which is a round trip for
    the thread client and a coroutine (so the call returns an awaitable) for the asyncio one.
    The signatures are the in-process Handle's (engine/api.py ``QueueHandle``)."""

    __slots__ = ()

    @property
    def connection(self):
        """The connection this handle was opened on (its unit of work is the handle's)."""
        return self._conn

    def _do(self, spec: tuple):
        if self._closed:
            raise self._closed_error()
        return self._conn._run(spec, self._ident)

    def put(self, data: bytes, md: MD | None = None, options: PMO | int = 0):
        """MQPUT (see :meth:`sweepq.engine.Handle.put`): a PutResult."""
        return self._do(put(self._hid, data, md, options))

    def put_many(self, datas: Sequence[bytes], md: MD | None = None, options: PMO | int = 0):
        """MQPUT of a batch in one round trip: a list of PutResult."""
        return self._do(put_many(self._hid, datas, md, options))

    def get(self, *args: Any, **named: Any) -> Any:
        """MQGET (see :meth:`sweepq.engine.Handle.get`): a Message, or a Status for UNLOCK."""
        return self._do(get(self._hid, args, named))

    get.__signature__ = _GET_SIGNATURE  # type: ignore[attr-defined]  # help() shows the engine's

    def get_many(self, max_messages: int, options: GMO | int = 0, wait_interval: int = -1):
        """MQGET of up to ``max_messages`` in one round trip: a list of Message."""
        return self._do(get_many(self._hid, max_messages, options, wait_interval))


def waits(options: object) -> bool:
    """A get that waits in the server (the asyncio client may cancel it)."""
    return isinstance(options, int) and bool(int(options) & _WAIT)


def put_result(value: list, ident: Identity) -> PutResult:
    return PutResult.many([value[1]], ident, value[0])[0]


def put_results(value: list, ident: Identity) -> list[PutResult]:
    reason, headers = value
    return PutResult.many(headers, ident, reason)


def message(value: list, ident: Identity):
    """A get's reply (net/session.py ``message_to_wire``) as the engine's Message or Status."""
    if value[0] == "s":
        return Status(value[1])
    _, rec, data, reason, read_at = value
    return Message.make(rec, ident, data_of(rec) if data is None else data, reason, read_at)


def messages(records: list, ident: Identity) -> list[Message]:
    return Message.many(records, ident)


class UnitOfWork:
    """The client's view of its unit of work: whether one is open (a call under syncpoint
    succeeded since the last commit or backout), and whether a reconnect lost it.

    After a reconnect that lost one, every call under syncpoint and ``commit`` fail with
    MQRC_BACKED_OUT (2003) until ``commit`` (which reports it) or ``backout``: work is never
    silently half done."""

    def __init__(self) -> None:
        self.open = False
        self.lost = False

    def commit_lost(self) -> MQError | None:
        """For commit: the 2003 to raise when a reconnect lost the unit of work (then forgotten)."""
        if not self.lost:
            return None
        self.ended()
        return MQError(
            Reason.BACKED_OUT,
            "the connection broke and was made again: the unit of work was backed out in the server, not committed",
        )

    def check(self, syncpoint: bool) -> None:
        if self.lost and syncpoint:
            raise lost_unit_of_work()

    def did(self, syncpoint: bool) -> None:
        if syncpoint:
            self.open = True

    def ended(self) -> None:
        self.open = self.lost = False

    def broke(self) -> None:
        self.lost = self.lost or self.open
        self.open = False


def put_sync(options: object) -> bool:
    if type(options) is int:  # the usual case, without the three calls below
        return options & _PUT_SYNC != 0
    return isinstance(options, int) and bool(int(options) & _PUT_SYNC)


def get_sync(options: object) -> bool:
    if type(options) is int:
        return options & _GET_SYNC != 0
    return isinstance(options, int) and bool(int(options) & _GET_SYNC)


def open_options(value: int) -> OO:
    return OO(value)
