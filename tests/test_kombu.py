"""The Kombu transport (sweepq.broker, docs/celery.md) through Kombu's own API: names, URLs,
the alias, ack / reject / requeue as units of work, priorities, fanout across processes'
connections, and a consumer killed with its messages unacknowledged. Celery itself:
tests/test_celery.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest

kombu = pytest.importorskip("kombu")

from kombu import Connection, Exchange, Queue  # noqa: E402

from sweepq.broker.names import MAX_NAME, mq_name  # noqa: E402
from sweepq.broker.site import site_of  # noqa: E402
from sweepq.engine import MQError, QueueManager, Reason, SweeperSettings  # noqa: E402


def _memory_url() -> str:
    return f"sweepq+memory://T{uuid.uuid4().hex[:12]}"


@pytest.fixture
def served(tmp_path_factory):
    """A queue manager served on a Unix socket, with an admin token: (url, admin token, qm)."""
    import tempfile

    where = tempfile.mkdtemp(prefix="sqk")
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        server = qm.serve(os.path.join(where, "s.sock"), admin_token="admin-secret")
        yield "sweepq+" + server.url, "admin-secret", qm


def test_a_valid_mq_name_is_kept_and_any_other_is_mapped_the_same_way_every_time():
    assert mq_name("celery") == "celery"
    long = "celery@a-host-with-a-long-name.example.com.celery.pidbox"
    assert mq_name(long) == mq_name(long)
    assert len(mq_name(long)) <= MAX_NAME
    assert mq_name(long) != mq_name(long + "x")
    assert mq_name(str(uuid.uuid4())).replace(".", "").replace("_", "").isalnum()


@pytest.mark.parametrize("url", ["ftp://x", "tcp://nohost", "unix", "dir://", 5])
def test_a_broker_url_of_another_form_is_one_clear_error(url):
    with pytest.raises(MQError) as e:
        site_of(url, {})
    assert e.value.reason == Reason.PARM_VALUE_ERROR
    assert "sweepq+unix://" in str(e.value)


def test_the_tcp_form_takes_its_token_from_the_url_the_options_or_the_environment(monkeypatch):
    monkeypatch.setenv("SWEEPQ_TOKEN", "from-env")
    assert site_of("tcp://:from-url@127.0.0.1:1414", {}).token == "from-url"
    assert site_of("tcp://:from-url@127.0.0.1:1414", {"token": "opt"}).token == "opt"
    assert site_of("tcp://127.0.0.1:1414", {}).token == "from-env"
    assert site_of("tls://127.0.0.1:1414?admin_token=a", {}).admin_token == "a"


def test_the_alias_is_registered_in_a_fresh_interpreter_with_no_import_of_sweepq():
    """The installed sweepq-kombu.pth adds it at start-up (broker/alias.py): a user's process
    that only imports kombu resolves ``sweepq+...``."""
    code = "from kombu.transport import resolve_transport; print(resolve_transport('sweepq').__module__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "sweepq.broker.transport"


_FINDERS_AFTER_THE_ALIAS = """
import importlib.machinery, sys, types
import sweepq.broker.alias as alias

alias._WATCHED = "watched_mod"  # stands for kombu.transport: served by a finder of no path


class Source:
    # serves watched_mod and later_mod from a string, as an editable install's finder does
    asked = []

    def find_spec(self, fullname, path, target=None):
        self.asked.append(fullname)
        if fullname in ("watched_mod", "later_mod"):
            return importlib.machinery.ModuleSpec(fullname, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.TRANSPORT_ALIASES = {}


sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, alias._Finder)]  # the .pth's, on kombu
sys.meta_path.insert(0, Source())
alias.install_hook()
assert type(sys.meta_path[0]).__name__ == "_Finder", sys.meta_path
import watched_mod, later_mod

