"""The memory-pressure demo (``sweepq demo``): its exactly-once check, its edge cases, its
budget and busy load, a quick run end to end as a user starts it, and Ctrl-C: SIGINT to the
process group or to the demo alone, SIGTERM, and the demo killed outright, each of which must
leave no process of the demo running (bench/children.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from sweepq.bench import demo
from sweepq.bench.busy import BusyLoad
from sweepq.bench.demo import MB, DeliveryChecker, DemoConfig, Level, header, parse, run_child

from helpers import reaped


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
    assert r["peak_budgeted"] > 0 and r["config"]["budget"] == DemoConfig().budget
    assert r["rss_start"] < r["peak_rss"] and r["rss_closed"] > 0 and r["rss_drained"] > 0


def test_the_clients_form_runs_producers_and_consumer_in_processes_of_their_own():
    r = run_child(_small(messages=3_000, seconds=0.6, interval=0.1, clients=True), lambda s: None)
    assert r["problems"] == [] and r["errors"] == [], r["errors"]
    assert r["delivered"] == 3_000 and r["audit_records"] > 0 and r["remaining"] == 0
    assert r["get_backouts"] > 0 and r["put_backouts"] > 0  # units of work through client connections
    assert r["msgs_swept"] > 0 and r["msgs_unswept"] == r["msgs_swept"]
    pids = r["client_pids"]
    assert len(set(pids)) == DemoConfig().producers + 1 and os.getpid() not in pids
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]


def test_the_clients_form_with_no_producers_ends_too():
    r = run_child(_small(producers=0, clients=True), lambda s: None)
    assert r["problems"] == [] and r["errors"] == [] and r["delivered"] == 0 and len(r["client_pids"]) == 1


def _levels(*busy: int) -> list[Level]:
    """Busy loads around tiny runs (no burners: the figures are what the table shows)."""
    out = []
    for n in busy:
        # The smallest budget (16 KiB), counting what is held: RocksDB's memtables alone pass it.
        runs = {
            key: run_child(_small(sweep=key == "with", budget=16_384, counts="held"), lambda s: None)
            for key in ("with", "without")
        }
        out.append(Level(n, runs, BusyLoad(n, 1.5 * n, 2.0), 0.5 + n))
    return out


def test_the_tables_show_every_busy_load_with_and_without_sweeping(tmp_path):
    from sweepq.bench.demo import budget_held, markdown, peak_rss_table, plot

    levels = _levels(0, 2)
    md = markdown(levels)
    head = md.splitlines()[0]
    assert head == (
        "| figure | with sweeper, 0 busy | without sweeping, 0 busy | with sweeper, 2 busy | without sweeping, 2 busy |"
    )
    assert "| busy processes beside the run | 0 | 0 | 2 | 2 |" in md
    assert "| ... CPU they used | - | - | 3.0 s in 2.0 s | 3.0 s in 2.0 s |" in md
    # A budget of 16 KiB cannot hold: the table says so, for the sweeping runs only.
    assert budget_held(levels[0].runs["with"]) is False and budget_held(levels[0].runs["without"]) is None
    label = "0.0 MB (messages + RocksDB)"
    assert f"| memory budget (what it counts) | {label} | - | {label} | - |" in md and "exceeded: " in md
    rss = peak_rss_table(levels).splitlines()
    assert rss[0].startswith("| busy processes | peak RSS with sweeper | budget + baseline | peak RSS without sweeping")
    assert [r.split("|")[1].strip() for r in rss[2:]] == ["0", "2"]
    w = levels[1].runs["with"]
    assert f"| 2 | {w['peak_rss'] / MB:,.1f} MB |" in rss[3]
    plot(levels, str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_every_line_of_every_panel_has_a_legend_and_mb_is_said(monkeypatch, tmp_path):
    import matplotlib.figure

    from sweepq.bench.demo import plot

    figures = []
    real_savefig = matplotlib.figure.Figure.savefig
    monkeypatch.setattr(
        matplotlib.figure.Figure, "savefig", lambda fig, *a, **k: figures.append(fig) or real_savefig(fig, *a, **k)
    )
    levels = _levels(1)
    levels[0].runs["with"]["config"]["budget"] = 5 * MB
    plot(levels, str(tmp_path / "p.png"))
    (fig,) = figures
    for ax in fig.axes:
        legend = ax.get_legend()
        labels = {t.get_text() for t in legend.get_texts()}
        for line in ax.get_lines():
            assert line.get_label() in labels, (ax.get_ylabel(), line.get_label())
    memory = fig.axes[0]
    assert "10^6 bytes" in memory.get_ylabel()
    budget = [ln for ln in memory.get_lines() if ln.get_label().startswith("memory budget")]
    assert budget and list(budget[0].get_ydata()) == [5.0, 5.0] and "(5.0 MB)" in budget[0].get_label()


def _small_table(tmp_path, **kw):
    from sweepq.bench.demo import markdown, plot, summary

    runs = {"with": run_child(_small(**kw), lambda s: None)}
    plot([Level(0, runs, BusyLoad(0, 0, 0), 0.0)], str(tmp_path / "p.png"))
    return summary(runs), markdown([Level(0, runs, BusyLoad(0, 0, 0), 0.0)])


def test_table_and_plot_without_the_comparison_run(tmp_path):
    s, md = _small_table(tmp_path)
    assert s["peak_rss_without_sweeping"] is None
    assert "| messages put | 600 |" in md and md.splitlines()[0] == "| figure | with sweeper |"
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_no_budget_is_no_verdict(tmp_path):
    s, md = _small_table(tmp_path, budget=0)
    assert s["budget_held"] is None and "| memory budget (what it counts) | - |" in md
    assert "| the budget | - |" in md and "| peak resident memory against budget + baseline | - |" in md


def _demo_processes(pid: int) -> list[psutil.Process]:
    """Every process whose command line says it belongs to the demo ``pid`` (runs and burners
    name their parent's pid on their command line)."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if any(m in cmd for m in ("sweepq.bench.demo", "sweepq.bench.busy")) and cmd[-1:] == [str(pid)]:
            out.append(p)
    return out


def _demo(tmp_path, *argv: str) -> tuple[subprocess.CompletedProcess, str, dict]:
    """``sweepq demo ARGV --out tmp_path`` as a user starts it: (the process, its output with
    rich's wrapping undone, the figures it wrote); no process of it is left running."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweepq.cli", "demo", *argv, "--out", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = proc.communicate(timeout=300)
    assert _demo_processes(proc.pid) == []
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done, " ".join(out.split()), json.loads((tmp_path / "demo.json").read_text())


def test_demo_quick_end_to_end_beside_a_busy_process(tmp_path):
    """The quick form as CI runs it, with a spinning process beside it: everything verified,
    the burner counted in the table and gone when the demo ends, and the memory budget held:
    the sweeping run's peak resident memory within 1.15 x budget + baseline, exit 0. (A budget
    that does not hold fails the demo: the next test.)"""
    proc, text, figures = _demo(tmp_path, "--quick", "--busy", "1")
    out = proc.stdout + proc.stderr
    s = figures["levels"][0]["summary"]
    assert s["budget_counts"] == "resident" and s["budget"] == 32 * MB
    bound = s["budget"] + s["baseline_with_sweeper"]
    assert s["rss_bound_with_sweeper"] == bound and 30 * MB < s["baseline_with_sweeper"] < 120 * MB
    assert s["peak_rss_with_sweeper"] <= 1.15 * bound, (s["peak_rss_with_sweeper"] / bound, out)
    assert s["budget_held"] is True and proc.returncode == 0, out
    ratio = s["peak_rss_with_sweeper"] / bound
    assert (
        f"memory budget (1 busy) held: peak resident memory {s['peak_rss_with_sweeper'] / MB:,.1f} MB against "
        f"budget + baseline 32.0 MB + {s['baseline_with_sweeper'] / MB:,.1f} MB = {bound / MB:,.1f} MB "
        f"({ratio:.2f} x; within 1.15 x is held)"
    ) in text, out
    assert "verified (with sweeper, 1 busy): all 60,000 messages arrived exactly once and in order" in text
    assert "verified (without sweeping, 1 busy): all 60,000 messages" in text
    assert "the sweep interval is shortened to 1 s" in text and "1 spinning process beside them" in text
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    assert figures["mb"] == 1_000_000 and figures["config"]["budget"] == 32 * MB
    (level,) = figures["levels"]
    assert level["busy"] == 1 and level["busy_load"]["processes"] == 1
    assert level["busy_load"]["cpu_seconds"] > 0  # it did spin
    assert s["messages"] == s["delivered_with_sweeper"] == 60_000
    assert s["msgs_swept"] > 0 and s["msgs_unswept"] == s["msgs_swept"]
    assert 0 < s["peak_rss_with_sweeper"] < s["peak_rss_without_sweeping"]
    assert figures["peak_rss"] == [
        {"busy": 1, "with_sweeper": s["peak_rss_with_sweeper"], "without_sweeping": s["peak_rss_without_sweeping"]}
    ]
    # A path longer than the terminal is folded inside a word: look for its name without spaces.
    assert "plot:" in text and "demo.png" in "".join(out.split()) and "figures:" in text
    md = (tmp_path / "demo.md").read_text()
    assert "| peak resident memory |" in md and "| busy processes beside the run | 1 | 1 |" in md
    assert f"| peak resident memory against budget + baseline | {s['peak_rss_with_sweeper'] / MB:,.1f} MB of" in md
    assert "| busy processes | peak RSS with sweeper | budget + baseline |" in md
    # peak.md is demo.md's last table alone (the README quotes it), and both are what the
    # run's demo.json makes again: a page quoting them can be checked against the run.
    peak = (tmp_path / "peak.md").read_text()
    assert md.endswith("\n" + peak) and peak.startswith("| busy processes |")
    levels = demo.levels_of(figures)
    assert md == demo.markdown(levels) + "\n" + demo.peak_rss_table(levels)
    assert {"date", "commit", "load", "machine"} <= set(figures["run"])


def test_a_budget_that_does_not_hold_fails_the_demo(tmp_path):
    """The quick form with a budget too small to hold (20 kB above the baseline: RocksDB's
    memtables alone take a megabyte): the demo says the budget FAILED, with the figures that
    show it, and exits 1 although every message arrived."""
    proc, text, figures = _demo(tmp_path, "--quick", "--no-compare", "--budget", "20kB", "--messages", "20000")
    s = figures["levels"][0]["summary"]
    assert s["budget"] == 20_000 and s["budget_held"] is False
    assert s["peak_rss_with_sweeper"] > 1.15 * (s["budget"] + s["baseline_with_sweeper"])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "memory budget FAILED: exceeded: peak resident memory" in text and "(within 1.15 x is held)" not in text
    assert "verified (with sweeper): all 20,000 messages arrived exactly once and in order" in text
    assert "exceeded: " in (tmp_path / "demo.md").read_text()


def test_a_budget_counting_what_is_held_is_checked_on_that_count(tmp_path):
    """--budget-counts held: the budget bounds the messages in memory and RocksDB's memtables
    and cache, and that is what the demo checks (every sample within the budget); resident
    memory is shown against budget + baseline, not judged."""
    proc, text, figures = _demo(
        tmp_path, "--quick", "--no-compare", "--budget-counts", "held", "--budget", "8MB", "--messages", "20000"
    )
    s = figures["levels"][0]["summary"]
    assert s["budget_counts"] == "held" and s["budget"] == 8 * MB
    assert s["budget_held"] is True and s["peak_budgeted_with_sweeper"] <= 8 * MB and proc.returncode == 0, text
    assert f"memory budget held: at most {s['peak_budgeted_with_sweeper'] / MB:,.1f} MB of messages in memory" in text
    assert "not bounded: --budget-counts resident bounds it" in text


# -- Ctrl-C and friends: every process of the demo ends ---------------------------------------------


def _start_demo(tmp_path) -> tuple[subprocess.Popen, list[psutil.Process]]:
    """A demo long enough to interrupt, in a session of its own (so that the test can signal
    its whole process group), once its runs are tethered (the lifeline thread is their
    second) and its burner spins (the demo waits for that before starting the runs). Its runs
    are paced to last ten minutes with few messages: they cost nothing while they wait to be
    interrupted, and none ends by itself within the time a test waits for them to end."""
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir()
    argv = ["demo", "--messages", "6000", "--seconds", "600", "--size", "64", "--busy", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweepq", *argv, "--out", str(tmp_path / "out")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=env,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        procs = _demo_processes(proc.pid)
        runs = [p for p in procs if "sweepq.bench.demo" in p.cmdline()]
        try:
            if len(procs) == 3 and len(runs) == 2 and all(p.num_threads() >= 2 for p in runs):
                return proc, procs
        except psutil.NoSuchProcess:
            pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    proc.kill()
    pytest.fail("the demo's runs did not start")


# How long a process of the demo may take to end once it must. A guard against a hang, not a
# speed: beside a CPU burner on a shared machine an exit takes seconds. Every process waited
# for would otherwise live ten times longer (the runs are paced over 600 s, the orphan below
# sleeps 600 s), so ending within it is ending because it was told to.
ENDS_WITHIN = 60.0


def _gone(procs: list[psutil.Process], within: float = ENDS_WITHIN) -> list[psutil.Process]:
    """The processes still running after ``within`` seconds (zombies count as gone)."""
    _, alive = psutil.wait_procs(procs, timeout=within)
    return [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.parametrize(
    ("to", "signum", "why"),
    [("group", signal.SIGINT, "Ctrl-C"), ("parent", signal.SIGINT, "Ctrl-C"), ("parent", signal.SIGTERM, "SIGTERM")],
)
def test_an_interrupt_ends_every_process_and_says_what_is_left(tmp_path, to, signum, why):
    proc, procs = _start_demo(tmp_path)
    with reaped(proc, procs):
        if to == "group":
            os.killpg(proc.pid, signum)  # what Ctrl-C in a terminal does
        else:
            os.kill(proc.pid, signum)
        assert _gone(procs) == []
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines[0].startswith(f"sweepq demo: interrupted ({why}): ended 2 run processes and 1 busy process"), err
    store = lines[1].split("(")[1].rstrip(")")
    assert lines[1].startswith("  removed: the runs' temporary blob stores") and not os.path.exists(store)
    assert f"not written: demo.png, demo.md, demo.json, peak.md in {tmp_path / 'out'}" in err
    assert os.listdir(tmp_path / "out") == [] and os.listdir(tmp_path / "tmp") == []
    assert "Traceback" not in err


def test_the_runs_and_the_burners_die_with_a_killed_demo(tmp_path):
    proc, procs = _start_demo(tmp_path)
    proc.kill()  # SIGKILL: nothing of the demo runs any more, its children must end by themselves
    proc.wait()
    assert _gone(procs) == []
    deadline = time.monotonic() + ENDS_WITHIN
    while os.listdir(tmp_path / "tmp") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.listdir(tmp_path / "tmp") == []  # the runs removed their stores on their way out


# -- the tether itself: each of its two means alone ------------------------------------------------

_ORPHAN = """
import os, sys, time
import sweepq.bench.children as children
if sys.argv[1] == "lifeline":  # only the pipe: as on a system without PR_SET_PDEATHSIG
    children._set_parent_death_signal = lambda signum: False
