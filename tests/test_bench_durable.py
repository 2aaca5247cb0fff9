"""``sweepq bench durable`` (bench/durable.py): each measurement runs at a tiny size and returns
the figures the table is built from. Timings on a shared machine are noise: only the shape
and the sanity of the figures are asserted, never a speed."""

from __future__ import annotations

import math
import os
import statistics
import threading

import pytest

from sweepq.bench import durable as d
from sweepq.bench.suite import SCENARIOS, BenchOptions, Report, durable, steps


def _finite_positive(x) -> bool:
    return isinstance(x, float) and math.isfinite(x) and x > 0


def _paired_by_hand(mine: list[float], base: list[float]) -> float:
    """What a paired ratio is: the median over rounds of the baseline's round time over the
    contender's round beside it (computed here apart from bench/durable.py's ``_paired``)."""
    return statistics.median(b / m for m, b in zip(mine, base, strict=True))


def test_paired_ratio_is_the_median_of_the_rounds_ratios():
    """Rounds beside each other are compared, not best against best: the contender is twice
    as fast in two rounds of three, slower in the third."""
    assert d._paired([1.0, 1.0, 4.0], [2.0, 2.0, 2.0]) == 2.0
    assert d._paired([1.0, 2.0], [3.0, 3.0]) == pytest.approx((1.5 + 3.0) / 2)  # even: the mean of the middle two
    assert d._paired([2.0, 1.0], [1.0, 2.0]) == pytest.approx((0.5 + 2.0) / 2)  # paired by round, not by rank
    with pytest.raises(ValueError):
        d._paired([1.0], [1.0, 2.0])


def test_sweepq_contender_is_persistent(tmp_path):
    """The sweepq rows measure persistent messages: what they put comes back after a reopen."""
    from sweepq.engine import QueueManager, SweeperSettings

    for sync in ("os", "commit"):
        path = str(tmp_path / sync)
        o = d.open_sweepq(path, sync)
        for i in range(3):
            o.put(b"m%d" % i)
        assert o.get() == b"m0"
        o.close()
        qm = QueueManager.open(path, sweeping=SweeperSettings(run=False))
        try:
            assert qm.recovery.messages == 2
        finally:
            qm.close()


def test_crash_safe_reports_every_contender(tmp_path):
    r = d.crash_safe(20, 64, 2, base=str(tmp_path))
    c = r["contenders"]
    assert {'sweepq sync="os"', d.STORE_ALONE, d.KV_ALONE} <= set(c)  # sweepq beside its own floors
    pytest.importorskip("persistqueue")
    assert {"persist-queue SQLiteQueue, synchronous=NORMAL", "persist-queue Queue (file), autosave=True"} <= set(c)
    for v in c.values():
        assert all(_finite_positive(v[k]) for k in ("pairs_per_s", "ops_per_s", "put_per_s", "get_per_s"))
        assert len(v["round_seconds"]) == 2
    base = r["persist_queue_baseline"]
    assert base.startswith("persist-queue")
    assert base == max((k for k in c if k.startswith("persist-queue")), key=lambda k: c[k]["median_ops_per_s"])
    for name, v in c.items():  # every row against the baseline's rounds, the baseline's own row included
        want = _paired_by_hand(v["round_seconds"], c[base]["round_seconds"])
        assert v["ratio_vs_persist_queue"] == pytest.approx(want), name
        assert v["best_ratio_vs_persist_queue"] == pytest.approx(v["pairs_per_s"] / c[base]["pairs_per_s"]), name
    want = _paired_by_hand(c['sweepq sync="os"']["round_seconds"], c[base]["round_seconds"])
    assert _finite_positive(r["sweepq_vs_persist_queue"]) and r["sweepq_vs_persist_queue"] == pytest.approx(want)


def test_power_safe_pairs_with_the_floor(tmp_path):
    r = d.power_safe(5, 1024, 3, base=str(tmp_path))
    c = r["contenders"]
    floor = c[d.FLOOR]["round_seconds"]
    s = c['sweepq sync="commit"']
    assert all(_finite_positive(s[k]) for k in ("ratio_vs_floor", "all_rounds_ratio_vs_floor", "best_ratio_vs_floor"))
    for name, v in c.items():  # each row from its own rounds beside the floor's
        assert len(v["round_seconds"]) == 3, name
        assert v["ratio_vs_floor"] == pytest.approx(_paired_by_hand(v["round_seconds"], floor)), name
        assert v["all_rounds_ratio_vs_floor"] == pytest.approx(sum(floor) / sum(v["round_seconds"])), name
        assert v["best_ratio_vs_floor"] == pytest.approx(v["ops_per_s"] / c[d.FLOOR]["ops_per_s"]), name
    assert s["syncs_per_op"] == pytest.approx(1.0)  # one producer: one fsync per put and per get
    assert r["sweepq_vs_floor"] == pytest.approx(_paired_by_hand(s["round_seconds"], floor))


