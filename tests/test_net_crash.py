"""kill -9 of the server under a client's load, then restart (bench/crash_server.py, the CI
form of ``sweepq crashtest-server``): every committed persistent message exactly once."""

from __future__ import annotations

from sweepq.bench.crash_server import run_server_crashtest


def test_server_kills_lose_and_duplicate_nothing(tmp_path):
    verdict = run_server_crashtest(str(tmp_path), kills=5, seed=3, quick=True)
    assert verdict.ok, verdict.render("tests/test_net_crash.py")
    assert verdict.committed > 0
