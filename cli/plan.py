"""``sweepq plan TRACE``: which settings of the sweep rule a workload should run with.

The grid (sweeper/plan.py) is replayed setting by setting (sweeper/plan_run.py); this module
reads the trace, reports progress, and writes the table, ``plan.json`` and ``plan.png``.
Every mistake ends in one line on stderr naming the argument, and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from sweepq.pipeline.args import EXIT_USAGE, HelpFormatter, Parser, existing_path, number, one_line
from sweepq.sweeper.pages import no_hugepage_advice

DEFAULT_GRID = "interval=1,5;factor=1,2,4;extra=5,100;rule=seed,adaptive"
PROG = "sweepq plan"
SPARK_PROG = "sweepq pipeline plan"


def _fail(message: str, prog: str = PROG) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f}"


def table(outcomes: list, front: list[int], default: int, chosen: int | None) -> str:
    """The table a person reads: one row per setting, frontier first by peak memory."""
    rest = sorted((i for i in range(len(outcomes)) if i not in front), key=lambda i: outcomes[i].costs())
    head = (
        f"{'#':>3} {'':2} {'peak MB':>9} {'swept MB':>9} {'read MB':>9} {'read %':>7} {'waits':>8} "
        f"{'stored s':>8} {'refused':>8}  setting"
    )
    lines = [head]
    for i in list(front) + rest:
        o = outcomes[i]
        mark = ("F" if i in front else " ") + ("*" if i == chosen else ("d" if i == default else " "))
        lines.append(
            f"{i:>3} {mark:2} {_mb(o.peak_memory_bytes):>9} {_mb(o.bytes_swept):>9} {_mb(o.bytes_read_back):>9} "
            f"{o.read_back_share:>7.1%} {o.unsweep_waits:>8,} {o.stored_mean_s:>8.1f} {o.blocked_or_refused:>8,}  "
            f"{o.setting.label()}"
        )
    lines.append(
        "F: on the frontier (no other setting is as good on peak memory, disk traffic, unsweep waits and "
        "refused puts, and better on one); d: the seed's default; *: the cheapest meeting the goal. "
        "waits: gets that found their message in a blob; stored s: how long such a blob had been stored, on average"
    )
    return "\n".join(lines)


def plot(outcomes: list, front: list[int], default: int, chosen: int | None, path: str, title: str, goal) -> None:
    """Peak memory against disk traffic, one point a setting; the frontier joined and numbered
    as in the table, the seed's default and the chosen setting marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [o.disk_bytes / 1e6 for o in outcomes]
    ys = [o.peak_memory_bytes / 1e6 for o in outcomes]
    fig, ax = plt.subplots(figsize=(9, 6))
    ax.scatter(xs, ys, s=22, color="#bbbbbb", label="a setting of the grid", zorder=2)
    ax.scatter(
        [xs[i] for i in front],
        [ys[i] for i in front],
        s=36,
        color="#1f77b4",
        zorder=3,
        label="on the frontier: no setting is better on memory, disk traffic, waits and refusals at once",
    )
    line = _trade_off([(xs[i], ys[i]) for i in front])
    ax.plot(
        [p[0] for p in line],
        [p[1] for p in line],
        "-",
        color="#1f77b4",
        lw=1.2,
        zorder=3,
        label="the trade-off of memory against disk traffic alone",
    )
    _number_points(ax, front, xs, ys)
    ax.scatter(
        [xs[default]],
        [ys[default]],
        marker="*",
        s=260,
        color="#d62728",
        zorder=4,
        label=f"#{default}: the seed's default (interval 5 s, sweep when y > 2x, keep x + 5)",
    )
    if goal is not None and goal.max_memory is not None:
        ax.axhline(
            goal.max_memory / 1e6,
            ls="--",
            color="#2ca02c",
            lw=1,
            label=f"the goal: peak memory at most {goal.max_memory / 1e6:,.0f} MB",
        )
    if chosen is not None:
        ax.scatter(
            [xs[chosen]],
            [ys[chosen]],
            s=200,
            facecolors="none",
            edgecolors="#2ca02c",
            lw=2.5,
            zorder=5,
            label=f"#{chosen}: the cheapest setting meeting the goal ({outcomes[chosen].setting.label()})",
        )
    ax.set_xlabel("disk traffic: MB swept into blobs + MB read back by gets (less is better)")
    ax.set_ylabel("peak memory: MB of messages held in memory (less is better)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def _trade_off(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other beats on both axes, by disk traffic (the line the plot draws)."""
    out: list[tuple[float, float]] = []
    for x, y in sorted(points):
        if not out or y < out[-1][1]:
            out.append((x, y))
    return out


def _number_points(ax, front: list[int], xs: list[float], ys: list[float]) -> None:
    """Each frontier point's number (#i, as in the table), skipping one that would overprint
    a number already placed (within 3 % of the axes)."""
    dx = (max(xs) - min(xs)) or 1.0
    dy = (max(ys) - min(ys)) or 1.0
    placed: list[tuple[float, float]] = []
    for i in sorted(front, key=lambda i: ys[i]):
        if any(abs(xs[i] - x) < 0.03 * dx and abs(ys[i] - y) < 0.03 * dy for x, y in placed):
            continue
        placed.append((xs[i], ys[i]))
        ax.annotate(f"#{i}", (xs[i], ys[i]), textcoords="offset points", xytext=(5, 4), fontsize=8, color="#1f77b4")


def _settings(args: argparse.Namespace) -> list:
    from sweepq.sweeper.plan import Setting, parse_grid

    if args.grid_file:
        with open(args.grid_file) as f:
            text = f.read()
    else:
        text = args.grid or DEFAULT_GRID
    settings = parse_grid(text)
    if Setting() not in settings:  # the seed's default is always measured: the plot marks it
        settings.append(Setting())
    return settings


def _goal(args: argparse.Namespace):
    from sweepq.sweeper.plan import Goal, parse_read_back

    if args.max_memory is None and args.max_read_back is None:
        return None
    limit, share = parse_read_back(args.max_read_back) if args.max_read_back else (None, False)
    return Goal(max_memory=args.max_memory, max_read_back=limit, read_back_share=share)


def _grid(args: argparse.Namespace, trace, settings: list, progress) -> list:
    """The outcomes: on this machine's threads, or with Spark for ``sweepq pipeline plan``."""
    from sweepq.engine.record import HEAD_LEN
    from sweepq.sweeper.plan_run import run_grid

    if getattr(args, "master", None) is None:
        return run_grid(trace, settings, HEAD_LEN, workers=args.workers, progress=progress)
    from sweepq.pipeline.plan import plan_on_spark
    from sweepq.pipeline.session import spark_session

    spark = spark_session(args.master, app="sweepq-plan")
    try:
        return plan_on_spark(spark, os.path.abspath(args.trace), settings, HEAD_LEN, args.buckets, trace=trace)
    finally:
        spark.stop()


def _run(args: argparse.Namespace) -> int:
    no_hugepage_advice()  # before numpy: the whole trace is read into fresh memory
    from sweepq.sweeper.plan import Setting, choose, frontier
    from sweepq.sweeper.traces import TraceError
    from sweepq.sweeper.user_traces import read_any

    prog = getattr(args, "prog", PROG)

    def fail(message: str) -> int:  # this command's name in every message
        return _fail(message, prog)

    try:
        settings = _settings(args)
        goal = _goal(args)
    except OSError as e:
        return fail(f"argument --grid-file: {e.strerror}: {args.grid_file}")
    except ValueError as e:
        return fail(f"argument {'--grid-file' if args.grid_file else '--grid'}: {e}")
    parent = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(parent):
        return fail(f"argument --out: directory {parent} does not exist; create it or choose another path")
    t0 = time.perf_counter()
    try:
        trace = read_any(args.trace)
    except TraceError as e:
        return fail(f"argument TRACE: {e}")
    say = (lambda *a: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    say(
        f"{prog}: {len(trace):,} events on {len(trace.queues):,} queue(s) read in {time.perf_counter() - t0:.1f} s; "
        + (
            f"replaying {len(settings)} settings on Spark {args.master}"
            if getattr(args, "master", None)
            else f"replaying {len(settings)} settings on {args.workers} thread(s)"
        )
    )

    def progress(done: int, total: int, o) -> None:
        say(
            f"{prog}: [{done}/{total}] {time.perf_counter() - t0:6.1f} s  peak {_mb(o.peak_memory_bytes)} MB  "
            f"{o.setting.label()}"
        )

    t_grid = time.perf_counter()
    try:
        outcomes = _grid(args, trace, settings, progress)
    except TraceError as e:
        return fail(f"argument TRACE: {e}")
    secs = time.perf_counter() - t_grid
    front = frontier(outcomes)
    default = settings.index(Setting())
    chosen = choose(outcomes, goal) if goal else None
    os.makedirs(args.out, exist_ok=True)
    title = (
        f"sweepq plan: {len(settings)} settings of the sweep rule over {os.path.basename(args.trace)} "
        f"({len(trace):,} events, {len(trace.queues):,} queues)"
    )
    plot(outcomes, front, default, chosen, os.path.join(args.out, "plan.png"), title, goal)
    doc = {
        "trace": args.trace,
        "events": len(trace),
        "queues": len(trace.queues),
        "seconds": round(secs, 3),
        "events_per_second": round(len(trace) * len(settings) / max(secs, 1e-9)),
        "default": default,
        "frontier": front,
        "goal": None
        if goal is None
        else {
            "max_memory": goal.max_memory,
            "max_read_back": goal.max_read_back,
            "read_back_share": goal.read_back_share,
        },
        "chosen": chosen,
        "settings": [o.as_dict() for o in outcomes],
    }
    with open(os.path.join(args.out, "plan.json"), "w") as f:
        json.dump(doc, f, indent=2)
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(table(outcomes, front, default, chosen))
        print(
            f"{len(settings)} settings x {len(trace):,} events replayed in {secs:.1f} s "
            f"({doc['events_per_second'] / 1e6:,.1f} M events/s); {len(front)} on the frontier; "
            f"written: {os.path.join(args.out, 'plan.json')}, {os.path.join(args.out, 'plan.png')}"
        )
    if goal is not None:
        if chosen is None:
            print(f"no setting of the grid meets the goal ({_goal_text(goal)}); widen the grid", file=sys.stderr)
            return 1
        o = outcomes[chosen]
        if not args.json:
            print(
                f"cheapest meeting the goal ({_goal_text(goal)}): #{chosen} {o.setting.label()}: peak "
                f"{_mb(o.peak_memory_bytes)} MB, {_mb(o.disk_bytes)} MB disk traffic, read back "
                f"{o.read_back_share:.1%} of the bytes put"
            )
    return 0


def _goal_text(goal) -> str:
    parts = []
    if goal.max_memory is not None:
        parts.append(f"peak memory <= {goal.max_memory / 1e6:,.2f} MB")
    if goal.max_read_back is not None:
        parts.append(
            f"read back <= {goal.max_read_back:.1%} of the bytes put"
            if goal.read_back_share
            else f"read back <= {goal.max_read_back / 1e6:,.2f} MB"
        )
    return ", ".join(parts)


def _size(text: str) -> int:
    from sweepq.sweeper.plan import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _read_back(text: str) -> str:
    from sweepq.sweeper.plan import parse_read_back

    try:
        parse_read_back(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


DESCRIPTION = (
    "Replay the sweep rule over TRACE once per setting of a grid (interval, factor, extra, "
    "blob_bytes, blob_records, memory_budget, policy, rule) and find the Pareto frontier of peak memory, "
    "disk traffic, unsweep waits and refused puts. Writes OUT/plan.json and OUT/plan.png. TRACE: a "
    "trace (Parquet or CSV), an engine recording (SweeperSettings.trace_path), or a CSV/Parquet of time, "
    "queue, size, op."
)


def register(sub) -> None:
    """Add ``plan`` to the ``sweepq`` subparsers ``sub``."""
    p = one_line(
        sub.add_parser(
            "plan",
            help="replay the sweep rule over a grid of settings; the frontier of memory against disk traffic",
            description=DESCRIPTION,
            formatter_class=HelpFormatter,
        )
    )
    _add_options(p)
    p.set_defaults(func=_run)


def pipeline_plan(argv: list[str]) -> int:
    """``sweepq pipeline plan ARGV``: the same grid with Spark, settings x queues as the unit."""
    p = Parser(prog=SPARK_PROG, description=DESCRIPTION + " Runs on Spark.", formatter_class=HelpFormatter)
    _add_options(p)
    p.add_argument("--master", default="local[*]", help="Spark master: local[N] or spark://host:port")
    p.add_argument("--buckets", type=number(int, 1), default=8, help="buckets of queues: tasks per setting")
    args = p.parse_args(argv)
    args.prog = SPARK_PROG
    return _run(args)


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE", type=existing_path, help="trace file or directory")
    p.add_argument(
        "--grid",
        default=None,
        help=f"axes and values, e.g. 'interval=1,5;factor=1:4;memory_budget=0,200MB' (default: {DEFAULT_GRID})",
    )
    p.add_argument("--grid-file", default=None, help="a file holding the grid: the same text, or a JSON object")
    p.add_argument("--max-memory", type=_size, default=None, help="goal: peak memory at most this (e.g. 200MB)")
    p.add_argument(
        "--max-read-back",
        type=_read_back,
        default=None,
        help="goal: bytes read back at most this share of the bytes put (5%%) or size (50MB)",
    )
    p.add_argument("--out", default="plan", help="directory for plan.json and plan.png")
    p.add_argument("--workers", type=number(int, 1), default=os.cpu_count() or 1, help="settings replayed at once")
    p.add_argument("--json", action="store_true", help="print plan.json instead of the table")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
