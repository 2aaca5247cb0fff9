"""The plan's predictions, kept by a live engine (issue 35, item 3): for three settings of the
frontier of a plan, a QueueManager on a ManualClock fed the same trace's puts and gets makes
the same sweep decisions interval by interval, and the bytes it counts in memory peak within
5 % of the plan's peak memory. Only the engine's public API is used: puts and gets through
handles, ``sweeper.run_once()`` at each interval's end, ``stats()`` for what it holds.

The live sweeper runs the seed's rule with no budget, so the grid varies what it can run:
interval, factor, extra and the blob limits."""

from __future__ import annotations

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.engine import GMO, MD, OO, MQError, QueueManager, Reason, SweeperSettings
from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import ManualClock
from sweepq.sweeper.plan import Setting, frontier, parse_grid
from sweepq.sweeper.plan_run import run_grid
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import PUT, Trace, generate

GRID = "interval=1,2;factor=1,2,4;extra=0,5,40;blob_bytes=4096,65536;blob_records=16"


@pytest.fixture(scope="module")
def plan():
    trace = generate("bursty", seconds=40, rate=40, queues=2, size=120, priorities=True, seed=11)
    settings = parse_grid(GRID)
    outcomes = run_grid(trace, settings, HEAD_LEN, workers=2)
    front = frontier(outcomes)
    assert len(front) >= 3, "the grid's frontier has three settings to check"
    picks = [front[0], front[len(front) // 2], front[-1]]  # least memory, a middle, least disk traffic
    return trace, [outcomes[i] for i in picks]


def run_live(trace: Trace, setting: Setting) -> tuple[list[dict[str, int]], list[int]]:
    """(each interval's decision per queue: buffer kept or -1; each interval's bytes in memory
    summed over queues), from the engine fed ``trace``."""
    policy = setting.sweep_policy()
    interval_us = round(policy.interval * 1e6)
    t0 = int(trace.time_us[0])
    n_int = int((int(trace.time_us[-1]) - t0) // interval_us + 1)
    clock = ManualClock()
    bounds = {"max_blob_records": setting.blob_records, "max_blob_bytes": setting.blob_bytes, "dictionaries": False}
    decisions, memory = [], []
    with QueueManager(
        clock=clock, sweeping=SweeperSettings(run=False, policy=policy), store=MemoryStore(**bounds)
    ) as qm:
        for q in trace.queues:
            qm.define_queue(q)
        conn = qm.connect()
        handles = [conn.open(q, OO.OUTPUT | OO.INPUT_SHARED) for q in trace.queues]
        i, n = 0, len(trace)
        for cur in range(n_int):
            end = t0 + (cur + 1) * interval_us
            while i < n and trace.time_us[i] < end:
                h = handles[trace.queue[i]]
                if trace.op[i] == PUT:
                    h.put(b"x" * int(trace.nbytes[i]), MD(priority=int(trace.priority[i])))
                else:
                    try:
                        h.get(GMO.NO_WAIT)
                    except MQError as e:
                        assert e.reason == Reason.NO_MSG_AVAILABLE
                i += 1
            clock.advance(policy.interval)
            report = qm.sweeper.run_once()
            decisions.append(
                {q: -1 if report.decision(q).keep is None else report.decision(q).keep for q in trace.queues}
            )
            memory.append(qm.stats()["*"].bytes_in_memory)
    return decisions, memory


@pytest.mark.parametrize("pick", [0, 1, 2], ids=["least-memory", "middle", "least-disk"])
def test_a_frontier_setting_holds_on_the_live_engine(plan, pick):
    trace, picked = plan
    o = picked[pick]
    s = o.setting
    decisions, memory = run_live(trace, s)
    r = replay(
        trace, s.sweep_policy(), record_header=HEAD_LEN, max_blob_bytes=s.blob_bytes, max_blob_records=s.blob_records
    )
    for cur, live in enumerate(decisions):
        kernel = {q: int(r.metric("decision", q)[cur]) for q in trace.queues}
        assert live == kernel, f"{s.label()}: interval {cur}: engine {live} != plan {kernel}"
    peak = max(memory)
    assert abs(peak - o.peak_memory_bytes) <= 0.05 * o.peak_memory_bytes, (s.label(), peak, o.peak_memory_bytes)
