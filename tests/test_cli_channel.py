"""``sweepq channel`` on the command line (issue 24 items 11, 13, 14; docs/channels.md "The
command line"): each of alter, delete, start, stop, status, reset and resolve, on a data
directory and against a running ``sweepq serve``, asserting what it changed; ``resolve
--commit`` and ``--backout`` of a real batch in doubt, both ways, on both; the same through
``RemoteQueueManager.channels``; and the page's example run as written."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys

import pytest
from channel_env import drain_all, pair, status, wait_until
from net_env import ServeProcess, short_dir

from sweepq.cli import main
from sweepq.engine import MD, OO, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.engine.distributed.sync import SenderSync
from sweepq.net import RemoteQueueManager, auth
from sweepq.net.channels import dq_admin

HERE = os.path.dirname(os.path.abspath(__file__))


def cli(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


def channel_status(capsys, name: str, *where: str) -> dict:
    capsys.readouterr()
    cli("channel", "status", name, *where, "--json")
    (row,) = json.loads(capsys.readouterr().out)
    return row


def with_a_batch_in_doubt(path: str, monkeypatch) -> None:
    """Leave the data directory ``path`` (QM1) with its sender TO.QM2 stopped and a batch of
    one persistent message in doubt: the receiver committed it, the sender's commit failed."""

    def never(self):
        raise MQError(Reason.RESOURCE_PROBLEM, "injected: the sender's commit")

    with monkeypatch.context() as m:
        m.setattr(SenderSync, "commit", never)
        with pair(qm1_options={"path": path}) as (qm1, qm2, _):
            qm1.connect().open("TARGET", OO.OUTPUT).put(b"order", MD(persistence=Persistence.PERSISTENT))
            qm1.channels.start("TO.QM2")
            assert len(drain_all(qm2, "Q", 1, lambda: status(qm1, "TO.QM2")["indoubt"])) == 1
            qm1.channels.stop("TO.QM2")


@pytest.mark.parametrize("where", ["data-dir", "server"])
@pytest.mark.parametrize("how", ["commit", "backout"])
def test_resolve_settles_a_batch_in_doubt_on_a_data_directory_and_on_a_server(where, how, monkeypatch, capsys):
    d = os.path.join(short_dir(), "qm1")
    with_a_batch_in_doubt(d, monkeypatch)
    srv = ServeProcess(d).start() if where == "server" else None
    at = ["--server", srv.url] if srv else ["--data-dir", d]
    try:
        before = channel_status(capsys, "TO.QM2", *at)
        assert before["status"] == "INDOUBT" and before["indoubt_messages"] == 1 and before["xmit_depth"] == 1
        cli("channel", "resolve", "TO.QM2", f"--{how}", *at)  # TypeError: _act() got multiple values for 'action'
        assert "channel TO.QM2 resolved" in capsys.readouterr().out
        after = channel_status(capsys, "TO.QM2", *at)
        assert not after["indoubt"] and after["status"] == "STOPPED"
        # commit: the receiver has it, it leaves the transmission queue; backout: it goes again
        assert after["xmit_depth"] == (0 if how == "commit" else 1)
        assert after["seq"] == (before["indoubt_seq"] if how == "commit" else before["seq"])
    finally:
        if srv is not None:
            srv.kill()


def test_remote_channels_resolve_through_a_real_server_needs_the_admin_token(monkeypatch):
    d = os.path.join(short_dir(), "qm1")
    with_a_batch_in_doubt(d, monkeypatch)
    with ServeProcess(d, "--tcp", "127.0.0.1:0") as srv:
        token = auth.read_token(os.path.join(d, auth.TOKEN_FILE))
        admin = auth.read_token(os.path.join(d, auth.ADMIN_TOKEN_FILE))
        with RemoteQueueManager(srv.url) as plain:
            with pytest.raises(MQError) as e:
                plain.channels.resolve("TO.QM2", "backout")
            assert e.value.reason == Reason.NOT_AUTHORIZED
            assert plain.channels.status("TO.QM2")[0]["indoubt"]
        with RemoteQueueManager(srv.url_of("tcp"), token, admin_token=admin) as r:
            st = r.channels.resolve("TO.QM2", "backout")  # TypeError before: net/channels/admin.py
            assert not st["indoubt"] and st["xmit_depth"] == 1
            with pytest.raises(MQError) as e:
                r.channels.resolve("TO.QM2", "maybe")
            assert e.value.reason == Reason.PARM_VALUE_ERROR


