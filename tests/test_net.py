"""Client connections (net/, docs/clients.md): the server, the thread client, security, hostile
input and limits. The behaviour tests also run over clients (tests/net_client_mode.py);
the multi-process proof is tests/test_net_proof.py, asyncio tests/test_net_aio.py."""

from __future__ import annotations

import os
import socket
import ssl
import stat
import struct
import subprocess
import sys
import threading

import pytest
from net_env import ServeProcess, served, short_dir

from sweepq.engine import GMO, MD, OO, PMO, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.engine.api import QueueAdmin, QueueConnection, QueueHandle
from sweepq.net import RemoteQueueManager, Server, auth
from sweepq.net import client as net_client
from sweepq.net import protocol as P

from helpers import IO, drain, wait_until


def reason_of(fn) -> int:
    with pytest.raises(MQError) as e:
        fn()
    return e.value.reason


def raw(url: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(url[len("unix://") :])
    return s


def hello_frame(**extra) -> bytes:
    return P.request(P.HELLO, {"pid": 1, "client": "raw", **extra})


def eof_within(s: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``s`` within ``seconds`` (reading and dropping what it sends)."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except (TimeoutError, OSError) as e:
        return not isinstance(e, TimeoutError)


# -- the same API -------------------------------------------------------------------------------


def test_the_in_process_and_the_client_connection_satisfy_one_protocol():
    with served() as (qm, server):
        with qm.connect() as local, net_client.connect(server.url) as remote:
            for conn in (local, remote):
                assert isinstance(conn, QueueConnection)
                assert isinstance(conn.open("Q", IO), QueueHandle)
        assert isinstance(qm, QueueAdmin)
        with RemoteQueueManager(server.url) as remote_qm:
            assert isinstance(remote_qm, QueueAdmin)


def test_results_are_the_engine_s_own_and_read_the_same_on_both_sides():
    with served() as (_qm, server), net_client.connect(server.url) as conn:
        h = conn.open("Q", IO | OO.BROWSE)
        md = MD(priority=7, correl_id=b"C1", properties={"k": 1, "s": "x"}, reply_to_q="R", expiry=600)
        r = h.put(b"data", md)
        got = h.get(GMO.BROWSE_FIRST)
        assert got.msg_id == r.msg_id and got.msg_token == r.msg_token and got.md.correl_id.startswith(b"C1")
        assert got.md.properties == {"k": 1, "s": "x"} and got.md.reply_to_q == "R" and got.priority == 7
        assert 0 < got.md.expiry <= 600
        assert h.get(buffer_length=2).reason == Reason.TRUNCATED_MSG_FAILED
        t = h.get(GMO.ACCEPT_TRUNCATED_MSG, buffer_length=2)
        assert (t.data, t.data_length, t.reason) == (b"da", 4, Reason.TRUNCATED_MSG_ACCEPTED)


def test_wrong_types_give_the_in_process_reasons(tmp_path):
    calls = [
        lambda h: h.put("text"),
        lambda h: h.put(b"x", MD(priority=object())),
        lambda h: h.put(b"x", {"priority": 1}),
        lambda h: h.put(b"x", MD(priority=2**80)),
        lambda h: h.put(b"x", MD(properties={"p": "\ud800"})),
        lambda h: h.get("x"),
        lambda h: h.get(GMO.WAIT, wait_interval=-7),
        lambda h: h.get(msg_id=12),
        lambda h: h.get_many(0),
        lambda h: h.put_many(b"abc"),
    ]
    with served() as (qm, server), qm.connect() as local, net_client.connect(server.url) as remote:
        lh, rh = local.open("Q", IO), remote.open("Q", IO)
        for call in calls:
            assert reason_of(lambda c=call: c(rh)) == reason_of(lambda c=call: c(lh))
        assert reason_of(lambda: remote.open("NOPE", IO)) == Reason.UNKNOWN_OBJECT_NAME
        assert reason_of(lambda: remote.open("Q", 0)) == Reason.OPTIONS_ERROR


def test_put_many_and_get_many_are_one_round_trip_each():
    with served() as (_qm, server), net_client.connect(server.url) as conn:
        h = conn.open("Q", IO)
        calls = conn.status()["connections"][0]["calls"]
        h.put_many([b"%d" % i for i in range(100)], None, PMO.SYNCPOINT)
        conn.commit()
        assert [m.data for m in h.get_many(100)] == [b"%d" % i for i in range(100)]
        assert conn.status()["connections"][0]["calls"] == calls + 1 + 3  # status, put_many, commit, get_many


def test_the_unit_of_work_lives_in_the_server_and_a_broken_connection_backs_it_out():
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put(b"kept")
        conn = net_client.connect(server.url)
        h = conn.open("Q", IO)
        assert h.get(GMO.SYNCPOINT).data == b"kept"
        h.put(b"never", None, PMO.SYNCPOINT)
        assert qm.inquire_queue("Q").current_depth == 2 and conn.uncommitted == 2
        conn._fs.sock.shutdown(socket.SHUT_RDWR)  # the network fails
        assert reason_of(lambda: h.put(b"x")) == Reason.CONNECTION_BROKEN
        wait_until(lambda: not server.status()["connections"], what="the server ending the broken connection")
        with qm.connect() as c:
            m = c.open("Q", IO).get()
            assert (m.data, m.backout_count) == (b"kept", 1)
            assert drain(c.open("Q", IO)) == []


def test_a_waiting_get_runs_in_the_server_and_blocks_no_other_client():
    with served() as (qm, server):
        qm.define_queue("OTHER")
        waiter = net_client.connect(server.url)
        wh = waiter.open("Q", IO)
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("m", wh.get(GMO.WAIT, wait_interval=30_000)))
        t.start()
        with net_client.connect(server.url) as other:
            oh = other.open("OTHER", IO)
            for i in range(50):  # the other client is served while the first one waits
                oh.put(b"%d" % i)
                assert oh.get().data == b"%d" % i
            assert t.is_alive()
            other.open("Q", IO).put(b"for the waiter")
        t.join(10)
        assert box["m"].data == b"for the waiter"
        waiter.disconnect()


def test_a_browse_lock_belongs_to_the_server_handle_and_a_broken_connection_releases_it():
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put(b"locked")
        conn = net_client.connect(server.url)
        b = conn.open("Q", OO.BROWSE | OO.INPUT_SHARED)
        assert b.get(GMO.BROWSE_FIRST | GMO.LOCK).data == b"locked"
        with qm.connect() as c:
            assert reason_of(lambda: c.open("Q", IO).get()) == Reason.NO_MSG_AVAILABLE
        conn._fs.sock.shutdown(socket.SHUT_RDWR)
        with qm.connect() as c:
            assert c.open("Q", IO).get(GMO.WAIT, wait_interval=5000).data == b"locked"


# -- a dead server, reconnect, a killed client ---------------------------------------------------------


def test_a_dead_server_is_2009_on_the_next_call_and_reconnect_reports_a_lost_unit_of_work():
    data = os.path.join(short_dir(), "d")
    with ServeProcess(data) as srv:
        with RemoteQueueManager(srv.url, admin_token=auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))) as r:
            r.define_queue("P", default_persistence=Persistence.PERSISTENT)
        plain = net_client.connect(srv.url)
        conn = net_client.connect(srv.url, reconnect=0.5)  # tries for half a second, then 2009
        h = conn.open("P", IO)
        h.put(b"committed")
        h.put(b"uncommitted", None, PMO.SYNCPOINT)
        srv.kill()
        for call in (lambda: plain.open("P", IO), lambda: h.put(b"x")):
            with pytest.raises(MQError) as e:
                call()
            assert e.value.reason == Reason.CONNECTION_BROKEN and "broke" in e.value.text
        assert reason_of(lambda: plain.open("P", IO)) == Reason.CONNECTION_BROKEN  # and it stays so
        srv.start()
        assert reason_of(lambda: h.put(b"y", None, PMO.SYNCPOINT)) == Reason.BACKED_OUT  # reconnected, reopened
        assert reason_of(conn.commit) == Reason.BACKED_OUT  # reported once, never half done
        h.put(b"after", None, PMO.SYNCPOINT)
        conn.commit()
        assert [m.data for m in h.get_many(10)] == [b"committed", b"after"]
        conn.disconnect()
        plain.disconnect()
        assert srv.terminate() == 0


