"""How runs are cut into pieces and blobs: one function for the engine (interpreted) and the
replay kernel (compiled), checked here against the plain greedy cut it stands for."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest

from sweepq.sweeper.runs import TARGET_BYTES, TARGET_MAX, blob_ends, cut_run, pieces


def greedy(prefix, lo, hi, max_bytes, max_records):
    """Record by record: add to the blob while it fits (framed), at least one record."""
    out, p0 = [], lo
    while p0 < hi:
        p1, s = min(p0 + TARGET_MAX, hi), p0
        while s < p1:
            e, used = s, 0
            while e < p1 and e - s < max_records:
                size = prefix[e + 1] - prefix[e] + 4
                if e > s and used + size > max_bytes:
                    break
                used += size
                e += 1
            out.append(e)
            s = e
        p0 = p1
    return out


@pytest.mark.parametrize("seed", range(40))
def test_cut_run_is_the_greedy_cut(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40_000))
    sizes = rng.integers(0, int(rng.choice([50, 500, 5000, 300_000])), n)
    prefix = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=prefix[1:])
    max_bytes, max_records = int(rng.choice([100, 4096, 262_144])), int(rng.choice([1, 3, 16, 1024]))
    lo = int(rng.integers(0, n))
    ends = np.empty(n + 1, np.int64)
    k = cut_run(prefix, lo, n, max_bytes, max_records, ends)
    assert list(ends[:k]) == greedy(prefix, lo, n, max_bytes, max_records)


def test_the_engine_does_not_load_numba():
    """Only the replay compiles: an application that queues and sweeps does not pay numba's
    start-up time and memory."""
    code = (
        "import sys\n"
        "from sweepq.engine import OO, QueueManager, SweeperSettings\n"
        "qm = QueueManager(sweeping=SweeperSettings(run=False)); qm.define_queue('Q')\n"
        "h = qm.connect().open('Q', OO.OUTPUT | OO.INPUT_SHARED)\n"
        "h.put_many([b'x' * 100] * 3000); qm.sweeper.run_once(); h.get_many(100)\n"
        "assert qm.stats()['Q'].msgs_swept > 0\n"
        "print('numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    assert out.stdout.strip() == "False"


def _get_order_selection(front, rear, limit, keep):
    """The definition, message by message: walk the fronts in get order (lane 9 first), the
    first ``keep`` stay; each rear moves up to its limit."""
    kept = [0] * len(front)
    for lane in range(len(front) - 1, -1, -1):
        for _ in range(front[lane]):
            if keep:
                kept[lane] += 1
                keep -= 1
    return kept, [min(r, m) for r, m in zip(rear, limit, strict=True)]


@pytest.mark.parametrize("seed", range(20))
def test_choose_runs_is_the_get_order_buffer_interpreted_and_compiled(seed):
    import numba

    from sweepq.sweeper.runs import choose_runs

    rng = np.random.default_rng(seed)
    front = rng.integers(0, 6, 10) * rng.integers(0, 2, 10)
    rear = rng.integers(0, 6, 10)
    limit = rng.integers(0, 8, 10)
    keep = int(rng.integers(0, 30))
    want = _get_order_selection(front.tolist(), rear.tolist(), limit.tolist(), keep)
    compiled = numba.njit(choose_runs)
    for fn in (choose_runs, compiled):
        kept, moved = np.zeros(10, np.int64), np.zeros(10, np.int64)
        fn(front, rear, limit, keep, kept, moved)
        assert (kept.tolist(), moved.tolist()) == want
    kept, moved = [0] * 10, [0] * 10  # the engine passes lists
    choose_runs(front.tolist(), rear.tolist(), limit.tolist(), keep, kept, moved)
    assert (kept, moved) == want


@pytest.mark.parametrize("seed", range(30))
def test_a_run_is_cut_into_pieces_of_whole_blobs_of_about_a_mebibyte(seed):
    """Each piece is the first whole blobs of the greedy cut from its start (the sweeper cuts
    a piece's copied records again: the same blobs, so no piece ends in a part-filled one),
    as many as stay within TARGET_BYTES (at least one) and TARGET_MAX records."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60_000))
    sizes = rng.integers(1, int(rng.choice([50, 300, 5000, 300_000])), n)
    prefix = np.zeros(n + 1, np.int64)
    np.cumsum(sizes, out=prefix[1:])
    max_bytes, max_records = int(rng.choice([4096, 262_144])), int(rng.choice([16, 1024]))
    cut = pieces(sizes, max_bytes, max_records)
    assert cut[0][0] == 0 and cut[-1][1] == n
    assert all(a[1] == b[0] for a, b in itertools.pairwise(cut))
    for lo, hi in cut:
        own = [lo + e for e in blob_ends(sizes[lo:hi], max_bytes, max_records)]
        # the greedy cut from the piece's start, over the records a piece can reach (within
        # TARGET_BYTES, and one more: every blob that ends before that record is the run's)
        reach = int(np.searchsorted(prefix, prefix[lo] + TARGET_BYTES, side="right"))
        from_here = greedy(prefix, lo, min(n, lo + TARGET_MAX, reach), max_bytes, max_records)
        assert own == from_here[: len(own)] and own[-1] == hi
        assert hi - lo <= TARGET_MAX
        assert len(own) == 1 or prefix[hi] - prefix[lo] <= TARGET_BYTES
        if len(from_here) > len(own):  # one blob more would have passed the target
            assert prefix[from_here[len(own)]] - prefix[lo] > TARGET_BYTES
