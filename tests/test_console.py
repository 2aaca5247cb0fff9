"""The web console's server side (net/console/): who may read and who may act, what a
snapshot says (the seed's rule as the sweeper saw it, the budget, channels), the event
stream, browse and clear, TLS, and the sweeper's per-queue last decision it shows. The page
itself, in a real browser: tests/test_console_browser.py."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading

import pytest
from console_env import ADMIN, TOKEN, console, login_cookie, request

from sweepq.blobstore import MemoryStore
from sweepq.engine import GMO, OO, MemorySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.net.console import actions
from sweepq.sweeper import LastDecision, ManualClock

from helpers import wait_until


def put(qm, queue: str, n: int, data: bytes | None = None) -> None:
    conn = qm.connect()
    h = conn.open(queue, OO.OUTPUT)
    h.put_many([data if data is not None else b"m%d" % i for i in range(n)])
    h.close()
    conn.disconnect()


def get(qm, queue: str, n: int) -> None:
    conn = qm.connect()
    h = conn.open(queue, OO.INPUT_AS_Q_DEF)
    assert len(h.get_many(n)) == n
    h.close()
    conn.disconnect()


def snapshot(base: str) -> dict:
    r = request(base + "api/snapshot", bearer=TOKEN)
    assert r.status == 200, r.body
    return r.json()


def queue_of(snap: dict, name: str) -> dict:
    return next(q for q in snap["queues"] if q["name"] == name)


# -- credentials ------------------------------------------------------------------------------

READS = [("GET", "api/snapshot"), ("GET", "api/history"), ("GET", "api/whoami"), ("GET", "api/queues/ORDERS/messages")]
ACTIONS = [
    ("POST", "api/queues", {"name": "NEW"}),
    ("DELETE", "api/queues/ORDERS?purge=true", None),
    ("POST", "api/queues/ORDERS/clear", None),
    ("POST", "api/channels/TO.QM2/start", None),
    ("POST", "api/channels/TO.QM2/stop", None),
]


def _credentials(base: str) -> dict:
    return {
        "none": {},
        "wrong bearer": {"bearer": "nope"},
        "forged cookie": {"cookie": f"sweepq_console={TOKEN}"},  # the token itself is not a session
        "read bearer": {"bearer": TOKEN},
        "read cookie": {"cookie": login_cookie(base)},
        "admin cookie": {"cookie": login_cookie(base, ADMIN)},  # a cookie never administers
        "admin bearer": {"bearer": ADMIN},
    }


def test_every_credential_against_every_request():
    with console() as (qm, server):
        qm.define_channel("TO.QM2", conname="tcp://127.0.0.1:9", xmit_queue="ORDERS")
        base = server.console_url
        creds = _credentials(base)
        may_read = {"read bearer", "read cookie", "admin cookie", "admin bearer"}
        for who, cred in creds.items():
            for method, path in READS:
                r = request(base + path, method, **cred)
                assert r.status == (200 if who in may_read else 401), (who, path, r.status, r.body)
            for method, path, body in ACTIONS:
                if who == "admin bearer":
                    continue  # done below, once: the actions change things
                r = request(base + path, method, body=body, **cred)
                expected = 403 if who in may_read else 401
                assert r.status == expected, (who, path, r.status, r.body)
                assert r.json()["reason"] == Reason.NOT_AUTHORIZED
        # Nothing a refused request asked for happened.
        assert qm.queue_names() == ["ORDERS"]
        assert qm.channels.status("TO.QM2")[0]["status"] == "INACTIVE"
        put(qm, "ORDERS", 3)
        admin = creds["admin bearer"]
        assert request(base + "api/queues/ORDERS/clear", "POST", **admin).json()["result"] == 3
        r = request(base + "api/queues", "POST", body={"name": "NEW", "attributes": {"memory_policy": "fail"}}, **admin)
        assert r.status == 200 and r.json()["result"]["attributes"]["memory_policy"] == "FAIL"
        assert request(base + "api/channels/TO.QM2/stop", "POST", **admin).json()["result"]["status"] == "STOPPED"
        assert request(base + "api/channels/TO.QM2/start", "POST", **admin).json()["result"]["status"] != "STOPPED"
        assert request(base + "api/channels/TO.QM2/stop", "POST", **admin).status == 200
        assert request(base + "api/queues/NEW", "DELETE", **admin).status == 200
        assert qm.queue_names() == ["ORDERS"]


def test_a_server_without_an_admin_token_refuses_every_action_even_to_its_own_token():
    with console(admin_token=None) as (qm, server):
        base = server.console_url
        put(qm, "ORDERS", 2)
        for method, path, body in ACTIONS:
            r = request(base + path, method, body=body, bearer=TOKEN)
            assert r.status == 403 and "no admin token" in r.json()["error"], (path, r.body)
        assert request(base + "api/whoami", bearer=TOKEN).json() == {"admin": False, "administered": False}
        assert qm.inquire_queue("ORDERS").current_depth == 2


def test_the_token_in_the_address_becomes_a_cookie_that_is_not_the_token():
    with console() as (_qm, server):
        base = server.console_url
        r = request(base + "?token=" + TOKEN)
        assert r.status == 303 and r.headers["Location"] == "/"  # the token leaves the address bar
        cookie = r.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        page = request(base, cookie=cookie.split(";")[0])
        assert page.status == 200 and b"/static/console.js" in page.body
        assert page.headers["Referrer-Policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
        wrong = request(base + "?token=wrong")
        assert wrong.status == 401 and b"not this server" in wrong.body and "Set-Cookie" not in wrong.headers
        assert request(base).status == 401  # the login page
        form = request(base + "login", "POST", form={"token": TOKEN})
        assert form.status == 303 and "sweepq_console=" in form.headers["Set-Cookie"]
        assert request(base + "login", "POST", form={"token": "x"}).status == 401


def test_a_unix_only_server_with_a_console_has_a_token_to_protect_it():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        from net_env import short_dir

        server = qm.serve(short_dir() + "/s.sock", console=":0")
        assert server.token  # made for the console
        assert request(server.console_url + "api/snapshot").status == 401
        assert request(server.console_url + "api/snapshot", bearer=server.token).status == 200


def test_static_files_are_served_from_the_package_and_nothing_outside_it():
    with console() as (_qm, server):
        base = server.console_url
        for path in ("console.js", "console.css", "index.html", "vendor/uPlot.iife.min.js", "vendor/uPlot.LICENSE"):
            assert request(base + "static/" + path).status == 200, path
        assert b"MIT" in request(base + "static/vendor/uPlot.LICENSE").body
        for path in ("../app.py", "..%2Fapp.py", "vendor/../../app.py", "nothing.js"):
            assert request(base + "static/" + path).status == 404, path


# -- what it shows ----------------------------------------------------------------------------


def test_the_snapshot_shows_the_seed_rule_as_the_sweeper_saw_it():
    with console(queues=("BIG", "SMALL")) as (qm, server):
        base = server.console_url
        put(qm, "BIG", 100)
        put(qm, "SMALL", 10)
        get(qm, "SMALL", 6)  # x = 6, y = 4: 4 <= 12, not swept
        before = snapshot(base)
        assert queue_of(before, "BIG")["rule"] is None and queue_of(before, "SMALL")["x_now"] == 6
        qm.sweeper.run_once()
        snap = snapshot(base)
        big, small = queue_of(snap, "BIG"), queue_of(snap, "SMALL")
        assert big["rule"]["y"] == 100 and big["rule"]["x"] == 0
        assert big["rule"]["threshold"] == 0 and big["rule"]["buffer"] == 5
        assert big["rule"]["outcome"] == "swept" and big["rule"]["swept"] == 95 and big["rule"]["says"] == "swept 95"
        assert (big["depth"], big["in_memory"], big["swept"]) == (100, 5, 95)
        assert big["blobs"] >= 1 and 0 < big["blob_bytes"] <= big["blob_raw_bytes"]
        assert small["rule"] == {
            **small["rule"],
            "y": 4,
            "x": 6,
            "threshold": 12,
            "buffer": 11,
            "outcome": "not swept",
            "says": "not swept (y 4 <= 12)",
        }
        assert snap["policy"] == {"factor": 2, "extra": 5, "interval": 5.0, "rule": "seed"}
        assert snap["totals"]["msgs_swept"] == 95 and snap["sweeper"]["cycles"] == 1
        get(qm, "BIG", 10)  # back from the blob
        assert snapshot(base)["totals"]["msgs_unswept"] > 0


def test_the_snapshot_shows_the_memory_budget_and_its_policy():
    with console(queues=()) as (qm, server):
        snap = snapshot(server.console_url)
        assert snap["budget"]["budget"] == 0 and snap["budget"]["acting"].startswith("no memory budget")
        assert snap["budget"]["rss"] > 10_000_000
    # A MemoryStore: RocksDB's memtables may take 1 MiB (their floor), which a 1 MB budget
    # reserves for them (engine/budget.py), so no FAIL put would fit.
    with QueueManager(
        sweeping=SweeperSettings(run=False), memory=MemorySettings(budget="1MB", counts="held"), store=MemoryStore()
    ) as qm:
        from net_env import short_dir

        qm.define_queue("Q", memory_policy=2)
        server = qm.serve(short_dir() + "/s.sock", console=":0", token=TOKEN)
        put(qm, "Q", 600, b"x" * 1000)  # 600 kB of records, under the high mark (800 kB)
        b = snapshot(server.console_url)["budget"]
        assert b["budget"] == 1_000_000 and b["high"] == 800_000 and b["low"] == 600_000 and b["page_at"] == 900_000
        assert b["messages"] >= 600 * 1000 and b["total"] == b["messages"] + b["store"]
        assert b["policies"] == {"FAIL": 1} and "records" in b["counts"]
        h = qm.connect().open("Q", OO.OUTPUT)
        with pytest.raises(MQError) as e:
            for _ in range(1000):  # FAIL: refused once the budget is reached
                h.put(b"x" * 1000)
        assert e.value.reason == Reason.STORAGE_NOT_AVAILABLE
        b = snapshot(server.console_url)["budget"]
        assert b["over"] and b["acting"].startswith("at the budget") and b["events"]["refused"] >= 1


def test_the_snapshot_lists_channels_and_connections():
    with console() as (qm, server):
        qm.define_queue("XQ", usage=1)
        qm.define_channel("TO.QM2", conname="tcp://127.0.0.1:9", xmit_queue="XQ")
        from sweepq.net import client as net_client

        with net_client.connect(server.url, client="a test") as conn:
            conn.open("ORDERS", OO.OUTPUT).put(b"x")
            snap = snapshot(server.console_url)
            assert [c["client"] for c in snap["connections"]] == ["a test"]
            assert snap["connections"][0]["handles"] == 1
        ch = snap["channels"][0]
        assert (ch["name"], ch["type"], ch["status"], ch["seq"], ch["indoubt"]) == (
            "TO.QM2",
            "SENDER",
            "INACTIVE",
            0,
            False,
        )
        assert ch["xmit_queue"] == "XQ" and ch["xmit_depth"] == 0


def _events(base: str, bearer: str = TOKEN):
    """The stream's events as they come: (name, data), until the caller stops."""
    host, port = base.split("//")[1].strip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/api/events", headers={"Authorization": f"Bearer {bearer}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.headers["Content-Type"].startswith("text/event-stream")
    name = None
    try:
        while True:
            line = resp.fp.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                yield name, json.loads(line[6:])
    finally:
        conn.close()


