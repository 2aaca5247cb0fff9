"""How an item becomes the bytes of a message and back: ``serializer=`` of
``Queue`` and ``AsyncQueue``.

``"pickle"`` (the default: any picklable object, as ``multiprocessing.Queue`` takes),
``"json"`` (what JSON holds; tuples come back as lists), ``"msgpack"`` (compact, readable from
other languages; bytes stay bytes) and ``"bytes"`` (the item is the message: ``bytes``,
``bytearray`` or ``memoryview`` in, ``bytes`` out, nothing encoded). Any object with
``dumps(item) -> bytes`` and ``loads(bytes) -> item`` may be given instead.

An item the serializer cannot encode is a ``TypeError`` that names the item's type and the
serializer, raised before anything is put.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

NAMES = ("pickle", "json", "msgpack", "bytes")
_PROTOCOL = pickle.HIGHEST_PROTOCOL  # what pickle writes: read once, not on every put


@runtime_checkable
class Serializer(Protocol):
    """What ``serializer=`` takes besides a name: a pair of functions, as the ``pickle``
    and ``json`` modules offer."""

    def dumps(self, item: Any, /) -> bytes: ...

    def loads(self, data: bytes, /) -> Any: ...


@dataclass(frozen=True)
class Codec:
    """A serializer chosen: ``encode`` raises TypeError for an item it cannot encode."""

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


def _json_dumps(item: Any) -> bytes:
    return json.dumps(item, separators=(",", ":")).encode()


def _bytes_dumps(item: Any) -> bytes:
    if type(item) is bytes:
        return item  # the message itself: no copy
    if isinstance(item, bytes | bytearray | memoryview):
        return bytes(item)
    raise TypeError(f"serializer='bytes' puts bytes, bytearray or memoryview, not {type(item).__name__}")


def _identity(data: bytes) -> bytes:
    return data


def codec(serializer: object) -> Codec:
    """The codec ``serializer`` names (see the module docstring).

    :raises ValueError: an unknown name. :raises TypeError: neither a name nor an object
        with ``dumps`` and ``loads``."""
    if isinstance(serializer, str):
        if serializer == "pickle":
            return Codec("pickle", _pickle_encode, pickle.loads)
        if serializer == "json":
            return Codec("json", _guarded(_json_dumps, "json"), json.loads)
        if serializer == "bytes":
            return Codec("bytes", _bytes_dumps, _identity)
        if serializer == "msgpack":
            import msgpack

            packer = msgpack.Packer(use_bin_type=True)

            def unpack(data: bytes) -> Any:
                return msgpack.unpackb(data, raw=False, strict_map_key=False)

            return Codec("msgpack", _guarded(packer.pack, "msgpack"), unpack)
        raise ValueError(f"serializer {serializer!r} is not one of {', '.join(map(repr, NAMES))}")
    if isinstance(serializer, Serializer):
        name = getattr(serializer, "__name__", type(serializer).__name__)
        return Codec(name, _guarded(serializer.dumps, name, check=True), serializer.loads)
    raise TypeError(
        f"serializer must be one of {', '.join(map(repr, NAMES))} or an object with dumps() and loads(), "
        f"not {type(serializer).__name__}"
    )


def _guarded(dumps: Callable[[Any], Any], name: str, check: bool = False) -> Callable[[Any], bytes]:
    """``dumps`` whose failures are the TypeError of :func:`_refusal` (json alone raises
    TypeError or ValueError, msgpack TypeError or OverflowError); with ``check``, a result
    that is not ``bytes`` is refused too (a serializer object's)."""

    def encode(item: Any) -> bytes:
        try:
            data = dumps(item)
        except Exception as e:
            raise _refusal(name, item, e) from e
        if check and not isinstance(data, bytes):
            raise TypeError(f"serializer {name}.dumps() returned {type(data).__name__}, not bytes")
        return data

    return encode


def _pickle_encode(item: Any) -> bytes:
    """The default serializer's encode: ``pickle.dumps`` at its highest protocol, its failures
    (PicklingError, TypeError or AttributeError) the TypeError of :func:`_refusal`. Called
    here, not through :func:`_guarded`: a wrapper of a wrapper was a Python call more on every
    put (sweepq.bench.instructions "durable Queue")."""
    try:
        return pickle.dumps(item, _PROTOCOL)
    except Exception as e:
        raise _refusal("pickle", item, e) from e


def _refusal(name: str, item: Any, e: Exception) -> TypeError:
    """The one error of every serializer that cannot encode ``item``: its type and the
    serializer named, with what to do instead."""
    hint = (
        "pickle takes instances of classes defined at a module's top level; pass serializer= an object with "
        "dumps() and loads() for others"
        if name == "pickle"
        else "pass another serializer (serializer='pickle' takes most objects)"
    )
    return TypeError(f"serializer={name!r} cannot encode an item of type {type(item).__name__}: {e}; {hint}")
