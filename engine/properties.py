"""Message properties: validation and the compact encoding stored inside a record.

Properties are what ``MD.properties`` holds: a mapping from a name to ``str``, ``int``,
``float``, ``bool``, ``bytes`` or ``None``. They travel inside the message record (the
HAS_PROPS section of engine/record.py), so they are swept and unswept with the message
and cost nothing to a message that has none.

Encoding: entries one after another, in the mapping's order::

    u8 type | varint name length | name (UTF-8) | value

types 0 NULL, 1 FALSE, 2 TRUE, 3/4/5/6 int in 1/2/4/8 bytes (signed, little endian),
7 float64, 8 str (varint length + UTF-8), 9 bytes (varint length + raw). Varints are
unsigned LEB128. Invariant: ``decode(encode(p)) == p`` for every valid ``p``, with every
value of the same Python type (bytes-like values come back as ``bytes``).

Names follow IBM MQ (2442 MQRC_PROPERTY_NAME_ERROR otherwise): selector identifiers
(Java identifiers joined by single dots, case-sensitive), not a selector keyword, at
most 4095 characters, not starting with ``JMS`` (JMS header fields), ``Root.`` or
``Body.`` (the descriptor, selectable as ``Root.MQMD.<Field>``). A value of another type,
an int outside 64 bits or a str that is not valid Unicode is 2473 MQRC_PROPERTY_TYPE_ERROR.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from .constants import Reason
from .errors import MQError
from .identifiers import is_identifier, reserved_prefix

MAX_NAME = 4095

T_NULL, T_FALSE, T_TRUE, T_I8, T_I16, T_I32, T_I64, T_F64, T_STR, T_BYTES = range(10)
_I8, _I16, _I32, _I64, _F64 = (struct.Struct(f) for f in ("<b", "<h", "<i", "<q", "<d"))
_INTS = ((T_I8, _I8, 2**7), (T_I16, _I16, 2**15), (T_I32, _I32, 2**31), (T_I64, _I64, 2**63))

Value = str | int | float | bool | bytes | None


def _varint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def check_name(name: object) -> str:
    """A valid property name, or MQError 2442 saying what is wrong with it."""
    if not isinstance(name, str):
        raise MQError(Reason.PROPERTY_NAME_ERROR, f"property names must be str, not {type(name).__name__}")
    if not name or len(name) > MAX_NAME:
        raise MQError(Reason.PROPERTY_NAME_ERROR, f"property name must be 1..{MAX_NAME} characters long")
    if reserved_prefix(name):
        raise MQError(
            Reason.PROPERTY_NAME_ERROR,
            f"property name {name!r}: names starting JMS, Root. or Body. are reserved for header and "
            "descriptor fields (select those as Root.MQMD.<Field>)",
        )
    if not is_identifier(name):
        raise MQError(
            Reason.PROPERTY_NAME_ERROR,
            f"property name {name!r} is not a selector identifier: use letters, digits, _ and $, not starting "
            "with a digit, parts joined by single dots, and not a keyword (AND, OR, NOT, NULL, TRUE, ...)",
        )
    return name


def encode(props: Mapping[str, Value]) -> bytes:
    """The encoded section for ``props`` (validated). Raises MQError 2442 / 2473."""
    if not isinstance(props, Mapping):
        raise MQError(
            Reason.PROPERTY_TYPE_ERROR, f"properties must be a dict of name -> value, not {type(props).__name__}"
        )
    out = bytearray()
    for name, value in props.items():
        raw = check_name(name).encode()
        head = _varint(len(raw)) + raw
        t = type(value)
        if value is None:
            out.append(T_NULL)
            out += head
        elif t is bool:
            out.append(T_TRUE if value else T_FALSE)
            out += head
        elif isinstance(value, int) and t is not bool:
            for code, st, lim in _INTS:
                if -lim <= value < lim:
                    out.append(code)
                    out += head
                    out += st.pack(value)
                    break
            else:
                raise MQError(Reason.PROPERTY_TYPE_ERROR, f"property {name!r}: int {value} does not fit in 64 bits")
        elif isinstance(value, float):
            out.append(T_F64)
            out += head
            out += _F64.pack(value)
        elif isinstance(value, str):
            try:
                data = value.encode()
            except UnicodeEncodeError as e:
                raise MQError(Reason.PROPERTY_TYPE_ERROR, f"property {name!r}: the str is not valid Unicode") from e
            out.append(T_STR)
            out += head
            out += _varint(len(data)) + data
        elif isinstance(value, bytes | bytearray | memoryview):
            data = bytes(value)
            out.append(T_BYTES)
            out += head
            out += _varint(len(data)) + data
        else:
            raise MQError(
                Reason.PROPERTY_TYPE_ERROR,
                f"property {name!r} is a {t.__name__}; values must be str, int, float, bool, bytes or None",
            )
    return bytes(out)


def _read_varint(buf: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        if b < 0x80:
            return n, i
        shift += 7


def _read_value(buf: bytes, t: int, i: int) -> tuple[Value, int]:
    if t == T_NULL:
        return None, i
    if t == T_FALSE:
        return False, i
    if t == T_TRUE:
        return True, i
    if t == T_I8:
        return _I8.unpack_from(buf, i)[0], i + 1
    if t == T_I16:
        return _I16.unpack_from(buf, i)[0], i + 2
    if t == T_I32:
        return _I32.unpack_from(buf, i)[0], i + 4
    if t == T_I64:
        return _I64.unpack_from(buf, i)[0], i + 8
    if t == T_F64:
        return _F64.unpack_from(buf, i)[0], i + 8
    n, i = _read_varint(buf, i)
    if t == T_STR:
        return buf[i : i + n].decode(), i + n
    return bytes(buf[i : i + n]), i + n


_WIDTH = {T_NULL: 0, T_FALSE: 0, T_TRUE: 0, T_I8: 1, T_I16: 2, T_I32: 4, T_I64: 8, T_F64: 8}


def wanted(names: frozenset[str] | set[str]) -> dict[bytes, str]:
    """The argument :func:`lookup` takes for ``names``: encoded name -> name (build it once)."""
    return {n.encode(errors="surrogatepass"): n for n in names}


def lookup(buf: bytes, start: int, end: int, names: dict[bytes, str] | None = None) -> dict[str, Value]:
    """The properties encoded in ``buf[start:end]``; only those in ``names`` (from
    :func:`wanted`) when given: the others are skipped without being decoded."""
    out: dict[str, Value] = {}
    i = start
    width = _WIDTH
    while i < end:
        t = buf[i]
        n = buf[i + 1]
        i += 2
        if n >= 0x80:
            n, i = _read_varint(buf, i - 1)
        raw = buf[i : i + n]
        i += n
        if names is None:
            out[raw.decode()], i = _read_value(buf, t, i)
        elif raw in names:
            out[names[raw]], i = _read_value(buf, t, i)
            if len(out) == len(names):
                break  # every name asked for is found: the rest stays encoded
        elif t in width:
            i += width[t]
        else:
            n, i = _read_varint(buf, i)
            i += n
    return out


def decode(section: bytes) -> dict[str, Value]:
    """Every property of an encoded section, in the order they were put."""
    return lookup(section, 0, len(section))
