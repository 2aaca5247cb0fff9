"""The memory budget and the adaptive rule in the live sweeper (the replay models both:
tests/test_replay_fidelity.py holds the two to the same numbers)."""

from __future__ import annotations

from sweepq.blobstore import MemoryStore
from sweepq.engine import MemorySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO, drain


def _fill(qm, puts=180, gets=60):
    h = qm.connect().open("Q", IO)
    for i in range(puts):
        h.put(b"%03d" % i + bytes(100))
    got = [h.get().data[:3] for _ in range(gets)]
    return h, got


def test_the_budget_sweeps_beyond_the_rule_keeping_the_buffer():
    # y = 120 <= 2x = 120: the rule alone keeps everything; the budget sweeps down to x + 5.
    # The sweep policy's budget alone (the rule the replay models), without the queue
    # manager's MemoryBudget: its puts would page from 90 % of it (tests/test_memory_bound.py).
    policy = SweepPolicy(memory_budget=1000)
    with QueueManager(
        clock=ManualClock(), sweeping=SweeperSettings(run=False, policy=policy), store=MemoryStore()
    ) as qm:
        qm.define_queue("Q")
        h, got = _fill(qm)
        d = qm.sweeper.run_once().decision("Q")
        assert d.budget and d.keep == 65 and d.msgs_swept == 55
        assert qm.stats()["Q"].msgs_in_memory == 65
        assert got + [m[:3] for m in drain(h)] == [b"%03d" % i for i in range(180)]


def test_no_budget_no_sweep_beyond_the_rule():
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False), store=MemoryStore()) as qm:
        qm.define_queue("Q")
        _fill(qm)
        d = qm.sweeper.run_once().decision("Q")
        assert d.keep is None and not d.budget and d.msgs_swept == 0


def test_the_budget_counts_the_stores_own_memory(tmp_path):
    # Messages alone are under this budget; RocksDB's memtables put the total over it.
    with QueueManager.open(
        tmp_path / "d", clock=ManualClock(), sweeping=SweeperSettings(run=False), memory=MemorySettings(budget=100_000)
    ) as qm:
        qm.define_queue("Q")
        qm.define_queue("BIG")
        big = qm.connect().open("BIG", IO)
        for _ in range(2000):
            big.put(bytes(1000))
        qm.sweeper.run_once()  # the rule sweeps BIG (no gets): RocksDB now holds memtables
        assert qm.store_memory()["memtable_bytes"] > 100_000
        use = qm.memory_use()
        assert use.store >= qm.store_memory()["memtable_bytes"] and use.total > 100_000
        _fill(qm)
        # Q pages (memory_policy PAGE) from its first put, since the store alone holds more
        # than the budget: its producer writes each page out (a page: an eighth of the 10 %
        # between PAGE_AT and the budget, 1,250 B), so of Q's 120 messages at most a page's
        # worth stays in memory, never the 120 (12 KB) the budget could not hold.
        q = qm.stats()["Q"]
        assert q.msgs_in_memory + q.msgs_swept == 120 and q.bytes_in_memory <= qm.budget.page_bytes == 1_250
        assert qm.budget.counts["page_outs"] >= 120 * 124 // 1_250  # a put is 124 B with its header


def test_the_adaptive_rule_counts_no_re_sweeps_where_the_seeds_rule_does():
    """A queue drained a little slower than it fills: the seed's rule sweeps again what came
    back from a blob (a blob of 200 comes back, the buffer keeps x + 5 = 50 of it); the
    adaptive rule keeps it."""
    reswept = {}
    for rule in ("seed", "adaptive"):
        policy = SweepPolicy(interval=1.0, rule=rule)
        with QueueManager(
            clock=ManualClock(),
            sweeping=SweeperSettings(run=False, policy=policy),
            store=MemoryStore(max_blob_records=200),
        ) as qm:
            qm.define_queue("Q")
            h = qm.connect().open("Q", IO)
            n = 0
            for _ in range(500):  # a backlog, so the rule sweeps at once
                h.put(b"%05d" % n)
                n += 1
            for _ in range(40):
                for _ in range(50):
                    h.put(b"%05d" % n)
                    n += 1
                for _ in range(45):
                    h.get()
                qm.sweeper.run_once()
            reswept[rule] = qm.stats()["Q"].msgs_reswept
    assert reswept["seed"] > 0 and reswept["adaptive"] == 0


def test_a_bad_budget_is_refused():
    for bad in (-1, 1.5, "1 parsec", None, 100):
        try:
            QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget=bad)).close()
        except MQError as e:
            assert e.reason == Reason.PARM_VALUE_ERROR
        else:
            raise AssertionError(f"memory_budget={bad!r} was accepted")
