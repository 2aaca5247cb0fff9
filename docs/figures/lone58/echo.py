"""What a server's wake costs a lone client on this machine, without sweepq: an echo server
over a Unix socket, 1,100 B a message, the client in this process on CPU 0 and the server in
a child on CPU 1, served three ways, alternating: a blocking ``recv`` (a thread per
connection), ``select.poll`` then ``recv``, and ``select.epoll`` then ``recv`` (a loop). Each
line: microseconds a round trip (median of ``ROUNDS`` rounds of ``N`` round trips).

Usage: python docs/figures/lone58/echo.py N ROUNDS > docs/figures/lone58/echo.txt
"""

from __future__ import annotations

import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time

WAYS = ("recv", "poll", "epoll")
MESSAGE = b"x" * 1100


def serve(c: socket.socket, way: str) -> None:
    """Echo until the client closes."""
    if way == "recv":
        while d := c.recv(4096):
            c.sendall(d)
        return
    c.setblocking(False)
    if way == "poll":
        p = select.poll()
        p.register(c.fileno(), select.POLLIN)
        wait = p.poll
    else:
        e = select.epoll()
        e.register(c.fileno(), select.EPOLLIN)
        wait = e.poll
    while True:
        wait()
        d = c.recv(4096)
        if not d:
            return
        c.setblocking(True)
        c.sendall(d)
        c.setblocking(False)


def one(way: str, n: int) -> float:
    """Seconds a round trip, ``n`` of them after a warm-up, with a fresh server."""
    path = os.path.join(tempfile.mkdtemp(), "echo.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen()
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {1})
        c, _ = srv.accept()
        serve(c, way)
        os._exit(0)
    cl = socket.socket(socket.AF_UNIX)
    cl.connect(path)
    for _ in range(1000):
        cl.sendall(MESSAGE)
        cl.recv(4096)
    t = time.perf_counter()
    for _ in range(n):
        cl.sendall(MESSAGE)
        cl.recv(4096)
    dt = time.perf_counter() - t
    cl.close()
    os.waitpid(pid, 0)
    srv.close()
    os.unlink(path)
    return dt / n


def main() -> None:
    n, rounds = int(sys.argv[1]), int(sys.argv[2])
    os.sched_setaffinity(0, {0})
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# python docs/figures/lone58/echo.py {n} {rounds}; commit {head}; {when}; load {os.getloadavg()[0]:.2f}")
    times: dict[str, list[float]] = {w: [] for w in WAYS}
    for _ in range(rounds):
        for way in WAYS:
            times[way].append(one(way, n))
    for way in WAYS:
        t = times[way]
        spread = f"rounds {min(t) * 1e6:.1f}-{max(t) * 1e6:.1f}"
        print(f"{way:6}: {statistics.median(t) * 1e6:5.1f} us a round trip ({spread})")


if __name__ == "__main__":
    main()
