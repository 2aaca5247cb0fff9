"""zstd compression of blob frames, with optional trained dictionaries.

The invariant that keeps python-zstandard's C code safe here: **no zstd object is ever
reachable from two threads.** Each thread builds its own compressor, decompressor *and*
``ZstdCompressionDict`` per (kind, dictionary) from the dictionary's raw ``bytes``, which are
immutable and the only thing threads share. python-zstandard documents its compressor and
decompressor objects as unsafe to share; a shared ``ZstdCompressionDict`` is unsafe too,
because the decompression form of a dictionary is built lazily, on first use, by whichever
decompressor gets there first, with the GIL released (``ensure_ddict`` in its
``c-ext/compressiondict.c``): two threads racing there both build one and one of the two is
lost (the stress test in tests/test_codec.py measures the leak). A buffer given to
``decompress`` is the immutable ``bytes`` read from the store (or a read-only view of them),
so no other thread can free or change it while the C code runs without the GIL.

Building a context costs microseconds and a dictionary's digested form a few dozen; each
thread reuses its own, so that is paid once per thread. Both calls release the GIL, so a
read-ahead thread decompresses while the application runs.
"""

from __future__ import annotations

import threading

import zstandard

DEFAULT_LEVEL = 1  # fastest; see the benchmark notes in the README for the measured ratios
DICT_SIZE = 16 * 1024
# zstd's trainer counts 8-byte d-mers: shorter samples teach it nothing, and (see train)
# a training share of fewer than 8 bytes crashes it.
MIN_SAMPLE_BYTES = 8
MIN_SAMPLES = 16


class Codec:
    """Compress / decompress frames with per-thread zstd state (see the module docstring).

    Thread-safe: every method may be called from any thread at any time."""

    def __init__(self, level: int = DEFAULT_LEVEL):
        if not 1 <= level <= 22:
            raise ValueError(f"zstd level {level} is outside 1..22")
        self.level = level
        self._raw: dict[int, bytes] = {}  # dictionary id -> its raw bytes (immutable, shared)
        self._local = threading.local()

    def add_dict(self, dict_id: int, raw: bytes) -> None:
        """Make dictionary ``dict_id`` usable. An id keeps its bytes for the codec's life.

        :raises ValueError: ``dict_id`` already names other bytes."""
        raw = bytes(raw)
        known = self._raw.setdefault(dict_id, raw)
        if known != raw:
            raise ValueError(f"zstd dictionary {dict_id} is already defined with other bytes")

    def has_dict(self, dict_id: int) -> bool:
        return dict_id in self._raw

    def raw_dicts(self) -> dict[int, bytes]:
        """Every dictionary's raw bytes by id (to write them again after damage)."""
        return dict(self._raw)

    def _mine(self) -> dict:
        """This thread's zstd objects, by (kind, dictionary id)."""
        c = getattr(self._local, "cache", None)
        if c is None:
            c = self._local.cache = {}
        return c

    def _dict(self, cache: dict, dict_id: int) -> zstandard.ZstdCompressionDict | None:
        """This thread's own ``ZstdCompressionDict`` for ``dict_id`` (None: no dictionary)."""
        if not dict_id:
            return None
        d = cache.get(("dict", dict_id))
        if d is None:
            raw = self._raw.get(dict_id)
            if raw is None:
                raise KeyError(f"zstd dictionary {dict_id} is missing from the store")
            d = cache["dict", dict_id] = zstandard.ZstdCompressionDict(raw)
        return d

    def compress(self, frame: bytes, dict_id: int = 0) -> bytes:
        cache = self._mine()
        cctx = cache.get(("c", dict_id))
        if cctx is None:
            cctx = cache["c", dict_id] = zstandard.ZstdCompressor(
                level=self.level, dict_data=self._dict(cache, dict_id)
            )
        return cctx.compress(frame)

    def decompress(self, body: bytes | memoryview, raw_len: int, dict_id: int = 0) -> bytes:
        """The frame ``body`` held. ``body`` is immutable (``bytes``, or a view of ``bytes``).

        :raises KeyError: its dictionary is unknown. :raises zstandard.ZstdError: damaged."""
        if type(body) is memoryview and (not body.readonly or type(body.obj) is not bytes):
            raise TypeError("decompress takes bytes or a read-only view of bytes")
        cache = self._mine()
        dctx = cache.get(("d", dict_id))
        if dctx is None:
            dctx = cache["d", dict_id] = zstandard.ZstdDecompressor(dict_data=self._dict(cache, dict_id))
        return dctx.decompress(body, max_output_size=raw_len)


def train(samples: list[bytes], size: int = DICT_SIZE) -> bytes:
    """Train a dictionary from sample records (python-zstandard's fastCover trainer).

    Samples shorter than :data:`MIN_SAMPLE_BYTES` are left out, which keeps the trainer's
    input safe by construction: zstd (1.5.7, bundled by python-zstandard 0.25) trains on the
    first three quarters of the samples and counts their d-mers as ``size - 8 + 1`` in
    unsigned arithmetic; a share of fewer than 8 bytes (e.g. hundreds of empty samples
    first) wraps that around and the trainer reads far past its buffer (SIGSEGV; zstd
    issues #4499 and #4682 are of this family). With every sample 8 bytes or more, any
    share of one sample or more has 8.

    :raises ValueError: fewer than :data:`MIN_SAMPLES` usable samples.
    :raises zstandard.ZstdError: zstd could not learn from them."""
    usable = [s for s in samples if len(s) >= MIN_SAMPLE_BYTES]
    if len(usable) < MIN_SAMPLES:
        raise ValueError(f"{len(usable)} samples of {MIN_SAMPLE_BYTES} bytes or more; a dictionary needs {MIN_SAMPLES}")
    return zstandard.train_dictionary(size, usable).as_bytes()  # type: ignore[arg-type]  # list is invariant


def zstd_error() -> type[Exception]:
    """zstd's own error type (for callers that must not import zstandard)."""
    return zstandard.ZstdError