children.tether(int(sys.argv[2]), lifeline=sys.argv[1] == "lifeline")
print("ready", flush=True)
time.sleep(600)
"""

_PARENT = """
import os, subprocess, sys, time
from sweepq.bench.children import Children
child = Children().start([sys.executable, "-c", sys.argv[1], sys.argv[2], str(os.getpid())], "child",
                         stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "ready\\n"
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("means", ["lifeline", "death-signal"])
def test_a_tethered_child_dies_with_its_parent_by_either_means(means):
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, _ORPHAN, means], stdout=subprocess.PIPE, text=True)
    try:
        child = psutil.Process(int(parent.stdout.readline()))
        assert child.is_running()
        parent.kill()
        parent.wait()
        assert _gone([child]) == []
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()


def _fake_run(sweeping: bool, fill: float) -> dict:
    sample = {
        "t": 0.0,
        "rss": 50 * MB,
        "depth": 10,
        "held": 5 * MB,
        "in_memory": 5,
        "swept_raw_bytes": 0,
        "swept_bytes": 0,
    }
    return {
        "sweeping": sweeping,
        "config": {"budget": 100 * MB, "counts": "resident"},
        "baseline": 40 * MB,
        "peak_rss": 130 * MB,
        "peak_budgeted": 80 * MB,
        "samples": [sample, {**sample, "t": fill + 1}],
        "fill_seconds": fill,
    }


