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

from .advice import for_the_command_line
from .args import Usage as _Usage

SOCKET_FILE = "sweepq.sock"


def _fail(prog: str, text: str, code: int = 1) -> int:
    print(f"{prog}: error: {' '.join(for_the_command_line(text).split())}", file=sys.stderr)
    return code


def _tls_context(cert: str | None, key: str | None):
    if cert is None:
        return None
    import ssl

    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx


def _serve(args: argparse.Namespace) -> int:
    from sweepq.engine import DurabilitySettings, MemorySettings, MQError, QueueManager, SweeperSettings
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
        given = given_token(args.token, args.token_file, "SWEEPQ_TOKEN", "--token-file")
    except _Usage as e:
        return _fail(prog, str(e), 2)
    try:
        from sweepq.sweeper import SweepPolicy

        qm = QueueManager.open(
            path,
            sweeping=SweeperSettings(policy=SweepPolicy(interval=args.sweep_interval)),
            durability=DurabilitySettings(sync=args.sync),
            memory=MemorySettings(budget=args.memory_budget, counts=args.budget_counts if args.memory_budget else ""),
        )
    except MQError as e:
        return _fail(prog, str(e))
    try:
        token = given or auth.token_file(os.path.join(path, auth.TOKEN_FILE))
        admin_token = os.environ.get("SWEEPQ_ADMIN_TOKEN") or auth.token_file(os.path.join(path, auth.ADMIN_TOKEN_FILE))
        for what in qm.recovery.damaged if qm.recovery else ():
            logging.getLogger("sweepq.net").warning("recovery: %s", what)
        if args.memory_policy is not None:
            _set_memory_policy(qm, args.memory_policy)
        server = qm.serve(
            os.path.join(path, SOCKET_FILE),
            tcp=args.tcp,
            token=token,
            admin_token=admin_token,
            tls=tls,
            metrics=args.metrics,
            console=args.console,
            max_connections=args.max_connections,
            max_handles=args.max_handles,
            max_handshakes=args.max_handshakes,
            hello_timeout=args.handshake_timeout,
            frame_timeout=args.frame_timeout,
            idle_timeout=args.idle_timeout,
            frame_memory=args.frame_memory,
        )
        print(f"sweepq serve: listening on {' and '.join(server.urls)}", file=sys.stderr, flush=True)
        started = qm.channels.resume()  # every sender channel not stopped (docs/channels.md)
        if started:
            print(f"sweepq serve: started channel(s) {', '.join(started)}", file=sys.stderr, flush=True)
        if server.metrics_url:
            print(f"sweepq serve: metrics on {server.metrics_url}", file=sys.stderr, flush=True)
        if server.console_url:
            where = os.path.join(path, auth.TOKEN_FILE) if not given else "the token given"
            print(
                f"sweepq serve: console on {server.console_url} (open it with ?token=TOKEN, {where}; "
                f"actions need the admin token, {os.path.join(path, auth.ADMIN_TOKEN_FILE)})",
                file=sys.stderr,
                flush=True,
            )
        if qm.budget is not None:
            from sweepq.engine.sizes import format_size

            policies = ", ".join(f"{k} {v}" for k, v in sorted(_policies(qm).items()))
            print(
                f"sweepq serve: memory budget {format_size(qm.budget.budget)}; "
                + (f"queues' policies: {policies}" if policies else "no queue yet (a new queue's memory policy: page)"),
                file=sys.stderr,
                flush=True,
            )
        while not stop.wait(0.5):
            pass
        print("sweepq serve: stopping: no new connections; backing out every unit of work", file=sys.stderr)
    except MQError as e:
        qm.close()
        return _fail(prog, str(e))
    qm.close()  # stops the server first (each client's unit of work backed out), then the store
    print("sweepq serve: stopped; the store is closed", file=sys.stderr)
    return 0


def _set_memory_policy(qm, policy: str) -> None:
    """``serve --memory-policy``: every local queue's memory_policy becomes ``policy`` (an
    ALTER of each, kept in the data directory, as ``sweepq alter QUEUE --memory-policy``)."""
    from sweepq.engine import MemoryPolicy

    wanted = MemoryPolicy[policy.upper()]
    for name in qm.queue_names():
        q = qm.queue_named(name)
        if q is not None and q.attrs.memory_policy != wanted:
            qm.alter_queue(name, memory_policy=wanted)


def _policies(qm) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in qm.queue_names():
        q = qm.queue_named(name)
        if q is not None:
            out[q.attrs.memory_policy.name.lower()] = out.get(q.attrs.memory_policy.name.lower(), 0) + 1
    return out


def given_token(value: str | None, path: str | None, env: str, option: str) -> str | None:
    """A token given on the command line (``value``), in a file (``path``) or in the
    environment variable ``env``, in that order; None when none is given.

    :raises _Usage: the file cannot be read or is empty."""
    if value:
        return value
    if path is not None:
        from sweepq.net import auth

        token = auth.read_token(path)
        if token is None:
            raise _Usage(f"argument {option}: cannot read a token from {path}")
        return token
    return os.environ.get(env) or None