def test_a_client_killed_mid_unit_of_work_its_gets_come_back_its_puts_never_appear():
    with served() as (qm, server):
        with qm.connect() as c:
            c.open("Q", IO).put_many([b"a", b"b"])
        code = (
            "import sys, time\n"
            "from sweepq.engine import GMO, PMO, OO\n"
            "from sweepq import client\n"
            f"c = client.connect({server.url!r})\n"
            "h = c.open('Q', OO.OUTPUT | OO.INPUT_SHARED)\n"
            "h.get(GMO.SYNCPOINT); h.put(b'ghost', None, PMO.SYNCPOINT); h.get(GMO.SYNCPOINT)\n"
            "print('ready', flush=True)\n"
            "time.sleep(60)\n"
        )
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"ready\n"
        assert qm.inquire_queue("Q").current_depth == 3
        proc.kill()
        proc.wait()
        with qm.connect() as c:
            h = c.open("Q", IO)
            got = [h.get(GMO.WAIT, wait_interval=10_000) for _ in range(2)]
            assert [(m.data, m.backout_count) for m in got] == [(b"a", 1), (b"b", 1)]
            assert drain(h) == []


# -- security -----------------------------------------------------------------------------------------


def test_the_unix_socket_is_0600():
    with served() as (_qm, server):
        assert stat.S_IMODE(os.stat(server.unix_path).st_mode) == 0o600


