"""The blob store as its callers see it: the protocol, its value types and its errors.

The engine and the sweeper are typed against :class:`Store`, so that RocksDB, memory and
fault-injecting stores are interchangeable; this module is all they import of a store
(``sweepq.blobstore`` re-exports it). Nothing here names RocksDB.

Every method may be called from any thread. Each write method is atomic: it applies all of
its changes or none, and raises :class:`StoreError` when it applied none, so the caller's
state never has to guess what the store did.

Errors say what happened, by type, never by their text:

* :class:`StoreError` — the call failed and changed nothing; trying again may work (an
  I/O failure, a full disk, a store that is reopening after one);
* :class:`StoreDamageError` — the stored bytes are damaged (a checksum failed): trying
  again gives the same answer. It names what it can (``where``);
* :class:`BlobCorruptError` — a :class:`StoreDamageError` of one blob, naming the blob, its
  owner and the record ids it held.

Optional capabilities are declared, not guessed: :attr:`Store.capabilities` says which of
the small protocols below a store also implements (:class:`Salvaging`, :class:`DamageLog`,
:class:`Checkpointing`); a caller tests the flag, then uses the protocol.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

# The key of Store.memory() that counts against a memory budget: what the store itself holds
# in memory for its callers' data (write buffers and read cache), whatever the backend.
MEMORY_HELD = "held_bytes"


class StoreError(Exception):
    """The store cannot be opened or used, or one call failed and changed nothing."""


class StoreDamageError(StoreError):
    """Stored bytes failed a checksum: ``where`` names what was read (a family and a key, a
    file). Trying again gives the same answer; the damage is reported, never returned as
    data."""

    def __init__(self, message: str, where: str = ""):
        super().__init__(message)
        self.where = where


class BlobCorruptError(StoreDamageError):
    """A stored blob failed its checks. Names the blob, its owner and the record ids it held;
    every other blob stays readable."""

    def __init__(self, blob_id: int, owner: bytes, ids: list[bytes], why: str):
        self.blob_id = blob_id
        self.owner = owner
        self.ids = ids
        shown = ", ".join(i.hex() for i in ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        super().__init__(
            f"blob {blob_id} of {owner.decode(errors='replace')!r} is corrupt ({why}); "
            f"it held {len(ids)} record(s): {shown or 'unknown'}",
            f"blob {blob_id}",
        )


@dataclass(frozen=True)
class BlobInfo:
    """What :meth:`Store.write_pending` wrote: one bounded blob. ``check`` is the crc32 of its
    record ids, which a read verifies."""

    blob_id: int
    count: int
    raw_len: int
    comp_len: int
    dict_id: int
    check: int = 0


@dataclass
class Salvage:
    """What :meth:`Salvaging.salvage_messages` could still prove after damage: ``pairs`` are
    verified (key, record) pairs in key order; ``damaged`` are keys known to the caller whose
    value could not be verified (never returned); ``gaps`` are key ranges that could not be
    read at all, as (last good key, first key after the gap or b"")."""

    pairs: list[tuple[bytes, bytes]] = field(default_factory=list)
    damaged: list[tuple[bytes, bytes | None]] = field(default_factory=list)  # (key, None)
    gaps: list[tuple[bytes, bytes]] = field(default_factory=list)


@dataclass(frozen=True)
class Frame:
    """A blob's records as stored (:meth:`Store.read_frame`): ``data`` holds the u32 length
    (little endian) of each of its ``count`` records, then the records back to back, the
    lengths proven to add up; ``check`` is the crc32 of the record ids it was written with
    (what a read verifies, as :attr:`BlobInfo.check`)."""

    data: bytes
    count: int
    check: int


@dataclass
class Since:
    """What changed in the message records since the last checkpoint, as the store's own
    record of the changes has them when it opened (:meth:`Checkpointing.since_checkpoint`).

    ``written``: keys whose record was written and not removed since, each with the first
    bytes of its record (to name it if damage took it); ``moved``: of those, the ones a link
    moved into a blob, with the blobs that link wrote (one of them holds it); ``unlinked``:
    blobs deleted; ``removed``: keys whose last change was a delete for good; ``dropped``:
    key prefixes every record under which was deleted at once (a queue deleted); ``marks``: the
    last value written (None: cleared) of each mark (blob id, position). ``lost_writes``:
    the store found, at open, that writes it had made are lost (a log cut or gone, a table
    file set aside, a damaged family rebuilt): a record that is missing may be one of them.
    ``complete``: the record reaches back to the checkpoint. ``logged``: the store kept a
    write-ahead log (without one, sync="none", a crash loses the writes since the last flush,
    as promised: no damage). ``redone``: writes the store made again at open from its own
    record of them, which RocksDB's log had lost (a power loss under sync="commit", which
    syncs that record alone, or damage to RocksDB's log): nothing of them is lost."""

    written: dict[bytes, bytes] = field(default_factory=dict)
    moved: dict[bytes, tuple[int, ...]] = field(default_factory=dict)
    unlinked: frozenset[int] = frozenset()
    removed: frozenset[bytes] = frozenset()
    marks: dict[tuple[int, int], bytes | None] = field(default_factory=dict)
    lost_writes: bool = False
    complete: bool = False
    dropped: frozenset[bytes] = frozenset()
    logged: bool = True
    redone: int = 0


