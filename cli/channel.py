"""``sweepq channel``: channels between queue managers (docs/channels.md), MQ's DEFINE, ALTER
and DELETE CHANNEL, START, STOP, DISPLAY CHSTATUS, RESET and RESOLVE CHANNEL, and ALTER QMGR
for the queue manager's name, dead-letter queue and default transmission queue.

Each works on a data directory (``--data-dir``, when no server runs there) or on a running
server (``--server URL``, with its admin token for changes), through the same actions
(net/channels/admin.py). A channel runs in the process that serves its queue manager, so
``start`` on a data directory only marks it to start: ``sweepq serve`` starts every sender
channel not stopped. Remote queues and transmission queues are ``sweepq define`` options
(``--remote-qmgr``, ``--usage xmitq``).

Exit codes: 0 done, 1 an MQ call failed (one line naming the reason), 2 a usage error.
cli/main.py lists :func:`register` among its commands.
"""

from __future__ import annotations

import argparse
import json

from .args import number
from .data import _check_data_dir, _opened, _run, _Usage
from .serve import add_server_options

_DEFINE_OPTIONS = (
    # (option, attribute, type, help)
    ("--conname", "conname", str, "a sender's partner: tcp://HOST:PORT, tls://HOST:PORT or unix:///PATH (CONNAME)"),
    ("--xmitq", "xmit_queue", str, "a sender's transmission queue (XMITQ)"),
    ("--batch-size", "batch_size", number(int, 1, 9999), "messages per batch (BATCHSZ; default 50)"),
    ("--batch-interval", "batch_interval", number(int, 0), "ms a batch waits for more messages (BATCHINT; 0)"),
    ("--heartbeat", "heartbeat", number(float, 0), "seconds between heartbeats of an idle channel (HBINT; 300)"),
    ("--disconnect-interval", "disconnect_interval", number(float, 0), "seconds idle before it ends (DISCINT; 6000)"),
    ("--short-retry", "short_retry", number(int, 0), "quick retries (SHORTRTY; 10)"),
    ("--short-interval", "short_interval", number(float, 0), "seconds between quick retries (SHORTTMR; 60)"),
    ("--long-retry", "long_retry", number(int, 0), "slow retries after them (LONGRTY; 999999999)"),
    ("--long-interval", "long_interval", number(float, 0), "seconds between slow retries (LONGTMR; 1200)"),
    ("--np-speed", "np_speed", str.upper, "FAST: non-persistent messages outside the batch (NPMSPEED; FAST)"),
    ("--partner-token", "partner_token", str, "the partner server's token (a tcp:// or tls:// conname)"),
    ("--partner-cafile", "partner_cafile", str, "CA certificates to check a tls:// partner's certificate"),
)


def _act(target, action: str, name: str | None, /, **kw):
    """An administration action on a data directory's queue manager or a running server
    (``kw`` its arguments: ``resolve`` takes one named ``action``, hence positional-only)."""
    from sweepq.net.channels import dq_admin

    if hasattr(target, "dq_admin"):  # a RemoteQueueManager: over the connection
        return target.dq_admin(action, name, **kw)
    if action == "start":  # nothing serves it here: it starts when the directory is served
        action = "enable"
    return dq_admin(target, True, action, name, kw)


# The channel attributes whose options say "partner", so that --token and --cafile mean the
# server the command reaches, as on every other command (cli/serve.py add_server_options).
_PARTNER = {"partner_token": "token", "partner_cafile": "cafile"}


def _attributes(args: argparse.Namespace) -> dict:
    out = {
        _PARTNER.get(attr, attr): getattr(args, attr)
        for _, attr, _, _ in _DEFINE_OPTIONS
        if getattr(args, attr) is not None
    }
    if args.partner_token_file is not None:
        from sweepq.net import auth

        token = auth.read_token(args.partner_token_file)
        if token is None:
            raise _Usage(f"argument --partner-token-file: cannot read a token from {args.partner_token_file}")
        out["token"] = token
    if getattr(args, "type", None):
        out["type"] = args.type.upper()
    return out