def remote(args: argparse.Namespace):
    """A RemoteQueueManager for ``--server`` (or the data directory's socket). The tokens, the
    same way for every command (add_server_options): ``--token`` / ``--token-file`` /
    $SWEEPQ_TOKEN, ``--admin-token`` / ``--admin-token-file`` / $SWEEPQ_ADMIN_TOKEN, else
    the files beside a Unix socket; ``--cafile`` checks a tls:// server's certificate.

    :raises _Usage: a token file cannot be read; a --cafile that is not there."""
    from sweepq.net import RemoteQueueManager, auth

    url = args.server or "unix://" + os.path.abspath(os.path.join(args.data_dir, SOCKET_FILE))
    near_token, near_admin = auth.beside_socket(url)
    get = getattr
    token = given_token(get(args, "token", None), get(args, "token_file", None), "SWEEPQ_TOKEN", "--token-file")
    admin = given_token(
        get(args, "admin_token", None), get(args, "admin_token_file", None), "SWEEPQ_ADMIN_TOKEN", "--admin-token-file"
    )
    cafile = get(args, "cafile", None)
    if cafile is not None and not os.path.isfile(cafile):
        raise _Usage(f"argument --cafile: {cafile} is not a file; pass the CA certificates (PEM) of the server")
    return RemoteQueueManager(url, token or near_token, admin or near_admin, client="sweepq cli", cafile=cafile)


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


def _rate(now: dict, before: dict | None, key: str, seconds: float) -> str:
    if before is None or seconds <= 0:
        return "-"
    return f"{(now[key] - before[key]) / seconds:+,.0f}"


def _calls_since(st: dict, before: dict) -> int:
    """The calls made since the frame ``before``: by each connection in both frames, plus all of
    a new one's. A connection gone since takes its count away from a sum of the frames, which
    would be negative; its calls since ``before`` are unknown and not counted."""
    then = {c["id"]: c["calls"] for c in before["connections"]}
    return sum(max(0, c["calls"] - then.get(c["id"], 0)) for c in st["connections"])


def render_watch(st: dict, before: dict | None, seconds: float) -> str:
    """One frame of ``sweepq status --watch``: each queue's depth, in memory, swept and their
    rates per second since the frame ``before`` (``seconds`` ago; "-" for the first)."""
    prev = {q["name"]: q for q in before["queues"]} if before else {}
    rate = f"{_calls_since(st, before) / seconds:,.0f} calls/s" if before is not None and seconds > 0 else ""
    head = f"queue manager {st['qm']}: {len(st['connections'])} connection(s) {rate}".rstrip()
    lines = [head, f"  {'queue':<32} {'depth':>10} {'/s':>8} {'in memory':>10} {'swept':>10} {'/s':>8}"]
    for q in st["queues"]:
        p = prev.get(q["name"])
        lines.append(
            f"  {q['name']:<32} {q['depth']:>10,} {_rate(q, p, 'depth', seconds):>8} {q['in_memory']:>10,} "
            f"{q['swept']:>10,} {_rate(q, p, 'swept', seconds):>8}"
        )
    return "\n".join(lines)


def _watch(remote, args: argparse.Namespace) -> int:
    """``status --watch``: a frame every --interval seconds (a live table on a terminal, one
    frame after another otherwise) until --count frames (exit 0), or Ctrl-C (exit 130, as for
    every interrupted command: docs/cli.md's exit codes)."""
    before, t_before = None, 0.0
    frames = 0
    live = None
    if sys.stdout.isatty():
        from rich.console import Console
        from rich.live import Live

        live = Live(console=Console(), auto_refresh=False, transient=False)
        live.start()
    try:
        while True:
            st, t = remote.status(), time.monotonic()
            text = render_watch(st, before, t - t_before)
            if live is not None:
                from rich.text import Text

                live.update(Text(text), refresh=True)
            else:
                print(text + "\n", flush=True)
            before, t_before = st, t
            frames += 1
            if args.count is not None and frames >= args.count:
                return 0
            time.sleep(args.interval)
    except KeyboardInterrupt:
        return 130  # 128 + SIGINT, as every sweepq command interrupted (cli/main.py EXIT_INTERRUPTED)
    finally:
        if live is not None:
            live.stop()


