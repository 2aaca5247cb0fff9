"""The chains of blobs a store keeps in memory, beside their records (``CF_CHAINS``): each
chain's blob ids in order, as the record under the chain's name packs them.

Invariant: a chain in memory equals its record once the write that changed the record
returned (the store changes both under its lock, the record first); an empty chain has
neither.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from .kv import CF_CHAINS, Op


class Chains:
    """Chain name -> blob ids. Not thread-safe: the store calls it under its lock."""

    def __init__(self, records: Iterable[tuple[bytes, bytes]] = ()):
        """From the chain records; a record whose length is not a whole number of ids is
        damage, left out (the change log may set the chain again)."""
        self._ids: dict[bytes, list[int]] = {k: unpack(v) for k, v in records if len(v) % 8 == 0}

    def get(self, name: bytes) -> list[int]:
        """The blob ids of ``name`` (a copy; empty when there is no such chain)."""
        return list(self._ids.get(name, []))

    def all(self) -> dict[bytes, list[int]]:
        return {k: list(v) for k, v in self._ids.items()}

    def linked(self) -> set[int]:
        """Every blob in some chain."""
        return {b for ids in self._ids.values() for b in ids}

    def set(self, name: bytes, ids: Sequence[int]) -> None:
        """``name`` holds ``ids`` now (none: the chain is gone)."""
        if ids:
            self._ids[name] = list(ids)
        else:
            self._ids.pop(name, None)

    def records(self) -> list[Op]:
        """The record of every chain (written back after damage took the family)."""
        return [record(name, ids) for name, ids in self._ids.items()]


def record(name: bytes, ids: Sequence[int]) -> Op:
    """The write that makes chain ``name`` hold ``ids`` (none: deletes it)."""
    return (CF_CHAINS, name, struct.pack(f"<{len(ids)}Q", *ids) if ids else None)


def unpack(value: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(value) // 8}Q", value))
