"""sweepq plan's logic (sweeper/plan.py) and its replay of a grid (sweeper/plan_run.py): the
grid's syntax, the frontier's invariant, the choice under a goal, and the outcome's figures
against hand-worked traces and an independent replay."""

from __future__ import annotations

import numpy as np
import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper.plan import Goal, Outcome, Setting, choose, frontier, parse_grid, parse_read_back, parse_size
from sweepq.sweeper.plan_run import run_grid, run_one
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import Trace, generate


def _trace(rows) -> Trace:
    """rows: (time_us, queue, op, bytes)."""
    t, q, o, b = zip(*rows, strict=True)
    n = len(rows)
    return Trace.from_columns(
        {"time_us": t, "queue": q, "op": o, "bytes": b, "priority": [0] * n, "persistent": [False] * n}
    )


# -- the grid ----------------------------------------------------------------------------------


def test_grid_ranges_lists_sizes_and_defaults():
    g = parse_grid("interval=1,5; factor=1:3 ; memory_budget=0,200MB")
    assert len(g) == 2 * 3 * 2
    assert {s.factor for s in g} == {1, 2, 3} and {s.interval for s in g} == {1.0, 5.0}
    assert {s.memory_budget for s in g} == {0, 200_000_000}
    assert all(s.extra == 5 and s.rule == "seed" for s in g)  # axes not given stay at the seed's
    assert [s.interval for s in parse_grid("interval=0.5:2:0.5")] == [0.5, 1.0, 1.5, 2.0]


def test_grid_from_json_and_lines_agree():
    a = parse_grid('{"extra": [0, 5], "rule": "seed,adaptive", "policy": ["page", "fail"]}')
    b = parse_grid("extra=0,5\nrule=seed,adaptive  # both rules\npolicy=page,fail")
    assert a == b and len(a) == 8


@pytest.mark.parametrize(
    "text,words",
    [
        ("speed=1,2", ["unknown grid axis", "speed"]),
        ("factor=3:1", ["lo <= hi"]),
        ("factor=x", ["factor", "integer"]),
        ("memory_budget=lots", ["not a size"]),
        ("rule=clever", ["unknown rule"]),
        ("policy=drop", ["unknown policy"]),
        ("factor", ["name=v1,v2"]),
        ("factor=1;factor=2", ["twice"]),
        ("", ["empty"]),
        ("{bad json", ["JSON"]),
    ],
)
def test_grid_mistakes_are_named(text, words):
    with pytest.raises(ValueError) as e:
        parse_grid(text)
    for w in words:
        assert w in str(e.value)


def test_sizes_and_read_back_goals():
    assert parse_size("200MB") == 200_000_000 and parse_size("64MiB") == 64 << 20 and parse_size("10") == 10
    assert parse_read_back("5%") == (0.05, True) and parse_read_back("50MB") == (50e6, False)
    with pytest.raises(ValueError):
        parse_read_back("five%")


# -- the frontier and the choice ------------------------------------------------------------


def _o(peak, swept, read, waits=0, refused=0, put=1000, **setting) -> Outcome:
    return Outcome(Setting(**setting), peak, peak * 2, put, swept, read, waits, 0.0, 0.0, refused, 0, 0, 0)


def test_frontier_keeps_exactly_the_undominated():
    outs = [
        _o(100, 0, 0, factor=1),  # least disk traffic
        _o(50, 40, 10, factor=2),  # a trade
        _o(60, 60, 20, factor=3),  # dominated by the one above
        _o(10, 200, 100, factor=4),  # least memory
        _o(10, 200, 100, factor=5),  # equal to the one above: adds no choice
        _o(10, 200, 100, refused=3, factor=6),  # dominated: refuses puts
    ]
    front = frontier(outs)
    assert front == [3, 1, 0]  # by peak memory
    for i in range(len(outs)):  # the invariant: off the frontier means dominated by a point on it
        if i not in front:
            assert any(all(a <= b for a, b in zip(outs[j].costs(), outs[i].costs(), strict=True)) for j in front)


