"""Channels between queue managers over loopback TCP (net/channels/, docs/channels.md): a
remote put arrives once, in order per priority; the dead-letter queue and its reasons; the
batch-size and batch-interval rules; two hops; in doubt resolved by the LUWIDs and by hand;
the sequence number; retries, heartbeats, the disconnect interval; stop across restarts;
tokens and TLS; administration over a connection."""

from __future__ import annotations

import pytest
from channel_env import FAST, drain_all, pair, receiving, running, sending, sent, status, wait_until

from sweepq.engine import MD, OO, MQError, Persistence, QueueManager, Reason, SweeperSettings
from sweepq.engine.distributed import DeadLetter
from sweepq.engine.distributed.sync import SenderSync
from sweepq.net import RemoteQueueManager

P = Persistence.PERSISTENT
NP = Persistence.NOT_PERSISTENT


def put_all(qm: QueueManager, name: str, items) -> list[bytes]:
    h = qm.connect().open(name, OO.OUTPUT)
    return [h.put(data, md).msg_id for data, md in items]


def test_remote_puts_arrive_once_in_order_per_priority():
    with pair() as (qm1, qm2, _):
        items = [(b"%d:%03d" % (i % 4, i), MD(priority=i % 4, persistence=P if i % 3 else NP)) for i in range(400)]
        ids = put_all(qm1, "TARGET", items)
        qm1.channels.start("TO.QM2")
        got = drain_all(qm2, "Q", 400, lambda: sent(qm1))
        assert len(got) == 400 and {m.msg_id for m in got} == set(ids)  # once each, MsgIds kept
        for p in range(4):
            mine = [m.data for m in got if m.priority == p]
            persistent = [d for d in mine if int(d[2:]) % 3]
            assert persistent == sorted(persistent, key=lambda d: int(d[2:]))  # in order per priority
        # The sender counts a batch once its commit returns, just after its queue empties.
        wait_until(lambda: status(qm1, "TO.QM2")["messages"] == 400, what="the sender counting its last batch")
        st = status(qm1, "TO.QM2")
        assert st["status"] == "RUNNING" and st["seq"] == 400 and st["xmit_depth"] == 0
        assert status(qm2, "TO.QM2")["seq"] == 400 and not st["indoubt"]


def test_a_message_that_cannot_be_put_goes_to_the_dead_letter_queue_with_its_reason():
    with pair() as (qm1, qm2, _):
        qm2.define_queue("FULL", max_depth=1)
        qm2.define_queue("SHUT", inhibit_put=True)
        qm1.define_remote_queue("GONE", remote_queue="NO.SUCH.Q", remote_qmgr="QM2")
        for name in ("FULL", "SHUT"):
            qm1.define_remote_queue(f"R.{name}", remote_queue=name, remote_qmgr="QM2")
        put_all(qm1, "R.FULL", [(b"fits", MD(persistence=P)), (b"too many", MD(persistence=P))])
        put_all(qm1, "R.SHUT", [(b"inhibited", None)])
        mid = put_all(qm1, "GONE", [(b"nowhere", MD(persistence=P, correl_id=b"C7"))])[0]
        qm1.channels.start("TO.QM2")
        dead = drain_all(qm2, "DLQ", 3, lambda: sent(qm1))
        why = {DeadLetter.parse(m.data).data: DeadLetter.parse(m.data) for m in dead}
        assert sorted(why) == [b"inhibited", b"nowhere", b"too many"]
        assert why[b"nowhere"].reason == Reason.UNKNOWN_OBJECT_NAME == 2085
        assert (why[b"nowhere"].dest_queue, why[b"nowhere"].dest_qmgr) == ("NO.SUCH.Q", "QM2")
        assert why[b"too many"].reason == Reason.Q_FULL and why[b"inhibited"].reason == Reason.PUT_INHIBITED
        lost = next(m for m in dead if m.msg_id == mid)
        assert lost.correl_id.rstrip(b"\0") == b"C7" and lost.persistent  # the descriptor as it was
        assert qm2.inquire_queue("FULL").current_depth == 1


