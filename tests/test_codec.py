"""The zstd codec's C code never crashes (issue 16, item 3).

The SIGSEGV of the loaded demo was in zstd's dictionary trainer, reached from the sweeper's
first sweeps of a queue: zstd 1.5.7 (the one python-zstandard 0.25 bundles) trains on the
first three quarters of the samples and counts their 8-byte d-mers as ``size - 8 + 1`` in
unsigned arithmetic, so a training share of fewer than 8 bytes wraps around and the
trainer reads far past its buffer. The store handed it such samples: a sweep snapshots a
run's records without the queue's lock, and a message got meanwhile reads as an empty
record; a consumer catching up empties whole runs that way, and those empty records were
taken as samples. The first test reproduces that crash from the engine, deterministically;
each runs where a crash would be in a child process, so that before the fix it fails
(exit -11) instead of killing the test run.

Then the thread-safety half: no zstd object is shared between threads (codec.py), which the
stress test exercises with many threads compressing and decompressing with trained
dictionaries, sweeps and read-ahead at once, and which removes the one piece of shared C
state there was (a dictionary's lazily built decompression form, whose race lost memory).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.blobstore.codec import Codec, train


def run_child(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_sweep_of_runs_got_meanwhile_does_not_crash_the_dictionary_trainer():
    """The demo's crash, from the engine: sweeps whose runs a consumer takes between the
    sweep's choice and its snapshot write empty records; the queue's dictionary is trained
    on the samples that follow. Before the fix the child died with SIGSEGV in the trainer."""
    out = run_child(
        """
        import os
        from sweepq.blobstore import MemoryStore
        from sweepq.engine import QueueManager, OO, SweeperSettings
        from sweepq.sweeper import ManualClock

        off = SweeperSettings(run=False, readahead_low_water=0)
        qm = QueueManager(clock=ManualClock(), store=MemoryStore(), sweeping=off)
        qm.define_queue("Q", max_depth=10**6)
        h = qm.connect().open("Q", OO.INPUT_SHARED | OO.OUTPUT)
        taker = qm.connect().open("Q", OO.INPUT_SHARED)
        q = qm.queue_named("Q")
        begin = q.sweep.sweep_begin

        def sweep_begin_then_take_it_all(keep):
            plan = begin(keep)  # the runs are chosen; their records are read after this
            while q.depth:
                taker.get()
            return plan

        q.sweep.sweep_begin = sweep_begin_then_take_it_all  # the sweeper calls the queue's own
        for _ in range(14):  # sweeps of 100 messages, every one got meanwhile
            qm.sweeper.run_once()  # an interval without gets: the rule sweeps the next
            for i in range(100):
                h.put(os.urandom(600))
            qm.sweeper.run_once()
        del q.sweep.sweep_begin
        for _ in range(3):  # then real records, enough to train the queue's dictionary
            qm.sweeper.run_once()
            for i in range(200):
                h.put(b'{"order": %d, "note": "%s"}' % (i, os.urandom(450).hex().encode()))
            qm.sweeper.run_once()
        print("trained", qm.blob_store().stats.dictionaries_trained)
        qm.close()
        """
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "trained 1" in out.stdout, out.stdout + out.stderr[-2000:]


def test_the_trainer_is_never_given_samples_it_cannot_take():
    """The trainer's own input rule, on the smallest set that crashed zstd 1.5.7: 800 empty
    samples, then 256 real ones. Empty and very short samples are left out; too few
    samples left is a ValueError, never a crash."""
    out = run_child(
        """
        import os
        from sweepq.blobstore.codec import train

        raw = train([b""] * 800 + [os.urandom(1024) for _ in range(256)])
        print("dictionary", len(raw))
        try:
            train([b""] * 5000 + [b"x" * 7] * 5000)
        except ValueError as e:
            print("refused:", e)
        """
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "dictionary" in out.stdout and "refused:" in out.stdout, out.stdout


def test_a_store_does_not_count_empty_records_as_samples():
    store = MemoryStore(max_blob_records=64)
    empty = [b""] * 2000
    store.write_pending(b"Q/0", empty, [i.to_bytes(24, "big") for i in range(2000)], [2000], scope=b"Q")
    real = [b'{"order": %d, "note": "%s"}' % (i, os.urandom(200).hex().encode()) for i in range(800)]
    ends = [*range(64, 800, 64), 800]
    store.write_pending(b"Q/0", real, [i.to_bytes(24, "big") for i in range(800)], ends, scope=b"Q")
    assert store.stats.dictionaries_trained == 1
    assert all(len(s) >= 8 for s in store.dictionary_samples(b"Q"))


def test_no_zstd_object_is_shared_between_threads():
    """Each thread builds its own contexts and its own dictionary object from the shared
    raw bytes (a ZstdCompressionDict digests itself lazily, without the GIL)."""
    samples = [b'{"order": %d, "note": "%s"}' % (i, os.urandom(20).hex().encode()) for i in range(3000)]
    codec = Codec()
    codec.add_dict(1, train(samples))
    frame = b"".join(samples[:50])
    seen: list[tuple[object, object, object]] = []  # the objects themselves: ids of dead ones repeat

    def use() -> None:
        body = codec.compress(frame, 1)
        assert codec.decompress(body, len(frame), 1) == frame
        mine = codec._mine()
        seen.append((mine["c", 1], mine["d", 1], mine["dict", 1]))

    threads = [threading.Thread(target=use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(3):
        assert len({id(s[k]) for s in seen}) == 8
    with pytest.raises(ValueError):
        codec.add_dict(1, b"other bytes")
    with pytest.raises(TypeError):
        codec.decompress(memoryview(bytearray(frame)), len(frame))


@pytest.mark.slow
def test_many_threads_compress_and_decompress_with_dictionaries_while_sweeps_and_readahead_run():
    """The stress: producers, consumers (gets and batch gets, so read-ahead and blobs coming
    back), the sweeper at a 20 ms interval training a dictionary per queue, for a few
    seconds of real time; every message comes back once and whole. In a child process: a
    crash is a failed test, not a dead test run."""
    out = run_child(
        """
        import os, random, threading, time
        from sweepq.engine import QueueManager, MD, OO, MQError, Reason, DurabilitySettings, SweeperSettings
        from sweepq.sweeper import SweepPolicy

        qm = QueueManager(sweeping=SweeperSettings(policy=SweepPolicy(interval=0.02), duty=1.0, readahead_low_water=64),
                          durability=DurabilitySettings(store_options={"max_blob_records": 32}))
        names = [f"Q{i}" for i in range(6)]
        for n in names:
            qm.define_queue(n, max_depth=10**7)
        stop = time.monotonic() + 6
        put, got, bad = {}, {}, []
        lock = threading.Lock()

        def producer(k):
            rng = random.Random(k)
            with qm.connect() as c:
                hs = [c.open(n, OO.OUTPUT) for n in names]
                seq = 0
                while time.monotonic() < stop:
                    for _ in range(100):
                        q, p = rng.randrange(len(names)), rng.choice((0, 5))
                        data = b'{"p": %d, "s": %d, "pad": "%s"}' % (k, seq, os.urandom(40).hex().encode())
                        hs[q].put(data, MD(priority=p))
                        with lock:
                            put[k, q, p] = put.get((k, q, p), 0) + 1
                        seq += 1

        def consumer(k):
            rng = random.Random(100 + k)
            with qm.connect() as c:
                hs = [c.open(n, OO.INPUT_SHARED) for n in names]
                idle = 0
                while idle < 50:
                    q = rng.randrange(len(names))
                    try:
                        ms = hs[q].get_many(64) if rng.random() < 0.5 else [hs[q].get()]
                    except MQError as e:
                        if e.reason != Reason.NO_MSG_AVAILABLE:
                            bad.append(str(e))
                        ms = []
                    if not ms and time.monotonic() > stop:
                        idle += 1
                    for m in ms:
                        with lock:
                            got[m.data] = got.get(m.data, 0) + 1

        ts = [threading.Thread(target=producer, args=(i,)) for i in range(3)]
        ts += [threading.Thread(target=consumer, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        with qm.connect() as c:  # what the consumers left
            for n in names:
                h = c.open(n, OO.INPUT_SHARED)
                while True:
                    try:
                        m = h.get()
                    except MQError:
                        break
                    got[m.data] = got.get(m.data, 0) + 1
        st = qm.stats()["*"]
        qm.close()
        assert not bad, bad[:3]
        assert all(n == 1 for n in got.values()), "a message came twice"
        assert len(got) == sum(put.values()), (len(got), sum(put.values()))
        print("ok", len(got), "swept", st.total_msgs_swept)
        """,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok"), out.stdout + out.stderr[-2000:]
