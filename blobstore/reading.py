"""Reading blobs back: a blob's records (or its whole frame), verified against its key, its
owner and the check of the ids it was linked with; its manifest; its header and raw bytes
for inspection.

Invariant: what a read returns is the blob that was linked, whole; anything else (damage,
a missing blob, another blob's bytes under the key) is :class:`BlobCorruptError` naming what
the blob held, from its separately stored manifest.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

from . import format as fmt
from .access import Access, store_error
from .codec import Codec
from .kv import CF_BLOBS, CF_MANIFESTS, KVCorruption, KVError
from .protocol import BlobCorruptError, Frame, StoreDamageError
from .stats import StoreStats

_U64 = struct.Struct(">Q")
_U32 = struct.Struct("<I")


class BlobReader:
    """Reads the blobs of the store behind ``access`` with its ``codec``, counting in ``stats``.
    Thread-safe (it keeps no state but the counts)."""

    def __init__(self, access: Access, codec: Codec, stats: StoreStats):
        self._access = access
        self._codec = codec
        self._stats = stats

    def read(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> list[bytes]:
        """See :meth:`Store.read`."""
        return self._read(blob_id, owner, check, fmt.unframe)[0]

    def read_frame(self, blob_id: int, owner: bytes | None = None, check: int | None = None) -> Frame:
        """See :meth:`Store.read_frame`."""

        def framed(raw: bytes, count: int) -> tuple[bytes, int]:
            fmt.check_frame(raw, count)
            return raw, count

        (raw, count), head = self._read(blob_id, owner, check, framed)
        return Frame(raw, count, head.ids_crc)

    def _read(
        self, blob_id: int, owner: bytes | None, check: int | None, unframe: Callable[[bytes, int], Any]
    ) -> tuple[Any, fmt.Header]:
        """A blob's frame made into what ``unframe(raw, count)`` returns, with its header,
        everything verified; raises as :meth:`read`."""
        t0 = time.perf_counter()
        try:
            value = self._access.kv().get(CF_BLOBS, _U64.pack(blob_id))
        except KVCorruption as e:
            raise self.corrupt(blob_id, str(e)) from e
        except KVError as e:
            raise store_error(e) from e
        if value is None:
            raise self.corrupt(blob_id, "missing from the store")
        try:
            head, body = fmt.unpack(value, blob_id, owner, check)
            if head.codec == fmt.CODEC_ZSTD:
                raw = self._codec.decompress(body, head.raw_len, head.dict_id)
            else:
                raw = bytes(body)
            records = unframe(raw, head.count)
        except Exception as e:  # FormatError, a missing dictionary (KeyError), zstd's ZstdError
            raise self.corrupt(blob_id, str(e)) from e
        self._stats.blobs_read += 1
        self._stats.bytes_compressed_read += len(value)
        self._stats.seconds_reading += time.perf_counter() - t0
        return records, head

    def manifest(self, blob_id: int) -> tuple[bytes, list[bytes]]:
        """(owner, record ids) of a blob, from its separately stored manifest; (b"?", []) when
        there is none. :raises StoreError: it cannot be read."""
        raw = self._access.get(CF_MANIFESTS, _U64.pack(blob_id))
        if raw is None:
            return b"?", []
        try:
            data = self._codec.decompress(raw, 0)
            parts = fmt.unframe(data[4:], _U32.unpack_from(data)[0])
        except Exception as e:  # zstd's ZstdError, a FormatError, a struct.error: damaged
            raise StoreDamageError(f"the manifest of blob {blob_id} is damaged ({e})", f"manifest {blob_id}") from e
        return parts[0], parts[1:]

    def corrupt(self, blob_id: int, why: str) -> BlobCorruptError:
        """The error for a damaged blob, naming what its manifest says it held."""
        try:
            owner, ids = self.manifest(blob_id)
        except Exception:  # the manifest may be damaged too: still name the blob
            owner, ids = b"?", []
        return BlobCorruptError(blob_id, owner, ids, why)

    def header(self, blob_id: int) -> fmt.Header:
        """The verified header of a stored blob (for inspection)."""
        value = self._access.get(CF_BLOBS, _U64.pack(blob_id))
        if value is None:
            raise self.corrupt(blob_id, "missing from the store")
        try:
            return fmt.unpack(value, blob_id)[0]
        except fmt.FormatError as e:
            raise self.corrupt(blob_id, str(e)) from e
