"""pipeline/arena.py: the shared memory a pre-started daemon makes ready for a direct task's
columns. A trace read into it equals one read into fresh arrays; one process at a time holds
it; it is sized from the trace's footers and made present until told to stop."""

from __future__ import annotations

import os

import numpy as np
import pytest

from sweepq.pipeline import arena, direct
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import POOL, WORK_BYTES_PER_SLOT, drop_work, replay, work_of, work_slots
from sweepq.sweeper.traces import generate, write


@pytest.fixture
def trace_file(tmp_path):
    t = generate("many-queues", seconds=3, rate=400, queues=20, seed=3)
    path = str(tmp_path / "t.parquet")
    write(t, path, row_group=700)
    return path, len(t)


@pytest.fixture
def no_arena():
    drop_work()
    yield
    arena._arena = None  # a test's arena is not the next one's
    arena._given = False
    drop_work()  # nor its work arrays, kept in this process's workspace


def test_the_arena_is_sized_for_a_parquet_traces_columns_and_nothing_else(trace_file, tmp_path):
    path, n = trace_file
    # the columns' 18 bytes an event and the kernel's work arrays' 13 a slot (a slot per event at most)
    assert arena.per_event() == arena.EVENT_BYTES + WORK_BYTES_PER_SLOT == 18 + 13
    assert arena.bytes_for(path) == n * arena.per_event() + 8 * arena.ALIGN
    assert arena.bytes_for(str(tmp_path / "t.csv")) == 0
    assert arena.bytes_for(str(tmp_path / "missing.parquet")) == 0


def test_arrays_are_laid_aligned_one_after_the_other_then_fresh_once_full():
    a = arena.Arena(4096)
    empty = a.allocator()
    x = empty(10, np.int8)
    y = empty(100, np.int64)
    z = empty(1000, np.int64)  # 8000 bytes: more than is left
    base = np.frombuffer(a.map, np.uint8).ctypes.data
    assert x.ctypes.data == base and y.ctypes.data == base + arena.ALIGN
    assert y.dtype == np.int64 and len(y) == 100
    assert z.base is None or z.ctypes.data < base or z.ctypes.data >= base + 4096  # not in the arena
    y[:] = 7
    assert (np.frombuffer(a.map, np.int64, 100, arena.ALIGN) == 7).all()  # the arena's memory


def test_populating_stops_when_told_and_goes_on_to_the_end_otherwise():
    a = arena.Arena(3 * arena.CHUNK + 5)
    calls = []
    assert a.populate(lambda: calls.append(1) or len(calls) > 2) == 2 * arena.CHUNK
    assert a.populate() == a.size


def test_a_trace_read_into_the_arena_equals_one_read_into_fresh_arrays(trace_file, no_arena):
    path, _ = trace_file
    spec = {"path": path, "buckets": 3, "bucket": 1, "threads": 2}
    fresh, span = direct.read_bucket(spec)
    assert arena.prepare(path) is not None
    into, span2 = direct.read_bucket(spec)  # this process claims it
    base = np.frombuffer(arena._arena.map, np.uint8).ctypes.data
    assert base <= into.time_us.ctypes.data < base + arena._arena.size
    assert span2 == span and into.queues == fresh.queues
    for name in ("time_us", "queue", "op", "nbytes", "priority", "lane_counts"):
        assert np.array_equal(getattr(into, name), getattr(fresh, name)), name
    assert arena.claimed() is None  # once a process: a reused worker's next read allocates its own


def test_one_process_holds_the_arena_another_allocates_its_own(trace_file, no_arena):
    path, _ = trace_file
    assert arena.claimed() is None  # no arena made: a task allocates as before
    arena.prepare(path)
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker: takes it and says so, then holds it until told to end
        os.close(r)
        os.close(go_w)
        os.write(w, b"1" if arena.claimed() is not None else b"0")
        os.read(go_r, 1)  # end of file when the test closes its end
        os._exit(0)
    os.close(w)
    os.close(go_r)
    try:
        assert os.read(r, 1) == b"1"
        assert arena.claimed() is None  # held by the worker
    finally:
        os.close(go_w)
        os.waitpid(pid, 0)
        os.close(r)
    assert arena.claimed() is not None  # released when the worker ended


def test_prepare_without_a_trace_makes_none(no_arena):
    assert arena.prepare(None) is None and arena.claimed() is None


def _in(a, mem) -> bool:
    base = np.frombuffer(mem.map, np.uint8).ctypes.data
    return base <= a.ctypes.data and a.ctypes.data + a.nbytes <= base + mem.size


def test_the_claiming_task_lays_the_kernels_work_arrays_in_the_arena_and_replays_on_them(trace_file, no_arena):
    path, _ = trace_file
    spec = {"path": path, "buckets": 1, "bucket": 0, "threads": 2}
    fresh, _ = direct.read_bucket(spec)  # no arena: nothing lent
    assert POOL.kept() == []
    expected = replay(fresh, SweepPolicy(), record_header=40)
    drop_work()
    mem = arena.prepare(path)
    into, _ = direct.read_bucket(spec)
    slots = work_slots(into.lane_counts)
    kept = POOL.kept()
    assert len(kept) == 3 and all(_in(a, mem) and len(a) == slots for a in kept)
    assert not any(np.shares_memory(a, into.time_us) or np.shares_memory(a, into.nbytes) for a in kept)
    work = work_of(slots)  # what the next replay takes: the arena's
    assert all(_in(a, mem) for a in work)
    POOL.give(work[0]), POOL.give(work[1]), POOL.give(work[2])
    got = replay(into, SweepPolicy(), record_header=40)
    assert got.totals.tolist() == expected.totals.tolist() and got.summary.tolist() == expected.summary.tolist()
    assert not _in(got.totals, mem) and not _in(got.summary, mem)  # results are the caller's own memory


def test_work_arrays_that_do_not_all_fit_are_not_laid_in_the_arena(no_arena):
    a = arena.Arena(4096)
    empty = a.allocator()
    empty(100, np.int64)  # 800 bytes of columns
    assert not arena.lend_work(empty, 300)  # 300 x 13 bytes more: no room
    assert POOL.kept() == []
    assert arena.lend_work(empty, 200)  # 200 x 13 bytes (aligned): room
    assert len(POOL.kept()) == 3 and all(_in(k, a) for k in POOL.kept())


def test_an_array_laid_in_the_arena_has_its_pages_mapped_in_as_it_is_laid(no_arena):
    import resource

    a = arena.Arena(64 << 20)
    a.populate()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # a worker forked from the daemon: the pages, not their entries
        empty = a.allocator()
        x = empty(1000, np.int8)  # not page-aligned at either end
        y = empty((32 << 20) // 8, np.int64)
        mapped = a.map_in(0, 0) and a.map_in(5, 3)  # nothing, then a part of a page
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt  # (a map-in counts its own)
        y[::512] = 1  # a store to every page
        x[:] = 2
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        os.write(w, f"{int(mapped)} {faults}".encode())
        os._exit(0)
    os.close(w)
    mapped, faults = map(int, os.read(r, 100).split())
    os.waitpid(pid, 0)
    os.close(r)
    if mapped:  # Linux 5.14 or later: 8,192 pages stored to, next to no faults
        assert faults < 100
