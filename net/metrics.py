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
``sweepq_sweeps_total``, ``sweepq_messages_swept_total``, ``sweepq_unsweeps_total``,
``sweepq_messages_unswept_total`` and ``sweepq_queue_blob_bytes`` (label ``queue``);
``sweepq_memory_budget_bytes`` (0: none), ``sweepq_memory_counted_bytes`` (what the budget
counts) and ``sweepq_resident_memory_bytes`` (the process's RSS). docs/grafana-dashboard.json
is a Grafana dashboard of these series (tests/test_console.py checks that each one it uses is
exported).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import psutil
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
        unsweeps = CounterMetricFamily("sweepq_unsweeps", "blobs brought back into memory", labels=["queue"])
        back = CounterMetricFamily("sweepq_messages_unswept", "messages brought back from blobs", labels=["queue"])
        blob_bytes = GaugeMetricFamily("sweepq_queue_blob_bytes", "compressed bytes in blobs now", labels=["queue"])
        for name, s in self.server.qm.stats().items():
            if name != "*":
                sweeps.add_metric([name], s.sweeps)
                moved.add_metric([name], s.total_msgs_swept)
                unsweeps.add_metric([name], s.unsweeps)
                back.add_metric([name], s.msgs_unswept)
                blob_bytes.add_metric([name], s.bytes_swept_compressed)
        yield from (sweeps, moved, unsweeps, back, blob_bytes)
        use = self.server.qm.memory_use()
        yield GaugeMetricFamily("sweepq_memory_budget_bytes", "the memory budget (0: none)", value=use.budget)
        yield GaugeMetricFamily(
            "sweepq_memory_counted_bytes", "what the memory budget counts: messages and the store", value=use.total
        )
        yield GaugeMetricFamily(
            "sweepq_resident_memory_bytes", "the server process's resident memory", value=self.rss()
        )

    @staticmethod
    def rss() -> int:
        return psutil.Process(os.getpid()).memory_info().rss


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
