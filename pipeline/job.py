"""``sweepq pipeline``: replay the sweep rule over traces with Spark and report.

Runs with a local master by default, with any master URL for a cluster, and through
spark-submit: this file is a script (``spark-submit .../sweepq/pipeline/job.py --traces ...``),
so it imports absolutely. Every argument is checked before Spark starts, and a bad value or
a bad trace is one line on stderr and exit code 2.

Stages (each timed, each with a progress line):

1. layout: a trace laid out by queue is used as it is; anything else is laid out by queue
   once, by a JVM-only Spark job (stages.partition) into ``OUT/partitioned``;
2. replay: one Spark task per file of whole queues (pipeline/units.py); each writes its
   per-interval metrics to ``OUT/metrics`` and returns a few numbers;
   and per-queue summary (``OUT/summary``), and the what-if combinations (``OUT/grid_queues``),
   and Spark reduces their small results (totals per interval, top queues, first fault);
3. report: ``OUT/overall.json`` and ``OUT/report.html``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time

GRID_AXES = {"interval": float, "factor": int, "extra": int, "blob_bytes": int, "rule": str}
GRID_LOW = {"interval": (0.0, True), "factor": (0, False), "extra": (0, False), "blob_bytes": (1, False)}


def parse_grid(text: str, rule: str = "seed") -> list[tuple[float, int, int, int, str]]:
    """'interval=1,5;factor=2,3;extra=5;blob_bytes=65536,262144;rule=seed,adaptive' -> every
    combination, as (interval, factor, extra, blob_bytes, rule) tuples.

    Raises ValueError naming the part and what to write instead."""
    from sweepq.sweeper.runs import DEFAULT_MAX_BLOB_BYTES

    axes: dict[str, list] = {
        "interval": [5.0],
        "factor": [2],
        "extra": [5],
        "blob_bytes": [DEFAULT_MAX_BLOB_BYTES],
        "rule": [rule],
    }
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if "=" not in part:
            raise ValueError(f"grid part {part!r}: write name=v1,v2 (names: {', '.join(GRID_AXES)})")
        name, values = (x.strip() for x in part.split("=", 1))
        if name not in GRID_AXES:
            raise ValueError(f"unknown grid axis {name!r}; use {', '.join(GRID_AXES)}")
        cast = GRID_AXES[name]
        if cast is str:
            rules = [v.strip() for v in values.split(",") if v.strip()]
            bad = [v for v in rules if v not in ("seed", "adaptive")]
            if bad or not rules:
                raise ValueError(f"rule={bad[0] if bad else ''!r}: each value must be seed or adaptive")
            axes[name] = rules
            continue
        low, open_ = GRID_LOW[name]
        parsed = []
        for v in filter(None, (v.strip() for v in values.split(","))):
            try:
                x = cast(v)
            except ValueError:
                x = None
            if x is None or not math.isfinite(x) or (x <= low if open_ else x < low):
                what = "a number" if cast is float else "an integer"
                raise ValueError(f"{name}={v!r}: each value must be {what} {'>' if open_ else '>='} {low:g}")
            parsed.append(x)
        if not parsed:
            raise ValueError(f"grid axis {name!r} has no values; write {name}=v1,v2")
        axes[name] = parsed
    return list(itertools.product(axes["interval"], axes["factor"], axes["extra"], axes["blob_bytes"], axes["rule"]))


def _grid_arg(text: str):
    try:
        return parse_grid(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    from sweepq.pipeline.args import HelpFormatter, add_rule_options, existing_path, number, one_line

    pos_int = number(int, 1)
    p = one_line(
        argparse.ArgumentParser(
            prog="sweepq pipeline",
            description="Replay the slow queue sweeper's rule over message traces with Spark: per-interval "
            "metrics (Parquet), summaries per queue and overall, and an HTML report. A trace laid out by "
            "queue ('sweepq trace partition', or 'trace generate --buckets') is used as it is; any other "
            "trace is laid out by queue first by a Spark job.",
            formatter_class=HelpFormatter,
        )
    )
    p.add_argument(
        "--traces", required=True, type=existing_path, help="trace: Parquet file or directory, or a .csv file"
    )
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--master", default="local[*]", help="Spark master URL")
    add_rule_options(p)
    p.add_argument(
        "--buckets",
        type=pos_int,
        default=None,
        help="files to lay an arbitrary trace out in (default: 4 per core of the master)",
    )
    p.add_argument(
        "--grid",
        type=_grid_arg,
        default=None,
        help="what-if grid, e.g. 'interval=1,5;factor=2,3;extra=0,5;blob_bytes=65536,262144;rule=seed,adaptive' "
        "(every combination, run by the same tasks)",
    )
    p.add_argument("--ui", action="store_true", help="keep Spark's web UI on (its address is printed)")
    return p


def run(args: argparse.Namespace, spark=None, log=print) -> dict:
    import numpy as np

    from sweepq.engine.record import HEAD_LEN
    from sweepq.pipeline import stages
    from sweepq.pipeline.report import render
    from sweepq.pipeline.session import spark_session
    from sweepq.sweeper.replay import METRICS, overall_figures
    from sweepq.sweeper.traces import read_layout

    times: dict[str, float] = {}
    stages.check_input(args.traces)
    t_jvm = time.perf_counter()
    spark = spark or spark_session(args.master, ui=getattr(args, "ui", False))
    times["spark_start"] = round(time.perf_counter() - t_jvm, 3)
    t_start = time.perf_counter()
    ui = spark.sparkContext.uiWebUrl
    where = f" (Spark UI {ui})" if ui else ""
    os.makedirs(args.out, exist_ok=True)

    layout = read_layout(args.traces)
    if layout is not None:
        path, trace_dir = "laid out by queue", args.traces
        log(f"layout: {args.traces} is laid out by queue in {len(layout['files'])} files{where}")
    else:
        path, trace_dir = "partitioned by a Spark job", os.path.join(args.out, "partitioned")
        buckets = args.buckets or 4 * spark.sparkContext.defaultParallelism
        log(f"layout: laying {args.traces} out by queue in {buckets} files (one Spark job, JVM only){where}")
        with stages.timed(times, "partition"):
            layout = stages.partition(spark, args.traces, trace_dir, buckets)
            stages.write_layout(trace_dir, layout)
        log(f"layout: {layout['events']:,} events laid out in {times['partition']:.1f} s")
    events, t0, t_end = int(layout["events"]), int(layout["t0"]), int(layout["t_end"])
    n_int = int((t_end - t0) // round(args.interval * 1e6) + 1) if events else 0
    units = stages.units_of(trace_dir, layout)
    job = {
        "t0": t0,
        "t_end": t_end,
        "n_intervals": n_int,
        "interval": args.interval,
        "factor": args.factor,
        "extra": args.extra,
        "rule": args.rule,
        "memory_budget": args.memory_budget,
        "blob_bytes": args.blob_bytes,
        "blob_records": args.blob_records,
        "record_header": HEAD_LEN,  # what the engine counts per message beyond its payload
        "out": os.path.abspath(args.out) if "://" not in args.out else args.out,
        "grid": args.grid or [],
    }
    for sub in ("metrics", "summary", "grid_queues"):
        _clear(os.path.join(args.out, sub))
    log(
        f"replay: {events:,} events, {len(units)} work units, {n_int:,} intervals of {args.interval:g} s"
        + (f", what-if grid of {len(args.grid)} combinations" if args.grid else "")
    )
    import threading

    # The driver idles while the tasks run: load the report's plotting library meanwhile.
    threading.Thread(target=lambda: __import__("matplotlib.pyplot"), daemon=True).start()
    with stages.timed(times, "warm_up"):
        workers = stages.warm_up_workers(spark)
    log(f"warm-up: {workers} Python workers started with the kernel loaded in {times['warm_up']:.1f} s")
    t_map = time.perf_counter()

    def progress(done: int) -> None:
        rate = done / max(1e-9, time.perf_counter() - t_map)
        log(f"replay: {done:,} of {events:,} events done ({rate / 1e6:.1f} M events/s){where}")

    with stages.timed(times, "replay"):
        result = stages.replay_map(spark, units, job, progress)
    fault = stages.first_fault(result)
    if fault is not None:
        if path != "laid out by queue" and fault.row is not None:
            fault = type(fault)(fault.column, stages.row_of_id(spark, args.traces, fault.row), fault.why)
        raise fault
    log(
        f"replay: {events:,} events in {times['replay']:.1f} s ({result['units']} tasks: "
        f"{result['read_seconds']:.1f} s reading, {result['seconds'] - result['read_seconds']:.1f} s replaying, "
        "summed over tasks)"
    )
    totals = result["totals"] if result.get("totals") is not None else np.zeros((0, len(METRICS)), np.int64)
    overall = {"events": events, **overall_figures(totals, int(result["queues"]), int(totals[:, 0].sum()))}
    grid = stages.grid_figures(result, args.grid) if args.grid else None
    seconds = time.perf_counter() - t_start
    overall["path"] = path
    overall["stage_seconds"] = times
    overall["seconds"] = round(seconds, 2)
    overall["events_per_second"] = int(events / max(1e-9, seconds))
    overall["interval_s"] = args.interval
    overall["rule"] = args.rule
    overall["memory_budget_bytes"] = args.memory_budget
    overall["t0_us"] = t0
    with open(os.path.join(args.out, "overall.json"), "w") as f:
        json.dump(overall, f, indent=2)
    with stages.timed(times, "report"):
        html = render(totals, result.get("top", []), overall, grid)
        with open(os.path.join(args.out, "report.html"), "w") as f:
            f.write(html)
    log(
        f"done: {events:,} events in {seconds:.1f} s after the JVM start ({overall['events_per_second'] / 1e6:.1f} "
        f"M events/s; path: {path}; stages {times}): {args.out}/report.html"
    )
    return overall


def _clear(directory: str) -> None:
    """Remove a previous run's output of a stage (its tasks write parts by name)."""
    import shutil

    if "://" not in directory and os.path.isdir(directory):
        shutil.rmtree(directory)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from sweepq.sweeper.traces import TraceError

    try:
        overall = run(args, log=lambda s: print(s, file=sys.stderr, flush=True))
    except TraceError as e:
        print(f"sweepq pipeline: error: argument --traces: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"sweepq pipeline: error: argument --traces: {e}", file=sys.stderr)
        return 2
    print(json.dumps(overall, indent=2))
    return 0


if __name__ == "__main__":  # spark-submit runs this file
    sys.exit(main())
