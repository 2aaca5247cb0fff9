"""The blob store as its callers see it: a ``typing.Protocol`` the engine and the sweeper are
typed against, so that RocksDB, memory and fault-injecting stores are interchangeable.

Every method may be called from any thread. Each write method is atomic: it applies all of
its changes or none, and raises :class:`~sweepq.blobstore.store.StoreError` when it applied
none, so the caller's state never has to guess what the store did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .store import BlobInfo


@runtime_checkable
class Store(Protocol):
    """What the engine and the sweeper use of a blob store (see the module docstring)."""

    max_blob_bytes: int
    max_blob_records: int

    def write_pending(
        self,
        owner: bytes,
        records: Sequence[bytes],
        ids: Sequence[bytes],
        ends: Sequence[int],
        scope: bytes | None = None,
    ) -> list[BlobInfo]:
        """Write ``records`` as pending blobs cut at ``ends``; return them in order.

        :raises StoreError: a write failed (blobs written before it stay pending).
        Thread-safe; not atomic across blobs, atomic per blob."""
        ...

    def delete_pending(self, blob_ids: Sequence[int]) -> None:
        """Delete blobs in no chain. :raises StoreError: none deleted. Thread-safe, atomic."""
        ...

    def link(self, chain: bytes, blob_ids: Sequence[int], at_head: bool, moved: Sequence[bytes] = ()) -> None:
        """Link pending blobs at the chain's head or tail and delete the message keys
        ``moved`` (their records are in the blobs now). :raises StoreError: nothing changed.
        Thread-safe, atomic."""
        ...

    def unlink(self, chain: bytes, blob_id: int, restore: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Take a blob out of its chain and delete it, writing ``restore`` (key, record) as
        messages. :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def write_messages(
        self,
        puts: Sequence[tuple[bytes, bytes]] = (),
        deletes: Sequence[bytes] = (),
        marks: Sequence[tuple[int, int, bytes | None]] = (),
    ) -> None:
        """Write and delete message records and set marks on blob records.
        :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def messages(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Message records under ``prefix`` in key order. :raises StoreError. Thread-safe."""
        ...

    def marks(self, blob_id: int) -> dict[int, bytes]:
        """A blob's marks by position. :raises StoreError: unreadable. Thread-safe."""
        ...

    def objects(self) -> dict[bytes, bytes]:
        """Named definitions. :raises StoreError: unreadable. Thread-safe."""
        ...

    def put_object(
        self, name: bytes, value: bytes | None, drop_messages: bytes | None = None, drop_chains: Sequence[bytes] = ()
    ) -> None:
        """Write or delete a definition (with the messages and chains it held).
        :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def sync(self) -> None:
        """Every write so far survives a power loss when this returns. :raises StoreError.
        Thread-safe."""
        ...

    def detach(self, chain: bytes, blob_id: int) -> None:
        """Take a blob out of its chain, keep it. :raises StoreError: nothing changed.
        Thread-safe, atomic."""
        ...

    def drop_chain(self, chain: bytes) -> None:
        """Delete a chain and its blobs. :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        """A blob's records, verified against its key, owner and ids' check.

        :raises BlobCorruptError: damaged, missing or not the blob expected (names what it
            held). :raises StoreError: the read failed (transient). Thread-safe."""
        ...

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        """(owner, record ids) of a blob. :raises StoreError: unreadable. Thread-safe."""
        ...

    def chain(self, name: bytes) -> list[int]:
        """A chain's blob ids in order. No I/O; thread-safe."""
        ...

    def chains(self) -> dict[bytes, list[int]]:
        """Every chain. No I/O; thread-safe."""
        ...

    def pending(self) -> list[int]:
        """Blob ids in no chain. :raises StoreError: unreadable. Thread-safe."""
        ...

    def memory(self) -> dict[str, int]:
        """Bytes the store holds in memory, by kind; never raises. Thread-safe."""
        ...

    def close(self) -> None:
        """Release the store; later calls raise StoreError."""
        ...
