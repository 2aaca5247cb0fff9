"""A store that fails on purpose: the third implementation of the store protocol.

It forwards every call to a real store unless a *fault plan* says that this call of this
method fails. Tests use it to fail each call site of the engine and the sweeper in turn and
to check the queues against a model afterwards; a failure is replayable because the plan
counts calls deterministically (TigerBeetle's simulator is the model: inject, then check).

:class:`PowerLossKV` is the power loss below it: a key-value store that keeps, beside what
it holds, what a power loss would leave (only what a sync made durable).
"""

from __future__ import annotations

import random
import sys
import threading
from collections.abc import Callable, Iterator, Sequence

from .kv import MemoryKV
from .protocol import (
    BlobCorruptError,
    BlobInfo,
    Capability,
    Checkpointing,
    DamageLog,
    Frame,
    Salvage,
    Salvaging,
    Since,
    Store,
    StoreDamageError,
    StoreError,
)

METHODS = (
    "write_pending",
    "delete_pending",
    "link",
    "unlink",
    "detach",
    "drop_chain",
    "read",
    "manifest",
    "pending",
    "write_messages",
    "messages",
    "marks",
    "objects",
    "put_object",
    "sync",
    "salvage_messages",
    "quarantine_messages",
    "checkpoint",
    "write_checkpoint",
)


