"""The ``sweepq`` command line."""

from __future__ import annotations

import argparse
import json
import sys

from .cli_replay import pipeline_command as _pipeline
from .cli_replay import register as register_replay_commands

DESCRIPTION = """\
sweepq: an embedded tiered-storage message queue engine with IBM MQ semantics.

commands:
  demo     run a short end-to-end example of the engine and narrate it
  bench    measure sweepq against the queues a user would pick instead, and the sweeper
  inspect  show what a data directory holds: chains, blobs, dictionaries, last statistics
  trace    generate synthetic message traces (steady, bursty, slow consumer, diurnal, many queues)
  replay   replay the sweep rule over a trace on this machine (numba) and summarise
  pipeline replay traces too large for one machine with Spark; metrics, summaries, HTML report
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
    if args.what in ("sweep", "all"):
        report["sweep"] = _bench_sweep(args, progress)
    if args.what in ("replay", "all"):
        report["replay"] = _bench_replay(args, progress)
    if args.json:
        print(json.dumps(report, indent=2, default=str))
    return 0


def _bench_sweep(args: argparse.Namespace, progress) -> dict:
    from . import sweeping

    out: dict = {}
    say = (lambda s: None) if args.json else print
    for size, n in ((100, args.sweep_messages), (1024, max(1, args.sweep_messages // 4))):
        for freeze in (False, True):
            if progress:
                progress(f"sweep/unsweep rates: {n:,} x {size} B{' (gc frozen)' if freeze else ''}")
            r = sweeping.rates(n, size, freeze=freeze)
            out[f"rates_{size}B{'_frozen' if freeze else ''}"] = r
            say(
                f"sweep {size:>4} B{' gc.freeze' if freeze else '          '}: "
                f"sweep {r['sweep_MBps']:6.1f} MB/s = {r['sweep_ratio']:.2f} x store alone "
                f"({r['raw_write_MBps']:.0f}); "
                f"unsweep {r['unsweep_MBps']:6.1f} MB/s = {r['unsweep_ratio']:.2f} x store alone "
                f"({r['raw_read_MBps']:.0f}); zstd ratio {r['compression_ratio']:.1f}  [goal >= 0.70 each]"
            )
    if progress:
        progress("lock holds for runs of 1k, 10k, 100k")
    holds = sweeping.lock_holds()
    out["lock_holds"] = holds
    for n, h in holds.items():
        say(
            f"lock held per sweep, run of {n:>7,}: p99 {h['p99_ms']:.2f} ms, max {h['max_ms']:.2f} ms over "
            f"{h['holds']} holds (total {h['total_ms']:.1f} ms)  [goal p99 <= 1 ms]"
        )
    if progress:
        progress("drain latency across blob boundaries")
    d = sweeping.drain_latency(args.sweep_messages)
    out["drain"] = d
    say(
        f"get p99 draining across {d['blob_boundaries']} blob boundaries: {d['drain_p99_us']:.1f} us vs "
        f"{d['steady_p99_us']:.1f} us steady = {d['p99_ratio']:.2f} x (max {d['drain_max_us']:.0f} us; "
        f"read-ahead {d['readahead_hits']} hits / {d['readahead_misses']} misses)  [goal <= 2 x]"
    )
    if progress:
        progress("put/get pairs while another queue is swept")
    c = sweeping.concurrent()
    out["concurrent"] = c
    say(
        f"put+get pairs while a sweep runs: {c['during_sweep_pairs_per_s'] / 1e3:.0f} k/s vs "
        f"{c['quiet_pairs_per_s'] / 1e3:.0f} k/s quiet = {c['ratio']:.2f} x  [goal >= 0.90]"
    )
    if progress:
        progress(f"memory per swept message ({args.sweep_memory_messages:,} messages)")
    for correl in (False, True):
        m = sweeping.swept_memory(args.sweep_memory_messages, correl=correl)
        out[f"swept_memory{'_correl' if correl else ''}"] = m
        say(
            f"memory per swept message{' with a CorrelId' if correl else ''}: "
            f"{m['bytes_per_swept_msg']:.2f} B in the process (index + blob objects)  [goal <= 8 B]"
        )
    return out


def _bench_replay(args: argparse.Namespace, progress) -> dict:
    from . import replay_bench

    say = (lambda s: None) if args.json else print
    if progress:
        progress(f"replay kernel on ~{args.replay_events_m:g} M events (and interpreted on 1/100 of them)")
    k = replay_bench.kernel(args.replay_events_m)
    say(
        f"replay kernel: {k['numba']['events_per_s'] / 1e6:.1f} M events/s compiled vs "
        f"{k['python']['events_per_s'] / 1e6:.3f} M/s interpreted = {k['ratio']:.0f} x  [goal >= 100 M events/s]"
    )
    out = {"kernel": k}
    if args.pipeline_events_m:
        if progress:
            progress(f"Spark pipeline end to end on ~{args.pipeline_events_m:g} M events")
        p = replay_bench.pipeline(args.pipeline_events_m)
        out["pipeline"] = p
        say(f"pipeline: {p['events']:,} events in {p['seconds']:.1f} s = {p['events_per_s'] / 1e6:.2f} M events/s")
    return out


def _inspect(args: argparse.Namespace) -> int:
    from .inspect import describe

    try:
        text = describe(args.path, as_json=args.json)
    except Exception as e:  # the store's errors already say what is wrong
        print(f"sweepq inspect: {e}", file=sys.stderr)
        return 1
    print(text)
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
    b.add_argument("what", nargs="?", default="all", choices=["throughput", "memory", "sweep", "replay", "all"])
    b.add_argument("--messages", type=int, default=30_000, help="put+get pairs per round (default 30000)")
    b.add_argument("--size", type=int, default=1024, help="payload bytes for throughput (default 1024)")
    b.add_argument("--rounds", type=int, default=30, help="interleaved rounds, best kept (default 30)")
    b.add_argument("--memory-messages", type=int, default=1_000_000, help="messages for memory (default 1000000)")
    b.add_argument("--memory-payload", type=int, default=100, help="payload bytes for memory (default 100)")
    b.add_argument(
        "--sweep-messages", type=int, default=100_000, help="messages for the sweep benchmarks (default 100000)"
    )
    b.add_argument(
        "--sweep-memory-messages",
        type=int,
        default=1_000_000,
        help="messages for memory per swept message (default 1000000)",
    )
    b.add_argument("--replay-events-m", type=float, default=10.0, help="M events for the kernel (default 10)")
    b.add_argument(
        "--pipeline-events-m", type=float, default=0.0, help="M events for the Spark pipeline (default 0: skip)"
    )
    b.add_argument("--json", action="store_true", help="print the figures as JSON")
    b.set_defaults(func=_bench)

    register_replay_commands(sub)  # trace, replay, pipeline: bench/cli_replay.py

    i = sub.add_parser(
        "inspect",
        help="show what a data directory holds",
        description="Open a sweepq data directory read-only and print its chains, blobs, "
        "dictionaries and the statistics its queue manager left at close.",
    )
    i.add_argument("path", help="the data directory (QueueManager.open(path))")
    i.add_argument("--json", action="store_true", help="print as JSON")
    i.set_defaults(func=_inspect)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pipeline"]:  # its own parser (and --help) lives with the pipeline
        return _pipeline(argparse.Namespace(rest=argv[1:]))
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