def _show(args: argparse.Namespace, what: str, value) -> None:
    if args.json:
        print(json.dumps(value, indent=2))
        return
    print(what)
    for k, v in (value or {}).items():
        if k == "token" and v:
            v = "(set)"
        print(f"  {k}: {v}")


def _define(args: argparse.Namespace) -> int:
    _check_data_dir(args.data_dir, create=True)
    with _opened(args.data_dir, "sweepq channel define", server=args) as qm:
        d = _act(qm, "define_channel", args.name, **_attributes(args))
    _show(args, f"defined channel {args.name} in {args.data_dir or args.server}", d)
    return 0


def _alter(args: argparse.Namespace) -> int:
    with _opened(args.data_dir, "sweepq channel alter", server=args) as qm:
        d = _act(qm, "alter_channel", args.name, **_attributes(args))
    _show(args, f"altered channel {args.name}", d)
    return 0


def _delete(args: argparse.Namespace) -> int:
    with _opened(args.data_dir, "sweepq channel delete", server=args) as qm:
        _act(qm, "delete_channel", args.name)
    print(f"deleted channel {args.name}")
    return 0


def _control(action: str, said: str):
    def body(args: argparse.Namespace) -> int:
        kw = {}
        if action == "reset":
            kw["seq"] = args.seq
        if action == "resolve":
            kw["action"] = args.action
        with _opened(args.data_dir, f"sweepq channel {action}", server=args) as qm:
            st = _act(qm, action, args.name, **kw)
        if action == "start" and args.server is None:
            said_here = "will start when the queue manager is served (sweepq serve --data-dir ...)"
            print(f"channel {args.name} {said_here}")
        else:
            print(f"channel {args.name} {said}")
        print(render_status([st]))
        return 0

    return body


def render_status(rows: list[dict]) -> str:
    """DISPLAY CHSTATUS as a table, then what each stopped or in-doubt channel says."""
    head = f"  {'channel':<20} {'type':<8} {'status':<9} {'seq':>9} {'msgs':>9} {'batches':>8} {'xmitq depth':>11}"
    lines = [head + "  partner"]
    for r in rows:
        partner = r.get("partner") or r.get("conname") or "-"
        depth = r.get("xmit_depth", "-")
        lines.append(
            f"  {r['name']:<20} {r['type']:<8} {r['status']:<9} {r['seq']:>9,} {r['messages']:>9,} "
            f"{r['batches']:>8,} {depth!s:>11}  {partner}"
        )
        if r.get("indoubt"):
            lines.append(
                f"    in doubt: batch {r['indoubt_luwid']} of {r['indoubt_messages']} message(s) up to "
                f"sequence number {r['indoubt_seq']} (resolved at the next start, or: sweepq channel resolve)"
            )
        if r.get("why"):
            lines.append(f"    {r['status'].lower()}: {' '.join(str(r['why']).split())}")
    return "\n".join(lines)


def _status(args: argparse.Namespace) -> int:
    with _opened(args.data_dir, "sweepq channel status", server=args) as qm:
        rows = _act(qm, "status", args.name)
    print(json.dumps(rows, indent=2) if args.json else render_status(rows))
    return 0


