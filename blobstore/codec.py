"""zstd compression of blob frames, with optional trained dictionaries.

python-zstandard's compressor and decompressor objects are not safe to share between
threads, so each thread keeps its own per (level, dictionary); building one costs
microseconds, reusing it saves that on every blob. Both calls release the GIL, so a
read-ahead thread decompresses while the application runs.
"""

from __future__ import annotations

import threading

import zstandard

DEFAULT_LEVEL = 1  # fastest; see the benchmark notes in the README for the measured ratios
DICT_SIZE = 16 * 1024


class Codec:
    """Compress / decompress frames; ``dicts`` maps dictionary id to its raw bytes."""

    def __init__(self, level: int = DEFAULT_LEVEL):
        if not 1 <= level <= 22:
            raise ValueError(f"zstd level {level} is outside 1..22")
        self.level = level
        self._dicts: dict[int, zstandard.ZstdCompressionDict] = {}
        self._local = threading.local()

    def add_dict(self, dict_id: int, raw: bytes) -> None:
        self._dicts[dict_id] = zstandard.ZstdCompressionDict(raw)

    def has_dict(self, dict_id: int) -> bool:
        return dict_id in self._dicts

    def _cache(self) -> dict:
        c = getattr(self._local, "cache", None)
        if c is None:
            c = self._local.cache = {}
        return c

    def compress(self, frame: bytes, dict_id: int = 0) -> bytes:
        cache = self._cache()
        key = ("c", dict_id)
        cctx = cache.get(key)
        if cctx is None:
            d = self._dicts.get(dict_id) if dict_id else None
            cctx = cache[key] = zstandard.ZstdCompressor(level=self.level, dict_data=d)
        return cctx.compress(frame)

    def decompress(self, body, raw_len: int, dict_id: int = 0) -> bytes:
        cache = self._cache()
        key = ("d", dict_id)
        dctx = cache.get(key)
        if dctx is None:
            if dict_id and dict_id not in self._dicts:
                raise KeyError(f"zstd dictionary {dict_id} is missing from the store")
            d = self._dicts.get(dict_id) if dict_id else None
            dctx = cache[key] = zstandard.ZstdDecompressor(dict_data=d)
        return dctx.decompress(body, max_output_size=raw_len)


def train(samples: list[bytes], size: int = DICT_SIZE) -> bytes:
    """Train a dictionary from sample records (python-zstandard's COVER trainer)."""
    return zstandard.train_dictionary(size, samples).as_bytes()  # type: ignore[arg-type]  # list is invariant
