"""The memory-pressure simulation commands of ``sweepq``: ``trace``, ``replay`` and ``pipeline``.

cli/main.py calls :func:`register` with its subparsers and :func:`pipeline_command` for
``sweepq pipeline ...`` (whose options live with the pipeline, pipeline/job.py, so that
``spark-submit`` sees the same ones). Every mistake a user can make with these commands ends
in one line on stderr that names the argument and what to do, and exit code 2: values are
checked by argparse types, paths before anything is read, traces by the one checker of
sweeper/traces.py. Every option's help shows its default.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from sweepq.pipeline.args import (
    EXIT_USAGE,
    HelpFormatter,
    Parser,
    add_rule_options,
    existing_path,
    number,
    one_line,
)
from sweepq.sweeper.pages import no_hugepage_advice


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _writable_parent(path: str) -> str | None:
    """None when ``path``'s directory exists, else what to say."""
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        return f"argument --out: directory {parent} does not exist; create it or choose another path"
    return None


# -- trace ------------------------------------------------------------------------------------


def _trace_generate(args: argparse.Namespace) -> int:
    from sweepq.sweeper.traces import generate, write, write_by_queue

    prog = "sweepq trace generate"
    why = _writable_parent(args.out)
    if why:
        return _fail(prog, why)
    if args.buckets is None and not args.out.endswith((".parquet", ".csv")):
        return _fail(
            prog,
            f"argument --out: {args.out!r} must end in .parquet or .csv "
            "(or pass --buckets N to write a directory laid out by queue)",
        )
    if args.buckets is not None and args.out.endswith(".csv"):
        return _fail(prog, "argument --out: a trace laid out by queue is a directory of Parquet files, not a .csv")
    t = generate(
        args.kind,
        seconds=args.seconds,
        rate=args.rate,
        queues=args.queues,
        size=args.size,
        priorities=args.priorities,
        seed=args.seed,
    )
    if args.buckets is not None:
        layout = write_by_queue(t, args.out, args.buckets)
        print(f"wrote {len(t):,} events on {len(t.queues):,} queue(s) to {args.out} in {len(layout['files'])} files")
    else:
        write(t, args.out)
        print(f"wrote {len(t):,} events on {len(t.queues):,} queue(s) to {args.out}")
    return 0


def _trace_partition(args: argparse.Namespace) -> int:
    no_hugepage_advice()  # before numpy: the whole trace is read into fresh memory
    from sweepq.sweeper.traces import TraceError, read, write_by_queue

    prog = "sweepq trace partition"
    why = _writable_parent(args.out.rstrip("/") or "/")
    if why:
        return _fail(prog, why.replace("--out", "OUT"))
    t0 = time.perf_counter()
    try:
        trace = read(args.trace)
    except TraceError as e:
        return _fail(prog, f"argument TRACE: {e}")
    layout = write_by_queue(trace, args.out, args.buckets)
    print(
        f"laid out {len(trace):,} events on {len(trace.queues):,} queue(s) by queue in "
        f"{len(layout['files'])} files under {args.out} ({time.perf_counter() - t0:.1f} s)"
    )
    return 0


# -- replay -----------------------------------------------------------------------------------


def _replay(args: argparse.Namespace) -> int:
    no_hugepage_advice()  # before numpy: the whole trace is read into fresh memory
    import threading

    from sweepq.engine.record import HEAD_LEN
    from sweepq.sweeper import SweepPolicy
    from sweepq.sweeper.replay import replay, warm_up
    from sweepq.sweeper.traces import TraceError, read

    prog = "sweepq replay"
    if args.out:
        why = _writable_parent(args.out.rstrip("/") or "/")
        if why:
            return _fail(prog, why)
    t_start = time.perf_counter()
    warm = threading.Thread(target=warm_up, daemon=True)  # numba starts while Arrow decodes
    warm.start()
    try:
        trace = read(args.trace, persistent=False)
    except FileNotFoundError:
        return _fail(prog, f"argument TRACE: {args.trace!r} does not exist; pass a trace file or directory")
    except TraceError as e:
        return _fail(prog, f"argument TRACE: {e}")
    t_read = time.perf_counter()
    warm.join()
    policy = SweepPolicy(
        factor=args.factor, extra=args.extra, interval=args.interval, rule=args.rule, memory_budget=args.memory_budget
    )
    t_kernel = time.perf_counter()
    r = replay(
        trace,
        policy,
        record_header=HEAD_LEN,
        max_blob_bytes=args.blob_bytes,
        max_blob_records=args.blob_records,
        per_interval=False,
    )
    secs_kernel = time.perf_counter() - t_kernel
    out = r.overall()
    out["events"] = len(trace)
    if args.out:
        r.write(args.out)
    secs = time.perf_counter() - t_start
    out["seconds"] = {"read": round(t_read - t_start, 3), "kernel": round(secs_kernel, 3), "total": round(secs, 3)}
    out["events_per_second"] = round(len(trace) / max(secs, 1e-9))
    if args.out:
        with open(os.path.join(args.out, "overall.json"), "w") as f:
            json.dump(out, f, indent=2)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    mb = 1e6
    print(
        f"{out['events']:,} events on {out['queues']:,} queue(s), {out['intervals']:,} intervals of "
        f"{policy.interval:g} s, replayed in {secs:.2f} s (read {t_read - t_start:.2f} s, kernel {secs_kernel:.2f} s)"
    )
    print(
        f"peak memory: {out['peak_memory_with_sweeper_bytes'] / mb:,.2f} MB with the sweeper, "
        f"{out['peak_memory_without_sweeping_bytes'] / mb:,.2f} MB without"
    )
    print(
        f"read back by gets: {out['bytes_read_back'] / mb:,.2f} MB in {out['blobs_read_back']:,} blobs; "
        f"{out['blobs_written']:,} blobs written; {out['msgs_swept']:,} messages swept, "
        f"{out['msgs_reswept']:,} of them again ({out['reswept_share']:.1%})"
    )
    if args.memory_budget:
        print(
            f"memory budget {args.memory_budget / mb:,.2f} MB: acted in {out['budget_intervals']:,} intervals, "
            f"sweeping {out['budget_msgs']:,} messages beyond the rule"
        )
    if args.out:
        print(f"metrics written to {args.out}")
    return 0