print(watched_mod.TRANSPORT_ALIASES, Source.asked)
"""


def test_the_alias_finder_wraps_any_finder_behind_it_and_skips_none():
    """The hook's finder takes ``kombu.transport``'s spec from whichever finder behind it
    gives one (an editable install's, not only the path's), and an import after it reaches
    every finder: it once removed itself from ``sys.meta_path`` while the import system walked
    that list, which made the walk skip the finder behind it."""
    out = subprocess.run([sys.executable, "-c", _FINDERS_AFTER_THE_ALIAS], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'sweepq': 'sweepq.broker.transport:Transport'} ['watched_mod', 'later_mod']"


def test_put_get_ack_in_process():
    with Connection(_memory_url()) as conn:
        q = conn.SimpleQueue("jobs")
        q.put({"n": 1})
        m = q.get(timeout=5)
        assert m.payload == {"n": 1}
        m.ack()
        with pytest.raises(q.Empty):
            q.get(block=False)
        q.close()


def test_reject_with_requeue_backs_out_and_the_message_comes_back_redelivered_and_ack_removes_it():
    with Connection(_memory_url()) as conn:
        q = conn.SimpleQueue("jobs")
        q.put("a")
        first = q.get(timeout=5)
        assert not first.delivery_info.get("redelivered")
        first.requeue()
        again = q.get(timeout=5)
        assert again.payload == "a" and again.delivery_info.get("redelivered") is True
        again.reject()  # without requeue: dropped
        with pytest.raises(q.Empty):
            q.get(block=False)
        q.close()


def test_messages_are_settled_one_by_one_in_any_order():
    """Each unacknowledged message holds its own unit of work: acking the second leaves the
    first unacknowledged, and backing the first out does not bring the second back."""
    with Connection(_memory_url()) as conn:
        q = conn.SimpleQueue("jobs")
        for text in ("one", "two"):
            q.put(text)
        a, b = q.get(timeout=5), q.get(timeout=5)
        b.ack()
        a.requeue()
        back = q.get(timeout=5)
        assert back.payload == "one"
        back.ack()
        with pytest.raises(q.Empty):
            q.get(block=False)
        q.close()


def test_unacknowledged_messages_come_back_when_the_channel_closes():
    url = _memory_url()
    with Connection(url) as conn:
        q = conn.SimpleQueue("jobs")
        q.put("kept")
        assert q.get(timeout=5).payload == "kept"  # never acked
        q.close()
    with Connection(url) as conn:
        q = conn.SimpleQueue("jobs")
        m = q.get(timeout=5)
        assert m.payload == "kept" and m.delivery_info.get("redelivered") is True
        m.ack()
        q.close()


def test_priorities_are_mq_priorities_nine_first():
    with Connection(_memory_url()) as conn:
        q = conn.SimpleQueue("jobs")
        for p in (3, 0, 9, 5, 9, 1):
            q.put(p, priority=p)
        got = []
        for _ in range(6):
            m = q.get(timeout=5)
            got.append(m.payload)
            m.ack()
        assert got == [9, 9, 5, 3, 1, 0]
        q.close()


def test_fanout_reaches_queues_bound_by_another_connection_over_the_server(served):
    """Bindings are shared: a publisher that never bound anything (another Kombu connection,
    as another process) reaches every queue bound to a fanout exchange, and a direct one."""
    url, admin, qm = served
    options = {"admin_token": admin}
    fan = Exchange("bcast", type="fanout")
    with Connection(url, transport_options=options) as listener:
        queues = [Queue(f"node{i}.pidbox", fan)(listener.default_channel) for i in range(2)]
        for q in queues:
            q.declare()
        with Connection(url, transport_options=options) as publisher:
            publisher.Producer().publish({"hello": 1}, exchange=fan, declare=[fan])
        for q in queues:
            m = q.get(no_ack=True)
            assert m is not None and m.payload == {"hello": 1}
        assert "node0.pidbox" in qm.queue_names()
        queues[0].delete()
        assert "node0.pidbox" not in qm.queue_names()


def test_a_queue_kombu_declares_needs_the_admin_token_without_it_one_clear_error(served):
    url, _, _ = served
    with Connection(url) as conn, pytest.raises(MQError) as e:
        conn.SimpleQueue("undefined")
    assert e.value.reason == Reason.NOT_AUTHORIZED and "admin token" in str(e.value)


CONSUMER = textwrap.dedent(
    """
    import sys
    from kombu import Connection
    with Connection(sys.argv[1], transport_options={"admin_token": sys.argv[2]}) as conn:
        q = conn.SimpleQueue("work")
        m = q.get(timeout=30)
        print(m.payload, flush=True)  # got, never acked
        sys.stdin.read()  # until killed
    """
)


def test_a_consumer_killed_with_sigkill_has_its_message_backed_out_by_the_server(served):
    url, admin, _ = served
    with Connection(url, transport_options={"admin_token": admin}) as conn:
        q = conn.SimpleQueue("work")
        q.put("task")
        proc = subprocess.Popen(
            [sys.executable, "-c", CONSUMER, url, admin], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            assert proc.stdout.readline().strip() == "task"  # the consumer holds it
            with pytest.raises(q.Empty):
                q.get(block=False)
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        m = q.get(timeout=30)  # the server backed its unit of work out
        assert m.payload == "task" and m.delivery_info.get("redelivered") is True
        m.ack()
        q.close()


def test_over_tcp_the_token_comes_from_the_url_and_a_wrong_one_fails_at_connect():
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        server = qm.serve(tcp="127.0.0.1:0", token="tok", admin_token="adm")
        tcp = next(u for u in server.urls if u.startswith("tcp://"))
        good = tcp.replace("tcp://", "sweepq+tcp://:tok@") + "?admin_token=adm"
        with Connection(good) as conn:
            q = conn.SimpleQueue("jobs")
            q.put("over tcp")
            m = q.get(timeout=5)
            assert m.payload == "over tcp"
            m.ack()
            q.close()
        with Connection(tcp.replace("tcp://", "sweepq+tcp://:wrong@")) as conn, pytest.raises(MQError) as e:
            conn.connect()
        assert e.value.reason == Reason.NOT_AUTHORIZED


def test_a_data_directory_in_process_keeps_persistent_messages_across_a_reopen(tmp_path):
    from sweepq.broker.site import close_local

    url = f"sweepq+dir://{tmp_path / 'data'}"
    with Connection(url) as conn:
        q = conn.SimpleQueue("jobs")
        q.put("durable", delivery_mode=2)
        q.put("transient", delivery_mode=1)
        q.close()
    close_local()  # as at the process's exit
    with Connection(url) as conn:
        q = conn.SimpleQueue("jobs")
        m = q.get(timeout=5)
        assert m.payload == "durable"
        m.ack()
        with pytest.raises(q.Empty):
            q.get(block=False)
        q.close()
    close_local()


def test_an_auto_delete_queue_goes_with_its_consumers_channel_and_its_binding_with_it(served):
    """As AMQP's auto_delete (Celery's worker pidbox and rpc:// reply queues): a clean close
    leaves neither the MQ queue nor its binding behind for broadcasts to fill."""
    url, admin, qm = served
    fan = Exchange("bcast", type="fanout")
    with Connection(url, transport_options={"admin_token": admin}) as conn:
        channel = conn.channel()
        q = Queue("node.pidbox", fan, auto_delete=True)(channel)
        q.declare()
        q.consume(callback=lambda body, message: None, no_ack=True)
        assert "node.pidbox" in qm.queue_names()
        channel.close()
        assert "node.pidbox" not in qm.queue_names()
        assert conn.default_channel.get_table("bcast") == []


def _consume(conn, queue: Queue, prefetch: int, got: list, ack: bool = True):
    """A consumer of ``queue`` that records each message (acknowledged when ``ack``)."""

    def on_message(body, message):
        got.append(message)
        if ack:
            message.ack()

    return conn.Consumer(queue, callbacks=[on_message], prefetch_count=prefetch)


def test_a_consumer_takes_as_many_as_its_prefetch_window_has_room_for_in_one_delivery():
    """One drain delivers a batch (one get of the queue manager), not one message: as many as
    the prefetch window has room for."""
    with Connection(_memory_url()) as conn:
        q = Queue("jobs", Exchange("jobs"), routing_key="jobs")
        producer = conn.Producer()
        for i in range(12):
            producer.publish(i, exchange=q.exchange, routing_key="jobs", declare=[q])
        got: list = []
        with _consume(conn, q, prefetch=5, got=got, ack=False):
            conn.drain_events(timeout=5)
            assert [m.payload for m in got] == [0, 1, 2, 3, 4]
            for m in got:
                m.ack()
            conn.drain_events(timeout=5)
            assert [m.payload for m in got[5:]] == [5, 6, 7, 8, 9]


def test_a_batch_asked_back_whole_is_backed_out_in_place_and_one_acked_keeps_the_rest_out():
    url = _memory_url()
    with Connection(url) as conn:
        q = Queue("jobs", Exchange("jobs"), routing_key="jobs")
        producer = conn.Producer()
        for i in range(4):
            producer.publish(i, exchange=q.exchange, routing_key="jobs", declare=[q])
        got: list = []
        with _consume(conn, q, prefetch=2, got=got, ack=False):
            conn.drain_events(timeout=5)
            for m in got:
                m.requeue()  # none acknowledged: the batch backed out, each in its place
            conn.drain_events(timeout=5)
            assert [m.payload for m in got[2:]] == [0, 1]
            assert all(m.delivery_info.get("redelivered") for m in got[2:])
            got[2].ack()
            got[3].requeue()  # the other acknowledged: a copy put back, after those waiting
            conn.drain_events(timeout=5)
            got[4].ack(), got[5].ack()
            conn.drain_events(timeout=5)
            assert [m.payload for m in got[4:]] == [2, 3, 1]
            assert got[6].delivery_info.get("redelivered") is True
            got[6].ack()
        left = conn.SimpleQueue("jobs")
        with pytest.raises(left.Empty):
            left.get(block=False)
        left.close()


def test_a_consumer_whose_prefetch_window_is_full_takes_more_once_one_is_acknowledged():
    """The empty poll's wait ends when a message is settled (not after polling_interval: an
    hour here, so without that the drain below would time out)."""
    import threading

    with Connection(_memory_url(), transport_options={"polling_interval": 3600}) as conn:
        q = Queue("jobs", Exchange("jobs"), routing_key="jobs")
        producer = conn.Producer()
        for i in range(2):
            producer.publish(i, exchange=q.exchange, routing_key="jobs", declare=[q])
        got: list = []
        with _consume(conn, q, prefetch=1, got=got, ack=False):
            conn.drain_events(timeout=5)
            assert len(got) == 1
            settled = conn.transport.settled
            waiting = threading.Event()
            wait = settled.wait

            def waits(timeout=None):
                waiting.set()
                return wait(timeout)

            settled.wait = waits
            acker = threading.Thread(target=lambda: waiting.wait(60) and got[0].ack())
            acker.start()
            conn.drain_events(timeout=120)
            acker.join(60)
            assert [m.payload for m in got] == [0, 1]


@pytest.mark.parametrize("size", [0, -1, "8", 2.5, True])
def test_a_wrong_batch_size_is_one_clear_error(size):
    with Connection(_memory_url(), transport_options={"batch_size": size}) as conn, pytest.raises(MQError) as e:
        conn.connect()
    assert e.value.reason == Reason.PARM_VALUE_ERROR and "batch_size" in str(e.value)


def test_a_consumer_tops_its_prefetch_window_up_half_a_window_at_a_time():
    """Not at every acknowledgement: a worker's window then took batches of one or two, a
    round trip each."""
    with Connection(_memory_url()) as conn:
        q = Queue("jobs", Exchange("jobs"), routing_key="jobs")
        producer = conn.Producer()
        for i in range(10):
            producer.publish(i, exchange=q.exchange, routing_key="jobs", declare=[q])
        got: list = []
        with _consume(conn, q, prefetch=4, got=got, ack=False) as consumer:
            conn.drain_events(timeout=5)
            assert len(got) == 4
            got[0].ack()
            assert not consumer.channel.qos.can_consume()  # a quarter of the window free
            got[1].ack()
            assert consumer.channel.qos.can_consume()
            conn.drain_events(timeout=5)
            assert [m.payload for m in got[4:]] == [4, 5]
