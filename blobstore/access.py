"""A store's way to its key-value layer (blobstore/kv.py): every call with the layer's errors
made the protocol's (:class:`StoreError`, damage kept as :class:`StoreDamageError`), and the
list of damage the store found and set right, which :meth:`BlobStore.damage_log` reports.

Invariant: once :meth:`Access.detach` ran, every call raises "closed"; nothing reaches a
closed database.
"""

from __future__ import annotations

from collections.abc import Sequence

from .kv import KV, KVCorruption, KVError, Op
from .protocol import Salvage, StoreDamageError, StoreError


class Access:
    """The key-value layer of the store at ``path``, its errors translated; ``found``: the
    damage the store met and dealt with, in the order met (its own, beside the layer's)."""

    def __init__(self, path: str, kv: KV):
        self.path = path
        # The open layer, None once detached (set by detach() alone). The hottest callers read
        # it directly, write() and ChangeLog.write_message (every durable put and get, issue
        # 31), and call kv() only when it is None, to say "closed".
        self.layer: KV | None = kv
        self.found: list[str] = []

    def kv(self) -> KV:
        """The open layer. :raises StoreError: the store is closed."""
        kv = self.layer
        if kv is None:
            raise StoreError(f"the store at {self.path} is closed")
        return kv

    def current(self) -> KV | None:
        """The open layer, or None once closed."""
        return self.layer

    def detach(self) -> KV | None:
        """Forget the layer (the caller closes it); every later call says "closed"."""
        kv, self.layer = self.layer, None
        return kv

    def damage_log(self) -> list[str]:
        """The layer's damage log, then the store's own (:attr:`found`)."""
        kv = self.layer
        return [*(kv.damage_log() if kv is not None else []), *self.found]

    def get(self, cf: str, key: bytes) -> bytes | None:
        try:
            return self.kv().get(cf, key)
        except KVError as e:
            raise store_error(e) from e

    def items(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        try:
            return self.kv().items(cf, prefix)
        except KVError as e:
            raise store_error(e) from e

    def write(self, ops: list[Op], logged: bool = False) -> int:
        """Apply ``ops`` atomically; return the horizon after them (the change log's).
        ``logged``: the caller appends them whole to the change log next (``KV.write``)."""
        kv = self.layer or self.kv()  # kv() only to say "closed": every durable put and get comes here
        try:
            return kv.write(ops, logged)
        except KVError as e:
            raise store_error(e) from e

    def salvage(self, cf: str, prefix: bytes, probes: Sequence[bytes] = ()) -> Salvage:
        """The pairs of ``cf`` under ``prefix`` that can be proven, and what cannot (the family
        is rebuilt without the damaged files)."""
        try:
            pairs, damaged, gaps = self.kv().salvage(cf, prefix, probes)
        except KVError as e:
            raise store_error(e) from e
        return Salvage(pairs, damaged, gaps)

    def proven(self, cf: str, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Every pair of ``cf`` under ``prefix``; past damage, those that can still be proven
        (the family is rebuilt without the rest, which :attr:`found` names).

        :raises StoreError: the family cannot be read at all."""
        try:
            return self.items(cf, prefix)
        except StoreDamageError as e:
            salvage = self.salvage(cf, prefix)
            self.found.append(
                f"the {cf} records were damaged ({e}): {len(salvage.damaged)} record(s) could not be proven "
                f"(quarantined) and {len(salvage.gaps)} range(s) could not be read"
            )
            return salvage.pairs

    def sync(self) -> None:
        """Make every write so far survive a power loss. :raises StoreError: it failed."""
        try:
            self.kv().sync()
        except KVError as e:
            raise store_error(e) from e

    def flush(self) -> None:
        try:
            self.kv().flush()
        except KVError as e:
            raise store_error(e) from e

    def compact(self) -> None:
        try:
            self.kv().compact()
        except KVError as e:
            raise store_error(e) from e


def store_error(e: KVError) -> StoreError:
    """The key-value layer's error as the protocol's: damage stays damage."""
    if isinstance(e, KVCorruption):
        return StoreDamageError(str(e), e.where)
    return StoreError(str(e))