# -- pipeline ---------------------------------------------------------------------------------


def pipeline_command(args: argparse.Namespace) -> int:
    """``sweepq pipeline ARGS``: the pipeline's own parser (pipeline/job.py) checks ``args.rest``;
    ``sweepq pipeline plan ...`` is the plan's grid on Spark (cli/plan.py)."""
    if args.rest[:1] == ["plan"]:
        from .plan import pipeline_plan

        return pipeline_plan(args.rest[1:])
    try:
        from sweepq.pipeline.job import main as pipeline_main
    except ImportError as e:
        return _fail("sweepq pipeline", f"needs the [spark] extra: pip install 'sweepq[spark]' ({e})")
    return pipeline_main(args.rest)


# -- registration -----------------------------------------------------------------------------


def register(sub) -> None:
    """Add ``trace``, ``replay`` and ``pipeline`` to the ``sweepq`` subparsers ``sub``."""
    from sweepq.sweeper.trace_kinds import KINDS  # not traces.py: that imports numba

    fmt = HelpFormatter
    pos_int = number(int, 1)
    nonneg_int = number(int, 0)
    pos_float = number(float, 0, low_open=True)

    t = one_line(
        sub.add_parser(
            "trace",
            help="generate synthetic message traces, or lay a trace out by queue",
            description="Message traces for 'sweepq replay' and 'sweepq pipeline'.",
            formatter_class=fmt,
        )
    )
    tsub = t.add_subparsers(dest="trace_command", metavar="{generate,partition}", required=True, parser_class=Parser)
    g = tsub.add_parser(
        "generate",
        help="write a seeded synthetic trace (Parquet, CSV for .csv, or laid out by queue with --buckets)",
        description="Write a seeded synthetic trace.",
    )
    g.add_argument("--kind", choices=KINDS, default="steady", help="the workload")
    g.add_argument("--seconds", type=pos_float, default=60.0, help="trace length in seconds")
    g.add_argument("--rate", type=pos_float, default=1000.0, help="puts per second per queue")
    g.add_argument("--queues", type=pos_int, default=1, help="queues (10000+ is fine for many-queues)")
    g.add_argument("--size", type=pos_int, default=256, help="typical payload bytes")
    g.add_argument("--priorities", action="store_true", help="spread priorities over 0..9 (default: all 0)")
    g.add_argument("--seed", type=nonneg_int, default=0, help="random seed")
    g.add_argument(
        "--buckets",
        type=pos_int,
        default=None,
        help="write a directory laid out by queue in this many files (the pipeline's fast path); default: one file",
    )
    g.add_argument("--out", required=True, help="output: a .parquet or .csv file, or a directory with --buckets")
    g.set_defaults(func=_trace_generate)

    pt = tsub.add_parser(
        "partition",
        help="lay a trace out by queue: files of whole queues, the pipeline's unit of work",
        description="Read a trace (checked as 'sweepq replay' checks it) and write it laid out by queue: "
        "N Parquet files, each holding whole queues in time order, and a layout file. For traces larger "
        "than one machine, 'sweepq pipeline' does the same with a Spark job.",
    )
    pt.add_argument("trace", metavar="TRACE", type=existing_path, help="trace file or directory (.parquet or .csv)")
    pt.add_argument("out", metavar="OUT", help="output directory (created)")
    pt.add_argument("--buckets", type=pos_int, default=16, help="files to spread the queues over")
    pt.set_defaults(func=_trace_partition)

    r = one_line(
        sub.add_parser(
            "replay",
            help="replay the sweep rule over a trace on this machine",
            description="Replay the slow queue sweeper's rule over a trace with the numba kernel: peak memory "
            "with and without the sweeper, volume read back, blobs. Within a queue times must not go "
            "backwards; queues may interleave in any order.",
            formatter_class=fmt,
        )
    )
    r.add_argument("trace", metavar="TRACE", type=existing_path, help="trace file or directory (.parquet or .csv)")
    add_rule_options(r)
    r.add_argument(
        "--out",
        default=None,
        help="directory to write the metrics to: totals per interval and summary per queue as Parquet, "
        "overall.json (default: print only)",
    )
    r.add_argument("--json", action="store_true", help="print the figures as JSON")
    r.set_defaults(func=_replay)

    pl = sub.add_parser(
        "pipeline",
        help="replay traces too large for one machine with Spark; see 'sweepq pipeline --help'",
        add_help=False,
    )
    pl.add_argument("rest", nargs=argparse.REMAINDER)
    pl.set_defaults(func=pipeline_command)