def test_tcp_is_loopback_by_default_and_needs_the_token(caplog):
    with served(tcp=":0", token="s3cret") as (qm, server):
        host, port = server.tcp
        assert host == "127.0.0.1"
        url = f"tcp://127.0.0.1:{port}"
        for token in (None, "wrong"):  # an answer (2035), not the client's timeout (a hang would be 2009)
            assert reason_of(lambda t=token: net_client.connect(url, t)) == Reason.NOT_AUTHORIZED
        assert "refused tcp" in caplog.text and "wrong token" in caplog.text
        with net_client.connect(url, "s3cret") as conn:
            conn.open("Q", IO).put(b"over tcp")
        assert qm.inquire_queue("Q").current_depth == 1


def test_tls_with_a_throwaway_certificate():
    trustme = pytest.importorskip("trustme")  # the [dev] extra installs it
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    with served(tcp=":0", token="t", tls=server_ctx) as (_qm, server):
        url = f"tls://127.0.0.1:{server.tcp[1]}"
        assert url in server.urls
        with net_client.connect(url, "t", tls=client_ctx) as conn:
            conn.open("Q", IO).put(b"secret")
            assert conn.open("Q", IO).get().data == b"secret"
        assert reason_of(lambda: net_client.connect(url, "t")) == Reason.HOST_NOT_AVAILABLE  # untrusted cert
        assert reason_of(lambda: net_client.connect(url, "bad", tls=client_ctx)) == Reason.NOT_AUTHORIZED


def test_administration_needs_its_own_token():
    with served(admin_token="adm") as (_qm, server):
        with net_client.connect(server.url) as app:
            assert reason_of(lambda: app.define_queue("NEW")) == Reason.NOT_AUTHORIZED
            assert reason_of(lambda: app.delete_queue("Q")) == Reason.NOT_AUTHORIZED
            assert app.inquire_queue("Q").current_depth == 0  # inquiry is not administration
        assert reason_of(lambda: net_client.connect(server.url, admin_token="wrong")) == Reason.NOT_AUTHORIZED
        with net_client.connect(server.url, admin_token="adm") as admin:
            assert admin.define_queue("NEW", default_priority=4).attributes.default_priority == 4
            admin.alter_queue("NEW", inhibit_put=True)
            admin.delete_queue("NEW")
            assert "NEW" not in admin.queue_names()
    with served() as (_qm, server):  # no admin token configured: none is accepted
        assert reason_of(lambda: net_client.connect(server.url, admin_token="any")) == Reason.NOT_AUTHORIZED


