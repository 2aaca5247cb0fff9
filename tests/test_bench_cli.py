"""``sweepq bench --quick`` runs every scenario and writes its figures as JSON and a Markdown
table. Timings on a shared machine are noise, so only the structure is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from sweepq.bench.suite import QUICK, SCENARIOS, BenchOptions, _peers, steps

# Sizes below --quick's for what only costs time here (this file checks the output's shape, not
# its figures): those docs/cli.md's examples run each scenario with. --quick still shrinks the
# rest (the backlog among them), which test_every_scenario_reports checks.
SMALLER = {
    "--rounds": "1",
    "--messages": "500",
    "--persistent-messages": "50",
    "--durable-messages": "50",
    "--durable-sync-messages": "10",
    "--durable-producers": "2",
    "--durable-rounds": "1",
    "--recovery-messages": "1000",
    "--retrieval-depth": "500",
    "--browse-messages": "1000",
    "--sweep-messages": "1000",
    "--memory-messages": "2000",
    "--gc-messages": "2000",
    "--replay-events-m": "0.01",
    "--replay-file-events-m": "0.01",
    "--clients-concurrent": "2",
    "--clients-held": "10",
    "--channel-messages": "200",
    "--channel-down-seconds": "0.5",
    "--celery-tasks": "100",
    "--celery-backlog": "200",
    "--instructions-n": "100",
    "--instructions-rows": "pair",  # each row is two callgrind children of ~15-30 s: the shape is one row's
}

# The module's bench run (bounded at 600 s itself) is timed with the first test that uses it.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("bench")
    smaller = [arg for pair in SMALLER.items() for arg in pair]
    out = subprocess.run(
        [sys.executable, "-m", "sweepq.cli", "bench", "--quick", *smaller, "--json", "--out", str(out_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out, out_dir


def test_every_scenario_reports(quick_run):
    out, out_dir = quick_run
    doc = json.loads(out.stdout)
    assert doc == json.loads((out_dir / "bench.json").read_text())
    assert set(doc["figures"]) == set(SCENARIOS)
    opts = doc["options"]
    assert opts["quick"] is True and opts["backlog"] == QUICK["backlog"] == 20_000  # --quick shrank it
    for flag, value in SMALLER.items():  # what the user set wins over --quick
        given = opts[flag[2:].replace("-", "_")]
        assert (",".join(given) if isinstance(given, list) else str(given).removesuffix(".0")) == value, flag
    f = doc["figures"]
    for kind in f["throughput"].values():
        assert set(kind) == {"queue.Queue", "deque+lock", "sweepq"}
        assert all(v["per_s"] > 0 for v in kind.values())
        for name, v in kind.items():  # each row's ratio is its rate over queue.Queue's of the same run
            assert v["ratio_vs_queue_Queue"] == pytest.approx(v["per_s"] / kind["queue.Queue"]["per_s"]), name
    batch = f["batch"]  # Handle.put_many is in this build: the scenario runs, never skipped
    assert set(batch) == {"queue.Queue", "deque+lock", "sweepq put/get", "sweepq put_many/get_many x100"}
    for name, v in batch.items():
        assert v["ratio_vs_single"] == pytest.approx(v["per_s"] / batch["sweepq put/get"]["per_s"]), name
        assert v["ratio_vs_queue_Queue"] == pytest.approx(v["per_s"] / batch["queue.Queue"]["per_s"]), name
    assert {"queue.Queue (in memory)", "sweepq (non-persistent)", *_peers(100)} == set(f["persistent"])
    assert {"persist-queue SQLiteQueue", "diskcache.Deque", "queuelib FifoDiskQueue"} <= set(f["persistent"])
    assert f["sweep"]["rates_100B"]["sweep_ratio"] > 0 and f["sweep"]["drain"]["blob_boundaries"] > 0
    assert set(f["sweep"]["lock_holds"]) == {"1000", "5000"}
    b = f["backlog"]
    assert b["with_sweeper"]["sweeping"] and not b["without_sweeping"]["sweeping"]
    assert b["with_sweeper"]["got"] >= 20_000 and b["without_sweeping"]["got"] >= 20_000
    assert b["rss_ratio"] > 0
    # 2,000 messages fit in what the arena and the heap already hold, so the resident growth
    # is noise here (once negative); the figure itself is held by tests/test_memory*.py.
    assert f["memory"]["in_memory"]["messages"] == 2000
    assert math.isfinite(f["memory"]["in_memory"]["overhead_per_message"])
    assert f["memory"]["swept"]["measured"] > 0  # 5,000 messages: once a division by zero
    assert set(f["gc"]) == {"deque", "sweepq", "sweepq-sweeping"}
    assert f["replay"]["kernel"]["numba"]["events_per_s"] > 0
    ins = f["instructions"]  # callgrind's counts where valgrind is installed, else a notice saying so
    assert set(ins) == {"pair"} or any("valgrind is not on the PATH" in n for n in doc["notices"])


def test_markdown_table_and_notices(quick_run):
    _, out_dir = quick_run
    md = (out_dir / "bench.md").read_text()
    assert md.startswith("One run, `sweepq bench --quick")
    assert "| scenario | what | figure | ratio, same run |" in md
    for name in SCENARIOS:
        assert f"| {name} |" in md or name == "batch"
    assert "persistent mode" in md  # the honest label for sweepq beside the persistent peers
    assert "x queue.Queue" in md and "x store alone" in md and "x without sweeping" in md


def test_out_writes_a_table_a_scenario_and_the_run_s_heading(quick_run):
    """--out writes what the docs quote (docs/figures/): each scenario's rows in a file of its
    own, and run.md: the command, date, machine, load and commit of the run."""
    from sweepq.bench.suite import tables

    _, out_dir = quick_run
    doc = json.loads((out_dir / "bench.json").read_text())
    assert {"date", "machine", "load", "load_after", "commit", "python"} <= set(doc["run"])
    assert tables(doc) == {p.name: p.read_text() for p in out_dir.glob("*.md")}
    run = (out_dir / "run.md").read_text()
    assert run.startswith(f"One run, `{doc['command']}`: {doc['run']['date']}") and doc["run"]["load"] in run
    assert (out_dir / "bench.md").read_text().startswith(run)
    for name in SCENARIOS:
        table = (out_dir / f"{name}.md").read_text()
        rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| scenario")]
        assert all(line.startswith(f"| {name} |") for line in rows), name
        assert rows or f"- {name}: skipped" in table, name  # instructions without valgrind: its notice


def test_progress_bars_count_every_step():
    o = BenchOptions(rounds=4)
    assert steps("throughput", o) == 8 and steps("persistent", o) == 4 and steps("batch", o) == 4


def test_a_missing_peer_is_skipped_with_a_notice(monkeypatch):
    import builtins

    from sweepq.bench import suite

    real_import = builtins.__import__

    def no_diskcache(name, *args, **kwargs):
        if name == "diskcache":
            raise ImportError("not installed")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_diskcache)
    report = suite.Report(say=lambda s: None)
    figures = suite.persistent(BenchOptions(persistent_messages=20, rounds=1, size=64), report, lambda: None)
    assert "diskcache.Deque" not in figures
    assert any("diskcache.Deque is not installed" in n for n in report.notices)


def test_bytes_per_swept_message_with_few_messages():
    """``--sweep-memory-messages 20000`` (one chunk) or fewer once divided by zero."""
    import math

    from sweepq.bench.sweeping import swept_memory

    for n in (20_000, 300, 1):
        m = swept_memory(n)
        assert m["measured"] > 0 and math.isfinite(m["bytes_per_swept_msg"]), m


@pytest.mark.parametrize("rows", ["nope", "pair,nope", ","])
def test_instructions_rows_outside_the_list_are_one_line(rows):
    out = subprocess.run(
        [sys.executable, "-m", "sweepq.cli", "bench", "instructions", "--instructions-rows", rows],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert (
        "argument --instructions-rows" in out.stderr
        and "give rows among pair, pair interpreted, batch, Queue" in out.stderr
    )


def test_several_scenarios_named_are_one_run_in_their_order(tmp_path):
    """``sweepq bench durable queue`` is one run of both: one run.md, one bench.json, a table a
    scenario (what a doc quoting several scenarios from one run needs); a name given twice runs once."""
    names = ["persistent", "throughput", "persistent"]
    sizes = ["--rounds", "1", "--messages", "200", "--persistent-messages", "20", "--out", str(tmp_path)]
    out = subprocess.run(
        [sys.executable, "-m", "sweepq.cli", "bench", *names, "--quick", *sizes],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads((tmp_path / "bench.json").read_text())
    assert list(doc["figures"]) == ["persistent", "throughput"]
    assert list(dict.fromkeys(row[0] for row in doc["rows"])) == ["persistent", "throughput"]
    assert (tmp_path / "persistent.md").exists() and (tmp_path / "throughput.md").exists()
    assert not (tmp_path / "durable.md").exists()


def test_a_scenario_that_is_none_is_one_line_naming_them(tmp_path):
    """Said before anything is made: the --out directory is not created."""
    out = subprocess.run(
        [sys.executable, "-m", "sweepq.cli", "bench", "throughput", "durabel", "--out", str(tmp_path / "new")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "'durabel' is not a scenario; give some of throughput, batch," in out.stderr
    assert not (tmp_path / "new").exists()
