"""``sweepq serve`` as a process of its own, with each of its options asserting what it does
(issue 24 items 9, 10, 11, 14; docs/clients.md): ``--tls-cert/--tls-key`` (TLS on TCP, the
Unix socket plain), ``--metrics``, ``--token``, ``--max-connections``, ``--max-handles``,
``--max-handshakes`` with ``--handshake-timeout`` (short here: it must elapse),
``--frame-memory``; and what it refuses in one line: a second server on the same data
directory (which it leaves as it was), an unwritable data directory, a token that is not
text."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from urllib.request import urlopen

import pytest
from net_env import ServeProcess, short_dir

from sweepq.engine import MQError, Reason
from sweepq.net import auth
from sweepq.net import client as net_client
from sweepq.net import protocol as P

from helpers import IO


def data_dir() -> str:
    return os.path.join(short_dir(), "d")


def logged(srv: ServeProcess, pattern: str) -> re.Match:
    """The first match of ``pattern`` in the server's log, once it has written it (it answers
    on its socket a moment before it says so)."""
    deadline = time.monotonic() + 30
    while (m := re.search(pattern, srv.log())) is None:
        assert time.monotonic() < deadline, f"{pattern!r} not in the log: {srv.log()}"
        time.sleep(0.01)
    return m


def tcp_of(srv: ServeProcess, scheme: str = "tcp") -> str:
    port = logged(srv, r"listening on .*(?:tcp|tls)://127\.0\.0\.1:(\d+)").group(1)
    return f"{scheme}://127.0.0.1:{port}"


def reason_of(fn) -> int:
    with pytest.raises(MQError) as e:
        fn()
    return e.value.reason


def serve_fails(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "sweepq", "serve", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def one_line(out: subprocess.CompletedProcess) -> str:
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def define_q(srv: ServeProcess) -> None:
    from sweepq.net import RemoteQueueManager

    admin = auth.read_token(os.path.join(srv.data_dir, auth.ADMIN_TOKEN_FILE))
    with RemoteQueueManager(srv.url, admin_token=admin) as r:
        r.define_queue("Q")


def test_tls_applies_to_tcp_and_the_unix_socket_stays_plain(tmp_path, capsys):
    trustme = pytest.importorskip("trustme")
    from sweepq.cli import main

    ca = trustme.CA()
    pem = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(pem))
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with ServeProcess(data_dir(), "--tcp", "127.0.0.1:0", "--tls-cert", str(pem), "--tls-key", str(pem)) as srv:
        define_q(srv)
        token = auth.read_token(os.path.join(srv.data_dir, auth.TOKEN_FILE))
        url = tcp_of(srv, "tls")
        assert url in srv.log()
        with net_client.connect(url, token, cafile=str(tmp_path / "ca.pem")) as c:  # TLS on TCP
            c.open("Q", IO).put(b"over tls")
        assert reason_of(lambda: net_client.connect(url, token)) == Reason.HOST_NOT_AVAILABLE  # not our CA
        with net_client.connect(srv.url) as c:  # the Unix socket: plain, no TLS
            assert c.open("Q", IO).get().data == b"over tls"
        assert main(["status", "--data-dir", srv.data_dir]) == 0  # what failed with "Connection reset by peer"
        assert "Q" in capsys.readouterr().out


def test_metrics_answer_prometheus_on_http():
    with ServeProcess(data_dir(), "--metrics", "127.0.0.1:0") as srv:
        define_q(srv)
        url = logged(srv, r"metrics on (http://\S+)").group(1)
        with net_client.connect(srv.url) as c:
            c.open("Q", IO).put_many([b"a", b"b"])
            text = urlopen(url, timeout=10).read().decode()
        assert 'sweepq_queue_depth{queue="Q"} 2.0' in text and "sweepq_connections 1.0" in text
        assert "sweepq_handshakes 0.0" in text and "sweepq_frame_memory_bytes 0.0" in text


def test_token_is_what_tcp_clients_must_present():
    with ServeProcess(data_dir(), "--tcp", "127.0.0.1:0", "--token", "s3cret") as srv:
        url = tcp_of(srv)
        assert reason_of(lambda: net_client.connect(url)) == Reason.NOT_AUTHORIZED
        file_token = auth.read_token(os.path.join(srv.data_dir, auth.TOKEN_FILE))
        assert file_token is None or reason_of(lambda: net_client.connect(url, file_token)) == Reason.NOT_AUTHORIZED
        with net_client.connect(url, "s3cret") as c:
            assert c.server.qm
        assert "refused tcp" in srv.log() and "Traceback" not in srv.log()


def test_max_connections_and_max_handles():
    with ServeProcess(data_dir(), "--max-connections", "1", "--max-handles", "1") as srv:
        define_q(srv)
        with net_client.connect(srv.url) as c:
            assert reason_of(lambda: net_client.connect(srv.url)) == Reason.MAX_CONNS_LIMIT_REACHED
            c.open("Q", IO)
            assert reason_of(lambda: c.open("Q", IO)) == Reason.HANDLE_NOT_AVAILABLE
        assert "1 connections open, the limit" in srv.log()


def test_max_handshakes_and_the_handshake_timeout():
    with ServeProcess(data_dir(), "--max-handshakes", "2", "--handshake-timeout", "2") as srv:
        path = srv.url[len("unix://") :]
        silent = []
        for _ in range(3):  # accepted in this order (the listen queue is first in, first out)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.settimeout(30)
            silent.append(s)
        assert silent[0].recv(1) == b""  # closed when the third came: the oldest at the limit
        silent[1].setblocking(False)
        with pytest.raises(BlockingIOError):  # the others wait for their deadline
            silent[1].recv(1)
        silent[1].setblocking(True)
        assert silent[1].recv(1) == b"" and silent[2].recv(1) == b""  # their deadline, 2 s after the accept
        with net_client.connect(srv.url) as c:
            assert c.server.qm
        assert "had not finished their handshake (HELLO within 2 s; at most 2" in srv.log()


def test_frame_memory_bounds_large_frames_in_flight():
    assert "--frame-memory" in one_line(serve_fails("--data-dir", data_dir(), "--frame-memory", "12xb"))
    with ServeProcess(data_dir(), "--frame-memory", "1MiB") as srv:
        define_q(srv)
        with net_client.connect(srv.url) as c:
            assert c.status()["frame_memory"]["limit"] == 2**20
            h = c.open("Q", IO)
            assert reason_of(lambda: h.put(b"x" * 1_500_000)) == Reason.STORAGE_NOT_AVAILABLE  # alone over it
            h.put(b"y" * 500_000)  # within it: goes through, and the connection went on
            assert len(h.get().data) == 500_000


def snapshot(d: str) -> dict[str, bytes]:
    """Every file of the data directory (the socket aside) and its bytes."""
    out = {}
    for name in sorted(os.listdir(d)):
        full = os.path.join(d, name)
        if os.path.isfile(full) and name != "sweepq.sock":
            with open(full, "rb") as f:
                out[name] = f.read()
    return out


def untouched(before: dict[str, bytes], after: dict[str, bytes]) -> bool:
    """No file of ``before`` made, removed or rewritten in ``after``; RocksDB's info ``LOG``
    may only have grown, since the store that holds the directory open appends to it when it
    likes (a flush, a compaction): a second opener would rotate it to ``LOG.old.*`` (a new
    name) or truncate it (a changed start)."""
    if before.keys() != after.keys():
        return False
    return all(after[name].startswith(data) if name == "LOG" else after[name] == data for name, data in before.items())


def test_a_second_server_on_the_same_data_directory_is_one_line_and_touches_nothing():
    with ServeProcess(data_dir()) as srv:
        define_q(srv)
        before = snapshot(srv.data_dir)
        out = serve_fails("--data-dir", srv.data_dir)
        assert out.returncode == 1 and "has it open" in one_line(out)
        assert untouched(before, snapshot(srv.data_dir))  # no LOG.old.*, no rewritten file
        with net_client.connect(srv.url) as c:  # and the first one serves on
            c.open("Q", IO).put(b"still")


def test_a_refused_open_in_the_same_process_touches_nothing_either(tmp_path):
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings

    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        before = snapshot(str(tmp_path / "d"))
        for repair in (False, True):
            with pytest.raises(MQError) as e:
                QueueManager.open(
                    tmp_path / "d", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(repair=repair)
                )
            assert e.value.reason == Reason.RESOURCE_PROBLEM and "in this process" in e.value.text
        assert untouched(before, snapshot(str(tmp_path / "d")))
    with QueueManager.open(
        tmp_path / "d", sweeping=SweeperSettings(run=False)
    ) as again:  # the claim went with the close
        assert "Q" in again.queue_names()


def test_an_unwritable_data_directory_is_one_line(tmp_path):
    if os.geteuid() == 0:
        parent = "/sys"  # root writes anywhere a mode allows: sysfs refuses it
    else:
        parent = str(tmp_path / "ro")
        os.mkdir(parent, 0o500)
    out = serve_fails("--data-dir", os.path.join(parent, "srv"))
    assert out.returncode == 1 and "cannot use" in one_line(out)


def test_a_token_that_is_not_text_is_refused_in_one_line():
    env = {**os.environ, "SWEEPQ_TOKEN": "\udcff"}  # the bytes 0xff: not UTF-8 text
    out = serve_fails("--data-dir", data_dir(), "--tcp", "127.0.0.1:0", env=env)
    assert out.returncode == 1 and "token must be non-empty text" in one_line(out)


def test_a_client_token_holding_a_lone_surrogate_is_2035_and_no_traceback():
    with ServeProcess(data_dir(), "--tcp", "127.0.0.1:0") as srv:
        url = tcp_of(srv)
        for bad in ("\ud800", "T\udcff", b"bytes"):
            assert reason_of(lambda b=bad: net_client.connect(url, b)) == Reason.NOT_AUTHORIZED
        assert reason_of(lambda: net_client.connect(srv.url, admin_token="\ud800")) == Reason.NOT_AUTHORIZED
        hello = P.request(P.HELLO, {"token": "\ud800", "pid": 1})
        s = socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])))
        s.sendall(hello)
        assert P.HEADER.unpack(s.recv(P.HEADER_LEN, socket.MSG_WAITALL))[2] == P.ERROR
        s.close()  # the refusal is logged before it is sent
        assert "Traceback" not in srv.log() and "UnicodeEncodeError" not in srv.log()