def test_choose_the_cheapest_meeting_the_goal_or_none():
    outs = [_o(100, 0, 0, factor=1), _o(50, 40, 10, factor=2), _o(10, 200, 100, factor=4), _o(5, 10, 5, refused=9)]
    assert choose(outs, Goal(max_memory=60)) == 1  # under 60: least disk traffic, no refused put
    assert choose(outs, Goal(max_memory=1)) is None
    assert choose(outs, Goal(max_read_back=0.02, read_back_share=True)) == 1  # 10 of 1000 put; least memory
    assert choose(outs, Goal(max_read_back=0)) == 0
    assert choose(outs, Goal(max_memory=60, max_read_back=5)) == 3  # only it meets both, refusals and all


# -- outcomes, against hand-worked traces and the replay ----------------------------------------


def test_swept_and_stored_figures_by_hand():
    # 20 puts of 100 bytes at t=0, interval 1 s, extra 0: the first sweep (t=1 s) keeps x + 0 = 0
    # and moves all 20 into one blob; a get at t=3.5 s finds the front empty and reads it back:
    # one unsweep wait, of a blob stored 2.5 s.
    rows = [(0, "A", "put", 100)] * 20 + [(3_500_000, "A", "get", 0)]
    o = run_one(_trace(rows), Setting(interval=1.0, extra=0), HEAD_LEN)
    rec = 100 + HEAD_LEN
    assert o.bytes_put == 20 * rec
    assert o.bytes_read_back == 20 * rec and o.unsweep_waits == 1
    # swept once; at t=4 s y = 19 > 2x = 2, so all but x + 0 = 1 of them are swept again
    assert o.bytes_swept == 20 * rec + 18 * rec and o.msgs_reswept == 18
    assert o.stored_mean_s == pytest.approx(2.5) and o.stored_max_s == pytest.approx(2.5)
    assert o.peak_memory_bytes == rec  # peak memory is counted at intervals' ends, after the sweep
    assert o.blocked_or_refused == 0


def test_budget_policy_counts_and_refuses():
    rec = 100 + HEAD_LEN
    rows = [(i, "A", "put", 100) for i in range(10)]
    page = run_one(_trace(rows), Setting(memory_budget=4 * rec, extra=0), HEAD_LEN)
    fail = run_one(_trace(rows), Setting(memory_budget=4 * rec, extra=0, policy="fail"), HEAD_LEN)
    assert page.blocked_or_refused == 6  # puts 5..10 arrive over the budget; PAGE makes them
    assert fail.blocked_or_refused == 6  # FAIL refuses them: 4 messages were ever put
    assert fail.bytes_swept == 4 * rec and page.bytes_swept == 10 * rec


def test_default_setting_equals_an_independent_replay():
    t = generate("slow-drain", seconds=120, rate=300, queues=3, seed=4)
    o = run_one(t, Setting(), HEAD_LEN)
    r = replay(t, record_header=HEAD_LEN).overall()  # the seed's policy, the store's blob limits
    assert o.peak_memory_bytes == r["peak_memory_with_sweeper_bytes"]
    assert o.bytes_read_back == r["bytes_read_back"] and o.unsweep_waits == r["blobs_read_back"]
    assert o.msgs_swept == r["msgs_swept"] and o.blobs_written == r["blobs_written"]


def test_grid_runs_in_order_on_threads_with_progress():
    t = generate("bursty", seconds=60, rate=200, queues=2, seed=1)
    settings = parse_grid("factor=1:3;rule=seed,adaptive")
    seen = []
    outs = run_grid(t, settings, HEAD_LEN, workers=2, progress=lambda d, n, o: seen.append((d, n)))
    assert [o.setting for o in outs] == settings
    assert sorted(seen) == [(d, 6) for d in range(1, 7)]
    alone = [run_one(t, s, HEAD_LEN) for s in settings]
    assert outs == alone  # threads change nothing
    assert np.all([o.bytes_swept >= o.bytes_read_back for o in outs])
