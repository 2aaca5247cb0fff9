"""Hostile clients against ``sweepq serve`` (issue 24, items 6 and 7): the two figures
docs/clients.md reports.

* ``slow``: N clients that connect over TCP without a token and send a HELLO one byte a
  second (slowloris; each one the server drops connects again), while a legitimate client,
  with the token, connects, puts, gets and disconnects every few milliseconds: its latency
  (p50, p99, worst) and its refusals, against the same client with no slow client about,
  and the server's threads and resident memory while they hold;
* ``greedy``: N connections that each complete the handshake and then send a frame header
  claiming the largest frame the server takes (and, with ``--body``, that many bytes of it),
  and hold: the server's resident memory before, while they hold, and after they go.

Run: ``python -m sweepq.bench.hostile slow --clients 1000 --max-connections 20`` and
``python -m sweepq.bench.hostile greedy --clients 100``. The server is ``sweepq serve`` in a
process of its own, the slow clients a process of their own; each prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from .children import bound

SLOW = r"""
import json, os, resource, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
seconds, hello = float(sys.argv[4]), bytes.fromhex(sys.argv[5])
conns = {}  # socket -> bytes of the hello sent
opened = dropped = 0
def fresh():
    global opened
    s = socket.socket()
    s.setblocking(False)
    with __import__("contextlib").suppress(BlockingIOError):
        s.connect((host, port))
    conns[s] = 0
    opened += 1
for _ in range(n):
    fresh()
end = time.monotonic() + seconds
ticks = 0
while time.monotonic() < end:
    for s in list(conns):
        k = conns[s]
        try:
            s.send(hello[k % len(hello): k % len(hello) + 1])  # one byte of a good HELLO
            conns[s] = k + 1
            if s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                raise ConnectionResetError
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            del conns[s]
            dropped += 1
            fresh()
    ticks += 1
    if ticks == 2:
        print("holding", flush=True)
    time.sleep(max(0.0, 1.0 - (time.monotonic() % 1.0)))
