"""The operator's command line (issue 26): alter, delete and clear on a data directory and
through a server; serve with a memory budget, a memory policy and the console; status
--watch (ended by --count or Ctrl-C); --version; --cafile against a TLS server; and one way
to give a token on every command that reaches a server. Every mistake: one line, exit 2
(usage) or 1 (a call failed), never a traceback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from importlib.metadata import version
from pathlib import Path

import pytest
from net_env import ServeProcess, short_dir

from sweepq.cli import main

from helpers import reaped, wait_until

COMMANDS_REACHING_A_SERVER = ("define", "alter", "delete", "clear", "put", "get", "browse", "status", "inspect")


def run(capsys, *args) -> tuple[int, str, str]:
    """``sweepq ARGS`` in this process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as e:  # argparse's usage errors and --version
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err, err
    return code, out, err


def one_line(capsys, code: int, *args) -> str:
    got, _out, err = run(capsys, *args)
    lines = err.strip().splitlines()
    assert got == code and len(lines) == 1, (args, got, err)
    return lines[0]


def test_version(capsys):
    code, out, _ = run(capsys, "--version")
    assert code == 0 and out.strip() == f"sweepq {version('sweepq')}"


def test_alter_delete_clear_on_a_data_directory(capsys, tmp_path):
    d = tmp_path / "q"
    assert run(capsys, "define", "Q", "--data-dir", d, "--persistent")[0] == 0
    assert run(capsys, "put", "Q", "a", "b", "c", "--data-dir", d)[0] == 0
    code, out, _ = run(capsys, "alter", "Q", "--data-dir", d, "--max-depth", "10", "--memory-policy", "block", "--fifo")
    attrs = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:]}
    assert code == 0 and attrs["max_depth"] == "10" and attrs["memory_policy"] == "BLOCK"
    assert attrs["delivery_sequence"] == "FIFO" and attrs["default_persistence"] == "PERSISTENT"  # kept
    assert attrs["current_depth"] == "3"
    code, out, _ = run(capsys, "alter", "Q", "--data-dir", d, "--put", "disabled", "--not-persistent")
    attrs = {line.split()[0]: line.split()[-1] for line in out.splitlines()[1:]}
    assert attrs["inhibit_put"] == "True" and attrs["default_persistence"] == "NOT_PERSISTENT"
    assert "give at least one attribute" in one_line(capsys, 2, "alter", "Q", "--data-dir", d)
    assert "MQRC_PUT_INHIBITED" in one_line(capsys, 1, "put", "Q", "x", "--data-dir", d)
    assert "--purge" in one_line(capsys, 1, "delete", "Q", "--data-dir", d)  # 2055: it holds messages
    code, out, _ = run(capsys, "clear", "Q", "--data-dir", d)
    assert code == 0 and out.strip() == "cleared 3 messages from Q"
    assert run(capsys, "alter", "Q", "--data-dir", d, "--put", "enabled")[0] == 0
    assert run(capsys, "put", "Q", "again", "--data-dir", d, "--persistent")[0] == 0
    code, out, _ = run(capsys, "delete", "Q", "--data-dir", d, "--purge")
    assert code == 0 and out.strip() == f"deleted queue Q and its 1 message from {d}"
    line = one_line(capsys, 1, "delete", "Q", "--data-dir", d)
    assert "MQRC_UNKNOWN_OBJECT_NAME (2085)" in line and "sweepq define Q" in line
    assert "MQRC_UNKNOWN_OBJECT_NAME" in one_line(capsys, 1, "clear", "NOPE", "--data-dir", d)


@pytest.fixture
def served():
    """``sweepq serve`` with TCP, a budget, a memory policy and the console, on a data
    directory holding queue Q; (process, tcp URL, console URL)."""
    d = os.path.join(short_dir(), "q")
    assert main(["define", "Q", "--data-dir", d]) == 0
    extra = ("--tcp", "127.0.0.1:0", "--console", "127.0.0.1:0", "--memory-budget", "64MB", "--memory-policy", "fail")
    with ServeProcess(d, *extra) as p:
        budget = "memory budget 64MB; queues' policies: fail 1"
        # The console's address and the budget's line are logged by different steps of the
        # start, in either order: wait for both.
        wait_until(lambda: "console on" in p.log() and budget in p.log(), 30, "the console's and budget's lines")
        log = p.log()
        tcp = re.search(r"(tcp://127\.0\.0\.1:\d+)", log).group(1)
        console = re.search(r"console on (http://127\.0\.0\.1:\d+/)", log).group(1)
        yield p, tcp, console


