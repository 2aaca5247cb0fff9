"""The checkpoint's format (engine/durable/ledger.py): a lane's arrival numbers and MsgIds
come back exactly as they went in, however they look, and a checkpoint of the first format
(SQL1, written before this one) is still read."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

from sweepq.engine.durable import ledger

RUN_A = b"SWQ QM1     abcd"
RUN_B = b"SWQ QM1     efgh"


def generated(prefix: bytes, seqs) -> list[bytes]:
    return [prefix + int(s).to_bytes(8, "big") for s in seqs]


def entry(seqs, ids) -> bytes:
    """A checkpoint with one lane entry (queue Q, lane 4) and no blobs."""
    parts = ledger._pack_lane(b"Q", 4, np.array(seqs, np.uint64), np.array(ids, "V24"))
    head = ledger._HEAD.pack(ledger.MAGIC, 1 << 40, 7, 1, 0, 1)
    return zlib.compress(head + b"".join(bytes(memoryview(p)) for p in parts))


CASES = {
    "one run's generated ids": (list(range(1, 301)), generated(RUN_A, range(1, 301))),
    "two runs, a MsgId of its own between": (
        [3, 4, 9, 10, 11],
        [*generated(RUN_A, [3, 4]), b"my own message id......!", *generated(RUN_B, [10, 11])],
    ),
    "a run coming back after another": (
        [1, 2, 3],
        [*generated(RUN_A, [1]), *generated(RUN_B, [2]), *generated(RUN_A, [3])],
    ),
    "steps too wide for 4 bytes": ([1, 2**40, 2**63 + 5], generated(RUN_A, [1, 2**40, 2**63 + 5])),
    "one message": ([42], [b"x" * 24]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_lane_comes_back_as_it_went_in(case):
    seqs, ids = CASES[case]
    got = ledger.parse(entry(seqs, ids))
    assert (got.next_seq, got.blob_horizon, got.closed) == (1 << 40, 7, True)
    back_seqs, back_ids = got.records["Q", 4]
    assert back_seqs.tolist() == seqs and back_ids.tolist() == ids


def test_numbers_out_of_order_are_kept_as_they_are_and_sorted_when_read():
    seqs, ids = [5, 3, 8], generated(RUN_A, [5, 3, 8])
    back_seqs, back_ids = ledger.parse(entry(seqs, ids)).records["Q", 4]
    assert back_seqs.tolist() == [3, 5, 8] and back_ids.tolist() == generated(RUN_A, [3, 5, 8])


def test_a_million_generated_ids_take_about_a_byte_each():
    n = 1_000_000
    seqs = np.arange(1, n + 1, dtype=np.uint64)
    ids = np.empty((n, 24), np.uint8)
    ids[:, :16] = np.frombuffer(RUN_A, np.uint8)
    ids[:, 16:] = seqs.astype(">u8").view(np.uint8).reshape(n, 8)
    raw = b"".join(bytes(memoryview(p)) for p in ledger._pack_lane(b"Q", 0, seqs, ids.view("V24").ravel()))
    assert len(raw) < 1.1 * n


def test_a_damaged_entry_is_refused_not_misread():
    good = zlib.decompress(entry([1, 2, 3], generated(RUN_A, [1, 2, 3])))
    with pytest.raises(ValueError):
        ledger.parse(zlib.compress(good[:-5]))  # cut short
    at = ledger._HEAD.size + ledger._LANE.size + 1 + 8 + 2 * 1  # the first prefix run's start
    bad = good[:at] + struct.pack("<I", 2) + good[at + 4 :]  # the first run no longer starts at 0
    with pytest.raises(ValueError):
        ledger.parse(zlib.compress(bad))


def test_a_checkpoint_of_the_first_format_is_read():
    seqs = np.array([2, 5, 6], np.uint64)
    ids = [*generated(RUN_A, [2, 5]), b"z" * 24]
    lane = ledger._LANE_1.pack(1, 0, 3) + b"Q" + seqs.astype("<u8").tobytes() + b"".join(ids)
    blob = ledger._BLOB.pack(9, 1, 0, 10, 12, 3) + b"Q" + np.packbits([True, False, True]).tobytes()
    data = zlib.compress(ledger._HEAD.pack(ledger.MAGIC_1, 20, 10, 1, 1, 0) + lane + blob)
    got = ledger.parse(data)
    assert got.records["Q", 0][0].tolist() == [2, 5, 6] and got.records["Q", 0][1].tolist() == ids
    assert got.blobs[9].live.tolist() == [True, False, True] and not got.closed


def test_the_msg_ids_of_some_positions_are_those_of_the_whole_lane():
    """A lane's MsgIds are made only for the positions asked for (ledger.PackedIds): the same
    as those of the whole lane, wherever the odd ones and the runs fall."""
    rng = np.random.default_rng(5)
    seqs = np.sort(rng.choice(np.arange(1, 10_000), 400, replace=False)).astype(np.uint64)
    ids = generated(RUN_A, seqs[:150]) + generated(RUN_B, seqs[150:300]) + generated(RUN_A, seqs[300:])
    for k in rng.choice(400, 30, replace=False):
        ids[k] = bytes(rng.integers(0, 256, 24, np.uint8))  # MsgIds of their own, anywhere
    _, back = ledger.parse(entry(seqs.tolist(), ids)).records["Q", 4]
    assert isinstance(back, ledger.PackedIds) and back.tolist() == ids
    for _ in range(10):
        mask = rng.random(400) < 0.1
        assert back[mask].tolist() == [i for i, m in zip(ids, mask, strict=True) if m]
