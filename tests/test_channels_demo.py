"""``sweepq demo --channel`` (bench/demo_channel.py): a sender queue manager whose partner is
stopped, then the catch-up; and Ctrl-C ends both queue managers."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import psutil

from helpers import reaped

DEMO = [sys.executable, "-m", "sweepq", "demo", "--channel", "--quick", "--messages", "6000", "--seconds", "1.5"]


def test_the_partner_comes_back_and_every_message_arrives_once_swept_or_not(tmp_path):
    out = subprocess.run([*DEMO, "--out", str(tmp_path)], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = json.loads((tmp_path / "demo-channel.json").read_text())["runs"]
    assert [r["sweeper"] for r in runs] == [False, True]
    for r in runs:
        assert (r["got"], r["duplicates"], r["out_of_order"]) == (6000, 0, 0)
        assert r["depth_when_qm2_started"] == 6000  # the partner was down while everything was put
    assert runs[0]["swept_when_qm2_started"] == 0 < runs[1]["swept_when_qm2_started"]
    assert "delivered once, in order: yes" in out.stdout


def test_ctrl_c_ends_both_queue_managers(tmp_path):
    proc = subprocess.Popen([*DEMO, "--out", str(tmp_path)], stdout=subprocess.PIPE, text=True)
    with reaped(proc):
        for line in proc.stdout:
            if "transmission queue" in line:  # QM1 runs
                break
        kids = psutil.Process(proc.pid).children(recursive=True)
        assert kids
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted" in rest and "stopped 1 QM1" in rest
    _gone, alive = psutil.wait_procs(kids, timeout=10)
    assert not alive


def test_the_channel_form_refuses_the_other_forms_in_one_line():
    out = subprocess.run([*DEMO, "--clients"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
