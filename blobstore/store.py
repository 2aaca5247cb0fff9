"""Where swept runs live: compressed, checksummed blobs in RocksDB, and the chains that order them.

The RocksDB layout, in one place (column families, all in raw mode):

``blobs``      u64 blob id (big endian) -> blob (blobstore/format.py). RocksDB's own
               compression is off here: blobs are zstd-compressed already, and a second
               pass would spend CPU for nothing.
``manifests``  u64 blob id -> zstd(owner label, then the record ids). Kept apart from the
               blob so that a damaged blob can still be named: which owner, which records.
``chains``     chain name -> the chain's blob ids, u64 each, in order.
``meta``       b"format" -> u32 format version; b"next_id" -> u64;
               b"dict/" + u32 id -> a trained zstd dictionary;
               b"dictscope/" + scope -> u32 id of that scope's current dictionary.

A blob is *pending* from :meth:`BlobStore.write_pending` until :meth:`BlobStore.link`
puts it in a chain; linking and unlinking are each one atomic WriteBatch, so a chain
never names a blob that is not there. Pending blobs that are never linked are deleted by
:meth:`BlobStore.delete_pending` (a sweep that aborts) or at the next open.

The store knows nothing about queues: it stores opaque records under opaque owner labels
and scopes. Only this package imports rocksdict and zstandard.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
import threading
import time
import weakref
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from rocksdict import AccessType, DBCompressionType, Options, Rdict, WriteBatch, WriteOptions

from . import format as fmt
from .codec import DEFAULT_LEVEL, Codec, train

CF_BLOBS = "blobs"
CF_MANIFESTS = "manifests"
CF_CHAINS = "chains"
CF_META = "meta"
_CFS = (CF_BLOBS, CF_MANIFESTS, CF_CHAINS, CF_META)

STORE_FORMAT = 1
DEFAULT_MAX_BLOB_BYTES = 256 * 1024
DEFAULT_MAX_BLOB_RECORDS = 1024  # bounds a sweep's lock hold (verify + detach are per record)
# Dictionaries help small records only; train once this many bytes of samples are seen.
DICT_MAX_AVG_RECORD = 1024
DICT_SAMPLE_BYTES = 256 * 1024
DICT_MIN_SAMPLES = 256

_U64 = struct.Struct(">Q")
_U32 = struct.Struct("<I")


class StoreError(Exception):
    """The store cannot be opened or used (not a sweepq store, newer format, I/O failure)."""


class BlobCorruptError(StoreError):
    """A stored blob failed its checks. Names the blob, its owner and the record ids it held;
    every other blob stays readable."""

    def __init__(self, blob_id: int, owner: bytes, ids: list[bytes], why: str):
        self.blob_id = blob_id
        self.owner = owner
        self.ids = ids
        shown = ", ".join(i.hex() for i in ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        super().__init__(
            f"blob {blob_id} of {owner.decode(errors='replace')!r} is corrupt ({why}); "
            f"it held {len(ids)} record(s): {shown or 'unknown'}"
        )


@dataclass(frozen=True)
class BlobInfo:
    """What :meth:`BlobStore.write_pending` wrote: one bounded blob."""

    blob_id: int
    count: int
    raw_len: int
    comp_len: int
    dict_id: int


@dataclass
class StoreStats:
    blobs_written: int = 0
    bytes_raw_written: int = 0
    bytes_compressed_written: int = 0
    blobs_read: int = 0
    bytes_compressed_read: int = 0
    seconds_writing: float = 0.0
    seconds_reading: float = 0.0
    dictionaries_trained: int = 0
    dict_ids: dict = field(default_factory=dict)


def _options() -> Options:
    o = Options(raw_mode=True)
    o.create_if_missing(True)
    o.create_missing_column_families(True)
    return o


def _cf_options(name: str) -> Options:
    o = Options(raw_mode=True)
    if name == CF_BLOBS:
        o.set_compression_type(DBCompressionType.none())
    return o


class BlobStore:
    """A blob store on a data directory.

    ``clear`` empties an existing store at open (until restarts are recovered, a new
    queue manager starts empty). ``sync`` makes every write durable before it returns.
    ``max_blob_bytes`` / ``max_blob_records`` bound one blob, so that bringing one back
    is a bounded amount of work. ``read_only`` opens for inspection alongside nothing else.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        clear: bool = False,
        sync: bool = False,
        level: int = DEFAULT_LEVEL,
        max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
        max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
        dictionaries: bool = True,
        read_only: bool = False,
    ):
        self.path = os.fspath(path)
        self.max_blob_bytes = max_blob_bytes
        self.max_blob_records = max_blob_records
        self.use_dictionaries = dictionaries
        self.codec = Codec(level)
        self.stats = StoreStats()
        self._lock = threading.Lock()
        self._temporary = False
        self._check_directory(read_only)
        access = AccessType.read_only() if read_only else AccessType.read_write()
        cfs = {name: _cf_options(name) for name in _CFS}
        try:
            self._db = Rdict(self.path, options=_options(), column_families=cfs, access_type=access)
        except Exception as e:
            raise StoreError(f"cannot open the store at {self.path}: {e}") from e
        self._cf = {name: self._db.get_column_family(name) for name in _CFS}
        self._h = {name: self._db.get_column_family_handle(name) for name in _CFS}
        self._wopts = WriteOptions()
        self._wopts.sync = sync
        meta = self._cf[CF_META]
        stored = meta.get(b"format")
        if stored is None:
            if read_only:
                raise StoreError(f"{self.path} is not a sweepq store (no format record)")
            meta[b"format"] = _U32.pack(STORE_FORMAT)
        elif _U32.unpack(stored)[0] > STORE_FORMAT:
            raise StoreError(
                f"{self.path} holds store format {_U32.unpack(stored)[0]}, newer than this "
                f"sweepq's {STORE_FORMAT}; upgrade sweepq to open it"
            )
        if clear and not read_only:
            self._clear()
        raw_next = meta.get(b"next_id")
        self._next_id = _U64.unpack(raw_next)[0] if raw_next else 1
        self._chains: dict[bytes, list[int]] = {
            k: list(struct.unpack(f"<{len(v) // 8}Q", v)) for k, v in self._cf[CF_CHAINS].items()
        }
        self._dict_refs: dict[int, int] = {}
        self._blob_dict: dict[int, int] = {}  # blob id -> its dictionary, for blobs that use one
        self._scope_dict: dict[bytes, int] = {}
        self._samples: dict[bytes, list[bytes]] = {}
        self._sample_bytes: dict[bytes, int] = {}
        for k, v in meta.items(from_key=b"dict/"):
            if not k.startswith(b"dict/"):
                break
            self.codec.add_dict(_U32.unpack(k[5:])[0], v)
        for k, v in meta.items(from_key=b"dictscope/"):
            if not k.startswith(b"dictscope/"):
                break
            self._scope_dict[k[10:]] = _U32.unpack(v)[0]

    @classmethod
    def temporary(cls, **kw) -> BlobStore:
        """A private store in a new temporary directory, removed by :meth:`close`."""
        path = tempfile.mkdtemp(prefix="sweepq-")
        store = cls(path, **kw)
        store._temporary = True
        # A queue manager that is never closed must not leave its directory behind.
        weakref.finalize(store, shutil.rmtree, path, True)
        return store

    def _check_directory(self, read_only: bool) -> None:
        if not os.path.exists(self.path):
            if read_only:
                raise StoreError(f"{self.path} does not exist")
            return
        if not os.path.isdir(self.path):
            raise StoreError(f"{self.path} is not a directory")
        entries = os.listdir(self.path)
        if entries and "CURRENT" not in entries:
            raise StoreError(f"{self.path} is not a sweepq store (it holds other files); choose an empty directory")
        if "CURRENT" in entries:
            try:
                cfs = set(Rdict.list_cf(self.path, Options(raw_mode=True)))
            except Exception as e:
                raise StoreError(f"{self.path} is not a readable RocksDB store: {e}") from e
            if CF_META not in cfs:
                raise StoreError(f"{self.path} is a RocksDB database but not a sweepq store")

    def _clear(self) -> None:
        wb = WriteBatch(raw_mode=True)
        for name in (CF_BLOBS, CF_MANIFESTS, CF_CHAINS):
            for k in self._cf[name].keys():  # noqa: SIM118 - an Rdict, not a dict
                wb.delete(k, self._h[name])
        for k in self._cf[CF_META].keys():  # noqa: SIM118 - an Rdict
            if k != b"format":
                wb.delete(k, self._h[CF_META])
        self._db.write(wb, self._wopts)

    # -- writing ---------------------------------------------------------------------------

    def write_pending(
        self,
        owner: bytes,
        records: Sequence[bytes],
        ids: Sequence[bytes],
        scope: bytes | None = None,
    ) -> list[BlobInfo]:
        """Compress ``records`` into bounded blobs and write them as pending (in no chain).

        ``ids`` (one per record) and ``owner`` go to the manifest, to name the records if a
        blob is ever damaged. ``scope`` (e.g. a queue) selects the trained dictionary.
        Returns the blobs in record order.
        """
        if len(records) != len(ids):
            raise ValueError("one id per record")
        t0 = time.perf_counter()
        dict_id = self._dictionary_for(scope, records) if scope is not None and self.use_dictionaries else 0
        out: list[BlobInfo] = []
        for lo, hi in self._split(records):
            part = records[lo:hi]
            raw = fmt.frame(list(part))
            body = self.codec.compress(raw, dict_id)
            value = fmt.pack(fmt.CODEC_ZSTD, dict_id, len(part), len(raw), body)
            manifest = self.codec.compress(_U32.pack(hi - lo + 1) + fmt.frame([owner, *ids[lo:hi]]))
            with self._lock:
                blob_id = self._next_id
                self._next_id += 1
                if dict_id:
                    self._dict_refs[dict_id] = self._dict_refs.get(dict_id, 0) + 1
                    self._blob_dict[blob_id] = dict_id
            wb = WriteBatch(raw_mode=True)
            key = _U64.pack(blob_id)
            wb.put(key, value, self._h[CF_BLOBS])
            wb.put(key, manifest, self._h[CF_MANIFESTS])
            wb.put(b"next_id", _U64.pack(blob_id + 1), self._h[CF_META])
            self._write(wb)
            out.append(BlobInfo(blob_id, len(part), len(raw), len(value), dict_id))
            self.stats.blobs_written += 1
            self.stats.bytes_raw_written += len(raw)
            self.stats.bytes_compressed_written += len(value)
        self.stats.seconds_writing += time.perf_counter() - t0
        return out

    def _split(self, records: Sequence[bytes]):
        """Cut ``records`` into runs of at most max_blob_records / max_blob_bytes (framed)."""
        n = len(records)
        ends = list(accumulate(len(r) + 4 for r in records))  # framed bytes up to each record
        lo = 0
        base = 0
        while lo < n:
            # The longest run from lo within the byte bound (at least one record) ...
            hi = bisect_right(ends, base + self.max_blob_bytes, lo, min(n, lo + self.max_blob_records))
            hi = max(hi, lo + 1)
            yield lo, hi
            base = ends[hi - 1]
            lo = hi

    def delete_pending(self, blob_ids: Sequence[int]) -> None:
        """Remove blobs that never made it into a chain (an aborted sweep)."""
        if not blob_ids:
            return
        wb = WriteBatch(raw_mode=True)
        for b in blob_ids:
            self._delete_blob(wb, b)
        self._write(wb)

    def link(self, chain: bytes, blob_ids: Sequence[int], at_head: bool) -> None:
        """Link pending blobs into ``chain`` (at its head or tail, in the order given), atomically."""
        with self._lock:
            ids = self._chains.get(chain, [])
            ids = [*blob_ids, *ids] if at_head else [*ids, *blob_ids]
            wb = WriteBatch(raw_mode=True)
            wb.put(chain, struct.pack(f"<{len(ids)}Q", *ids), self._h[CF_CHAINS])
            self._write(wb)
            self._chains[chain] = ids

    def unlink(self, chain: bytes, blob_id: int) -> None:
        """Take ``blob_id`` out of ``chain`` and delete it, in one atomic batch."""
        self._remove_from_chain(chain, blob_id, delete=True)

    def detach(self, chain: bytes, blob_id: int) -> None:
        """Take ``blob_id`` out of ``chain`` but keep the blob (a damaged one, for inspection)."""
        self._remove_from_chain(chain, blob_id, delete=False)

    def _remove_from_chain(self, chain: bytes, blob_id: int, delete: bool) -> None:
        with self._lock:
            ids = [b for b in self._chains.get(chain, []) if b != blob_id]
            wb = WriteBatch(raw_mode=True)
            if ids:
                wb.put(chain, struct.pack(f"<{len(ids)}Q", *ids), self._h[CF_CHAINS])
            else:
                wb.delete(chain, self._h[CF_CHAINS])
            if delete:
                self._delete_blob(wb, blob_id)
            self._write(wb)
            if ids:
                self._chains[chain] = ids
            else:
                self._chains.pop(chain, None)

    def drop_chain(self, chain: bytes) -> None:
        """Delete a chain and all its blobs (a queue deleted with purge)."""
        with self._lock:
            ids = self._chains.pop(chain, [])
            wb = WriteBatch(raw_mode=True)
            wb.delete(chain, self._h[CF_CHAINS])
            for b in ids:
                self._delete_blob(wb, b)
            self._write(wb)

    def _delete_blob(self, wb: WriteBatch, blob_id: int) -> None:
        key = _U64.pack(blob_id)
        dict_id = self._blob_dict.pop(blob_id, 0)  # known for every blob written since open
        if dict_id and dict_id in self._dict_refs:
            self._dict_refs[dict_id] -= 1
            if self._dict_refs[dict_id] <= 0 and dict_id not in self._scope_dict.values():
                # Kept while any blob refers to it; this was the last one.
                del self._dict_refs[dict_id]
                wb.delete(b"dict/" + _U32.pack(dict_id), self._h[CF_META])
        wb.delete(key, self._h[CF_BLOBS])
        wb.delete(key, self._h[CF_MANIFESTS])

    def _write(self, wb: WriteBatch) -> None:
        try:
            self._db.write(wb, self._wopts)
        except Exception as e:
            raise StoreError(f"write to {self.path} failed: {e}") from e

    # -- reading ---------------------------------------------------------------------------

    def read(self, blob_id: int) -> list[bytes]:
        """The records of one blob, verified. Raises BlobCorruptError naming what it held."""
        t0 = time.perf_counter()
        value = self._cf[CF_BLOBS].get(_U64.pack(blob_id))
        if value is None:
            raise self._corrupt(blob_id, "missing from the store")
        try:
            head, body = fmt.unpack(value)
            if head.codec == fmt.CODEC_ZSTD:
                raw = self.codec.decompress(body, head.raw_len, head.dict_id)
            else:
                raw = bytes(body)
            records = fmt.unframe(raw, head.count)
        except Exception as e:  # FormatError, a missing dictionary (KeyError), zstd's ZstdError
            raise self._corrupt(blob_id, str(e)) from e
        self.stats.blobs_read += 1
        self.stats.bytes_compressed_read += len(value)
        self.stats.seconds_reading += time.perf_counter() - t0
        return records

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        """(owner, record ids) of a blob, from its separately stored manifest."""
        raw = self._cf[CF_MANIFESTS].get(_U64.pack(blob_id))
        if raw is None:
            return b"?", []
        data = self.codec.decompress(raw, 0)
        parts = fmt.unframe(data[4:], _U32.unpack_from(data)[0])
        return parts[0], parts[1:]

    def _corrupt(self, blob_id: int, why: str) -> BlobCorruptError:
        try:
            owner, ids = self.manifest(blob_id)
        except Exception:  # the manifest may be damaged too: still name the blob
            owner, ids = b"?", []
        return BlobCorruptError(blob_id, owner, ids, why)

    def chain(self, name: bytes) -> list[int]:
        return list(self._chains.get(name, []))

    def chains(self) -> dict[bytes, list[int]]:
        return {k: list(v) for k, v in self._chains.items()}

    def blob_header(self, blob_id: int) -> fmt.Header:
        """The verified header of a stored blob (for inspection)."""
        value = self._cf[CF_BLOBS].get(_U64.pack(blob_id))
        if value is None:
            raise self._corrupt(blob_id, "missing from the store")
        try:
            return fmt.unpack(value)[0]
        except fmt.FormatError as e:
            raise self._corrupt(blob_id, str(e)) from e

    def pending(self) -> list[int]:
        """Blob ids that are in no chain."""
        linked = {b for ids in self._chains.values() for b in ids}
        keys = self._cf[CF_BLOBS].keys()
        return [_U64.unpack(k)[0] for k in keys if _U64.unpack(k)[0] not in linked]

    # -- dictionaries ---------------------------------------------------------------------

    def _dictionary_for(self, scope: bytes, records: Sequence[bytes]) -> int:
        """The scope's dictionary id, training one once enough small records were seen."""
        current = self._scope_dict.get(scope, 0)
        if current or not records:
            return current
        avg = sum(map(len, records)) / len(records)
        if avg > DICT_MAX_AVG_RECORD:
            return 0
        with self._lock:
            samples = self._samples.setdefault(scope, [])
            have = self._sample_bytes.get(scope, 0)
            for r in records:
                if have >= DICT_SAMPLE_BYTES:
                    break
                samples.append(bytes(r))
                have += len(r)
            self._sample_bytes[scope] = have
            if have < DICT_SAMPLE_BYTES or len(samples) < DICT_MIN_SAMPLES:
                return 0
            del self._samples[scope]
        try:
            raw = train(samples)
        except Exception:  # zstd refuses samples it cannot learn from: go without
            return 0
        with self._lock:
            dict_id = max([0, *self._scope_dict.values(), *self._dict_refs]) + 1
            self.codec.add_dict(dict_id, raw)
            wb = WriteBatch(raw_mode=True)
            wb.put(b"dict/" + _U32.pack(dict_id), raw, self._h[CF_META])
            wb.put(b"dictscope/" + scope, _U32.pack(dict_id), self._h[CF_META])
            self._write(wb)
            self._scope_dict[scope] = dict_id
            self.stats.dictionaries_trained += 1
            self.stats.dict_ids[scope] = dict_id
        return dict_id

    # -- lifetime ---------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database; a temporary store is removed."""
        if self._db is None:
            return
        self._db.close()
        # rocksdict keeps the database locked while column-family objects are alive.
        self._cf.clear()
        self._h.clear()
        self._db = None
        if self._temporary:
            shutil.rmtree(self.path, ignore_errors=True)

    def __enter__(self) -> BlobStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
