"""The definitions of distributed queuing, as MQ has them (docs/channels.md "Objects").

* :class:`QmgrAttributes` — the queue manager's own object: its name (kept in the data
  directory; the MsgIds it generates carry it), its default transmission queue (DEFXMITQ)
  and its dead-letter queue (DEADQ);
* :class:`RemoteQueue` — DEFINE QREMOTE: a name that stands for a queue on another queue
  manager (RNAME, RQMNAME, XMITQ); with no remote queue it is a *queue-manager alias*;
* :class:`ChannelDefinition` — DEFINE CHANNEL of a sender (where its partner listens, its
  transmission queue, batch size and interval, heartbeat, disconnect interval, retries,
  NPMSPEED) or a receiver.

Each ``validated()`` returns the definition with enums coerced, or raises MQError
PARM_VALUE_ERROR (3229) naming the field. ``encode``/``decode`` are the JSON kept in the
store (engine/distributed/registry.py), enums as their values.

Times: ``batch_interval`` is in milliseconds (as MQ's BATCHINT); the other intervals are in
seconds (MQ's HBINT, DISCINT, SHORTTMR, LONGTMR), and may have a fraction.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace

from .. import checks
from ..constants import ChannelType, NpSpeed, Reason
from ..errors import MQError

MAX_QMGR_NAME = 48
MAX_CHANNEL_NAME = 20
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/%")
CONNAME_SCHEMES = ("tcp://", "tls://", "unix://")


def _bad(what: str, why: str) -> MQError:
    return MQError(Reason.PARM_VALUE_ERROR, f"{what}: {why}")


def object_name(value: object, what: str, longest: int, reason: Reason = Reason.PARM_VALUE_ERROR) -> str:
    """A name of MQ's characters (A-Z a-z 0-9 . _ / %), 1 to ``longest`` of them."""
    if not isinstance(value, str) or not 1 <= len(value) <= longest or set(value) - _NAME_CHARS:
        raise MQError(reason, f"{what} {value!r:.60}: 1..{longest} characters from A-Z a-z 0-9 . _ / %")
    return value


def optional_name(value: object, what: str, longest: int = 48) -> str:
    """A name, or "" for none."""
    if value == "":
        return ""
    return object_name(value, what, longest)