def define_sender(d: str) -> None:
    cli("channel", "qmgr", "--data-dir", d, "--name", "QM1")
    cli("define", "XQ", "--usage", "xmitq", "--data-dir", d)
    # nobody listens on port 1: started, it retries, once an hour
    cli("channel", "define", "OUT", "--conname", "tcp://127.0.0.1:1", "--xmitq", "XQ", "--data-dir", d)
    cli("channel", "alter", "OUT", "--short-interval", "3600", "--data-dir", d)


def definition(d: str, srv: ServeProcess | None) -> dict | None:
    """Channel OUT's definition as the queue manager keeps it (None: there is none)."""
    if srv is not None:
        with RemoteQueueManager(srv.url) as r:
            return r.dq_admin("objects", None)["channels"].get("OUT")
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        return dq_admin(qm, False, "objects", None, {})["channels"].get("OUT")


@pytest.mark.parametrize("where", ["data-dir", "server"])
def test_the_seven_channel_actions_do_what_they_say(where, capsys):
    d = os.path.join(short_dir(), "qm1")
    define_sender(d)
    srv = ServeProcess(d).start() if where == "server" else None  # serve starts OUT: it retries
    at = ["--server", srv.url] if srv else ["--data-dir", d]
    try:
        first = channel_status(capsys, "OUT", *at)  # status
        assert first["type"] == "SENDER" and first["status"] == ("RETRYING" if srv else "INACTIVE")
        cli("channel", "alter", "OUT", "--batch-size", "7", *at)  # alter
        assert definition(d, srv)["batch_size"] == 7
        cli("channel", "stop", "OUT", *at)  # stop
        assert channel_status(capsys, "OUT", *at)["status"] == "STOPPED"
        cli("channel", "reset", "OUT", "--seq", "5", *at)  # reset: only while it does not run
        assert channel_status(capsys, "OUT", *at)["seq"] == 5
        cli("channel", "resolve", "OUT", "--commit", *at)  # resolve: nothing in doubt, nothing to do
        assert channel_status(capsys, "OUT", *at)["seq"] == 5
        capsys.readouterr()
        cli("channel", "start", "OUT", *at)  # start
        out = capsys.readouterr().out
        if srv:
            assert "channel OUT started" in out
            wait_until(lambda: channel_status(capsys, "OUT", *at)["status"] == "RETRYING")
            assert main(["channel", "delete", "OUT", *at]) == 1  # not while it runs: 4031, one line
            assert "4031" in capsys.readouterr().err
            cli("channel", "stop", "OUT", *at)
        else:
            assert "will start when the queue manager is served" in out
            assert channel_status(capsys, "OUT", *at)["status"] != "STOPPED"
        cli("channel", "delete", "OUT", *at)  # delete
        assert definition(d, srv) is None
        capsys.readouterr()
        assert main(["channel", "status", "OUT", *at]) == 1
        assert "4032" in capsys.readouterr().err  # CHANNEL_NOT_FOUND
    finally:
        if srv is not None:
            srv.kill()


def test_channel_actions_on_a_directory_being_served_are_refused_in_one_line(capsys):
    d = os.path.join(short_dir(), "qm1")
    define_sender(d)
    with ServeProcess(d) as srv:
        before = sorted(os.listdir(d))
        assert main(["channel", "resolve", "OUT", "--backout", "--data-dir", d]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "2102" in err and "has it open" in err
        assert sorted(os.listdir(d)) == before
        cli("channel", "status", "--server", srv.url)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_command_line_example_of_channels_md_runs_as_written(tmp_path):
    """The bash block of docs/channels.md "The command line", run by bash as it is written,
    with one change: port 1414 becomes a free port (tests run beside other work)."""
    with open(os.path.join(HERE, "..", "docs", "channels.md")) as f:
        page = f.read()
    section = page[page.index("## The command line") :]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    script = "set -e\n" + block.replace("1414", str(free_port()))
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    proc = subprocess.Popen(
        ["bash", "-c", script],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, f"{out}\n{err}"
    assert "hello\n" in out and "QM1.QM2" in out and "resolved" in out
    assert "Traceback" not in err