def test_without_a_dead_letter_queue_the_channel_stops_and_keeps_the_batch():
    with pair() as (qm1, qm2, _):
        qm2.alter_qmgr(dead_letter_queue="")
        qm1.define_remote_queue("GONE", remote_queue="NO.SUCH.Q", remote_qmgr="QM2")
        put_all(qm1, "TARGET", [(b"ok", MD(persistence=P))])
        put_all(qm1, "GONE", [(b"nowhere", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "STOPPED", what="the channel stopping")
        st = status(qm1, "TO.QM2")
        assert "no dead-letter queue" in st["why"] and st["xmit_depth"] == 2 and st["seq"] == 0
        assert qm2.inquire_queue("Q").current_depth == 0  # the batch was backed out, all of it
        qm2.alter_qmgr(dead_letter_queue="DLQ")
        qm1.channels.start("TO.QM2")
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"ok"]
        assert [DeadLetter.parse(m.data).reason for m in drain_all(qm2, "DLQ", 1, lambda: sent(qm1))] == [2085]


def test_a_start_while_the_stopped_agent_is_still_ending_starts_a_new_one(monkeypatch):
    """STOPPED is shown as soon as the agent decides to stop, before it has dropped its link
    and its batch: a START then is not lost to the agent that is ending (it was, under load)."""
    import threading

    from sweepq.net.channels.sender import Sender

    gate, ending = threading.Event(), threading.Event()
    real = Sender._release_pending

    def held(self):  # the ending agent's last steps wait for the test
        if not gate.is_set():
            ending.set()
            gate.wait(30)
        return real(self)

    monkeypatch.setattr(Sender, "_release_pending", held)
    with pair() as (qm1, qm2, _):
        qm2.alter_qmgr(dead_letter_queue="")
        qm1.define_remote_queue("GONE", remote_queue="NO.SUCH.Q", remote_qmgr="QM2")
        put_all(qm1, "GONE", [(b"nowhere", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        assert ending.wait(30), "the channel did not stop"
        assert status(qm1, "TO.QM2")["status"] == "STOPPED"
        qm2.alter_qmgr(dead_letter_queue="DLQ")
        threading.Timer(0.2, gate.set).start()  # the old agent ends a little later
        qm1.channels.start("TO.QM2")
        assert [DeadLetter.parse(m.data).reason for m in drain_all(qm2, "DLQ", 1, lambda: sent(qm1))] == [2085]


def test_batches_hold_batch_size_messages_and_wait_batch_interval_for_more():
    with pair(batch_size=10) as (qm1, qm2, _):
        put_all(qm1, "TARGET", [(b"%d" % i, MD(persistence=P)) for i in range(35)])
        qm1.channels.start("TO.QM2")
        assert len(drain_all(qm2, "Q", 35, lambda: sent(qm1))) == 35
        wait_until(lambda: status(qm1, "TO.QM2")["batches"] >= 4, what="the sender counting its last batch")
        assert status(qm1, "TO.QM2")["seq"] == 35
        assert status(qm1, "TO.QM2")["batches"] == status(qm2, "TO.QM2")["batches"] == 4  # 10 + 10 + 10 + 5
    with pair(batch_size=5, batch_interval=3000) as (qm1, qm2, _):
        qm1.channels.start("TO.QM2")
        wait_until(lambda: running(qm1, "TO.QM2"))
        h = qm1.connect().open("TARGET", OO.OUTPUT)
        for i in range(5):  # one by one: without the interval the first would go alone
            h.put(b"%d" % i)
        assert len(drain_all(qm2, "Q", 5, lambda: sent(qm1))) == 5
        assert status(qm2, "TO.QM2")["batches"] == 1 and status(qm2, "TO.QM2")["messages"] == 5


def test_a_route_through_two_hops():
    with (
        QueueManager("QM3", sweeping=SweeperSettings(run=False)) as qm3,
        QueueManager("QM2", sweeping=SweeperSettings(run=False)) as qm2,
        QueueManager("QM1", sweeping=SweeperSettings(run=False)) as qm1,
    ):
        qm3.define_queue("FINAL")
        s3 = receiving(qm3, "QM2.QM3")
        s2 = receiving(qm2, "QM1.QM2")
        sending(qm2, "QM2.QM3", s3, "QM3")  # QM2 holds a transmission queue for QM3
        sending(qm1, "QM1.QM2", s2, "QM2")
        qm1.define_remote_queue("QM3", remote_qmgr="QM3", xmit_queue="QM2")  # QM3 reached through QM2
        h = qm1.connect().open("FINAL", OO.OUTPUT, qmgr="QM3")
        ids = [h.put(b"%d" % i, MD(priority=i % 2, persistence=P)).msg_id for i in range(60)]
        qm1.channels.start("QM1.QM2")
        qm2.channels.start("QM2.QM3")
        got = drain_all(qm3, "FINAL", 60, lambda: sent(qm1, "QM1.QM2") and sent(qm2, "QM2.QM3"))
        assert [m.msg_id for m in got if m.priority == 1] == [i for k, i in enumerate(ids) if k % 2]
        assert len(got) == 60 and qm2.inquire_queue("QM3").current_depth == 0


def test_a_failure_between_the_two_commits_is_resolved_by_the_receivers_luwid(monkeypatch):
    with pair() as (qm1, qm2, _):
        real, failed = SenderSync.commit, []

        def commit_fails_once(self):
            if not failed:
                failed.append(self.indoubt.luwid)
                raise MQError(Reason.RESOURCE_PROBLEM, "injected: the sender's commit")
            return real(self)

        monkeypatch.setattr(SenderSync, "commit", commit_fails_once)
        put_all(qm1, "TARGET", [(b"%d" % i, MD(persistence=P)) for i in range(20)])
        qm1.channels.start("TO.QM2")
        got = drain_all(qm2, "Q", 20, lambda: sent(qm1))
        assert sorted(int(m.data) for m in got) == list(range(20))  # once: the in-doubt batch was not sent again
        wait_until(lambda: status(qm1, "TO.QM2")["seq"] == 20 and status(qm1, "TO.QM2")["xmit_depth"] == 0)
        assert failed and not status(qm1, "TO.QM2")["indoubt"]


def test_a_batch_in_doubt_is_resolved_by_hand_while_the_channel_is_stopped(monkeypatch):
    with pair() as (qm1, qm2, _):

        def never(self):
            raise MQError(Reason.RESOURCE_PROBLEM, "injected")

        monkeypatch.setattr(SenderSync, "commit", never)
        put_all(qm1, "TARGET", [(b"x", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        assert len(drain_all(qm2, "Q", 1, lambda: status(qm1, "TO.QM2")["indoubt"])) == 1  # the receiver committed it
        wait_until(lambda: status(qm1, "TO.QM2")["indoubt"])
        with pytest.raises(MQError) as ei:
            qm1.channels.resolve("TO.QM2", "commit")
        assert ei.value.reason == Reason.CHANNEL_IN_USE  # not while it runs or retries
        qm1.channels.stop("TO.QM2")
        st = status(qm1, "TO.QM2")
        assert st["status"] == "INDOUBT" and st["indoubt_messages"] == 1
        monkeypatch.undo()
        with pytest.raises(MQError) as ei:
            qm1.channels.reset("TO.QM2", 5)
        assert ei.value.reason == Reason.CHANNEL_INDOUBT
        assert qm1.channels.resolve("TO.QM2", "commit")["status"] == "STOPPED"
        assert qm1.inquire_queue("QM2").current_depth == 0
        with pytest.raises(MQError):
            qm1.channels.resolve("TO.QM2", "maybe")


def test_a_sequence_number_mismatch_stops_the_channel_until_both_ends_are_reset(tmp_path):
    with pair(qm1_options={"path": tmp_path / "qm1"}) as (qm1, qm2, _):  # a sender with state of its own
        qm2.channels.reset("TO.QM2", 7)  # the receiver thinks 7 messages came
        put_all(qm1, "TARGET", [(b"a", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "STOPPED")
        assert "sequence number mismatch" in status(qm1, "TO.QM2")["why"]
        qm1.channels.reset("TO.QM2", 0)  # the sender's word; its token is not the partner's admin token
        qm1.channels.start("TO.QM2")
        wait_until(lambda: "refused this sender's sequence number reset" in status(qm1, "TO.QM2").get("why", ""))
        assert status(qm1, "TO.QM2")["status"] == "STOPPED" and status(qm2, "TO.QM2")["seq"] == 7  # untouched
        qm2.channels.reset("TO.QM2", 0)  # the receiver's administrator agrees
        qm1.channels.start("TO.QM2")
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"a"]
        wait_until(lambda: status(qm2, "TO.QM2")["seq"] == 1)


def test_a_sender_holding_the_partner_s_admin_token_resets_the_receiver_too(tmp_path):
    with (
        QueueManager("QM2", sweeping=SweeperSettings(run=False)) as qm2,
        QueueManager("QM1", sweeping=SweeperSettings(run=False), path=tmp_path / "qm1") as qm1,
    ):
        qm2.define_queue("Q")
        server = receiving(qm2, "TO.QM2", admin_token="ADM")
        sending(qm1, "TO.QM2", server, "QM2")
        qm1.alter_channel("TO.QM2", token="ADM")  # the partner's admin token: it may reset the receiver
        qm1.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
        qm2.channels.reset("TO.QM2", 7)
        qm1.channels.reset("TO.QM2", 0)
        put_all(qm1, "TARGET", [(b"a", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"a"]
        wait_until(lambda: status(qm2, "TO.QM2")["seq"] == 1 and status(qm1, "TO.QM2")["seq"] == 1)


def test_a_sender_retries_until_its_partner_is_there_and_stops_when_retries_run_out():
    with pair(short_retry=2, long_retry=1, long_interval=0.05) as (qm1, qm2, server):
        server.close()
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "STOPPED", what="retries running out")
        assert "gave up after 3 retries" in status(qm1, "TO.QM2")["why"]
    with pair() as (qm1, qm2, server):
        port = server.tcp[1]
        server.close()
        put_all(qm1, "TARGET", [(b"late", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "RETRYING")
        qm2.serve(None, tcp=f"127.0.0.1:{port}", token=server.token)
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"late"]


def test_an_idle_channel_heartbeats_then_ends_and_a_message_starts_it_again():
    with pair(heartbeat=0.1, disconnect_interval=1.0) as (qm1, qm2, server):
        qm1.channels.start("TO.QM2")
        wait_until(lambda: running(qm1, "TO.QM2"))
        wait_until(lambda: any(c["calls"] >= 3 for c in server.status()["connections"]), what="heartbeats")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "INACTIVE", what="the disconnect interval")
        assert status(qm2, "TO.QM2")["status"] == "INACTIVE"  # the receiver's session ended too
        put_all(qm1, "TARGET", [(b"wake", None)])
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"wake"]


def test_a_stopped_channel_stays_stopped_across_a_restart(tmp_path):
    with pair(qm1_options={"path": tmp_path / "qm1"}) as (qm1, _qm2, _):
        qm1.channels.start("TO.QM2")
        wait_until(lambda: running(qm1, "TO.QM2"))
        qm1.channels.stop("TO.QM2")
    with QueueManager.open(tmp_path / "qm1", sweeping=SweeperSettings(run=False)) as again:
        assert status(again, "TO.QM2")["status"] == "STOPPED" and again.channels.resume() == []


def test_a_receiver_takes_one_sender_and_refuses_when_stopped():
    with pair() as (qm1, qm2, server):
        qm2.channels.stop("TO.QM2")
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "RETRYING")
        assert "is stopped" in status(qm1, "TO.QM2")["why"]
        qm2.channels.start("TO.QM2")
        wait_until(lambda: running(qm1, "TO.QM2"))
        with QueueManager("QM1", sweeping=SweeperSettings(run=False)) as twin:  # a second sender of the same name
            sending(twin, "TO.QM2", server, "QM2")
            twin.channels.start("TO.QM2")
            wait_until(lambda: status(twin, "TO.QM2")["status"] == "RETRYING")
            assert "in use" in status(twin, "TO.QM2")["why"]


def test_a_wrong_token_stops_the_channel():
    with pair() as (qm1, _qm2, _):
        qm1.alter_channel("TO.QM2", token="not-the-token")
        qm1.channels.start("TO.QM2")
        wait_until(lambda: status(qm1, "TO.QM2")["status"] == "STOPPED")
        assert "token" in status(qm1, "TO.QM2")["why"]


def test_a_channel_over_tls(tmp_path):
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    with (
        QueueManager("QM2", sweeping=SweeperSettings(run=False)) as qm2,
        QueueManager("QM1", sweeping=SweeperSettings(run=False)) as qm1,
    ):
        qm2.define_queue("Q")
        server = receiving(qm2, "TO.QM2", tls=ctx)
        assert server.urls[-1].startswith("tls://")
        sending(qm1, "TO.QM2", server, "QM2", cafile=str(tmp_path / "ca.pem"))
        qm1.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
        put_all(qm1, "TARGET", [(b"secret", MD(persistence=P))])
        qm1.channels.start("TO.QM2")
        assert [m.data for m in drain_all(qm2, "Q", 1, lambda: sent(qm1))] == [b"secret"]


def test_channels_are_administered_over_a_connection_with_the_admin_token():
    with pair() as (qm1, _qm2, _):
        server = qm1.serve(None, tcp="127.0.0.1:0", admin_token="ADMIN")
        url = server.urls[-1]
        with RemoteQueueManager(url, server.token) as plain:
            assert plain.channels.status()[0]["name"] == "TO.QM2"
            with pytest.raises(MQError) as ei:
                plain.channels.start("TO.QM2")
            assert ei.value.reason == Reason.NOT_AUTHORIZED
        with RemoteQueueManager(url, server.token, admin_token="ADMIN") as admin:
            admin.define_remote_queue("R2", remote_queue="Q", remote_qmgr="QM2")
            assert admin.define_channel("SPARE", type="RECEIVER")["type"] == "RECEIVER"
            assert admin.channels.start("TO.QM2")["name"] == "TO.QM2"
            wait_until(lambda: admin.channels.status("TO.QM2")[0]["status"] == "RUNNING")
            assert admin.channels.stop("TO.QM2")["status"] == "STOPPED"
            admin.delete_channel("SPARE")
            with pytest.raises(MQError) as ei:
                admin.dq_admin("explode", None)
            assert ei.value.reason == Reason.PARM_VALUE_ERROR
        assert "R2" in qm1.distributed.remotes and "SPARE" not in qm1.distributed.channels


def test_a_running_channel_cannot_be_deleted_or_reset():
    with pair() as (qm1, _qm2, _):
        qm1.channels.start("TO.QM2")
        wait_until(lambda: running(qm1, "TO.QM2"))
        for call in (lambda: qm1.delete_channel("TO.QM2"), lambda: qm1.channels.reset("TO.QM2", 1)):
            with pytest.raises(MQError) as ei:
                call()
            assert ei.value.reason == Reason.CHANNEL_IN_USE
        with pytest.raises(MQError) as ei:
            qm1.channels.start("NOPE")
        assert ei.value.reason == Reason.CHANNEL_NOT_FOUND


def test_normal_speed_carries_nonpersistent_messages_in_the_batch():
    with pair(np_speed="NORMAL") as (qm1, qm2, _):
        put_all(qm1, "TARGET", [(b"%d" % i, MD(persistence=NP)) for i in range(30)])
        qm1.channels.start("TO.QM2")
        assert sorted(int(m.data) for m in drain_all(qm2, "Q", 30, lambda: sent(qm1))) == list(range(30))
        assert FAST["short_interval"] < 1


def test_three_queue_managers_in_three_processes_over_loopback_tcp(tmp_path):
    """QM1 -> QM2 -> QM3, each 'sweepq serve' in a process of its own, defined with the command
    line: QM1's remote queue names QM3 through its transmission queue to QM2."""
    from net_env import ServeProcess

    from sweepq.engine import GMO
    from sweepq.net import client

    d = {n: str(tmp_path / n.lower()) for n in ("QM1", "QM2", "QM3")}

    def cli(*argv: str) -> None:
        assert main(list(argv)) == 0, argv

    def serve(name: str) -> tuple[ServeProcess, int]:
        p = ServeProcess(d[name], "--tcp", "127.0.0.1:0").start()
        return p, int(p.url_of("tcp").rsplit(":", 1)[1])

    from sweepq.cli import main

    cli("channel", "qmgr", "--data-dir", d["QM3"], "--name", "QM3", "--dlq", "DLQ")
    cli("define", "FINAL", "--data-dir", d["QM3"], "--persistent")
    cli("channel", "define", "QM2.QM3", "--type", "receiver", "--data-dir", d["QM3"])
    cli("channel", "qmgr", "--data-dir", d["QM2"], "--name", "QM2")
    cli("channel", "define", "QM1.QM2", "--type", "receiver", "--data-dir", d["QM2"])
    cli("define", "QM3", "--data-dir", d["QM2"], "--usage", "xmitq")
    cli("channel", "qmgr", "--data-dir", d["QM1"], "--name", "QM1")
    cli("define", "QM2", "--data-dir", d["QM1"], "--usage", "xmitq")
    cli("define", "ORDERS", "--data-dir", d["QM1"], "--remote-qmgr", "QM3", "--remote-queue", "FINAL", "--xmitq", "QM2")
    procs = []
    try:
        p3, port3 = serve("QM3")
        procs.append(p3)
        tok = ["--partner-token-file"]
        cli(
            "channel",
            "define",
            "QM2.QM3",
            "--data-dir",
            d["QM2"],
            "--conname",
            f"tcp://127.0.0.1:{port3}",
            "--xmitq",
            "QM3",
            *tok,
            f"{d['QM3']}/sweepq.token",
            "--short-interval",
            "0.1",
        )
        p2, port2 = serve("QM2")
        procs.append(p2)
        cli(
            "channel",
            "define",
            "QM1.QM2",
            "--data-dir",
            d["QM1"],
            "--conname",
            f"tcp://127.0.0.1:{port2}",
            "--xmitq",
            "QM2",
            *tok,
            f"{d['QM2']}/sweepq.token",
            "--short-interval",
            "0.1",
        )
        p1, _ = serve("QM1")  # starts its sender channel, as QM2's did
        procs.append(p1)
        with client.connect(p1.url) as c:
            h = c.open("ORDERS", OO.OUTPUT)
            sent = [h.put(b"%03d" % i, MD(priority=i % 3, persistence=P)).msg_id for i in range(90)]
        got = []
        with client.connect(p3.url) as c:
            h = c.open("FINAL", OO.INPUT_SHARED)
            while len(got) < 90:
                got.append(h.get(GMO.WAIT, 30_000))
            with pytest.raises(MQError):
                h.get(GMO.WAIT, 300)
        assert sorted(m.msg_id for m in got) == sorted(sent)
        for prio in range(3):
            mine = [m.data for m in got if m.priority == prio]
            assert mine == sorted(mine)
        assert all(m.persistent for m in got)
        rows = RemoteQueueManager(p2.url).channels.status()
        assert {r["name"]: r["status"] for r in rows} == {"QM1.QM2": "RUNNING", "QM2.QM3": "RUNNING"}
    finally:
        for p in procs:
            p.kill()