def seconds(value: object, what: str, high: float = 999_999) -> float:
    """A time in seconds: an int or float in 0..``high``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= high:
        raise _bad(what, f"{value!r:.40} is not a number of seconds in 0..{high:g}")
    return value


@dataclass(frozen=True)
class QmgrAttributes:
    """The queue manager's own attributes (MQ's QMGR object)."""

    name: str = "QM1"
    default_xmit_queue: str = ""  # DEFXMITQ: where a message for an unknown queue manager goes
    dead_letter_queue: str = ""  # DEADQ: where a receiver puts what it cannot deliver

    def validated(self) -> QmgrAttributes:
        object_name(self.name, "queue manager name", MAX_QMGR_NAME, Reason.Q_MGR_NAME_ERROR)
        optional_name(self.default_xmit_queue, "default_xmit_queue")
        optional_name(self.dead_letter_queue, "dead_letter_queue")
        return self


@dataclass(frozen=True)
class RemoteQueue:
    """DEFINE QREMOTE: messages put to it go to ``remote_queue`` on ``remote_qmgr``, through
    ``xmit_queue`` (or, when that is "", the transmission queue name resolution finds for
    ``remote_qmgr``). With ``remote_queue`` "", it is a queue-manager alias: its name stands
    for ``remote_qmgr`` (reached through ``xmit_queue`` when given)."""

    remote_queue: str = ""  # RNAME
    remote_qmgr: str = ""  # RQMNAME
    xmit_queue: str = ""  # XMITQ

    def validated(self) -> RemoteQueue:
        optional_name(self.remote_queue, "remote_queue")
        optional_name(self.xmit_queue, "xmit_queue")
        if self.remote_qmgr == "" and self.remote_queue:
            raise _bad("remote_qmgr", "a remote queue needs the name of the queue manager that holds it")
        optional_name(self.remote_qmgr, "remote_qmgr", MAX_QMGR_NAME)
        if not (self.remote_qmgr or self.xmit_queue):
            raise _bad("remote_qmgr", "a queue-manager alias needs remote_qmgr or xmit_queue")
        return self

    @property
    def is_qmgr_alias(self) -> bool:
        return not self.remote_queue


@dataclass(frozen=True)
class ChannelDefinition:
    """DEFINE CHANNEL (MQ attribute in brackets). A sender needs ``conname`` and ``xmit_queue``;
    a receiver uses neither. ``token`` is what the partner's server asks of a TCP client
    (docs/clients.md "Security"; kept in this data directory, private to its owner as the
    server's own token file is); ``cafile`` checks a ``tls://`` partner's certificate."""

    type: ChannelType = ChannelType.SENDER  # CHLTYPE
    conname: str = ""  # CONNAME: tcp://host:port, tls://host:port or unix:///path of the partner
    xmit_queue: str = ""  # XMITQ
    batch_size: int = 50  # BATCHSZ
    batch_interval: int = 0  # BATCHINT, ms: how long a batch stays open for more messages
    heartbeat: float = 300  # HBINT, s: an idle channel checks its partner this often
    disconnect_interval: float = 6000  # DISCINT, s: an idle channel ends (0: never)
    short_retry: int = 10  # SHORTRTY
    short_interval: float = 60  # SHORTTMR, s
    long_retry: int = 999_999_999  # LONGRTY
    long_interval: float = 1200  # LONGTMR, s
    np_speed: NpSpeed = NpSpeed.FAST  # NPMSPEED
    token: str = ""
    cafile: str = ""

    def validated(self) -> ChannelDefinition:
        try:
            out = replace(self, type=ChannelType(self.type), np_speed=NpSpeed(self.np_speed))
        except ValueError as e:
            raise _bad("channel type or np_speed", str(e)) from None
        checks.integer(out.batch_size, "batch_size", Reason.PARM_VALUE_ERROR, 1, 9999)
        checks.integer(out.batch_interval, "batch_interval (ms)", Reason.PARM_VALUE_ERROR, 0, 999_999_999)
        for f in ("short_retry", "long_retry"):
            checks.integer(getattr(out, f), f, Reason.PARM_VALUE_ERROR, 0, 999_999_999)
        for f in ("heartbeat", "disconnect_interval", "short_interval", "long_interval"):
            seconds(getattr(out, f), f"{f} (seconds)")
        for f in ("token", "cafile", "conname"):
            if not isinstance(getattr(out, f), str):
                raise _bad(f, "must be a str")
        if out.type == ChannelType.SENDER:
            if not out.conname.startswith(CONNAME_SCHEMES):
                raise _bad(
                    "conname", f"{out.conname!r:.60}: a sender needs tcp://host:port, tls://host:port or unix:///path"
                )
            object_name(out.xmit_queue, "xmit_queue", 48)
        return out


def encode(obj: QmgrAttributes | RemoteQueue | ChannelDefinition) -> bytes:
    """The JSON of a definition as the store keeps it (enums as their values)."""
    return json.dumps(
        {k: v.value if isinstance(v, ChannelType | NpSpeed) else v for k, v in asdict(obj).items()}
    ).encode()


def decode(cls: type, value: bytes):
    """A definition read back (fields it does not know are left out: a newer version's).

    :raises MQError: PARM_VALUE_ERROR when a field fails validation; ValueError, TypeError
        when the JSON is damaged (the caller reports it)."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in json.loads(value).items() if k in known}).validated()


def changed(obj, changes: dict, what: str):
    """``obj`` with ``changes`` (field names of its class), validated.

    :raises MQError: PARM_VALUE_ERROR naming an unknown field or a bad value."""
    known = {f.name for f in fields(obj)}
    unknown = set(changes) - known
    if unknown:
        raise _bad(what, f"unknown attribute(s) {sorted(unknown)}; known: {sorted(known)}")
    return replace(obj, **changes).validated()
