"""The Ctrl-C tests hold when the suite itself is started with SIGINT ignored (the background of
a non-interactive shell, nohup, some CI): tests/conftest.py gives the processes they start
SIGINT's default back. Without it, their children ignore the signal and the tests hang."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_ctrl_c_test_passes_under_an_ignored_sigint(tmp_path):
    test = "tests/test_queue.py::test_ctrl_c_ends_a_blocked_call"  # every call and landing
    pytest_argv = f"{sys.executable} -m pytest -q -p no:cacheprovider --timeout 120 {test}"
    run = subprocess.run(
        ["bash", "-c", f"trap '' INT; exec {pytest_argv}"],  # the suite starts with SIGINT ignored
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTEST_ADDOPTS": f"--basetemp={tmp_path / 'inner'}"},
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "6 passed" in run.stdout