def test_sqlite_synchronous_is_read_back(tmp_path):
    pytest.importorskip("persistqueue")
    assert d.sqlite_synchronous(str(tmp_path / "n"), "NORMAL") == 1
    assert d.sqlite_synchronous(str(tmp_path / "o"), "OFF") == 0


def test_producers_share_fsyncs(tmp_path):
    r = d.producers(16, 64, 4, 1, base=str(tmp_path))
    assert r["messages"] == 16
    kinds = ("put", "put+commit", *d.BARES)
    for key in [f"{kind}, {p}" for kind in kinds for p in ("1 producer", "4 producers")]:
        assert _finite_positive(r[key]["per_s"]), key
        assert 0 < r[key]["syncs_per_msg"] <= 1.0, key
    for kind in kinds:  # 4 producers' rounds each against 1 producer's beside it
        one, four = r[f"{kind}, 1 producer"], r[f"{kind}, 4 producers"]
        assert len(four["round_seconds"]) == len(one["round_seconds"]) == 1
        assert four["ratio_vs_one"] == pytest.approx(one["round_seconds"][0] / four["round_seconds"][0]), kind
        assert one["syncs_per_msg"] == 1.0, kind  # one producer shares its fsyncs with nobody
    assert r[f"{d.BARE_OWN}, 4 producers"]["syncs_per_msg"] == 1.0  # each thread's own fdatasync
    assert r["ceiling"] == max(r[f"{kind}, 4 producers"]["ratio_vs_one"] for kind in d.BARES)


def test_the_bare_group_commit_covers_each_write_by_a_sync_begun_after_it(tmp_path, monkeypatch):
    """The ceiling row is a real group commit: no call returns before an fdatasync that began
    after its write has ended, and one sync serves the threads that wrote while another ran."""
    events: list[tuple[str, int]] = []
    seen = threading.Condition()
    release = threading.Event()  # holds the first sync until the two late threads have written
    real_pwrite, real_sync = os.pwrite, os.fdatasync

    def note(what: str, who: int = 0) -> None:
        with seen:
            events.append((what, who))
            seen.notify_all()

    def pwrite(fd: int, data: bytes, at: int) -> int:
        n = real_pwrite(fd, data, at)
        note("write", threading.get_ident())
        return n

    def fdatasync(fd: int) -> None:
        note("sync begins")
        assert release.wait(30)
        real_sync(fd)
        note("sync ends")

    monkeypatch.setattr(d.os, "pwrite", pwrite)
    monkeypatch.setattr(d.os, "fdatasync", fdatasync)
    group = d._BareGroup(str(tmp_path / "g"), 3)

    def put() -> None:
        group._put(b"y" * 64)
        note("returns", threading.get_ident())

    def writes(k: int) -> bool:
        return sum(1 for e in events if e[0] == "write") >= k

    first = threading.Thread(target=put)
    first.start()  # writes, then leads the first sync, held by ``release``
    with seen:
        assert seen.wait_for(lambda: ("sync begins", 0) in events, 30)
    late = [threading.Thread(target=put) for _ in range(2)]
    for t in late:
        t.start()
    with seen:
        assert seen.wait_for(lambda: writes(3), 30)
    release.set()
    for t in [first, *late]:
        t.join(30)
        assert not t.is_alive()
    group.close()
    for i, (what, who) in enumerate(events):
        if what == "write":
            rest = events[i + 1 :]
            back = rest.index(("returns", who))
            begins = rest.index(("sync begins", 0))
            assert begins < back and ("sync ends", 0) in rest[begins:back], f"a write not covered: {events}"
    assert group.syncs == 2  # the two late writers shared the second sync