# -- hostile input ----------------------------------------------------------------------------------


def test_hostile_frames_close_that_connection_only_and_nothing_queued_is_lost():
    with served(partial_timeout=0.3, hello_timeout=0.5) as (qm, server):
        good = net_client.connect(server.url)
        gh = good.open("Q", IO | OO.BROWSE)
        gh.put_many([b"%d" % i for i in range(10)])
        attacks = [
            b"\xff" * 64,  # garbage before any handshake
            P.HEADER.pack(0xFFFFFFFF, P.VERSION, P.HELLO),  # a frame claiming 4 GiB
            P.HEADER.pack(100, P.VERSION, P.HELLO) + b"x" * 10,  # half a frame, then silence
            hello_frame() + P.HEADER.pack(3, P.VERSION, P.PUT) + b"\xc1\xc1\xc1",  # not MessagePack
            hello_frame() + P.request(P.PUT, [1, 2]),  # the wrong number of arguments
            hello_frame() + P.request(99, []),  # an unknown op
            hello_frame() + P.HEADER.pack(0xFFFFFFFF, P.VERSION, P.PUT),  # 4 GiB after the handshake
            hello_frame() + struct.pack(">IBB", 2, 7, P.PUT) + b"\x90\x90",  # another protocol version
            b"",  # connect and say nothing
        ]
        for data in attacks:
            s = raw(server.url)
            s.sendall(data)
            assert eof_within(s, 5), data[:20]
            s.close()
            assert gh.get(GMO.BROWSE_FIRST).data == b"0"  # the others are still served
        s = raw(server.url)
        s.sendall(hello_frame())
        s.recv(65536)
        s.sendall(P.request(P.PUT, [12345, b"x", None, 0]))  # a handle number it never opened
        op, body = P.HEADER.unpack(s.recv(6))[2], s.recv(65536)
        assert op == P.ERROR and P.unpack(body)[0] == Reason.HOBJ_ERROR
        s.close()
        assert qm.inquire_queue("Q").current_depth == 10
        assert [m.data for m in gh.get_many(10)] == [b"%d" % i for i in range(10)]


def test_a_connection_s_packer_frames_every_value_as_a_fresh_one_and_drops_a_grown_buffer():
    """net/protocol.py Framer: one packer per connection, kept between calls; a failed pack
    (a big int, a value that contains itself) leaves nothing behind for the next frame, and a
    body over KEEP_BUFFER replaces the packer so an idle connection does not keep its buffer."""
    loop: list = []
    loop.append(loop)
    values = [[1, b"x" * 100, None, 0], [2**70, "a"], [loop], {"k": [1.5, True]}, ["\ud800"], [b"y" * 10]]
    kept = P.Framer()
    for op, value in enumerate(values, 1):
        framed = kept.frame(op, value)
        assert framed == P.Framer().frame(op, value)
        n, version, got_op = P.HEADER.unpack_from(framed)
        assert (n, version, got_op) == (len(framed) - P.HEADER_LEN, P.VERSION, op)
    assert P.unpack(kept.frame(P.OK, [2**70])[P.HEADER_LEN :]) == [2**70]
    packer = kept._packb
    # (a map: the packer's to pack; the compiled form packs bytes and lists in place, no packer)
    kept.frame(P.OK, {"k": b"z" * P.KEEP_BUFFER})  # a body a few bytes over the limit
    assert kept._packb is not packer
    packer = kept._packb
    kept.frame(P.OK, {"k": b"z" * 1000})
    assert kept._packb is packer
    assert P.unpack(kept.frame(P.OK, [b"after"])[P.HEADER_LEN :]) == [b"after"]


def test_a_thousand_connections_opened_and_dropped():
    with served() as (_qm, server):
        good = net_client.connect(server.url)
        gh = good.open("Q", IO)
        socks = [raw(server.url) for _ in range(1000)]
        for s in socks:
            s.close()
        wait_until(lambda: len(server.status()["connections"]) == 1, what="the server closing 1,000 sockets")
        gh.put(b"still here")
        assert gh.get().data == b"still here"


