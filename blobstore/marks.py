"""Which positions of which blobs carry a mark (a record removed, or its count changed), kept
in memory so that reading a blob's marks, and deleting a blob with them, needs no scan.

Invariant: a position is here exactly when its mark record (``CF_MARKS``) is there, once the
write that changed it returned (the store changes both under its lock).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .kv import CF_MARKS, Op

_U64 = struct.Struct(">Q")
_U32 = struct.Struct("<I")


class Marks:
    """Blob id -> marked positions. Not thread-safe: the store calls it under its lock."""

    def __init__(self, keys: Iterable[bytes] = ()):
        self._marked: dict[int, set[int]] = {}
        for k in keys:
            self._marked.setdefault(_U64.unpack_from(k)[0], set()).add(_U32.unpack_from(k, 8)[0])

    def any(self, blob_id: int) -> bool:
        return blob_id in self._marked

    def apply(self, marks: Sequence[tuple[int, int, bytes | None]]) -> None:
        """Marks set (a value) or cleared (None) by a write that returned."""
        for blob_id, pos, value in marks:
            if value is None:
                self._marked.get(blob_id, set()).discard(pos)
            else:
                self._marked.setdefault(blob_id, set()).add(pos)

    def delete_ops(self, blob_id: int) -> list[Op]:
        """The writes that delete a blob's marks."""
        return [(CF_MARKS, key(blob_id, pos), None) for pos in self._marked.get(blob_id, ())]

    def forget(self, blob_id: int) -> None:
        self._marked.pop(blob_id, None)


def key(blob_id: int, pos: int) -> bytes:
    """The key of the mark on record ``pos`` of blob ``blob_id`` (the blob's prefix first)."""
    return _U64.pack(blob_id) + _U32.pack(pos)


def blob_prefix(blob_id: int) -> bytes:
    return _U64.pack(blob_id)


def position(k: bytes) -> int:
    return _U32.unpack_from(k, 8)[0]
