"""The server's statistics in Prometheus's text format, on an optional HTTP port, through the
Prometheus client library (``prometheus-client``): ``sweepq serve --metrics :9464``.

A collector reads :meth:`Server.status` and the queue manager's sweep statistics at each
scrape (nothing is kept between scrapes), into a registry of its own, so that several servers
in one process never share series.

Series: ``sweepq_queue_depth``, ``sweepq_queue_in_memory``, ``sweepq_queue_swept``,
``sweepq_queue_memory_bytes``, ``sweepq_queue_open_input``, ``sweepq_queue_open_output``
(label ``queue``); ``sweepq_connections``, ``sweepq_connections_refused_total``,
``sweepq_handshakes``, ``sweepq_handshakes_dropped_total``, ``sweepq_frame_memory_bytes``,
``sweepq_frames_refused_total``, ``sweepq_uncommitted`` (label ``connection``);
``sweepq_store_memory_bytes`` (label ``kind``);
``sweepq_sweeps_total`` and ``sweepq_messages_swept_total`` (label ``queue``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

if TYPE_CHECKING:
    from .server import Server

_QUEUE_GAUGES = (
    ("depth", "messages on the queue (CURDEPTH)"),
    ("in_memory", "messages held in memory"),
    ("swept", "messages swept into blobs"),
    ("mem_bytes", "bytes of the messages in memory"),
    ("open_input", "handles open for input"),
    ("open_output", "handles open for output"),
)


class _Collector:
    def __init__(self, server: Server):
        self.server = server

    def collect(self):
        status = self.server.status()
        for key, text in _QUEUE_GAUGES:
            name = "memory_bytes" if key == "mem_bytes" else key
            g = GaugeMetricFamily(f"sweepq_queue_{name}", text, labels=["queue"])
            for q in status["queues"]:
                g.add_metric([q["name"]], q[key])
            yield g
        yield GaugeMetricFamily("sweepq_connections", "client connections open", value=len(status["connections"]))
        yield CounterMetricFamily(
            "sweepq_connections_refused", "connections refused at the limit", value=status["refused"]
        )
        yield GaugeMetricFamily("sweepq_handshakes", "connections in their handshake", value=status["handshakes"])
        yield CounterMetricFamily(
            "sweepq_handshakes_dropped",
            "connections closed before they finished their handshake (its deadline, or the oldest at the limit)",
            value=status["dropped"],
        )
        fm = status["frame_memory"]
        yield GaugeMetricFamily("sweepq_frame_memory_bytes", "memory held by large frames in flight", value=fm["used"])
        yield CounterMetricFamily(
            "sweepq_frames_refused",
            "large frames read and dropped for want of frame memory (2071)",
            value=fm["refused"],
        )
        u = GaugeMetricFamily(
            "sweepq_uncommitted", "operations in each connection's unit of work", labels=["connection"]
        )
        for c in status["connections"]:
            u.add_metric([str(c["id"])], c["uncommitted"])
        yield u
        m = GaugeMetricFamily("sweepq_store_memory_bytes", "the blob store's memory", labels=["kind"])
        for kind, value in status["store_memory"].items():
            m.add_metric([kind], value)
        yield m
        sweeps = CounterMetricFamily("sweepq_sweeps", "sweeps done", labels=["queue"])
        moved = CounterMetricFamily("sweepq_messages_swept", "messages moved into blobs", labels=["queue"])
        for name, s in self.server.qm.stats().items():
            if name != "*":
                sweeps.add_metric([name], s.sweeps)
                moved.add_metric([name], s.total_msgs_swept)
        yield sweeps
        yield moved


class Metrics:
    """The HTTP endpoint of one server; ``close()`` stops it."""

    def __init__(self, server: Server, address: str | int):
        from .server import parse_tcp

        host, port = parse_tcp(address)
        self.registry = CollectorRegistry()
        self.registry.register(_Collector(server))
        self._httpd, self._thread = start_http_server(port, host, registry=self.registry)
        self.url = f"http://{host}:{self._httpd.server_port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def start_metrics(server: Server, address: str | int) -> Metrics:
    return Metrics(server, address)
