"""``python -m sweepq.bench.crash worker ...`` (one worker run, which the driver starts and
kills) or ``... drain ...`` (the final drain in a process of its own)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .worker import DEFAULT_INTERVAL, drain, worker_main


def _drain_main(args: argparse.Namespace) -> int:
    """The drain as a process of its own; why it could not open goes to stderr (exit 1)."""
    why = drain(args.data_dir, args.log, args.sync, args.repair)
    if why:
        print(why, file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from sweepq.pipeline.args import HelpFormatter, Parser, number

    p = Parser(prog="python -m sweepq.bench.crash", formatter_class=HelpFormatter)
    sub = p.add_subparsers(dest="what", required=True, parser_class=Parser)
    w = sub.add_parser("worker", help="one worker run (the driver starts these)")
    w.add_argument("--data-dir", required=True, help="the store directory")
    w.add_argument("--log", required=True, help="the event log to append to")
    w.add_argument("--seed", type=number(int, 0), default=1, help="the harness seed")
    w.add_argument("--run", type=number(int, 1), default=1, help="this run's number (the producer id)")
    w.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the sync option")
    w.add_argument("--interval", type=number(float, 0, low_open=True), default=DEFAULT_INTERVAL, help="sweep interval")
    w.add_argument("--kill-at", default=None, help="POINT:N, kill this process at the N-th pass of POINT")
    w.add_argument("--max-ops", type=number(int, 0), default=0, help="units of work, then close (0: until killed)")
    w.add_argument("--fill-only", action="store_true", help="no drain phases: a backlog builds")
    w.set_defaults(func=worker_main)
    d = sub.add_parser("drain", help="open a store, drain the harness queues, log like a worker")
    d.add_argument("--data-dir", required=True, help="the store directory")
    d.add_argument("--log", required=True, help="the event log to append to")
    d.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the sync option")
    d.add_argument("--repair", action="store_true", help="open with repair=True")
    d.set_defaults(func=_drain_main)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