def test_the_bare_fdatasync_per_write_syncs_each_write_on_its_own_thread_after_it(tmp_path, monkeypatch):
    """The other floor: every call makes its own fdatasync after its write, on its thread,
    while another thread's sync is still under way (nothing in Python waits for it)."""
    events: list[tuple[str, int]] = []
    lock = threading.Lock()
    two_in_sync = threading.Barrier(2, timeout=30)  # both syncs under way at once, or it breaks
    real_pwrite = os.pwrite

    def pwrite(fd: int, data: bytes, at: int) -> int:
        n = real_pwrite(fd, data, at)
        with lock:
            events.append(("write", threading.get_ident()))
        return n

    def fdatasync(fd: int) -> None:
        with lock:
            events.append(("sync", threading.get_ident()))
        two_in_sync.wait()

    monkeypatch.setattr(d.os, "pwrite", pwrite)
    monkeypatch.setattr(d.os, "fdatasync", fdatasync)
    own = d._BareGroup(str(tmp_path / "o"), 2, leader=False)
    threads = [threading.Thread(target=own._put, args=(b"z" * 64,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
        assert not t.is_alive()
    own.close()
    for t in threads:
        mine = [what for what, who in events if who == t.ident]
        assert mine == ["write", "sync"], events
    assert own.syncs == 2


def test_recovery_checks_order_and_reports(tmp_path):
    r = d.recovery(3_000, base=str(tmp_path), profile="1")
    assert r["build"]["swept"] == 1_500
    rec = r["recovery"]
    assert rec["messages"] == 3_000 and rec["swept"] == 1_500 and rec["in_memory"] == 1_500
    assert rec["damaged"] == []
    assert r["check"] == {**r["check"], "drained": 3_000, "in_put_order": True, "first_out_of_order": None}
    assert _finite_positive(r["open_seconds"]) and _finite_positive(r["open_cpu_seconds"])
    assert len(r["opens"]) == d.RECOVERY_OPENS == 3  # the goal's three fresh-process opens, in one run
    assert r["opens"][-1] == {"open_seconds": r["open_seconds"], "open_cpu_seconds": r["open_cpu_seconds"]}
    assert all(_finite_positive(t["open_seconds"]) for t in r["opens"])
    prof = r["profile"]
    assert {"function", "calls", "tottime", "cumtime", "share"} <= set(prof["top"][0])
    assert prof["seconds"] > 0 and prof["phases"]["load the blobs (read, marks, index)"]["seconds"] > 0
    assert prof["phases"]["scan and check the message records (records)"]["share"] > 0
    assert prof["phases"]["write the checkpoint"]["seconds"] > 0
    assert list(tmp_path.iterdir()) == []  # the build directory is removed


def test_recovery_opens_one_directory_as_often_as_asked_and_refuses_a_bad_count(tmp_path):
    """The opens before the last leave the messages for it: the last still finds them all."""
    r = d.recovery(200, base=str(tmp_path), profile="0", opens=2)
    assert len(r["opens"]) == 2 and r["check"]["drained"] == 200 and r["check"]["in_put_order"]
    for bad in (0, 21):
        with pytest.raises(ValueError, match="fresh-process opens"):
            d.recovery(200, base=str(tmp_path), opens=bad)


def test_recovery_payloads_are_100_to_200_bytes_and_numbered():
    sizes = {len(d.recovery_payload(i)) for i in range(500)}
    assert min(sizes) == 100 and max(sizes) == 200
    assert d.recovery_payload(1234)[:10] == b"0000001234"


def test_the_scenario_writes_rows_with_goals(tmp_path):
    assert "durable" in SCENARIOS
    o = BenchOptions(
        durable_messages=20,
        durable_sync_messages=8,
        durable_producers=4,
        durable_rounds=1,
        recovery_messages=2_000,
        durable_dir=str(tmp_path),
        size=256,
    )
    report = Report(say=lambda s: None)
    calls = []
    figures = durable(o, report, lambda: calls.append(1))
    assert len(calls) == steps("durable", o)
    assert {"crash_safe", "power_safe", "producers", "recovery"} <= set(figures)
    md = report.markdown()
    for goal in ("goal >= 5 x", "goal >= 1 x", "goal >= 8 x", "goal <= 1 s"):
        assert goal in md, goal
    assert "x floor (paired median of 6 rounds; all rounds" in md
    assert "2,000 of 2,000 back, in put order" in md
    assert all(r[0] == "durable" for r in report.rows)
    assert list(tmp_path.iterdir()) == []  # every store and floor file is removed


def test_cli_passes_the_durable_options():
    from sweepq.cli import build_parser

    args = build_parser().parse_args(
        ["bench", "durable", "--durable-messages", "10", "--recovery-messages", "500", "--durable-dir", "/x"]
    )
    assert args.what == ["durable"]
    assert (args.durable_messages, args.recovery_messages, args.durable_dir) == (10, 500, "/x")
    assert args.durable_producers == BenchOptions().durable_producers


def test_the_put_get_profile_says_when_the_store_s_writes_run_compiled():
    """cProfile sees nothing of a compiled module: the notice says the writes run compiled
    instead of a share of 0 % (bench/suite.py); interpreted, the share is measured."""
    import json
    import os
    import subprocess
    import sys

    from sweepq import forms

    here = d.profile_put_get(200, 1024, "os")
    assert here["compiled"] == ("sweepq.blobstore.changelog" in forms.built())
    code = "import json; from sweepq.bench import durable; print(json.dumps(durable.profile_put_get(200, 1024, 'os')))"
    out = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, "SWEEPQ_PURE": "1"}, capture_output=True, timeout=120
    )
    pure = json.loads(out.stdout)
    assert pure["compiled"] is False and pure["store_write_share"] > 0.1