def test_the_event_stream_sends_the_history_then_each_snapshot_as_it_changes():
    with console() as (qm, server):
        stream = _events(server.console_url)
        assert next(stream)[0] == "history"
        name, first = next(stream)
        assert name == "snapshot" and queue_of(first, "ORDERS")["depth"] == 0
        put(qm, "ORDERS", 7)
        for _name, snap in stream:
            if queue_of(snap, "ORDERS")["depth"] == 7:
                break
        assert snap["pages"] == 1 and server._console.pages == 1  # this stream, counted
        stream.close()
        again = _events(server.console_url)
        history = next(again)[1]
        assert history[-1]["depth"]["ORDERS"] == 7 and history[0]["t"] <= history[-1]["t"]
        again.close()


def test_closing_the_server_ends_open_streams_at_once():
    with console() as (_qm, server):
        host, port = server.console_url.split("//")[1].strip("/").split(":")
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(f"GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n".encode())
        assert b"200" in sock.recv(100)
        ended = threading.Event()

        def read_to_end():
            while sock.recv(65536):
                pass
            ended.set()

        reader = threading.Thread(target=read_to_end, daemon=True)
        reader.start()
        server.close()
        # The stream never ends by itself (a keepalive at most): only the close ends it. The
        # wait bounds a hang; it is not a speed.
        assert ended.wait(30), "the event stream was still open after the server closed"
        reader.join(10)
        sock.close()


