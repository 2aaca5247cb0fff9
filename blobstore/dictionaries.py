"""The zstd dictionaries of a store: trained once per scope (a queue) from its first small
records, used by the blobs written after, and deleted with the last blob that uses one.

Invariant: a dictionary's record (``dict/<id>`` in ``CF_META``) stays while a blob in the
store may need it: one in use by a scope, referenced by a blob written in this run, or kept
from an earlier run (which blobs use those is not known without reading each; they are a few
dozen KiB each).
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Iterable, Sequence

from .access import Access
from .codec import MIN_SAMPLE_BYTES, Codec, train, zstd_error
from .kv import CF_META, Op
from .protocol import StoreError
from .stats import StoreStats

# Dictionaries help small records only; train once this many bytes of samples are seen.
DICT_MAX_AVG_RECORD = 1024
DICT_SAMPLE_BYTES = 256 * 1024
DICT_MIN_SAMPLES = 256

_U32 = struct.Struct("<I")


class Dictionaries:
    """The dictionaries of the store behind ``access``, loaded into ``codec`` from the meta
    records ``meta``; each one trained is counted in ``stats``. Thread-safe (a lock of its
    own, taken after the store's when both are)."""

    def __init__(self, codec: Codec, access: Access, stats: StoreStats, meta: Iterable[tuple[bytes, bytes]]):
        self._codec = codec
        self._stats = stats
        self._access = access
        self._lock = threading.Lock()
        self._refs: dict[int, int] = {}  # dictionary -> blobs of this run that use it
        self._of_blob: dict[int, int] = {}  # blob id -> its dictionary, for blobs that use one
        self._of_scope: dict[bytes, int] = {}
        self._samples: dict[bytes, list[bytes]] = {}
        self._sample_bytes: dict[bytes, int] = {}
        for k, v in meta:
            if k.startswith(b"dict/"):
                codec.add_dict(_U32.unpack(k[5:])[0], v)
            elif k.startswith(b"dictscope/"):
                self._of_scope[k[10:]] = _U32.unpack(v)[0]
        self._pinned = set(codec.raw_dicts())  # an earlier run's: kept

    def by_scope(self) -> dict[bytes, int]:
        """Scope -> the dictionary its blobs are written with (inspection)."""
        with self._lock:
            return dict(self._of_scope)

    def samples(self, scope: bytes) -> list[bytes]:
        """The records kept to train ``scope``'s dictionary, not yet trained (inspection)."""
        with self._lock:
            return list(self._samples.get(scope, []))

    def for_records(self, scope: bytes, records: Sequence[bytes]) -> int:
        """The scope's dictionary id (0: none), training one once enough small records were
        seen; a dictionary that cannot be trained or written is none this time."""
        current = self._of_scope.get(scope, 0)
        if current:
            return current
        # Records too short to learn from are no samples: an empty one is a message got
        # while its sweep read the run (it fails verification), and zstd's trainer must
        # never see a run of them (blobstore/codec.py, train).
        usable = [r for r in records if len(r) >= MIN_SAMPLE_BYTES]
        if not usable or sum(map(len, usable)) / len(usable) > DICT_MAX_AVG_RECORD:
            return 0
        samples = self._sample(scope, usable)
        if samples is None:
            return 0
        try:
            raw = train(samples)
        except (ValueError, zstd_error()):  # samples it cannot learn from: go without
            return 0
        return self._add(scope, raw)

    def _sample(self, scope: bytes, usable: list[bytes]) -> list[bytes] | None:
        """Keep samples of ``scope``; all of them once there are enough to train on."""
        with self._lock:
            samples = self._samples.setdefault(scope, [])
            have = self._sample_bytes.get(scope, 0)
            for r in usable:
                if have >= DICT_SAMPLE_BYTES:
                    break
                samples.append(bytes(r))
                have += len(r)
            self._sample_bytes[scope] = have
            if have < DICT_SAMPLE_BYTES or len(samples) < DICT_MIN_SAMPLES:
                return None
            del self._samples[scope]
            return samples

    def _add(self, scope: bytes, raw: bytes) -> int:
        with self._lock:
            dict_id = max([0, *self._of_scope.values(), *self._refs, *self._codec.raw_dicts()]) + 1
            self._codec.add_dict(dict_id, raw)
            try:
                self._access.write(
                    [
                        (CF_META, b"dict/" + _U32.pack(dict_id), raw),
                        (CF_META, b"dictscope/" + scope, _U32.pack(dict_id)),
                    ]
                )
            except StoreError:
                return 0  # no dictionary this time; the blobs are written without one
            self._of_scope[scope] = dict_id
            self._stats.dictionaries_trained += 1
            self._stats.dict_ids[scope] = dict_id
        return dict_id

    def used(self, blob_id: int, dict_id: int) -> None:
        """Blob ``blob_id`` was written with ``dict_id`` (0: none)."""
        if dict_id:
            with self._lock:
                self._refs[dict_id] = self._refs.get(dict_id, 0) + 1
                self._of_blob[blob_id] = dict_id

    def delete_ops(self, blob_id: int) -> list[Op]:
        """The write that deletes the dictionary of ``blob_id`` when it is the last user."""
        with self._lock:
            dict_id = self._of_blob.get(blob_id, 0)
            if (
                dict_id
                and self._refs.get(dict_id, 0) <= 1
                and dict_id not in self._of_scope.values()
                and dict_id not in self._pinned
            ):
                return [(CF_META, b"dict/" + _U32.pack(dict_id), None)]
            return []

    def forget(self, blob_id: int) -> None:
        """``blob_id`` was deleted."""
        with self._lock:
            dict_id = self._of_blob.pop(blob_id, 0)
            if dict_id and dict_id in self._refs:
                self._refs[dict_id] -= 1
                if self._refs[dict_id] <= 0:
                    del self._refs[dict_id]

    def records(self) -> list[Op]:
        """The meta records of every dictionary and scope (written back after damage)."""
        with self._lock:
            ops: list[Op] = [(CF_META, b"dict/" + _U32.pack(i), raw) for i, raw in self._codec.raw_dicts().items()]
            return ops + [(CF_META, b"dictscope/" + scope, _U32.pack(i)) for scope, i in self._of_scope.items()]
