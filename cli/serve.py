"""``sweepq serve`` (a queue manager as a server) and ``sweepq status`` (DISPLAY QSTATUS and
DISPLAY CONN of a running one); ``sweepq inspect --server URL`` prints the same view.

``serve`` runs in the foreground: one log line per connection event on stderr; SIGTERM or
Ctrl-C stops accepting, backs out every client's unit of work, closes the store cleanly and
exits 0. It keeps its socket and tokens in the data directory (made 0700):
``sweepq.sock`` (0600), ``sweepq.token`` (TCP clients present it) and ``sweepq.admin-token``
(define, alter and delete over a connection need it), each 0600.

Exit codes: 0 done, 1 an MQ call failed (one line naming the reason), 2 a usage error.
cli/main.py lists :func:`register` among its commands.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
import time

SOCKET_FILE = "sweepq.sock"


def _fail(prog: str, text: str, code: int = 1) -> int:
    print(f"{prog}: error: {' '.join(text.split())}", file=sys.stderr)
    return code


def _tls_context(cert: str | None, key: str | None):
    if cert is None:
        return None
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def _serve(args: argparse.Namespace) -> int:
    from sweepq.engine import MQError, QueueManager
    from sweepq.net import auth

    prog = "sweepq serve"
    path = args.data_dir
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return _fail(prog, f"argument --data-dir: {parent} does not exist; create it first", 2)
    if os.path.exists(path) and not os.path.isdir(path):
        return _fail(prog, f"argument --data-dir: {path} is not a directory", 2)
    if (args.tls_cert is None) != (args.tls_key is None):
        return _fail(prog, "give --tls-cert and --tls-key together", 2)
    if args.frame_memory is not None:
        from sweepq.engine.sizes import parse_size

        try:
            args.frame_memory = parse_size(args.frame_memory, "--frame-memory", minimum=1024 * 1024)
        except MQError as e:
            return _fail(prog, f"argument --frame-memory: {e.text}", 2)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        os.chmod(path, 0o700)  # the socket's permissions are the access control: nobody else gets in
    except OSError as e:
        return _fail(prog, f"cannot use {path} as the data directory: {e.strerror or e}")
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s sweepq serve: %(message)s", stream=sys.stderr, force=True
    )
    try:
        tls = _tls_context(args.tls_cert, args.tls_key)
    except OSError as e:
        return _fail(prog, f"cannot load the TLS certificate: {e.strerror or e}", 2)
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # a socket per connection: allow them all
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        from sweepq.sweeper import SweepPolicy

        qm = QueueManager.open(path, sync=args.sync, sweep_policy=SweepPolicy(interval=args.sweep_interval))
    except MQError as e:
        return _fail(prog, str(e))
    try:
        token = args.token or os.environ.get("SWEEPQ_TOKEN") or auth.token_file(os.path.join(path, auth.TOKEN_FILE))
        admin_token = os.environ.get("SWEEPQ_ADMIN_TOKEN") or auth.token_file(os.path.join(path, auth.ADMIN_TOKEN_FILE))
        for what in qm.recovery.damaged if qm.recovery else ():
            logging.getLogger("sweepq.net").warning("recovery: %s", what)
        server = qm.serve(
            os.path.join(path, SOCKET_FILE),
            tcp=args.tcp,
            token=token,
            admin_token=admin_token,
            tls=tls,
            metrics=args.metrics,
            max_connections=args.max_connections,
            max_handles=args.max_handles,
            max_handshakes=args.max_handshakes,
            hello_timeout=args.handshake_timeout,
            frame_memory=args.frame_memory,
        )
        print(f"sweepq serve: listening on {' and '.join(server.urls)}", file=sys.stderr, flush=True)
        started = qm.channels.resume()  # every sender channel not stopped (docs/channels.md)
        if started:
            print(f"sweepq serve: started channel(s) {', '.join(started)}", file=sys.stderr, flush=True)
        if server.metrics_url:
            print(f"sweepq serve: metrics on {server.metrics_url}", file=sys.stderr, flush=True)
        while not stop.wait(0.5):
            pass
        print("sweepq serve: stopping: no new connections; backing out every unit of work", file=sys.stderr)
    except MQError as e:
        qm.close()
        return _fail(prog, str(e))
    qm.close()  # stops the server first (each client's unit of work backed out), then the store
    print("sweepq serve: stopped; the store is closed", file=sys.stderr)
    return 0


def _remote(args: argparse.Namespace):
    """A RemoteQueueManager for ``--server`` (or the data directory's socket), with the tokens
    given, in the environment, or beside a Unix socket."""
    from sweepq.net import RemoteQueueManager, auth

    url = args.server or "unix://" + os.path.abspath(os.path.join(args.data_dir, SOCKET_FILE))
    near_token, near_admin = auth.beside_socket(url)
    token = getattr(args, "token", None) or os.environ.get("SWEEPQ_TOKEN") or near_token
    admin = os.environ.get("SWEEPQ_ADMIN_TOKEN") or near_admin
    return RemoteQueueManager(url, token, admin, client="sweepq cli")


def _age(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 3600}h{s // 60 % 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def render_status(st: dict) -> str:
    """The text of ``sweepq status``: DISPLAY QSTATUS, then DISPLAY CONN."""
    now = time.time()
    lines = [f"queue manager {st['qm']} on {', '.join(st['urls'])}, up {_age(now - st['started'])}"]
    lines.append(f"  {'queue':<32} {'depth':>10} {'in memory':>10} {'swept':>10} {'input':>6} {'output':>6}")
    for q in st["queues"]:
        lines.append(
            f"  {q['name']:<32} {q['depth']:>10,} {q['in_memory']:>10,} {q['swept']:>10,} "
            f"{q['open_input']:>6} {q['open_output']:>6}"
        )
    conns = st["connections"]
    refused = f", {st['refused']} refused at the limit" if st["refused"] else ""
    lines.append(f"  {len(conns)} connection(s){refused}")
    if conns:
        lines.append(
            f"  {'conn':>6} {'from':<22} {'pid':>7} {'handles':>7} {'uncommitted':>11} {'calls':>9}  state  client"
        )
    for c in conns:
        lines.append(
            f"  {'#' + str(c['id']):>6} {c['transport'] + ' ' + c['peer']:<22} {c['pid']:>7} {c['handles']:>7} "
            f"{c['uncommitted']:>11,} {c['calls']:>9,}  {c['state']}  {c['client'] or '-'}"
        )
    if st.get("store_memory"):
        lines.append("  store memory: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in st["store_memory"].items()))
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    from sweepq.engine import MQError

    prog = "sweepq status"
    if args.server is None and args.data_dir is None:
        return _fail(prog, "give --server URL or --data-dir DIR (see 'sweepq status --help')", 2)
    try:
        with _remote(args) as remote:
            st = remote.status()
    except MQError as e:
        return _fail(prog, str(e))
    try:
        print(json.dumps(st, indent=2) if args.json else render_status(st), flush=True)
    except BrokenPipeError:  # `sweepq status | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def inspect_server(args: argparse.Namespace) -> int:
    """``sweepq inspect --server URL``: a running server's view (its status)."""
    args.data_dir = None
    return _status(args)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve`` and ``status`` to the ``sweepq`` subparsers."""
    from .args import number

    s = sub.add_parser(
        "serve",
        help="serve a data directory's queue manager to other processes (client connections)",
        description="Run the data directory's queue manager as a server, in the foreground, with the sweeper on.\n"
        "Clients connect with sweepq.client.connect(URL) or sweepq.aio.connect(URL). It listens on the Unix\n"
        "socket DIR/sweepq.sock (0600: its permissions are the access control); --tcp adds TCP, where a client\n"
        "must present the token in DIR/sweepq.token. Administration over a connection needs the token in\n"
        "DIR/sweepq.admin-token. One log line per connection event. SIGTERM or Ctrl-C stops accepting, backs\n"
        "out every client's unit of work, closes the store and exits 0.",
        epilog="examples:\n  sweepq serve --data-dir ./q\n  sweepq serve --data-dir ./q --tcp :1414 --metrics :9464\n"
        "  sweepq serve --data-dir ./q --tcp 0.0.0.0:1414 --tls-cert cert.pem --tls-key key.pem",
    )
    s.add_argument("--data-dir", required=True, metavar="DIR", help="the data directory (created 0700 if missing)")
    s.add_argument("--tcp", metavar="HOST:PORT", help="also listen on TCP (127.0.0.1 unless a host is named)")
    s.add_argument("--token", help="the token TCP clients must present (default: DIR/sweepq.token, made if missing)")
    s.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="TLS on the TCP port: the server's certificate (PEM); the Unix socket stays plain",
    )
    s.add_argument("--tls-key", metavar="FILE", help="TLS on the TCP port: its private key (PEM)")
    s.add_argument("--metrics", metavar="HOST:PORT", help="Prometheus text metrics over HTTP at /metrics")
    s.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the queue manager's sync option")
    s.add_argument(
        "--sweep-interval",
        type=number(float, 0, 3600, low_open=True, hint="pass seconds, e.g. 5"),
        default=5.0,
        metavar="SECONDS",
        help="the sweeper's interval in seconds",
    )
    limits = (
        # (option, default, what N counts, help)
        (
            "--max-connections",
            4096,
            "connections",
            "connections held at once (counted after their handshake); "
            "more are refused with MQRC_MAX_CONNS_LIMIT_REACHED (2025)",
        ),
        (
            "--max-handles",
            1024,
            "handles",
            "handles per connection; more are refused with MQRC_HANDLE_NOT_AVAILABLE (2017)",
        ),
        (
            "--max-handshakes",
            1024,
            "connections",
            "connections still in their handshake, apart from --max-connections; one more closes the oldest",
        ),
    )
    for option, default, what, help_ in limits:
        kind = number(int, 1, 1_000_000, hint=f"pass a number of {what}")
        s.add_argument(option, type=kind, default=default, metavar="N", help=help_)
    s.add_argument(
        "--handshake-timeout",
        type=number(float, 0, 3600, low_open=True, hint="pass seconds, e.g. 10"),
        default=10.0,
        metavar="SECONDS",
        help="a connection's whole handshake (TLS, then HELLO) must be done within SECONDS of its accept",
    )
    s.add_argument(
        "--frame-memory",
        default=None,
        metavar="SIZE",
        help="memory for large frames in flight, for the whole server (e.g. 256MiB; default twice the "
        "largest frame); past it a frame waits, then is dropped with MQRC_STORAGE_NOT_AVAILABLE (2071)",
    )
    s.set_defaults(func=_serve)

    t = sub.add_parser(
        "status",
        help="a running server's queues and connections (MQ's DISPLAY QSTATUS and DISPLAY CONN)",
        description="Ask a running server for every queue (depth, messages in memory, swept, handles open for\n"
        "input and output) and every connection (where from, process id, handles, its unit of work).",
        epilog="examples:\n  sweepq status --data-dir ./q\n  sweepq status --server tcp://127.0.0.1:1414 --json",
    )
    add_server_options(t)
    t.add_argument("--data-dir", metavar="DIR", help="the server's data directory (its socket DIR/sweepq.sock)")
    t.add_argument("--json", action="store_true", help="print as JSON")
    t.set_defaults(func=_status)


def add_server_options(p: argparse.ArgumentParser) -> None:
    """``--server URL`` and ``--token`` (also read from SWEEPQ_TOKEN)."""
    p.add_argument(
        "--server",
        metavar="URL",
        help="a running server: unix:///DIR/sweepq.sock, tcp://HOST:PORT or tls://HOST:PORT",
    )
    p.add_argument("--token", help="the server's token for TCP (default: $SWEEPQ_TOKEN, or beside a Unix socket)")
