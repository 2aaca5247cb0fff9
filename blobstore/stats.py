"""What a store has done since it opened: blobs written and read, their bytes and time, and
the dictionaries it trained (``sweepq inspect`` and the benchmarks report them)."""

from __future__ import annotations

from dataclasses import dataclass, field


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
    dict_ids: dict = field(default_factory=dict)  # scope -> the dictionary trained for it