def test_console_addresses_and_intervals_are_checked():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        from net_env import short_dir

        for bad in ("nowhere", "127.0.0.1:99999"):
            with pytest.raises(MQError) as e:
                qm.serve(short_dir() + "/s.sock", console=bad)
            assert e.value.reason == Reason.PARM_VALUE_ERROR
        with pytest.raises(MQError) as e:
            qm.serve(short_dir() + "/s.sock", console=":0", console_interval=0)
        assert e.value.reason == Reason.PARM_VALUE_ERROR
        taken = socket.create_server(("127.0.0.1", 0))
        with pytest.raises(MQError) as e:
            qm.serve(short_dir() + "/s.sock", console=f"127.0.0.1:{taken.getsockname()[1]}")
        assert e.value.reason == Reason.RESOURCE_PROBLEM and "console" in e.value.text
        taken.close()
        assert qm._servers == []  # the failed server stopped what it had started


def test_over_tls_when_the_server_has_a_certificate():
    trustme = pytest.importorskip("trustme")  # the [dev] extra installs it
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    with console(tls=server_ctx, tcp=":0") as (_qm, server):
        base = server.console_url
        assert base.startswith("https://127.0.0.1:")
        r = request(base + "?token=" + TOKEN, context=client_ctx)
        assert r.status == 303 and "Secure" in r.headers["Set-Cookie"]
        assert request(base + "api/snapshot", bearer=TOKEN, context=client_ctx).status == 200
        plain = base.replace("https", "http")
        with pytest.raises(Exception):  # noqa: B017 - plain HTTP to a TLS port: no answer to read
            http.client.HTTPConnection(*plain.split("//")[1].strip("/").split(":"), timeout=5).request("GET", "/")
            raise ConnectionError