def test_serve_with_a_budget_a_policy_and_the_console(served):
    p, _tcp, console = served
    token = Path(p.data_dir, "sweepq.token").read_text().strip()
    req = urllib.request.Request(console + "api/snapshot", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        snap = json.load(r)
    assert snap["budget"]["budget"] == 64_000_000 and snap["budget"]["policies"] == {"FAIL": 1}
    assert p.terminate() == 0


def test_alter_delete_clear_through_a_server_and_tokens_the_same_everywhere(served, capsys, monkeypatch):
    p, tcp, _console = served
    unix = p.url
    token_file = os.path.join(p.data_dir, "sweepq.token")
    admin_file = os.path.join(p.data_dir, "sweepq.admin-token")
    token = Path(token_file).read_text().strip()
    admin = Path(admin_file).read_text().strip()
    # Over the Unix socket the owner's tokens are read beside it.
    assert run(capsys, "put", "Q", "a", "b", "--server", unix)[0] == 0
    code, out, _ = run(capsys, "alter", "Q", "--server", unix, "--max-depth", "50")
    assert code == 0 and "max_depth            MAXDEPTH       50" in out
    code, out, _ = run(capsys, "clear", "Q", "--server", unix)
    assert code == 0 and out.strip() == "cleared 2 messages from Q"
    # Over TCP: a token by option, by file, by the environment, the same on every command.
    for how in (["--token", token], ["--token-file", token_file]):
        code, out, _ = run(capsys, "status", "--server", tcp, *how)
        assert code == 0 and "Q" in out, how
        assert run(capsys, "browse", "Q", "--server", tcp, *how)[0] == 0
    monkeypatch.setenv("SWEEPQ_TOKEN", token)
    assert run(capsys, "inspect", "--server", tcp)[0] == 0
    monkeypatch.delenv("SWEEPQ_TOKEN")
    for command in COMMANDS_REACHING_A_SERVER:
        args = [command] + ([] if command in ("status", "inspect") else ["Q"]) + ["--server", tcp]
        if command == "alter":
            args += ["--max-depth", "60"]
        line = one_line(capsys, 1, *args, "--token", "wrong")
        assert "MQRC_NOT_AUTHORIZED (2035)" in line, (command, line)
    line = one_line(capsys, 2, "status", "--server", tcp, "--token-file", "/nonexistent")
    assert "argument --token-file: cannot read a token from /nonexistent" in line
    # Changes need the admin token: by option or by file.
    line = one_line(capsys, 1, "delete", "Q", "--server", tcp, "--token", token)
    assert "MQRC_NOT_AUTHORIZED (2035)" in line
    # Told the command line's way, not the client API's (connect with admin_token=...).
    assert "--admin-token-file" in line and "admin_token=" not in line, line
    line = one_line(capsys, 1, "status", "--server", tcp)  # TCP, no token given
    assert "--token-file" in line and "connect(" not in line, line
    assert run(capsys, "define", "NEW", "--server", tcp, "--token", token, "--admin-token", admin)[0] == 0
    code, out, _ = run(capsys, "delete", "NEW", "--server", tcp, "--token", token, "--admin-token-file", admin_file)
    assert code == 0 and out.startswith("deleted queue NEW")


def test_status_watch_ends_after_count_frames(served, capsys):
    p, _tcp, _console = served
    code, out, _ = run(capsys, "status", "--server", p.url, "--watch", "--interval", "0.1", "--count", "3")
    frames = [f for f in out.split("\n\n") if f.strip()]
    assert code == 0 and len(frames) == 3
    assert all(f.startswith("queue manager ") for f in frames) and "depth" in frames[0]
    first, second = (f.splitlines() for f in frames[:2])
    q_first = next(line for line in first if line.split()[0] == "Q")
    q_second = next(line for line in second if line.split()[0] == "Q")
    assert q_first.split()[2] == "-" and q_second.split()[2] == "+0"  # a rate once two frames exist
    assert "--count counts the frames of --watch" in one_line(capsys, 2, "status", "--server", p.url, "--count", "2")


def test_status_watch_ends_on_ctrl_c_with_130(served):
    p, _tcp, _console = served
    cmd = [sys.executable, "-m", "sweepq", "status", "--server", p.url, "--watch", "--interval", "0.2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with reaped(proc):
        first = proc.stdout.readline()
        assert first.startswith("queue manager ")
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == "", err  # 130: interrupted, as the help says


def test_cafile_reaches_a_tls_server(tmp_path, capsys):
    trustme = pytest.importorskip("trustme")  # the [dev] extra installs it
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    cert.private_key_and_cert_chain_pem.write_to_path(str(tmp_path / "server.pem"))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    d = os.path.join(short_dir(), "q")
    assert main(["define", "Q", "--data-dir", d]) == 0
    pem = str(tmp_path / "server.pem")
    p = ServeProcess(d, "--tcp", "127.0.0.1:0", "--tls-cert", pem, "--tls-key", pem)
    p.start()  # it waits on the Unix socket, which stays plain with a certificate (TLS is for TCP)
    try:
        wait_until(lambda: "listening on" in p.log() or p.proc.poll() is not None, 60, "the server listening")
        assert p.proc.poll() is None, p.log()
        url = re.search(r"(tls://127\.0\.0\.1:\d+)", p.log()).group(1)
        token_file = os.path.join(d, "sweepq.token")
        code, out, _ = run(
            capsys, "status", "--server", url, "--token-file", token_file, "--cafile", tmp_path / "ca.pem"
        )
        assert code == 0 and "Q" in out
        assert (
            run(capsys, "put", "Q", "x", "--server", url, "--token-file", token_file, "--cafile", tmp_path / "ca.pem")[
                0
            ]
            == 0
        )
        line = one_line(capsys, 1, "status", "--server", url, "--token-file", token_file)  # the system's CAs: no
        assert "MQRC_HOST_NOT_AVAILABLE (2538)" in line
        line = one_line(capsys, 2, "status", "--server", url, "--cafile", tmp_path / "none.pem")
        assert "argument --cafile" in line
    finally:
        p.kill()


@pytest.mark.parametrize(
    "args, code, says",
    [
        (["serve", "--data-dir", "X", "--memory-budget", "100"], 2, "did you mean 100 MB"),
        (["serve", "--data-dir", "X", "--memory-budget", "lots"], 2, "is not a size"),
        (["serve", "--data-dir", "X", "--memory-policy", "drop"], 2, "invalid choice"),
        (["serve", "--data-dir", "X", "--token-file", "/nonexistent"], 2, "argument --token-file"),
        (["status"], 2, "give --server URL or --data-dir DIR"),
        (["status", "--data-dir", "X", "--watch", "--json"], 2, "not allowed with argument"),
        (["status", "--server", "unix:///nonexistent/s.sock", "--watch"], 1, "MQRC_"),
        (["alter", "Q"], 2, "--data-dir"),
        (["clear", "bad name", "--data-dir", "X"], 2, "is not a queue name"),
        (["delete", "Q", "--data-dir", "X", "--server", "unix:///x"], 2, "not allowed with argument"),
        (["alter", "Q", "--data-dir", "X", "--get", "maybe"], 2, "invalid choice"),
        (
            ["channel", "define", "C", "--data-dir", "X", "--partner-token-file", "/nonexistent"],
            2,
            "--partner-token-file",
        ),
    ],
)
def test_every_mistake_is_one_line(capsys, tmp_path, args, code, says):
    args = [str(tmp_path / "d") if a == "X" else a for a in args]
    assert says in one_line(capsys, code, *args)


def test_channel_status_says_why_a_channel_retries():
    from sweepq.cli.channel import render_status

    row = {"name": "C", "type": "SENDER", "status": "RETRYING", "seq": 0, "messages": 0, "batches": 0}
    text = render_status([{**row, "why": "cannot reach\n the partner"}])
    assert text.splitlines()[-1] == "    retrying: cannot reach the partner"  # one line (it raised before)


def test_status_watch_counts_no_negative_rate_when_a_client_leaves():
    """A connection gone between two frames took its calls out of the frames' sums: the rate
    counts the calls of the connections in the later frame (-1,390 calls/s before)."""
    from sweepq.cli.serve import render_watch

    def frame(*conns):
        return {"qm": "QM", "queues": [], "connections": [{"id": i, "calls": n} for i, n in conns]}

    before = frame((1, 5000), (2, 100))
    text = render_watch(frame((2, 130), (3, 20)), before, 1.0)  # 1 left; 2 made 30 calls; 3 is new with 20
    assert text.splitlines()[0] == "queue manager QM: 2 connection(s) 50 calls/s"


def test_an_unknown_channel_is_told_the_command_that_defines_it(capsys, tmp_path):
    d = tmp_path / "d"
    assert main(["define", "Q", "--data-dir", str(d)]) == 0
    line = one_line(capsys, 1, "channel", "start", "NOPE", "--data-dir", d)
    assert "sweepq channel define NOPE" in line and "define_channel()" not in line, line


def test_serve_with_a_budget_and_no_queue_says_so(capsys):
    """The budget line names the budget as sizes are written everywhere (64MB) and, with no
    queue yet, says what a new queue's policy is, not "queues' policies: " and nothing."""
    d = os.path.join(short_dir(), "q")
    with ServeProcess(d, "--memory-budget", "5MB") as p:
        wait_until(lambda: "memory budget" in p.log(), what="the budget's line in the log")
        line = next(line for line in p.log().splitlines() if "memory budget" in line)
    assert line == "sweepq serve: memory budget 5MB; no queue yet (a new queue's memory policy: page)"


def test_the_readme_says_what_serve_console_prints(served):
    """The README's comment on `serve --console`: the page's URL and the file of its token (the
    token itself is never printed)."""
    p, _tcp, console = served
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    said = next(line for line in readme.splitlines() if "serve --data-dir ./q --console" in line)
    assert "the file holding its token" in said
    line = next(line for line in p.log().splitlines() if "console on" in line)
    token = Path(p.data_dir, "sweepq.token").read_text().strip()
    assert console in line and os.path.join(p.data_dir, "sweepq.token") in line and token not in line
