"""The memory-pressure demo (``sweepq demo``): its exactly-once check, its edge cases, and a
quick run end to end as a user starts it."""

from __future__ import annotations

import json
import subprocess
import sys

from sweepq.bench.demo import DeliveryChecker, DemoConfig, header, parse, run_child


def _deliver(seqs, expected_count):
    c = DeliveryChecker()
    for s in seqs:
        c.see(1, 0, 4, s)
    return c.finish({(1, 0, 4): expected_count})


def test_checker_accepts_every_message_once_in_order():
    assert _deliver([0, 1, 2, 3], 4) == []


def test_checker_rejects_a_duplicate():
    problems = _deliver([0, 1, 1, 2, 3], 4)
    assert problems and "duplicate" in problems[0]


def test_checker_rejects_a_missing_message():
    assert any("4 put, 3 delivered" in p for p in _deliver([0, 1, 2], 4))
    assert _deliver([0, 2, 3], 4)  # a gap in the middle


def test_checker_rejects_a_swap_and_a_stray_stream():
    assert _deliver([0, 2, 1, 3], 4)
    c = DeliveryChecker()
    c.see(9, 9, 9, 0)  # a message nobody put
    assert c.finish({})


def test_header_round_trips():
    assert parse(header(3, 2, 9, 12345) + b"body;with;semicolons") == (3, 2, 9, 12345)


def _small(**kw) -> DemoConfig:
    base = {"messages": 600, "size": 64, "seconds": 0.3, "interval": 0.1, "sample_every": 0.05}
    return DemoConfig(**{**base, **kw})


def test_no_producers_and_a_single_message_run_clean():
    for cfg in (_small(producers=0), _small(producers=1, messages=1), _small(producers=3, messages=2)):
        r = run_child(cfg, lambda s: None)
        assert r["problems"] == [] and r["errors"] == [], r
        assert r["delivered"] == r["messages"] == cfg.messages * (cfg.producers > 0)
        assert r["remaining"] == 0


def test_a_small_run_with_the_sweeper_verifies_and_counts():
    r = run_child(_small(messages=3_000, seconds=0.6, interval=0.1), lambda s: None)
    assert r["problems"] == [] and r["errors"] == []
    assert r["delivered"] == 3_000 and r["audit_records"] > 0
    assert r["get_backouts"] > 0 and r["put_backouts"] > 0
    assert r["msgs_unswept"] == r["msgs_swept"]  # everything swept came back


def test_demo_quick_end_to_end(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "sweepq.cli", "demo", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    text = " ".join(out.stdout.split())  # rich wraps lines at the terminal width
    assert "verified (with sweeper): all 20,000 messages arrived exactly once and in order" in text
    assert "verified (without sweeping): all 20,000 messages" in text
    assert "the sweep interval is shortened to 1 s" in text
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    figures = json.loads((tmp_path / "demo.json").read_text())
    s = figures["summary"]
    assert s["messages"] == s["delivered_with_sweeper"] == 20_000
    assert s["msgs_swept"] > 0 and s["msgs_unswept"] == s["msgs_swept"]
    assert s["peak_rss_with_sweeper"] > 0 and s["peak_rss_without_sweeping"] > 0
    assert "plot:" in text and "demo.png" in text and "figures:" in text
    assert "| peak resident memory |" in (tmp_path / "demo.md").read_text()


def test_table_and_plot_without_the_comparison_run(tmp_path):
    from sweepq.bench.demo import markdown, plot, summary

    runs = {"with": run_child(_small(), lambda s: None)}
    assert summary(runs)["peak_rss_without_sweeping"] is None
    assert "| messages put | 600 | - |" in markdown(runs)
    plot(runs, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 10_000