def test_limits_on_connections_and_handles():
    with served(max_connections=2, max_handles=2) as (_qm, server):
        a, b = net_client.connect(server.url), net_client.connect(server.url)
        assert reason_of(lambda: net_client.connect(server.url)) == Reason.MAX_CONNS_LIMIT_REACHED
        a.open("Q", IO)
        a.open("Q", IO)
        assert reason_of(lambda: a.open("Q", IO)) == Reason.HANDLE_NOT_AVAILABLE
        b.disconnect()
        wait_until(lambda: len(server.status()["connections"]) == 1, what="the server seeing b's disconnect")
        net_client.connect(server.url).disconnect()  # the freed slot is taken again
        a.disconnect()


def test_a_server_needs_an_address_and_refuses_a_taken_socket():
    with served() as (qm, server):
        assert reason_of(lambda: Server(qm)) == Reason.PARM_VALUE_ERROR
        for clock in (5, "now", object()):  # the handshake deadline's clock needs a now()
            assert reason_of(lambda clock=clock: Server(qm, tcp=":0", clock=clock)) == Reason.PARM_VALUE_ERROR
        assert reason_of(lambda: qm.serve(server.unix_path)) == Reason.RESOURCE_PROBLEM
        assert reason_of(lambda: net_client.connect("http://x")) == Reason.PARM_VALUE_ERROR
    assert reason_of(lambda: net_client.connect(server.url)) == Reason.HOST_NOT_AVAILABLE


def test_closing_the_queue_manager_stops_its_server_and_backs_out_its_clients():
    qm = QueueManager(sweeping=SweeperSettings(run=False))
    qm.define_queue("Q")
    server = qm.serve(os.path.join(short_dir(), "s.sock"))
    conn = net_client.connect(server.url)
    conn.open("Q", IO).put(b"x", None, PMO.SYNCPOINT)
    qm.close()
    assert server.closed and not os.path.exists(server.unix_path)
    assert reason_of(lambda: conn.commit()) == Reason.CONNECTION_BROKEN


# -- request/reply with temporary dynamic queues ----------------------------------------------------


def test_request_reply_with_a_temporary_dynamic_queue_over_clients():
    with served() as (qm, server):
        requester, responder = net_client.connect(server.url), net_client.connect(server.url)
        replies = requester.open("SYSTEM.DEFAULT.MODEL.QUEUE", OO.INPUT_EXCLUSIVE)
        assert replies.name.startswith("AMQ.") and replies.name in qm.queue_names()
        req = requester.open("Q", OO.OUTPUT).put(b"2+2?", MD(reply_to_q=replies.name, reply_to_q_mgr=qm.name))
        m = responder.open("Q", OO.INPUT_SHARED).get()
        assert (m.md.reply_to_q, m.md.reply_to_q_mgr) == (replies.name, qm.name)
        with responder.open(m.md.reply_to_q, OO.OUTPUT) as out:
            out.put(b"4", MD(correl_id=m.msg_id))
        assert replies.get(GMO.WAIT, wait_interval=5000, correl_id=req.msg_id).data == b"4"
        name = replies.name
        replies.close()
        assert name not in qm.queue_names()  # deleted with its handle
        again = requester.open("SYSTEM.DEFAULT.MODEL.QUEUE", OO.INPUT_EXCLUSIVE)
        assert again.name != name
        requester._fs.sock.shutdown(socket.SHUT_RDWR)  # the connection breaks
        wait_until(lambda: again.name not in qm.queue_names(), what="the dynamic queue deleted with its connection")