def _qmgr(args: argparse.Namespace) -> int:
    changes = {
        k: v for k, v in (("dead_letter_queue", args.dlq), ("default_xmit_queue", args.default_xmitq)) if v is not None
    }
    options = {"name": args.name} if args.name and args.server is None else {}
    _check_data_dir(args.data_dir, create=True)
    with _opened(args.data_dir, "sweepq channel qmgr", server=args, **options) as qm:
        attrs = _act(qm, "alter_qmgr", None, **changes) if changes else _act(qm, "objects", None)["qmgr"]
    _show(args, f"queue manager {attrs['name']}", attrs)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``channel`` (with its actions) to the ``sweepq`` subparsers."""
    c = sub.add_parser(
        "channel",
        help="channels between queue managers: define, start, stop, status, reset, resolve",
        description="Channels move messages from a transmission queue of one queue manager to another, in\n"
        "batches, exactly once for persistent messages (docs/channels.md). Define a sender on the queue\n"
        "manager that sends and a receiver of the same name on its partner, which must be served\n"
        "('sweepq serve --tcp ...'); 'sweepq define' defines remote queues and transmission queues.",
        epilog="examples:\n"
        "  sweepq channel qmgr --data-dir ./qm2 --name QM2 --dlq DEAD.LETTERS\n"
        "  sweepq channel define QM1.QM2 --type receiver --data-dir ./qm2\n"
        "  sweepq define QM2 --data-dir ./qm1 --usage xmitq\n"
        "  sweepq define ORDERS --data-dir ./qm1 --remote-qmgr QM2 --remote-queue ORDERS\n"
        "  sweepq channel define QM1.QM2 --data-dir ./qm1 --conname tcp://127.0.0.1:1415 --xmitq QM2 \\\n"
        "      --partner-token T\n"
        "  sweepq channel start QM1.QM2 --server unix://$PWD/qm1/sweepq.sock\n"
        "  sweepq channel status --server unix://$PWD/qm1/sweepq.sock",
    )
    actions = c.add_subparsers(dest="channel_action", metavar="ACTION", title="actions", required=True)

    def action(name: str, help_: str, body, with_name: bool = True) -> argparse.ArgumentParser:
        p = actions.add_parser(name, help=help_, description=help_)
        if with_name:
            p.add_argument("name", metavar="CHANNEL", help="the channel's name (1 to 20 of A-Z a-z 0-9 . _ / %%)")
        where = p.add_mutually_exclusive_group()
        where.add_argument("--data-dir", metavar="DIR", help="the queue manager's data directory (no server running)")
        add_server_options(p, where)  # a running 'sweepq serve' (its admin token for changes)
        p.set_defaults(func=_run(f"sweepq channel {name}", body))
        return p

    def definition(p: argparse.ArgumentParser) -> None:
        for option, attr, kind, help_ in _DEFINE_OPTIONS:
            p.add_argument(option, dest=attr, type=kind, help=help_)
        p.add_argument(
            "--partner-token-file",
            metavar="FILE",
            help="read --partner-token from FILE (the partner's DIR/sweepq.token)",
        )
        p.add_argument("--json", action="store_true", help="print the definition as JSON")

    d = action("define", "define a channel (DEFINE CHANNEL)", _define)
    d.add_argument("--type", choices=("sender", "receiver"), default="sender", help="the channel's end")
    definition(d)
    definition(action("alter", "change a channel's definition; it takes effect at its next start", _alter))
    action("delete", "delete a channel (not while it runs or has a batch in doubt)", _delete)
    action("start", "start a channel (a sender connects; a receiver accepts its sender)", _control("start", "started"))
    action("stop", "stop a channel; it stays stopped, across restarts too, until started", _control("stop", "stopped"))
    s = action("status", "the status of one channel or all of them (DISPLAY CHSTATUS)", _status, with_name=False)
    s.add_argument("name", metavar="CHANNEL", nargs="?", help="one channel (default: every channel)")
    s.add_argument("--json", action="store_true", help="print as JSON")
    r = action("reset", "set a stopped channel's sequence number (after a mismatch)", _control("reset", "reset"))
    r.add_argument("--seq", type=number(int, 0, 999_999_999), default=0, help="the last sequence number (default 0)")
    v = action(
        "resolve", "commit or back out a stopped sender's batch in doubt, by hand", _control("resolve", "resolved")
    )
    how = v.add_mutually_exclusive_group(required=True)
    how.add_argument("--commit", dest="action", action="store_const", const="commit", help="the receiver has it")
    how.add_argument("--backout", dest="action", action="store_const", const="backout", help="send it again")
    q = action("qmgr", "the queue manager's name, dead-letter queue and default transmission queue", _qmgr, False)
    q.add_argument("--name", help="the name of a new queue manager (fixed once its data directory exists)")
    q.add_argument("--dlq", help="the dead-letter queue a receiver puts what it cannot deliver on (DEADQ)")
    q.add_argument("--default-xmitq", help="the transmission queue of messages for unknown queue managers (DEFXMITQ)")
    q.add_argument("--json", action="store_true", help="print as JSON")
