"""What Spark's JVM runs to start the Python daemon on a session with a pre-started one: a
script of the standard library alone, run by the workers' interpreter with ``-I -S``.

The JVM starts its daemon as ``<workers' python> -m sweepq.pipeline.daemon``: a full start of
the interpreter (its site, sweepq's editable finder, Spark's pyspark.zip and py4j zip first on
``PYTHONPATH``) only for that process to hand its pipes over to the daemon pre-started by the
driver (pipeline/prestart.py). On this machine that start took 0.06 to 0.09 s of CPU and 0.14
to 0.22 s, on the path of the first job's first task; an interpreter started with ``-I -S``
that imports the standard library's socket and json alone, 0.02 s of CPU. So on a session
that pre-starts the daemon, the workers' interpreter is this script (written once into the
user's cache directory, its first line ``#!<interpreter> -IS``, by :func:`script`). Run with
``-m sweepq.pipeline.daemon`` and the pre-started daemon's socket in ``SWEEPQ_DAEMON_SOCKET``,
it hands over (:func:`hand_over`) and stands in for the daemon (:func:`stand_in`); run any
other way, or refused, it runs the interpreter as asked (``exec``, the same process and
pipes), without the socket's variable, as Spark would have.

The hand-over and the stand-in are the same functions for the daemon module run by the
interpreter itself (pipeline/daemon.py), which sends the ``sys.path`` it has; this script's
is not the one the daemon would have (``-I -S``), so it sends none and the pre-started daemon
works it out from the request's directory and ``PYTHONPATH`` (prestart.py ``as_started``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import sys

ENV = "SWEEPQ_DAEMON_SOCKET"
MODULE = "sweepq.pipeline.daemon"
# How long a daemon the JVM started waits for the pre-started one to take it (it may still
# be loading its modules under load); past it, it runs the daemon itself.
CLAIM_TIMEOUT_S = 120.0


def hand_over(path: str, request: dict, timeout: float = CLAIM_TIMEOUT_S) -> int | None:
    """Give this process's standard streams, and ``request`` (its interpreter, path or None,
    environment, arguments and directory), to the pre-started daemon listening at ``path``.
    Its pid when it took them (it is the daemon now), None when there is none or it refused
    (this process is to run the daemon itself)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            socket.send_fds(s, [json.dumps(request).encode()], [0, 1, 2])
            s.shutdown(socket.SHUT_WR)
            reply = b"".join(iter(lambda: s.recv(4096), b""))
    except OSError:  # none there (it ended, or was claimed), or it did not answer in time
        return None
    if not reply.startswith(b"ok "):
        if reply:
            print(f"sweepq: the pre-started daemon refused: {reply.decode(errors='replace')}", file=sys.stderr)
        return None
    return int(reply.split()[1])


def stand_in(pid: int) -> None:
    """What the process the JVM started does once the daemon ``pid`` took over: be the JVM's
    handle on it (pass a SIGTERM on) until it ends. Its own standard streams point nowhere
    (the daemon has the JVM's pipes). Call it with SIGTERM blocked since before the hand-over."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)

    def forward(signum, _frame) -> None:
        with contextlib.suppress(OSError):  # it ended meanwhile
            os.kill(pid, signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon has its own handler
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # one sent meanwhile is passed on now
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # it ended already
        return
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while not poller.poll():  # readable when the process ends
        pass
    os.close(fd)


def script(interpreter: str) -> str:
    """The launcher's text for ``interpreter``: this module run as a script by it."""
    with open(__file__, encoding="utf-8") as f:
        return f"#!{interpreter} -IS\n" + f.read()


def main(args: list[str]) -> None:
    """The script's entry (``args``: its arguments, ``-m sweepq.pipeline.daemon`` from the JVM):
    hand over and stand in, or run the interpreter as asked (the module docstring)."""
    path = os.environ.get(ENV)
    if path and args[:2] == ["-m", MODULE]:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # passed on once handed over
        request = {"executable": sys.executable, "path": None, "env": dict(os.environ), "argv": None}
        request.update(args=args[2:], cwd=os.getcwd())
        pid = hand_over(path, request)
        if pid is not None:
            stand_in(pid)
            sys.exit(0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    env = {k: v for k, v in os.environ.items() if k != ENV}
    os.execve(sys.executable, [sys.executable, *args], env)


if __name__ == "__main__":
    main(sys.argv[1:])