print(json.dumps({"opened": opened, "dropped": dropped, "held_at_end": len(conns)}), flush=True)
"""


def _serve(data: str, *extra: str) -> tuple[subprocess.Popen, str, str]:
    """``sweepq serve`` on ``data`` with TCP; (process, tcp url, token)."""
    from sweepq.net import auth

    cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", data, "--tcp", "127.0.0.1:0", *extra]
    log = open(data + ".log", "wb")  # noqa: SIM115 - the server's stderr, for as long as it runs
    proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=log)
    for _ in range(1200):
        with open(data + ".log", errors="replace") as f:
            text = f.read()
        if "listening on" in text:
            port = text.split("tcp://127.0.0.1:")[1].split()[0]
            return proc, f"tcp://127.0.0.1:{port}", auth.read_token(os.path.join(data, auth.TOKEN_FILE)) or ""
        if proc.poll() is not None:
            raise RuntimeError(f"sweepq serve exited: {text}")
        time.sleep(0.05)
    raise RuntimeError("sweepq serve did not start")


def _visits(url: str, token: str, n: int, gap: float) -> dict:
    """``n`` visits of a legitimate client (connect, put, get, disconnect), ``gap`` s apart."""
    from sweepq.engine import OO, MQError
    from sweepq.net import client

    lat, refused = [], []
    for _ in range(n):
        t = time.perf_counter()
        try:
            with client.connect(url, token, timeout=30.0) as c:
                h = c.open("BENCH", OO.OUTPUT | OO.INPUT_SHARED)
                h.put(b"x" * 100)
                h.get()
            lat.append(time.perf_counter() - t)
        except MQError as e:
            refused.append(int(e.reason))
        time.sleep(gap)
    lat.sort()

    def q(p: float) -> float:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2) if lat else float("nan")

    return {"visits": n, "ok": len(lat), "refused": len(refused), "reasons": sorted(set(refused))}, {
        "p50_ms": q(0.50),
        "p99_ms": q(0.99),
        "max_ms": round(lat[-1] * 1000, 2) if lat else float("nan"),
    }


def _define(url: str, data: str) -> None:
    from sweepq.net import RemoteQueueManager, auth

    admin = auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))
    with RemoteQueueManager("unix://" + os.path.join(data, "sweepq.sock"), admin_token=admin) as r:
        r.define_queue("BENCH")


def slow(args: argparse.Namespace) -> dict:
    import psutil

    from sweepq.net import protocol as P

    where = tempfile.mkdtemp(prefix="sqh")
    data = os.path.join(where, "q")
    proc, url, token = _serve(data, "--max-connections", str(args.max_connections), *args.serve_arg)
    try:
        _define(url, data)
        server = psutil.Process(proc.pid)
        counts, alone = _visits(url, token, args.visits, args.gap)
        hello = P.request(P.HELLO, {"token": None, "admin_token": None, "pid": 1, "client": "slow", "cancel": False})
        host, port = url[len("tcp://") :].rsplit(":", 1)
        seconds = args.visits * (args.gap + 0.01) + 30
        driver = subprocess.Popen(
            bound([sys.executable, "-c", SLOW, host, port, str(args.clients), str(seconds), hello.hex()]),
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert driver.stdout is not None
            driver.stdout.readline()  # "holding": every slow client connected and sending
            time.sleep(1.0)
            threads, rss = server.num_threads(), server.memory_info().rss
            counts_under, under = _visits(url, token, args.visits, args.gap)
        finally:
            driver.terminate()
            driver.wait(30)
        return {
            "figure": "a legitimate client's visit (connect, put, get, disconnect) while slow clients hold connections",
            "slow_clients": args.clients,
            "max_connections": args.max_connections,
            "alone": {**counts, **alone},
            "under_attack": {**counts_under, **under},
            "server_threads_under_attack": threads,
            "server_rss_mib_under_attack": round(rss / 2**20, 1),
        }
    finally:
        proc.terminate()
        proc.wait(60)


def greedy(args: argparse.Namespace) -> dict:
    import psutil

    from sweepq.net import protocol as P

    where = tempfile.mkdtemp(prefix="sqh")
    data = os.path.join(where, "q")
    proc, _url, _token = _serve(data, *args.serve_arg)
    try:
        server = psutil.Process(proc.pid)
        path = os.path.join(data, "sweepq.sock")
        time.sleep(1.0)
        before = server.memory_info().rss
        socks = []
        max_frame = 0
        for _ in range(args.clients):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(P.request(P.HELLO, {"pid": 1, "client": "greedy", "cancel": False}))
            n = P.HEADER.unpack(s.recv(P.HEADER_LEN, socket.MSG_WAITALL))[0]
            reply = P.unpack(s.recv(n, socket.MSG_WAITALL))
            max_frame = reply["max_frame"]
            s.sendall(P.HEADER.pack(max_frame, P.VERSION, P.PUT))  # the largest frame, claimed
            socks.append(s)
        chunk = b"\x00" * 65536
        for s in socks:
            s.setblocking(False)
        sent = [0] * len(socks)
        deadline = time.monotonic() + 60
        while args.body and min(sent) < args.body and time.monotonic() < deadline:
            for i, s in enumerate(socks):
                if sent[i] < args.body:
                    with contextlib.suppress(BlockingIOError, OSError):
                        sent[i] += s.send(chunk[: min(len(chunk), args.body - sent[i])])
            time.sleep(0.001)
        time.sleep(args.hold)
        holding = server.memory_info().rss
        peak = holding
        for s in socks:
            s.close()
        time.sleep(1.0)
        after = server.memory_info().rss
        return {
            "figure": "server RSS with connections each claiming the largest frame",
            "connections": args.clients,
            "claimed_bytes_each": max_frame,
            "body_bytes_sent_each": min(sent) if sent else 0,
            "rss_mib_before": round(before / 2**20, 1),
            "rss_mib_holding": round(peak / 2**20, 1),
            "rss_mib_after_they_go": round(after / 2**20, 1),
            "rise_mib": round((peak - before) / 2**20, 1),
        }
    finally:
        proc.terminate()
        proc.wait(60)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sweepq.bench.hostile", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    s = sub.add_parser("slow", help="a legitimate client's latency while slow clients hold connections")
    s.add_argument("--clients", type=int, default=1000, help="slow clients (default 1000)")
    s.add_argument("--max-connections", type=int, default=20, help="the server's --max-connections (default 20)")
    s.add_argument("--visits", type=int, default=400, help="visits of the legitimate client per phase")
    s.add_argument("--gap", type=float, default=0.02, help="seconds between two visits")
    s.add_argument("--serve-arg", action="append", default=[], help="one more argument for sweepq serve")
    g = sub.add_parser("greedy", help="server memory while connections claim the largest frame")
    g.add_argument("--clients", type=int, default=100, help="greedy connections (default 100)")
    g.add_argument("--body", type=int, default=0, help="bytes of the claimed frame each one sends (default 0)")
    g.add_argument("--hold", type=float, default=3.0, help="seconds they hold before the measurement")
    g.add_argument("--serve-arg", action="append", default=[], help="one more argument for sweepq serve")
    args = p.parse_args(argv)
    print(json.dumps(slow(args) if args.what == "slow" else greedy(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