# -- browse and clear ---------------------------------------------------------------------------


def test_browse_describes_messages_and_removes_none():
    with console() as (qm, server):
        base = server.console_url
        put(qm, "ORDERS", 1, "héllo".encode())
        put(qm, "ORDERS", 1, b"\xff\x00binary")
        put(qm, "ORDERS", 1, b"y" * 5000)
        r = request(base + "api/queues/ORDERS/messages?count=10&max_bytes=100", bearer=TOKEN)
        text, binary, long = r.json()["messages"]
        assert text["data"] == "héllo" and text["data_length"] == 6 and not text["truncated"]
        assert text["persistence"] == "NOT_PERSISTENT" and text["priority"] == 0 and len(text["msg_id"]) == 48
        assert binary["data"] is None and binary["data_hex"] == "ff0062696e617279"
        assert long["truncated"] and long["data_length"] == 5000 and len(long["data_hex"]) == 200
        assert len(request(base + "api/queues/ORDERS/messages?count=2", bearer=TOKEN).json()["messages"]) == 2
        assert qm.inquire_queue("ORDERS").current_depth == 3
        missing = request(base + "api/queues/NOPE/messages", bearer=TOKEN)
        assert missing.status == 404 and missing.json()["reason"] == Reason.UNKNOWN_OBJECT_NAME
        assert request(base + "api/queues/ORDERS/messages?count=x", bearer=TOKEN).status == 400