class Capability(enum.Flag):
    """Optional protocols a store implements, besides :class:`Store`."""

    NONE = 0
    SALVAGE = enum.auto()  # Salvaging: read past damage, every value proven
    DAMAGE_LOG = enum.auto()  # DamageLog: what the store found damaged and set right itself
    CHECKPOINT = enum.auto()  # Checkpointing: a small record kept apart from the data


@runtime_checkable
class Store(Protocol):
    """What the engine and the sweeper use of a blob store (see the module docstring)."""

    max_blob_bytes: int
    max_blob_records: int
    capabilities: Capability

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

    def write_message(self, key: bytes, value: bytes | None) -> None:
        """:meth:`write_messages` of one record under ``key`` (``value`` None: its delete).
        :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def message_writer(self) -> Callable[[bytes, bytes | None], object]:
        """A callable that does :meth:`write_message` (what it returns means nothing), bound
        once: a caller that writes one record at a time keeps it (engine/durable/journal.py)."""
        ...

    def messages(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        """Message records under ``prefix`` in key order. :raises StoreDamageError: a
        checksum failed (see :class:`Salvaging`). :raises StoreError. Thread-safe."""
        ...

    def message_chunks(self, prefix: bytes = b"", size: int = 4096) -> Iterator[list[tuple[bytes, bytes]]]:
        """:meth:`messages` in lists of at most ``size`` pairs, each read when it is taken.
        :raises StoreDamageError: as :meth:`messages`, possibly after some lists were given.
        :raises StoreError. Thread-safe."""
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
        """Take a damaged blob out of its chain, keep it (a store with Capability.DAMAGE_LOG
        gives it to the next open: :meth:`DamageLog.detached`). :raises StoreError: nothing
        changed. Thread-safe, atomic."""
        ...

    def drop_chain(self, chain: bytes) -> None:
        """Delete a chain and its blobs. :raises StoreError: nothing changed. Thread-safe, atomic."""
        ...

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        """A blob's records, verified against its key, owner and ids' check.

        :raises BlobCorruptError: damaged, missing or not the blob expected (names what it
            held). :raises StoreError: the read failed (transient). Thread-safe."""
        ...

    def read_frame(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> Frame:
        """:meth:`read`, its records left as stored, back to back: for a reader of every blob
        at once (a reopen), which makes no bytes object per record. Raises as :meth:`read`."""
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
        """Bytes the store holds in memory, by kind, and under :data:`MEMORY_HELD` the total
        a memory budget counts; never raises. Thread-safe."""
        ...

    def close(self) -> None:
        """Release the store (its directory's lock above all), even after a failure; later
        calls raise StoreError. :raises StoreError: what could not be written at close
        (the store is released all the same)."""
        ...


class Salvaging(Protocol):
    """Capability.SALVAGE: read what can still be proven after :meth:`Store.messages` raised
    :class:`StoreDamageError`."""

    def salvage_messages(self, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> Salvage:
        """Every record under ``prefix`` whose value the store can still prove, and the keys
        and ranges it cannot (see :class:`Salvage`). ``probes``: message keys (under any
        prefix) the caller knows of, read one by one where damage hides them from a scan.
        Nothing unproven is ever returned or read again. :raises StoreError. Thread-safe."""
        ...

    def quarantine_messages(self, keys: Sequence[bytes]) -> None:
        """Move the records under ``keys`` aside (kept for inspection, never read as data),
        atomically. :raises StoreError: nothing moved. Thread-safe."""
        ...


class DamageLog(Protocol):
    """Capability.DAMAGE_LOG: what the store found damaged and set right by itself (a cut
    write-ahead log at open, files set aside by a repair, a damaged family rebuilt while
    open), and a way to hear of it as it happens."""

    def damage_log(self) -> list[str]:
        """Every such event since the store opened, oldest first. Never raises; thread-safe."""
        ...

    def detached(self) -> list[int]:
        """Blobs an earlier run took out of their chains because they were damaged
        (:meth:`Store.detach`) and that are still kept: the messages they held were lost, and
        the caller names them before it deletes the blobs (:meth:`Store.delete_pending`); a
        pending blob is never one of them. Thread-safe."""
        ...

    def on_damage(self, listener: Callable[[list[str]], None]) -> None:
        """Call ``listener(kinds)`` after the store rebuilt damaged records of those kinds
        ("messages", "marks", "objects", ...) without what it could not prove: the caller
        writes again what it holds in memory of them. Called on a thread of the store's,
        with no lock of the store held."""
        ...


class Checkpointing(Protocol):
    """Capability.CHECKPOINT: one small record kept apart from the data, so that damage to
    the data cannot take it too (a queue manager keeps there which messages were live)."""

    def checkpoint(self) -> bytes | None:
        """The last record written (None: none). :raises StoreDamageError: it is damaged."""
        ...

    def write_checkpoint(self, data: bytes) -> None:
        """Replace the record atomically and durably. :raises StoreError: it was not replaced."""
        ...

    def blob_horizon(self) -> int:
        """Every blob this store has ever written has a smaller id. Thread-safe."""
        ...

    def since_checkpoint(self) -> Since:
        """What changed in the message records between the last checkpoint and this open
        (see :class:`Since`); the next :meth:`write_checkpoint` starts the record again.
        Never raises. Thread-safe."""
        ...
