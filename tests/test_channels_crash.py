"""kill -9 of either end of a channel under load (bench/crash_channel.py, the CI form of
``sweepq crashtest-channel``): every committed persistent message arrives exactly once, in
order per priority; and the verdict it rests on finds what it must."""

from __future__ import annotations

import os

import pytest

from sweepq.bench.crash_channel import judge, run_channel_crashtest

from helpers import reaped, wait_until


@pytest.mark.long
def test_kills_of_the_sender_and_the_receiver_lose_and_duplicate_nothing(tmp_path):
    verdict = run_channel_crashtest(str(tmp_path), kills=50, seed=11, quick=True)
    assert verdict.ok, verdict.render("tests/test_channels_crash.py")
    assert verdict.committed > 1000 and verdict.kills == 50
    # Each class counts a kill only when the victim's own log ends with the kill at that point
    # (bench/crash_channel.py _one_kill): "qm1 between-commits not reached: at random" is not one.
    for where in ("qm1 between-commits", "qm2 receiver-commit", "qm1 at random", "qm2 at random"):
        assert verdict.kill_classes[where] >= 1, verdict.kill_classes
    # and the logs say so themselves: QM1 killed itself after the receiver had confirmed (its
    # commit done) and before its own commit, with nothing logged after
    said = {"qm1": [], "qm2": []}
    for log in (tmp_path / "logs").glob("qm*-*.log"):
        lines = log.read_text().splitlines()
        said[log.name[:3]] += [line for line in lines if line.startswith("K ")]
        if any(line.startswith("K ") for line in lines):
            assert lines[-1].startswith("K "), f"{log.name} logged after its kill: {lines[-3:]}"
    assert said["qm1"].count("K between-commits") >= verdict.kill_classes["qm1 between-commits"]
    assert said["qm2"].count("K receiver-commit") >= verdict.kill_classes["qm2 receiver-commit"]


def write_logs(d, qm1: list[str], qm2: list[str]) -> str:
    os.makedirs(d / "logs")
    (d / "logs" / "qm1-00001.log").write_text("".join(line + "\n" for line in qm1))
    (d / "logs" / "qm2-00002.log").write_text("".join(line + "\n" for line in qm2))
    return str(d / "logs")


def test_the_verdict_names_lost_duplicated_reordered_and_phantom_messages(tmp_path):
    qm1 = ["S 1", "R", "U 1.1:0 1.2:0 1.3:4", "C+", "C", "U 1.4:0", "B", "U 1.5:9", "C+", "C", "U 1.6:9", "C+"]
    ok = judge(write_logs(tmp_path / "ok", qm1, ["R", "G 1.1:0 1.2:0", "C+", "C", "G 1.5:9 1.3:4", "C+", "C"]))
    assert ok.ok and (ok.committed, ok.maybe, ok.consumed) == (4, 1, 4)
    # a get whose commit was cut, got again later: consumed once
    cut = ["G 1.1:0 1.2:0 1.3:4 1.5:9", "C+", "G 1.1:0 1.2:0 1.3:4 1.5:9 1.6:9", "C+", "C"]
    again = judge(write_logs(tmp_path / "again", qm1, cut))
    assert again.ok and again.maybe_applied == 1
    bad = judge(write_logs(tmp_path / "bad", qm1, ["G 1.2:0 1.1:0 1.1:0 1.4:0 !1.5:4", "C+", "C"]))
    assert set(bad.violations) >= {"lost", "duplicated", "reordered", "phantom", "damaged payload", "wrong priority"}
    assert bad.violations["lost"] == ["1.3"]


def test_ctrl_c_stops_both_queue_managers_and_says_where_the_logs_are(tmp_path):
    import signal
    import subprocess
    import sys

    work = tmp_path / "w"
    cmd = [sys.executable, "-m", "sweepq", "crashtest-channel", "--kills", "1000", "--quick", "--data-dir", str(work)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = work / "logs"
    with reaped(proc):
        # the driver's own progress: both children started, a kill done
        wait_until(lambda: len(list(logs.glob("*.log")) if logs.exists() else []) >= 3, 60, "three logs")
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert f"interrupted; the logs and store are kept in {work}" in out
    pids = [int(line.split()[2]) for p in logs.glob("*.log") for line in p.read_text().splitlines() if line[:2] == "S "]
    assert pids
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        raise AssertionError(f"child {pid} still runs after Ctrl-C")


def test_crashtest_channel_refuses_a_directory_in_use_in_one_line(tmp_path):
    import subprocess
    import sys

    (tmp_path / "x").write_text("")
    cmd = [sys.executable, "-m", "sweepq", "crashtest-channel", "--data-dir", str(tmp_path)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr


@pytest.mark.parametrize("harness", ["crashtest-channel", "crashtest-server"])
def test_out_that_cannot_be_written_fails_at_once_in_one_line(tmp_path, harness):
    """--out is made before the first kill: a run of half an hour must not end unwritten."""
    import subprocess
    import sys

    (tmp_path / "file").write_text("")
    cmd = [sys.executable, "-m", "sweepq", harness, "--out", str(tmp_path / "file" / "v")]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "--out" in out.stderr and "kill" not in out.stdout  # no run began


def test_out_keeps_the_verdict_under_its_run_heading(tmp_path):
    """verdict.md is verdict.json's heading (command, date, commit, machine, load at the start
    and the end) over the verdict as printed, so a page quoting it can be held to the run."""
    import json

    from sweepq.cli.harness import VerdictOut, verdict_markdown

    out = VerdictOut(str(tmp_path / "v"), "sweepq crashtest-channel --kills 3 --out v")
    out.write("crash harness verdict: PASS (seed 1)\n  lost: 0", ok=True)
    doc = json.loads((tmp_path / "v" / "verdict.json").read_text())
    assert doc["ok"] is True and doc["command"] == "sweepq crashtest-channel --kills 3 --out v"
    assert {"date", "commit", "load", "load_after", "machine"} <= set(doc["run"])
    md = (tmp_path / "v" / "verdict.md").read_text()
    assert md == verdict_markdown(doc, doc["verdict"])
    assert md.startswith("One run, `sweepq crashtest-channel --kills 3 --out v`:") and "  lost: 0\n```\n" in md