def test_clear_removes_swept_messages_too_and_refuses_an_open_queue():
    with console() as (qm, server):
        base = server.console_url
        put(qm, "ORDERS", 2500)
        qm.sweeper.run_once()
        assert qm.inquire_queue("ORDERS").swept > 0
        conn = qm.connect()
        h = conn.open("ORDERS", OO.INPUT_SHARED)
        r = request(base + "api/queues/ORDERS/clear", "POST", bearer=ADMIN)
        assert r.status == 409 and r.json()["reason"] == Reason.OBJECT_IN_USE
        h.close()
        assert request(base + "api/queues/ORDERS/clear", "POST", bearer=ADMIN).json()["result"] == 2500
        info = qm.inquire_queue("ORDERS")
        assert (info.current_depth, info.swept) == (0, 0)
        conn.disconnect()
        assert actions.clear(qm, "ORDERS") == 0


def test_define_and_delete_say_what_went_wrong():
    with console() as (qm, server):
        base = server.console_url
        put(qm, "ORDERS", 1)
        for body in ("not json", {"nothing": 1}, {"name": "N", "attributes": {"memory_policy": "sometimes"}}):
            r = request(base + "api/queues", "POST", body=body, bearer=ADMIN)
            assert r.status == 400 and r.json()["reason"] == Reason.PARM_VALUE_ERROR, body
        assert request(base + "api/queues", "POST", body={"name": "ORDERS"}, bearer=ADMIN).status == 409
        r = request(base + "api/queues/ORDERS", "DELETE", bearer=ADMIN)
        assert r.status == 409 and r.json()["reason"] == Reason.Q_NOT_EMPTY


def test_a_wrong_token_is_told_it_is_wrong_and_no_error_asks_for_python():
    """A wrong token is not a missing one: the API says which. An unknown queue or channel is
    told how to define it on the page or the command line, never with define_queue()."""
    with console() as (_qm, server):
        base = server.console_url
        wrong = request(base + "api/snapshot", bearer="nope")
        assert wrong.status == 401 and "that token is not this server's" in wrong.json()["error"]
        missing = request(base + "api/snapshot")
        assert missing.status == 401 and "the console needs the server's token" in missing.json()["error"]
        r = request(base + "api/queues/NOPE/messages", bearer=TOKEN)
        said = r.json()["error"]
        assert r.json()["reason"] == Reason.UNKNOWN_OBJECT_NAME and "define_queue()" not in said
        assert "the page's define form" in said
        r = request(base + "api/channels/NOPE/start", "POST", bearer=ADMIN)
        assert "define_channel()" not in r.json()["error"] and "sweepq channel define" in r.json()["error"], r.body


# -- the sweeper's last decision ---------------------------------------------------------------


def test_last_decision_outcomes_in_words():
    swept = LastDecision.of(1.0, 100, 3, 8, 92, {"gotten": 1}, False, 2, 5)
    assert (swept.threshold, swept.buffer, swept.outcome) == (6, 8, "swept")
    assert swept.says() == "swept 92 (gotten 1 aborted)"
    assert LastDecision.of(1.0, 4, 3, None, 0, {}, False, 2, 5).says() == "not swept (y 4 <= 6)"
    assert LastDecision.of(1.0, 40, 3, 8, 0, {"locked": 2}, False, 2, 5).says() == "aborted (locked 2)"
    assert LastDecision.of(1.0, 7, 0, 5, 0, {}, False, 2, 5).outcome == "nothing to sweep"
    assert LastDecision.of(1.0, 70, 0, 5, 65, {}, True, 2, 5).says() == "swept 65 for the memory budget"


def test_the_sweeper_keeps_each_queues_last_decision_and_forgets_deleted_queues():
    clock = ManualClock()
    with QueueManager(sweeping=SweeperSettings(run=False), clock=clock) as qm:
        qm.define_queue("A")
        qm.define_queue("B")
        put(qm, "A", 50)
        qm.sweeper.run_once()
        assert qm.sweeper.last["A"].outcome == "swept" and qm.sweeper.last["B"].outcome == "not swept"
        clock.advance(5)
        qm.sweeper.relieve()  # no budget: sweeps nothing, and the cycle's decision stands
        assert qm.sweeper.last["A"].swept == 45 and qm.sweeper.last["A"].at == 0
        qm.delete_queue("B")
        qm.sweeper.run_once()
        assert set(qm.sweeper.last) == {"A"} and qm.sweeper.last["A"].at == 5


