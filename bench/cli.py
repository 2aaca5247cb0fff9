"""The ``sweepq`` command line."""

from __future__ import annotations

import argparse
import json
import sys

DESCRIPTION = """\
sweepq: an embedded tiered-storage message queue engine with IBM MQ semantics.

commands:
  demo     run a short end-to-end example of the engine and narrate it
  bench    measure sweepq against the queues a user would pick instead
"""


def _demo(args: argparse.Namespace) -> int:
    from .demo import run

    run(sys.stdout, producers=args.producers, per_producer=args.per_producer)
    return 0


def _bench(args: argparse.Namespace) -> int:
    report: dict = {}
    progress = (lambda s: print(f"  ... {s}", file=sys.stderr, flush=True)) if not args.json else None
    if args.what in ("throughput", "all"):
        report["throughput"] = _bench_throughput(args, progress)
    if args.what in ("memory", "all"):
        if progress:
            progress(f"memory: putting {args.memory_messages:,} messages of {args.memory_payload} B")
        from .memory import resident_bytes_per_message

        fig = resident_bytes_per_message(args.memory_messages, args.memory_payload)
        report["memory"] = fig
        if not args.json:
            print(
                f"memory: {fig['bytes_per_message']:.1f} B resident per message of "
                f"{fig['payload']} B -> {fig['overhead_per_message']:.1f} B beyond the payload "
                f"({fig['messages']:,} messages; goal <= 128 B)"
            )
    if args.json:
        print(json.dumps(report, indent=2))
    return 0


def _bench_throughput(args: argparse.Namespace, progress) -> dict:
    from .timing import interleaved
    from .workloads import SweepqPairs, pairs_deque, pairs_queue_queue

    n, payload = args.messages, b"x" * args.size
    sq = SweepqPairs()
    try:
        results = interleaved(
            {
                "queue.Queue": lambda: pairs_queue_queue(n, payload),
                "deque+lock": lambda: pairs_deque(n, payload),
                "sweepq": lambda: sq(n, payload),
            },
            ops=n,
            rounds=args.rounds,
            progress=progress,
        )
    finally:
        sq.close()
    base = results["queue.Queue"].rate
    out = {name: {"pairs_per_s": r.rate, "ratio_vs_queue_Queue": r.rate / base} for name, r in results.items()}
    if not args.json:
        print(
            f"put+get pairs of {args.size} B, non-persistent, no syncpoint; "
            f"best of {args.rounds} interleaved rounds of {n:,}"
        )
        for name, r in out.items():
            print(
                f"  {name:12s} {r['pairs_per_s'] / 1e6:6.3f} M pairs/s   {r['ratio_vs_queue_Queue']:5.2f} x queue.Queue"
            )
        print("  goal: sweepq >= 0.50 x queue.Queue")
    return out


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sweepq", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("demo", help="run a short end-to-end example and narrate it")
    d.add_argument("--producers", type=int, default=3, help="producer threads (default 3)")
    d.add_argument("--per-producer", type=int, default=4, help="orders each producer puts (default 4)")
    d.set_defaults(func=_demo)

    b = sub.add_parser(
        "bench",
        help="benchmarks, reported as ratios against a baseline measured in the same run",
        description="Run benchmarks. Figures are ratios against a baseline measured in the same "
        "run (interleaved rounds, best round each), because machines are shared and noisy.",
    )
    b.add_argument("what", nargs="?", default="all", choices=["throughput", "memory", "all"])
    b.add_argument("--messages", type=int, default=30_000, help="put+get pairs per round (default 30000)")
    b.add_argument("--size", type=int, default=1024, help="payload bytes for throughput (default 1024)")
    b.add_argument("--rounds", type=int, default=30, help="interleaved rounds, best kept (default 30)")
    b.add_argument("--memory-messages", type=int, default=1_000_000, help="messages for memory (default 1000000)")
    b.add_argument("--memory-payload", type=int, default=100, help="payload bytes for memory (default 100)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=_bench)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