def test_the_budget_verdict_says_what_it_measured_and_stands_under_that_row():
    """ "held (0.93 x)" stood under "peak of messages + RocksDB (held)" but measured resident
    memory against budget + baseline: the verdict now names its measure and follows it."""
    from sweepq.bench.demo import _ROWS, _budget_text

    w = _fake_run(True, 10.0)
    assert _budget_text(w) == "held: peak resident memory 0.93 x budget + baseline"
    held = {**w, "config": {"budget": 100 * MB, "counts": "held"}}
    assert _budget_text(held) == "held: peak of messages + RocksDB 0.80 x budget"
    labels = [label for label, _ in _ROWS]
    assert labels[labels.index("the budget") - 1] == "peak resident memory against budget + baseline"


def test_each_run_has_its_own_producers_done_line():
    """The two runs' producers stop at different times: a line each, named for its run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sweepq.bench.demo import _plot_level

    lv = Level(
        busy=0,
        runs={"with": _fake_run(True, 10.0), "without": _fake_run(False, 12.5)},
        load=BusyLoad(0, 0.0, 0.0),
        load_average=1.0,
    )
    fig, axes = plt.subplots(3, 1)
    try:
        _plot_level(axes, lv)
        for ax in axes:
            done = {
                line.get_label(): line.get_xdata()[0] for line in ax.get_lines() if "producers done" in line.get_label()
            }
            assert done == {"producers done, with sweeper": 10.0, "producers done, without sweeping": 12.5}, done
    finally:
        plt.close(fig)


class _RefusingAudit:
    """A connection whose AUDIT handle refuses its first ``refusals`` puts with 2071, as a
    full budget under --policy fail does; every other call goes to the real connection."""

    def __init__(self, conn, refusals: int):
        self.conn, self.refusals, self.refused = conn, refusals, 0

    def __enter__(self):
        self.conn.__enter__()
        return self

    def __exit__(self, *exc):
        return self.conn.__exit__(*exc)

    def open(self, name, options):
        h = self.conn.open(name, options)
        if name != "AUDIT":
            return h
        outer = self

        class Handle:
            def put(self, data, md, opts):
                from sweepq.engine import MQError, Reason

                if outer.refused < outer.refusals:
                    outer.refused += 1
                    raise MQError(Reason.STORAGE_NOT_AVAILABLE)
                return h.put(data, md, opts)

        return Handle()

    def commit(self):
        self.conn.commit()

    def backout(self):
        self.conn.backout()


def test_the_consumer_puts_again_an_audit_record_the_full_budget_refuses():
    """A loaded `sweepq demo --policy fail` ended with 2071 from the consumer's audit put,
    which only the producers' puts retried: the consumer now retries it too, and every
    message still arrives once, its audit records one per committed unit of work."""
    import threading

    from sweepq.engine import QueueManager

    cfg = _small(messages=200, producers=1, policy="fail")
    qm = QueueManager("AUDITED")
    for name in [*demo.queue_names(cfg), "AUDIT"]:
        qm.define_queue(name)
    refusing: list[_RefusingAudit] = []

    def connect():
        refusing.append(_RefusingAudit(qm.connect(), refusals=3))
        return refusing[-1]

    work = demo.Workload(cfg, connect, time.monotonic())
    expected = work.produce(0, cfg.messages, lambda k: None)
    done = threading.Event()
    done.set()
    checker, stats = DeliveryChecker(), {"audit_put": 0, "get_backouts": 0}
    work.consume(done, checker, stats, lambda k: None, lambda: None)
    assert refusing[-1].refused == 3  # the refusals happened, and did not end the consumer
    assert checker.finish(expected) == []
    assert qm.inquire_queue("AUDIT").current_depth == stats["audit_put"] > 0
    qm.close()