class FaultyStore:
    """Forwards to ``inner``; :meth:`fail` arms a fault.

    ``fail(method, at=k, times=n)``: the k-th call of ``method`` from now (1 = the next) and
    the n - 1 after it raise :class:`StoreError` (``corrupt=True``: damage, i.e.
    :class:`BlobCorruptError` for blob reads, :class:`StoreDamageError` otherwise) *before*
    reaching the inner store, so a failed write changed nothing, as the protocol promises.
    It has the capabilities of ``inner`` and forwards them. ``gate``: calls of
    ``write_pending`` wait on it (to hold a sweep between its unlock and re-lock). ``calls``
    counts every call by method; with ``track_sites``, ``sites`` names the functions that
    called each method.
    """

    def __init__(self, inner: Store, track_sites: bool = False):
        self.inner = inner
        self.max_blob_bytes = inner.max_blob_bytes
        self.max_blob_records = inner.max_blob_records
        self.capabilities: Capability = inner.capabilities
        self.calls: dict[str, int] = dict.fromkeys(METHODS, 0)
        self.sites: dict[str, set[str]] = {m: set() for m in METHODS}
        self._track = track_sites
        self.failures: dict[str, int] = dict.fromkeys(METHODS, 0)
        self._plan: dict[str, tuple[int, int, bool]] = {}
        self._lock = threading.Lock()
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self._chaos: tuple[random.Random, float, frozenset[str]] | None = None

    def fail(self, method: str, at: int = 1, times: int = 1, corrupt: bool = False) -> None:
        if method not in METHODS:
            raise ValueError(f"unknown store method {method!r}")
        with self._lock:
            self._plan[method] = (self.calls[method] + at, times, corrupt)

    def chaos(self, probability: float, seed: int, methods: tuple[str, ...] = METHODS) -> None:
        """From now on every call of ``methods`` fails with ``probability``, drawn from a
        generator seeded with ``seed``: the same seed and the same calls fail the same way."""
        self._chaos = (random.Random(seed), probability, frozenset(methods))

    def heal(self) -> None:
        with self._lock:
            self._plan.clear()
            self._chaos = None

    def _tick(self, method: str, blob_id: int = 0) -> None:
        if self._track:
            self.sites[method].add(sys._getframe(2).f_code.co_name)  # the store's caller
        with self._lock:
            self.calls[method] += 1
            n = self.calls[method]
            plan = self._plan.get(method)
            chaos = self._chaos
            if plan is not None and plan[0] <= n < plan[0] + plan[1]:
                corrupt = plan[2]
            elif chaos is not None and method in chaos[2] and chaos[0].random() < chaos[1]:
                corrupt = False
            else:
                return
            self.failures[method] += 1
        if corrupt and method in ("read", "marks", "manifest"):
            raise BlobCorruptError(blob_id, b"?", [], f"injected: {method} call {n} found damage")
        if corrupt:
            raise StoreDamageError(f"injected: {method} call {n} found damage", method)
        raise StoreError(f"injected: {method} call {n} failed")

    def write_pending(
        self,
        owner: bytes,
        records: Sequence[bytes],
        ids: Sequence[bytes],
        ends: Sequence[int],
        scope: bytes | None = None,
    ) -> list[BlobInfo]:
        if self.gate is not None:
            self.entered.set()
            if not self.gate.wait(30):
                raise StoreError("injected: the gate was never opened")
        self._tick("write_pending")
        return self.inner.write_pending(owner, records, ids, ends, scope)

    def delete_pending(self, blob_ids: Sequence[int]) -> None:
        self._tick("delete_pending")
        self.inner.delete_pending(blob_ids)

    def link(self, chain: bytes, blob_ids: Sequence[int], at_head: bool, moved: Sequence[bytes] = ()) -> None:
        self._tick("link")
        self.inner.link(chain, blob_ids, at_head, moved)

    def unlink(self, chain: bytes, blob_id: int, restore: Sequence[tuple[bytes, bytes]] = ()) -> None:
        self._tick("unlink")
        self.inner.unlink(chain, blob_id, restore)

    def write_messages(
        self,
        puts: Sequence[tuple[bytes, bytes]] = (),
        deletes: Sequence[bytes] = (),
        marks: Sequence[tuple[int, int, bytes | None]] = (),
    ) -> None:
        self._tick("write_messages")
        self.inner.write_messages(puts, deletes, marks)

    def write_message(self, key: bytes, value: bytes | None) -> None:
        self._tick("write_messages")  # write_messages of one record: the same faults
        self.inner.write_message(key, value)

    def message_writer(self) -> Callable[[bytes, bytes | None], object]:
        return self.write_message  # every write through _tick: its faults

    def messages(self, prefix: bytes = b"") -> list[tuple[bytes, bytes]]:
        self._tick("messages")
        return self.inner.messages(prefix)

    def message_chunks(self, prefix: bytes = b"", size: int = 4096) -> Iterator[list[tuple[bytes, bytes]]]:
        self._tick("messages")  # the same reads as messages(): the same faults
        yield from self.inner.message_chunks(prefix, size)

    def marks(self, blob_id: int) -> dict[int, bytes]:
        self._tick("marks", blob_id)
        return self.inner.marks(blob_id)

    def objects(self) -> dict[bytes, bytes]:
        self._tick("objects")
        return self.inner.objects()

    def put_object(
        self, name: bytes, value: bytes | None, drop_messages: bytes | None = None, drop_chains: Sequence[bytes] = ()
    ) -> None:
        self._tick("put_object")
        self.inner.put_object(name, value, drop_messages, drop_chains)

    def sync(self) -> None:
        self._tick("sync")
        self.inner.sync()

    def detach(self, chain: bytes, blob_id: int) -> None:
        self._tick("detach")
        self.inner.detach(chain, blob_id)

    def drop_chain(self, chain: bytes) -> None:
        self._tick("drop_chain")
        self.inner.drop_chain(chain)

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        self._tick("read", blob_id)
        return self.inner.read(blob_id, owner, check)

    def read_frame(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> Frame:
        self._tick("read", blob_id)  # the same read as read(): the same faults
        return self.inner.read_frame(blob_id, owner, check)

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        self._tick("manifest", blob_id)
        return self.inner.manifest(blob_id)

    def chain(self, name: bytes) -> list[int]:
        return self.inner.chain(name)

    def chains(self) -> dict[bytes, list[int]]:
        return self.inner.chains()

    def pending(self) -> list[int]:
        self._tick("pending")
        return self.inner.pending()

    def memory(self) -> dict[str, int]:
        return self.inner.memory()

    def close(self) -> None:
        self.inner.close()

    # -- the optional protocols, forwarded when ``inner`` declares them --------------------------

    def salvage_messages(self, prefix: bytes = b"", probes: Sequence[bytes] = ()) -> Salvage:
        self._tick("salvage_messages")
        inner: Salvaging = self.inner  # type: ignore[assignment]  # Capability.SALVAGE
        return inner.salvage_messages(prefix, probes)

    def quarantine_messages(self, keys: Sequence[bytes]) -> None:
        self._tick("quarantine_messages")
        inner: Salvaging = self.inner  # type: ignore[assignment]
        inner.quarantine_messages(keys)

    def damage_log(self) -> list[str]:
        inner: DamageLog = self.inner  # type: ignore[assignment]  # Capability.DAMAGE_LOG
        return inner.damage_log()

    def detached(self) -> list[int]:
        inner: DamageLog = self.inner  # type: ignore[assignment]
        return inner.detached()

    def on_damage(self, listener) -> None:
        inner: DamageLog = self.inner  # type: ignore[assignment]
        inner.on_damage(listener)

    def checkpoint(self) -> bytes | None:
        self._tick("checkpoint")
        inner: Checkpointing = self.inner  # type: ignore[assignment]  # Capability.CHECKPOINT
        return inner.checkpoint()

    def write_checkpoint(self, data: bytes) -> None:
        self._tick("write_checkpoint")
        inner: Checkpointing = self.inner  # type: ignore[assignment]
        inner.write_checkpoint(data)

    def blob_horizon(self) -> int:
        inner: Checkpointing = self.inner  # type: ignore[assignment]
        return inner.blob_horizon()

    def since_checkpoint(self) -> Since:
        inner: Checkpointing = self.inner  # type: ignore[assignment]
        return inner.since_checkpoint()


class PowerLossKV(MemoryKV):
    """The in-memory key-value store (blobstore/kv.py) with a power loss: what it holds now
    is what a killed process would leave; :meth:`power_loss` is what a machine that lost
    power would. A sync makes the side logs durable, and the writes too unless every write
    since the last one was ``logged`` (RocksKV syncs RocksDB's log only then: the change log
    holds those writes whole, and the next open redoes them); the side records written since
    are durable by themselves, and a log start makes everything durable (RocksKV syncs
    RocksDB's log before it replaces the log). Writes and log appends that no sync
    covered are dropped. ``syncs`` counts the syncs, ``data_syncs`` those that synced the
    writes."""

    def __init__(self) -> None:
        super().__init__()
        self._durable = self._copy()
        self._owed = False  # a write since the last sync that the change log cannot redo
        self.syncs = 0
        self.data_syncs = 0

    def _copy(self) -> dict[str, dict[bytes, bytes]]:
        return {cf: dict(d) for cf, d in self._cfs.items()}

    def write(self, ops, logged: bool = False) -> int:
        horizon = super().write(ops, logged)
        if not logged:
            with self._lock:  # as the sync's look and clear: a write between them is kept
                self._owed = True
        return horizon

    def sync(self) -> None:
        with self._lock:
            if self._owed:
                self._durable = self._copy()
                self.data_syncs += 1
            else:
                self._durable["logs"] = dict(self._cfs["logs"])
            self._owed = False
            self.syncs += 1

    def write_side(self, name: str, data: bytes) -> None:
        super().write_side(name, data)
        with self._lock:
            self._durable.setdefault("side", {})[name.encode()] = bytes(data)

    def start_log(self, name: str, record: bytes) -> None:
        # As RocksKV: the writes synced first (a record the old log drops may have been the
        # only synced copy of its write), then the new log, durable by itself.
        super().start_log(name, record)
        with self._lock:
            self._durable = self._copy()
            self._owed = False

    def power_loss(self) -> MemoryKV:
        """What the store would hold after a power loss now (a store of its own)."""
        after = MemoryKV()
        with self._lock:
            after._cfs = {cf: dict(d) for cf, d in self._durable.items()}
        return after