def test_an_aborted_sweep_is_recorded_with_its_reason():
    def take_one(q, target):  # between the write and the link: a get takes a message of the run
        conn = qm.connect()
        conn.open("A", OO.INPUT_AS_Q_DEF).get(GMO.NO_WAIT, msg_id=target.ids[-1])
        conn.disconnect()

    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("A")
        put(qm, "A", 50)
        qm.sweeper.after_write = take_one
        qm.sweeper.run_once()
        d = qm.sweeper.last["A"]
        assert d.outcome == "aborted" and sum(d.aborts.values()) >= 1 and d.says().startswith("aborted (")


# -- the Grafana dashboard ------------------------------------------------------------------------


def test_every_metric_the_grafana_dashboard_uses_is_exported():
    import pathlib
    import re
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    doc = json.loads((pathlib.Path(__file__).resolve().parents[1] / "docs" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    used = {name for e in exprs for name in re.findall(r"\bsweepq_[a-z_]+", e)}
    assert len(used) >= 15
    with QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget="64MB")) as qm:
        from net_env import short_dir

        qm.define_queue("Q")
        put(qm, "Q", 100)
        qm.sweeper.run_once()
        get(qm, "Q", 20)
        server = qm.serve(short_dir() + "/s.sock", metrics=":0")
        from sweepq.net import client as net_client

        # A connection open while scraped, so that its series has a sample.
        with net_client.connect(server.url), urllib.request.urlopen(server.metrics_url, timeout=10) as r:
            text = r.read().decode()
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    missing = sorted(used - set(samples))
    assert not missing, f"the dashboard plots series the server does not export: {missing}"
    # The values are the engine's, not placeholders.
    assert samples["sweepq_memory_budget_bytes"].value == 64_000_000
    assert samples["sweepq_messages_unswept_total"].value > 0 and samples["sweepq_resident_memory_bytes"].value > 0
    labels = {k for e in exprs for k in re.findall(r"by \((\w+)\)", e)}
    assert labels <= {"queue", "kind"}


# -- the console's port behind the client port's limits (issue 32, item 6) ---------------------


def _console_socket(server) -> socket.socket:
    host, port = server.console_url.split("//")[1].rstrip("/").rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def _console_closed(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        while True:
            if not s.recv(65536):
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        s.setblocking(True)


def test_a_slow_request_head_on_the_console_port_is_cut_at_the_handshake_deadline():
    clock = ManualClock()
    with console(clock=clock, hello_timeout=10.0) as (_qm, server):
        guard = server._console.guard
        s = _console_socket(server)
        wait_until(lambda: len(guard.open) == 1, 30, "the console taking the connection")
        head = b"GET /api/snapshot HTTP/1.1\r\nHost: x\r\n"
        for i, byte in enumerate(head):  # one byte a "second": every read brings something
            s.send(bytes([byte]))
            clock.advance(10.0 / (len(head) + 1))
            assert not _console_closed(s), f"closed after {i + 1} bytes"
        clock.advance(1.0)  # past 10 s from the accept, the head not yet whole
        wait_until(lambda: guard.cut == 1, 30, "the slow connection cut")
        wait_until(lambda: _console_closed(s), 30, "the socket closed")
        assert request(server.console_url + "api/snapshot", bearer=TOKEN).status == 200  # others go on


def test_the_console_port_holds_at_most_max_connections():
    with console(max_connections=2) as (_qm, server):
        guard = server._console.guard
        held = [_console_socket(server) for _ in range(2)]
        wait_until(lambda: len(guard.open) == 2, 30, "two connections held")
        extra = _console_socket(server)
        wait_until(lambda: _console_closed(extra), 30, "the third closed at its accept")
        assert guard.refused == 1
        for s in held:
            s.close()
        wait_until(lambda: not guard.open, 30, "the two gone")
        assert request(server.console_url + "api/snapshot", bearer=TOKEN).status == 200
