"""Checks of what an application passes in: a wrong type or value is an ``MQError`` with the
reason MQ gives for that field, never a ``TypeError``, ``ValueError`` or ``OverflowError``
from deep inside the engine.

MQ's fields are C integers (MQLONG, 32 bits) and fixed-length byte arrays, so a float, a
string or a bool where MQ has an integer is refused, as is an integer MQ could not hold.
Identifiers shorter than their field are padded with NULs, as MQ's C structures and the
pymqi binding do; longer ones are refused.
"""

from __future__ import annotations

from typing import TypeGuard

from .constants import Reason
from .errors import MQError

MQLONG_MAX = 2**31 - 1
FLAGS_MAX = 2**32 - 1


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def flags(value: object, what: str, reason: Reason = Reason.OPTIONS_ERROR) -> int:
    """A set of option flags: an int (or IntFlag) of at most 32 bits."""
    if _is_int(value) and 0 <= value <= FLAGS_MAX:
        return int(value)
    if _is_int(value):
        raise MQError(reason, f"{what} {value}: not a 32-bit set of flags")
    raise MQError(reason, f"{what} must be flags (an int, e.g. from the option enums), not {type(value).__name__}")


def integer(value: object, what: str, reason: Reason, low: int, high: int = MQLONG_MAX) -> int:
    """An MQLONG-sized integer in ``low..high``."""
    if not _is_int(value):
        raise MQError(reason, f"{what} must be an int, not {type(value).__name__} ({value!r:.40})")
    if not low <= value <= high:
        raise MQError(reason, f"{what} {value} is outside {low}..{high}")
    return int(value)


def boolean(value: object, what: str, reason: Reason = Reason.PARM_VALUE_ERROR) -> bool:
    """A bool, and only a bool: "no" is not False."""
    if not isinstance(value, bool):
        raise MQError(reason, f"{what} must be True or False, not {type(value).__name__} ({value!r:.40})")
    return value


def identifier(value: object, length: int, what: str, reason: Reason = Reason.MD_ERROR) -> bytes:
    """A fixed-length identifier: bytes of at most ``length``, padded with NULs."""
    if not isinstance(value, bytes | bytearray | memoryview):
        raise MQError(reason, f"{what} must be bytes, not {type(value).__name__}")
    value = bytes(value)
    if len(value) > length:
        raise MQError(reason, f"{what} is {len(value)} bytes; at most {length} allowed")
    return value.ljust(length, b"\0")


def name(value: object, what: str = "queue name") -> str:
    """An object name: a str (its characters are checked where names are defined)."""
    if not isinstance(value, str):
        raise MQError(Reason.UNKNOWN_OBJECT_NAME, f"{what} must be a str, not {type(value).__name__}")
    return value


MAX_NAME = 48
"""The longest queue name, in characters (MQ's MQ_Q_NAME_LENGTH)."""
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/%")


def check_name(name: str) -> str:
    """``name`` when it is a queue name by MQ's rule (1..48 characters from A-Z a-z 0-9 . _ /
    %), else an MQError (PARM_VALUE_ERROR) whose text ends with the rule. Here, in the engine's
    lowest layer, so that the command line asks the same rule without importing the queue."""
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME or set(name) - _NAME_CHARS:
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"queue name {name!r}: 1..{MAX_NAME} characters from A-Z a-z 0-9 . _ / %",
        )
    return name