def test_model_queues_in_process():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_model_queue("REPLY.MODEL", "REPLY.*", max_depth=5, default_priority=3)
        assert reason_of(lambda: qm.define_model_queue("REPLY.MODEL")) == Reason.OBJECT_ALREADY_EXISTS
        assert reason_of(lambda: qm.define_queue("REPLY.MODEL")) == Reason.OBJECT_ALREADY_EXISTS
        assert reason_of(lambda: qm.define_model_queue("M2", "NOSTAR")) == Reason.PARM_VALUE_ERROR
        assert reason_of(lambda: qm.inquire_queue("REPLY.MODEL")) == Reason.OBJECT_TYPE_ERROR
        assert reason_of(lambda: qm.delete_queue("REPLY.MODEL")) == Reason.OBJECT_TYPE_ERROR
        with qm.connect() as c:
            t = c.open("REPLY.MODEL", OO.INPUT_EXCLUSIVE | OO.OUTPUT)
            assert t.name.startswith("REPLY.") and len(t.name) == len("REPLY.") + 16
            info = qm.inquire_queue(t.name)
            assert (info.attributes.max_depth, info.attributes.default_priority) == (5, 3)
            other = c.open(t.name, OO.OUTPUT)  # a responder's handle keeps it until it closes
            t.put(b"x", MD(persistence=Persistence.NOT_PERSISTENT))
            t.close()
            assert t.name in qm.queue_names()
            other.close()
            assert t.name not in qm.queue_names()
            assert reason_of(lambda: c.open(t.name, OO.OUTPUT)) == Reason.UNKNOWN_OBJECT_NAME
            assert t.name not in qm.stats()  # never swept


def test_reply_to_fields_in_the_descriptor_and_in_selectors():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        with qm.connect() as c:
            h = c.open("Q", IO)
            h.put(b"plain")
            h.put(b"request", MD(reply_to_q="AMQ.1", reply_to_q_mgr="QM9", properties={"p": 1}))
            sel = c.open("Q", OO.INPUT_SHARED, selector="Root.MQMD.ReplyToQ = 'AMQ.1'")
            m = sel.get()
            assert (m.data, m.md.reply_to_q, m.md.reply_to_q_mgr, m.md.properties) == (
                b"request",
                "AMQ.1",
                "QM9",
                {"p": 1},
            )
            plain = h.get()
            assert (plain.md.reply_to_q, plain.md.reply_to_q_mgr) == ("", "")
            for bad in (MD(reply_to_q="X" * 49), MD(reply_to_q=5), MD(reply_to_q_mgr="é")):
                assert reason_of(lambda b=bad: h.put(b"x", b)) == Reason.MD_ERROR


def test_temporary_dynamic_queues_hold_nothing_durable(tmp_path):
    """As in MQ: a persistent put to a temporary dynamic queue is refused (2048), a
    non-persistent one is taken; the queue does not outlive its run."""
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm, qm.connect() as c:
        t = c.open("SYSTEM.DEFAULT.MODEL.QUEUE", OO.INPUT_EXCLUSIVE | OO.OUTPUT)
        with pytest.raises(MQError) as ei:
            t.put(b"p", MD(persistence=Persistence.PERSISTENT))
        assert ei.value.reason == Reason.PERSISTENT_NOT_ALLOWED == 2048
        with pytest.raises(MQError):
            t.put_many([b"p", b"q"], MD(persistence=Persistence.PERSISTENT))
        t.put(b"n", MD(persistence=Persistence.NOT_PERSISTENT))
        assert qm.inquire_queue(t.name).current_depth == 1
        name = t.name
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)) as qm:
        assert name not in qm.queue_names()


# -- administration of a running server -------------------------------------------------------------


def test_status_lists_queues_and_connections_with_their_units_of_work():
    with served() as (_qm, server), net_client.connect(server.url, client="status test") as conn:
        h = conn.open("Q", IO)
        h.put_many([b"a", b"b", b"c"], None, PMO.SYNCPOINT)
        st = conn.status()
        q = next(q for q in st["queues"] if q["name"] == "Q")
        assert (q["depth"], q["open_input"], q["open_output"]) == (3, 1, 1)
        (mine,) = st["connections"]
        assert (mine["uncommitted"], mine["handles"], mine["client"], mine["pid"]) == (3, 1, "status test", os.getpid())
        from sweepq.cli.serve import render_status

        text = render_status(st)
        assert "status test" in text and "Q" in text


