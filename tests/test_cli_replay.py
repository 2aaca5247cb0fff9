"""The trace / replay / pipeline commands as a user runs them: every mistake is one line on
stderr naming the argument, and exit code 2; never a traceback. Each case is a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEADER = "time_us,queue,op,bytes,priority,persistent\n"


def sweepq(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "sweepq.cli", *map(str, argv)], capture_output=True, text=True, cwd=cwd
    )


def one_line_error(p, *words):
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


@pytest.fixture
def files(tmp_path):
    f = {
        "empty": "",
        "nohdr": "0,A,put,100,5,true\n10,A,get,0,0,false\n",
        "maybe": HEADER + "0,A,put,100,5,maybe\n",
        "back": HEADER + "10,A,put,100,5,true\n12,B,put,1,1,false\n3,A,get,0,0,false\n",
        "inter": HEADER + "10,A,put,100,5,true\n5,B,put,1,1,false\n30,A,get,0,0,false\n",
    }
    for name, text in f.items():
        (tmp_path / f"{name}.csv").write_text(text)
    return tmp_path


@pytest.mark.parametrize(
    "argv,words",
    [
        (["trace", "generate", "--out", "/nonexistent/dir/t.parquet"], ["--out", "/nonexistent/dir", "create it"]),
        (["trace", "generate", "--seconds", "-5", "--out", "t.parquet"], ["--seconds", "-5", "> 0"]),
        (["trace", "generate", "--out", "t.txt"], ["--out", ".parquet or .csv"]),
        (["trace", "generate", "--queues", "0", "--out", "t.parquet"], ["--queues", ">= 1"]),
        (["trace", "partition", "missing.parquet", "out"], ["TRACE", "does not exist"]),
        (["replay", "empty.csv"], ["TRACE", "empty", "header"]),
        (["replay", "nohdr.csv"], ["TRACE", "time_us", "header"]),
        (["replay", "missing.parquet"], ["TRACE", "missing.parquet", "does not exist"]),
        (["replay", "inter.csv", "--interval", "0"], ["--interval", "> 0"]),
        (["replay", "inter.csv", "--factor", "-1"], ["--factor", ">= 0"]),
        (["replay", "inter.csv", "--blob-bytes", "x"], ["--blob-bytes", "integer"]),
        (["replay", "inter.csv", "--memory-budget", "lots"], ["--memory-budget", "500MB"]),
        (["replay", "inter.csv", "--rule", "clever"], ["--rule", "adaptive"]),
        (["replay", "maybe.csv"], ["persistent", "row 0", "'maybe'", "true or false"]),
        (["replay", "back.csv"], ["time_us", "row 2", "'A'", "backwards"]),
        (["pipeline", "--traces", "missing.parquet", "--out", "o"], ["--traces", "does not exist"]),
        (["pipeline", "--traces", "inter.csv", "--out", "o", "--grid", "interval=abc"], ["--grid", "'abc'"]),
        (["pipeline", "--traces", "inter.csv", "--out", "o", "--grid", "colour=1,2"], ["--grid", "colour", "interval"]),
        (["pipeline", "--traces", "inter.csv", "--out", "o", "--grid", "interval=0"], ["--grid", "> 0"]),
        (["pipeline", "--traces", "inter.csv", "--out", "o", "--interval", "-1"], ["--interval", "> 0"]),
    ],
)
def test_every_mistake_is_one_line_and_exit_2(files, argv, words):
    one_line_error(sweepq(*argv, cwd=files), *words)


def test_interleaved_trace_replays(files):
    """In order per queue but not across queues: accepted (the one order rule)."""
    p = sweepq("replay", "inter.csv", "--json", cwd=files)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["events"] == 3 and out["queues"] == 2


def test_generate_partition_replay_round_trip(tmp_path):
    assert (
        sweepq(
            "trace",
            "generate",
            "--kind",
            "slow-consumer",
            "--queues",
            "3",
            "--rate",
            "50",
            "--seconds",
            "30",
            "--out",
            tmp_path / "t.parquet",
        ).returncode
        == 0
    )
    assert sweepq("trace", "partition", tmp_path / "t.parquet", tmp_path / "byq", "--buckets", "2").returncode == 0
    assert (
        sweepq(
            "trace",
            "generate",
            "--kind",
            "slow-consumer",
            "--queues",
            "3",
            "--rate",
            "50",
            "--seconds",
            "30",
            "--buckets",
            "2",
            "--out",
            tmp_path / "gen",
        ).returncode
        == 0
    )
    outs = []
    for src in ("t.parquet", "byq", "gen"):
        p = sweepq("replay", tmp_path / src, "--json", "--out", tmp_path / f"m-{src}")
        assert p.returncode == 0, p.stderr
        out = json.loads(p.stdout)
        outs.append({k: v for k, v in out.items() if k not in ("seconds", "events_per_second")})
        assert (tmp_path / f"m-{src}" / "totals.parquet").exists()
    assert outs[0] == outs[1] == outs[2] and outs[0]["msgs_swept"] > 0


def test_replay_with_the_adaptive_rule_and_a_budget(tmp_path):
    t = tmp_path / "t.parquet"
    assert (
        sweepq("trace", "generate", "--kind", "slow-drain", "--rate", "50", "--seconds", "300", "--out", t).returncode
        == 0
    )
    p = sweepq("replay", t, "--rule", "adaptive", "--memory-budget", "20kB", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["budget_msgs"] > 0 and out["reswept_share"] < 0.05


def test_every_option_shows_its_default():
    """Each option's help block (argparse's layout: '  --name ...' then indented lines) says
    its default, except the required ones and --help."""
    import re

    required = {"pipeline": {"--traces", "--out"}, "trace generate": {"--out"}}
    for cmd in ("trace generate", "trace partition", "replay", "pipeline"):
        p = sweepq(*cmd.split(), "--help")
        assert p.returncode == 0, p.stderr
        options = p.stdout.split("options:", 1)[1]
        blocks = re.split(r"\n  (?=-)", "\n" + options)
        for block in filter(None, (b.strip() for b in blocks)):
            name = block.split()[0].rstrip(",")
            if name in ("-h", "--help") or name in required.get(cmd, ()):
                continue
            assert "default" in " ".join(block.split()), (cmd, name, block)


@pytest.mark.slow
def test_pipeline_on_a_trace_going_backwards_ends_in_one_error_line_not_java(files):
    """Spark starts (its own few lines of start-up), the trace is checked in the tasks, and the
    fault comes back as a result: the last line names the column and the row, no stack."""
    p = sweepq("pipeline", "--traces", "back.csv", "--out", "o", "--master", "local[1]", cwd=files)
    assert p.returncode == 2, p.stderr[-2000:]
    last = p.stderr.strip().splitlines()[-1]
    assert "--traces" in last and "time_us" in last and "row 2" in last and "backwards" in last
    assert "Traceback" not in p.stderr and "\tat org.apache" not in p.stderr
    # Spark's own start-up and warnings vary with the machine's load (a slow heartbeat adds
    # WARN lines); what must not appear is a stack: every line but ours is a short one.
    ours = [line for line in p.stderr.strip().splitlines() if "sweepq" in line or "--traces" in line]
    assert len(ours) <= 2 and not any(line.startswith(("\tat ", "Caused by")) for line in p.stderr.splitlines())