def _status(args: argparse.Namespace) -> int:
    from sweepq.engine import MQError

    prog = "sweepq status"
    if args.server is None and args.data_dir is None:
        return _fail(prog, "give --server URL or --data-dir DIR (see 'sweepq status --help')", 2)
    if not getattr(args, "watch", False) and (getattr(args, "count", None) is not None):
        return _fail(prog, "--count counts the frames of --watch: pass --watch too", 2)
    try:
        with remote(args) as server:
            if getattr(args, "watch", False):
                return _watch(server, args)
            st = server.status()
    except _Usage as e:
        return _fail(prog, str(e), 2)
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
    args.watch, args.count = False, None
    return _status(args)


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``serve`` and ``status`` to the ``sweepq`` subparsers."""
    from .args import address, memory_size, number

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
    s.add_argument(
        "--tcp", type=address, metavar="HOST:PORT", help="also listen on TCP (127.0.0.1 unless a host is named)"
    )
    s.add_argument(
        "--token",
        help="the token TCP clients must present (default: $SWEEPQ_TOKEN, else DIR/sweepq.token, made if missing)",
    )
    s.add_argument("--token-file", metavar="FILE", help="read --token from FILE")
    s.add_argument(
        "--tls-cert",
        metavar="FILE",
        help="TLS on the TCP port: the server's certificate (PEM); the Unix socket stays plain",
    )
    s.add_argument("--tls-key", metavar="FILE", help="TLS on the TCP port: its private key (PEM)")
    s.add_argument("--metrics", type=address, metavar="HOST:PORT", help="Prometheus text metrics over HTTP at /metrics")
    s.add_argument(
        "--console",
        type=address,
        metavar="HOST:PORT",
        help="the web console (docs/console.md) over HTTP, HTTPS with --tls-cert; it needs the token, its "
        "actions the admin token",
    )
    s.add_argument(
        "--memory-budget",
        type=memory_size,
        default=0,
        metavar="SIZE",
        help="bound what the queues and the store hold in memory: 100MB, 512MiB or bytes; beyond it the sweeper "
        "sweeps beyond its rule (MemorySettings(budget=)); 0: none",
    )
    s.add_argument(
        "--budget-counts",
        choices=("resident", "held"),
        default="resident",
        help="what --memory-budget counts (MemorySettings.counts): resident, the process's resident "
        "memory above its baseline at start, what the OS and a container's limit see (the default, as for "
        "Queue and the demo); held, the messages in memory and RocksDB's memtables and cache",
    )
    s.add_argument(
        "--memory-policy",
        choices=("page", "block", "fail"),
        help="set every queue's memory_policy (kept in the data directory): what a put does once the budget is "
        "reached: page writes new messages out, block waits for room, fail refuses (2071) (default: each "
        "queue's own, page unless altered)",
    )
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
        "--frame-timeout",
        type=number(float, 0, 3600, low_open=True, hint="pass seconds, e.g. 30"),
        default=30.0,
        metavar="SECONDS",
        help="after the handshake, each frame's bytes must all come within SECONDS of its first, however spread",
    )
    s.add_argument(
        "--idle-timeout",
        type=number(float, 0, 30 * 86400, low_open=True, hint="pass seconds, e.g. 600"),
        default=None,
        metavar="SECONDS",
        help="close a connection idle between calls for SECONDS (a get waiting in the server is not idle; "
        "default: no limit)",
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
        epilog="examples:\n  sweepq status --data-dir ./q\n  sweepq status --server tcp://127.0.0.1:1414 --json\n"
        "  sweepq status --data-dir ./q --watch --interval 1",
    )
    add_server_options(t)
    t.add_argument("--data-dir", metavar="DIR", help="the server's data directory (its socket DIR/sweepq.sock)")
    out = t.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print as JSON")
    out.add_argument(
        "--watch",
        action="store_true",
        help="a live table of depths, in memory, swept and their rates, every --interval seconds; Ctrl-C ends it",
    )
    t.add_argument(
        "--interval",
        type=number(float, 0.05, 3600, hint="pass seconds, e.g. 2"),
        default=2.0,
        metavar="SECONDS",
        help="seconds between the frames of --watch",
    )
    t.add_argument(
        "--count",
        type=number(int, 1, hint="pass how many frames, at least 1"),
        metavar="N",
        help="with --watch: stop after N frames (default: until Ctrl-C)",
    )
    t.set_defaults(func=_status)


def add_server_options(p: argparse.ArgumentParser, where=None) -> None:
    """The options of every command that reaches a server, the same everywhere: ``--server``
    (into the group ``where`` when given, e.g. exclusive with --data-dir), ``--token`` /
    ``--token-file`` (else $SWEEPQ_TOKEN), ``--admin-token`` / ``--admin-token-file`` (else
    $SWEEPQ_ADMIN_TOKEN), both else read beside a Unix socket, and ``--cafile``."""
    (where or p).add_argument(
        "--server",
        metavar="URL",
        help="a running 'sweepq serve': unix:///DIR/sweepq.sock, tcp://HOST:PORT or tls://HOST:PORT",
    )
    g = p.add_argument_group("reaching a server (--server)")
    g.add_argument("--token", help="the server's token for TCP (default: $SWEEPQ_TOKEN, or beside a Unix socket)")
    g.add_argument("--token-file", metavar="FILE", help="read the token from FILE (the server's DIR/sweepq.token)")
    g.add_argument(
        "--admin-token", help="the admin token, for changes (default: $SWEEPQ_ADMIN_TOKEN, or beside a Unix socket)"
    )
    g.add_argument("--admin-token-file", metavar="FILE", help="read the admin token from FILE (DIR/sweepq.admin-token)")
    g.add_argument(
        "--cafile",
        metavar="FILE",
        help="CA certificates (PEM) to check a tls:// server's certificate (default: the system's)",
    )