def test_prometheus_metrics_on_an_http_port():
    from urllib.request import urlopen

    with served(metrics=":0") as (_qm, server), net_client.connect(server.url) as conn:
        conn.open("Q", IO).put_many([b"a", b"b"])
        text = urlopen(server.metrics_url, timeout=10).read().decode()
        assert 'sweepq_queue_depth{queue="Q"} 2.0' in text
        assert "sweepq_connections 1.0" in text and "sweepq_store_memory_bytes" in text


def test_net_sits_between_the_engine_and_the_command_line():
    """net/ reaches down only (engine, sweeper), and the engine never imports net/: it finds
    the server and the channel agents by entry point (engine/extensions.py, docs/design.md)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    up = re.compile(r"^\s*(from|import)\s+(sweepq\.(bench|pipeline|cli)|pyspark|rocksdict|zstandard)", re.M)
    assert [p.name for p in (root / "net").rglob("*.py") if up.search(p.read_text())] == []
    to_net = re.compile(r"^\s*(from|import)\s+sweepq\.net", re.M)
    users = {str(p.relative_to(root)) for p in (root / "engine").rglob("*.py") if to_net.search(p.read_text())}
    assert users == set()
    from sweepq.engine import extensions
    from sweepq.net.channels import Channels

    assert (extensions.service("server"), extensions.service("channels")) == (Server, Channels)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_sweepq_serve_stops_on_a_signal_backing_out_every_unit_of_work(sig):
    import signal as signals

    data = os.path.join(short_dir(), "d")
    srv = ServeProcess(data).start()
    try:
        with RemoteQueueManager(srv.url, admin_token=auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))) as r:
            r.define_queue("P", default_persistence=Persistence.PERSISTENT)
            with r.connect() as c:
                c.open("P", IO).put(b"committed")
        conn = net_client.connect(srv.url)
        h = conn.open("P", IO)
        assert h.get(GMO.SYNCPOINT).data == b"committed"
        h.put(b"uncommitted", None, PMO.SYNCPOINT)
        srv.proc.send_signal(getattr(signals, sig))
        assert srv.proc.wait(60) == 0
        assert "backed out 2 uncommitted operation(s)" in srv.log() and "the store is closed" in srv.log()
        srv.start()
        with net_client.connect(srv.url) as c:
            m = c.open("P", IO).get()
            assert (m.data, m.backout_count) == (b"committed", 1)
            assert drain(c.open("P", IO)) == []
    finally:
        srv.kill()


def test_the_data_directory_commands_work_against_a_running_server(capsys):
    from sweepq.cli import main

    data = os.path.join(short_dir(), "d")
    with ServeProcess(data) as srv:
        url = srv.url
        assert main(["define", "ORDERS", "--server", url, "--persistent"]) == 0
        assert main(["put", "ORDERS", "--server", url, "first", "second"]) == 0
        assert main(["get", "ORDERS", "--server", url, "--count", "1"]) == 0
        assert main(["browse", "ORDERS", "--server", url, "--json"]) == 0
        out = capsys.readouterr().out
        assert "defined queue ORDERS" in out and "first\n" in out and '"data": "second"' in out
        assert main(["status", "--data-dir", data]) == 0
        assert main(["inspect", "--server", url, "--json"]) == 0
        out = capsys.readouterr().out
        assert "ORDERS" in out and '"depth": 1' in out
        assert main(["get", "NOPE", "--server", url]) == 1
        assert "--server" in capsys.readouterr().err  # the hint names the server, not a directory
        assert main(["put", "ORDERS", "x"]) == 2  # neither --data-dir nor --server
        assert main(["status", "--server", "tcp://127.0.0.1:1"]) == 1
        err = capsys.readouterr().err
        assert "--data-dir (or --server URL)" in err and "MQRC_HOST_NOT_AVAILABLE (2538)" in err


def test_the_clients_bench_says_when_redis_is_not_there(monkeypatch, tmp_path):
    from sweepq.bench import clients

    monkeypatch.setattr(clients.shutil, "which", lambda name: None)
    r = clients._Redis(str(tmp_path))
    assert r.proc is None and "redis-server is not on the PATH" in r.why
