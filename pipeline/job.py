"""``sweepq pipeline``: replay the sweep rule over traces with Spark and report.

Runs with a local master by default, with any master URL for a cluster, and through
spark-submit: this file is a script (``spark-submit .../sweepq/pipeline/job.py --traces ...``),
so it imports absolutely. Every argument is checked before Spark starts, and a bad value or
a bad trace is one line on stderr and exit code 2.

Stages (each timed, each with a progress line):

1. warm-up: a no-op job that starts the Python workers with the kernel loaded, when there is
   a layout to use (given or reused); when one is to be made, the layout job is the first
   job and its tasks start the workers (the warm-up is in its time, and has no job of its own);
   a direct replay has none either (on a local master whose JVM the run starts, the JVM's
   first job is the session's own: pipeline/session.py ``warm_up``);
2. layout: a trace laid out by queue is used as it is; a layout of the same trace kept by an
   earlier run is reused; on a local master a trace that is not large is not laid out at all
   (``--shuffle direct``, what ``auto`` picks there: each replay task reads the whole trace
   and replays the queues of its bucket, pipeline/direct.py); anything else is laid out by
   queue by a Spark job, the map side of a shuffle in Arrow (pipeline/layout.py; ``--shuffle
   jvm``: Spark's own), and kept in ``OUT/layout`` (or ``--layout``);
3. replay: one Spark task per bucket of whole queues (pipeline/units.py); each writes its
   per-interval metrics (``OUT/metrics``), per-queue summary (``OUT/summary``) and the
   what-if combinations (``OUT/grid_queues``), and Spark reduces their small results
   (totals per interval, top queues, faults);
4. report: ``OUT/overall.json`` and ``OUT/report.html``, with events/s after the JVM's
   start and with it, each stage's time, and whether the layout was made or reused.
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
            "queue ('sweepq trace partition', or 'trace generate --buckets') is used as it is. Any other "
            "trace (one file, or files with queues in any order) is, on a local master and for a trace "
            "that is not large, read whole by each replay task, which replays the queues of its bucket "
            "(--shuffle direct); else laid out by queue first by a Spark job, kept in OUT/layout (or "
            "--layout), and reused by the next run on the same trace (--shuffle arrow).",
            formatter_class=HelpFormatter,
        )
    )
    p.add_argument(
        "--traces", required=True, type=existing_path, help="trace: Parquet file or directory, or a .csv file"
    )
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument(
        "--master",
        default=None,
        help="Spark master URL, e.g. spark://host:7077 (default: spark-submit's --master when run by it, "
        "else local[*])",
    )
    add_rule_options(p)
    p.add_argument(
        "--buckets",
        type=pos_int,
        default=None,
        help="buckets of queues to lay a trace out in, one replay task each (default: a multiple of the "
        "master's cores, each bucket of a few million events, pipeline/layout.py UNIT_EVENTS; a CSV: 4 per core; or "
        "those of a layout reused; a direct replay: one per two cores, each reading on two threads)",
    )
    p.add_argument(
        "--layout",
        default=None,
        help="directory to keep the layout of a trace in, and to reuse it from (default: OUT/layout)",
    )
    p.add_argument(
        "--shuffle",
        choices=("auto", "direct", "arrow", "jvm"),
        default="auto",
        help="how the replay tasks get whole queues: 'direct', no layout: each task reads the whole trace "
        "with pyarrow and replays the queues of its bucket (less work than a layout where the tasks are "
        "few: one machine's cores); 'arrow', a layout by queue, the map side of a shuffle in Arrow (tasks "
        "read ranges with pyarrow and write per-bucket files, kept in --layout for the next run); 'jvm', "
        "that layout by Spark's own shuffle in the JVM (slower; for comparison); 'auto': a layout of the "
        "same trace kept by an earlier run is reused, else direct on a local master when the tasks times "
        "the trace's events are at most pipeline/direct.py MAX_READS (32 M) and no --layout is given, "
        "else arrow. A trace laid out by queue already is read as it is whatever this says",
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


def _job(args: argparse.Namespace, span: dict | None) -> dict:
    """What every replay task is told: the intervals, the rule, the bounds, where to write.
    ``span``: the trace's events, first and last time (a layout's); None for a direct replay,
    whose tasks each read the whole trace and find them (pipeline/units.py)."""
    from sweepq.engine.record import HEAD_LEN
    from sweepq.pipeline.units import interval_count

    if span is None:
        t0 = t_end = n_intervals = None
    else:
        events, t0, t_end = int(span["events"]), int(span["t0"]), int(span["t_end"])
        n_intervals = interval_count(t0, t_end, args.interval, events)
    return {
        "t0": t0,
        "t_end": t_end,
        "n_intervals": n_intervals,
        "interval": args.interval,
        "factor": args.factor,
        "extra": args.extra,
        "rule": args.rule,
        "memory_budget": args.memory_budget,
        "blob_bytes": args.blob_bytes,
        "blob_records": args.blob_records,
        "record_header": HEAD_LEN,  # what the engine counts per message beyond its payload
        "out": args.out,
        "grid": args.grid or [],
    }


def _layout(spark, args: argparse.Namespace, times: dict, log, where: str) -> tuple[str, dict, str]:
    """The warm-up and layout stages: a trace laid out already, or a layout reused, after a
    warm-up job of its own; or a layout made (and kept) by a job that is the first one, its
    tasks starting the workers (a warm-up job before it would only delay it: its tasks do
    nothing that the layout's do not, on workers forked from a daemon that has every module
    loaded, pipeline/daemon.py); or none, for a direct replay (``how`` "direct") (:func:`run`
    releases the pre-started daemon after its job)."""
    from sweepq.pipeline import direct, prestart, stages
    from sweepq.pipeline import layout as lay

    directory = args.layout or lay.default_directory(args.out)
    t = time.perf_counter()
    found = stages.existing_layout(args.traces, directory, args.buckets)
    if found is not None and found[2] == "reused" and args.shuffle == "direct":
        found = None  # told to replay directly: a layout kept is not read
    shuffle = args.shuffle
    if found is None and shuffle == "auto":
        shuffle = stages.auto_shuffle(spark, args.traces, args.buckets, args.layout)
    looked = time.perf_counter() - t  # counted in the layout stage
    if found is None and shuffle == "direct":
        times["layout"] = round(looked, 3)
        tasks = args.buckets or direct.tasks_for(spark.sparkContext.defaultParallelism)
        log(
            f"layout: none (direct): {_counted(tasks, 'task')} each read the whole trace and replay the queues "
            f"of their bucket; no warm-up job{where}"
        )
        return args.traces, {"made_by": "none", "buckets": tasks}, "direct"
    if found is None and shuffle == "arrow":  # Python tasks: they start the workers
        log("warm-up: in the layout job (its tasks start the Python workers)")
    else:
        with stages.timed(times, "warm_up"):
            workers = stages.warm_up_workers(spark)
            prestart.release()  # the first job claimed it, or it ends now (pipeline/prestart.py)
        log(f"warm-up: {workers} Python workers started with the kernel loaded in {times['warm_up']:.1f} s")
    t = time.perf_counter()
    try:
        made = found or stages.make_layout(spark, args.traces, directory, args.buckets, shuffle)
    finally:
        prestart.release()  # idempotent
        times["layout"] = round(looked + time.perf_counter() - t, 3)
    trace_dir, layout, how = made
    n = len(lay.units(layout))
    if how == "given":
        log(f"layout: {args.traces} is laid out by queue in {n} units{where}")
    elif how == "reused":
        log(
            f"layout: reused {trace_dir} ({n} buckets, made by the {layout['made_by']} shuffle in "
            f"{layout['seconds']:.1f} s at {layout['made_at']}; same trace files, sizes and times){where}"
        )
    else:
        log(
            f"layout: {layout['events']:,} events laid out by queue in {n} buckets by the {shuffle} shuffle "
            f"in {times['layout']:.1f} s{_task_cpu(layout)}, kept in {trace_dir} for the next run{where}"
        )
    return trace_dir, layout, how


def _counted(n: int, word: str) -> str:
    """``n`` and ``word`` for a progress line: "1 task", "2 tasks"."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _task_cpu(layout: dict) -> str:
    if layout.get("made_by") != "arrow":
        return ""
    return f" ({len(layout['ranges'])} tasks, {layout['task_cpu_seconds']:.1f} s of CPU)"


def _write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def run(args: argparse.Namespace, spark=None, log=print) -> dict:
    """Run the pipeline (see the module docstring); returns what overall.json holds.

    A run that fails leaves no report: the previous run's overall.json, report.html and
    metrics are removed first, and the report is written only when every task succeeded.

    :raises TraceError: a bad trace (the first row at fault, in the input's numbering)."""
    import threading

    import numpy as np

    from sweepq.pipeline import direct, prestart, stages
    from sweepq.pipeline.java import runtime
    from sweepq.pipeline.report import render, restamp
    from sweepq.pipeline.report import warm_up as warm_charts
    from sweepq.pipeline.session import spark_session
    from sweepq.sweeper.replay import METRICS, overall_figures

    times: dict[str, float] = {}
    # Executors run elsewhere (another directory, another machine): every path absolute.
    for name in ("traces", "out", "layout"):
        value = getattr(args, name, None)
        if value and "://" not in value:
            setattr(args, name, os.path.abspath(value))
    stages.check_input(args.traces)
    _clear_results(args.out)
    java = runtime()
    # The driver idles while Spark starts and its tasks run: matplotlib's first chart meanwhile,
    # for the what-if grid's chart (the charts over time are SVG, pipeline/svg.py).
    charts_warm = threading.Thread(target=warm_charts, name="sweepq-report-warm-up", daemon=True)
    if args.grid:
        charts_warm.start()
    # A direct replay's task reads the whole trace: the pre-started daemon makes its columns'
    # memory ready while the JVM starts (pipeline/arena.py). A layout named is read instead.
    prestart.expect_trace(args.traces if args.shuffle in ("auto", "direct") and not args.layout else None)
    t_jvm = time.perf_counter()
    # The JVM shuffle's work is Spark's own code: keep its full compiler (pipeline/jvm_start.py).
    # Spark SQL only for the JVM shuffle: its session's creation is a second of the JVM's start.
    jvm = args.shuffle == "jvm"
    spark = spark or spark_session(args.master, ui=getattr(args, "ui", False), jit=not jvm, sql=jvm)
    times["spark_start"] = round(time.perf_counter() - t_jvm, 3)
    t_start = time.perf_counter()
    ui = spark.sparkContext.uiWebUrl
    where = f" (Spark UI {ui})" if ui else ""
    log(f"spark: {spark.sparkContext.master} started in {times['spark_start']:.1f} s; {java.describe()}")
    group = f"sweepq-{os.getpid()}-{time.time_ns()}"
    spark.sparkContext.setJobGroup(group, "sweepq pipeline")
    trace_dir, layout, how = _layout(spark, args, times, log, where)
    if how == "direct":
        cores = spark.sparkContext.defaultParallelism
        units = direct.units(args.traces, layout["buckets"], max(1, cores // layout["buckets"]))
        job = _job(args, None)
        log(
            f"replay: {_counted(len(units), 'work unit')}, each the whole trace, intervals of {args.interval:g} s"
            + (f", what-if grid of {len(args.grid)} combinations" if args.grid else "")
        )
    else:
        job = _job(args, layout)
        units = stages.units_of(trace_dir, layout)
        log(
            f"replay: {int(layout['events']):,} events, {len(units)} work units, {job['n_intervals']:,} intervals "
            f"of {args.interval:g} s" + (f", what-if grid of {len(args.grid)} combinations" if args.grid else "")
        )
    t_map = time.perf_counter()

    def progress(done: int, units_done: int) -> None:
        elapsed = time.perf_counter() - t_map
        if how == "direct":  # a direct task counts its events only when it ends: say how many ended
            log(f"replay: {units_done} of {_counted(len(units), 'task')} done, {elapsed:.0f} s{where}")
            return
        rate = done / max(1e-9, elapsed)
        log(f"replay: {done:,} of {int(layout['events']):,} events done ({rate / 1e6:.1f} M events/s){where}")

    try:
        with stages.timed(times, "replay"):
            result = stages.replay_map(spark, units, job, progress)
    finally:
        prestart.release()  # a direct replay's job was the first (idempotent)
    fault = stages.first_fault(spark, result, layout)
    if fault is not None:
        raise fault
    if how == "direct":  # the tasks found the trace's span, each reading it whole
        job = _job(args, result.get("span") or {"events": 0, "t0": 0, "t_end": 0})
    events = int(result["events"] if how == "direct" else layout["events"])
    log(
        f"replay: {events:,} events in {times['replay']:.1f} s ({_counted(result['units'], 'task')}: "
        f"{result['read_seconds']:.1f} s reading, {result['seconds'] - result['read_seconds']:.1f} s replaying, "
        f"{result['cpu_seconds']:.1f} s of CPU, summed over tasks)"
    )
    totals = result["totals"] if result.get("totals") is not None else np.zeros((0, len(METRICS)), np.int64)
    overall = {"events": events, **overall_figures(totals, int(result["queues"]), int(totals[:, 0].sum()))}
    grid = stages.grid_figures(result, args.grid) if args.grid else None
    overall["interval_s"] = args.interval
    overall["rule"] = args.rule
    overall["memory_budget_bytes"] = args.memory_budget
    overall["t0_us"] = job["t0"]
    overall["java"] = java.describe()
    overall["master"] = spark.sparkContext.master
    overall["tasks_failed"] = stages.failed_tasks(spark, group)
    overall["task_cpu_seconds"] = {
        "layout": layout.get("task_cpu_seconds") if how == "made" else 0.0,
        "replay": round(result["cpu_seconds"], 3),
    }
    if overall["tasks_failed"]:
        log(f"retries: {overall['tasks_failed']} task attempts failed (an executor lost?) and ran again")
    times["report"] = 0.0
    before = {**overall, **_speed(events, time.perf_counter() - t_start, times, layout, how, trace_dir)}
    with stages.timed(times, "report"):
        if args.grid:
            charts_warm.join()  # matplotlib is not to be drawn with from two threads at once
        html = render(totals, result.get("top", []), before, grid)
    seconds = time.perf_counter() - t_start
    overall.update(_speed(events, seconds, times, layout, how, trace_dir))
    _write_atomically(os.path.join(args.out, "overall.json"), json.dumps(overall, indent=2))
    _write_atomically(os.path.join(args.out, "report.html"), restamp(html, before, overall))
    log(
        f"done: {events:,} events in {seconds:.1f} s after the JVM start, {overall['events_per_second'] / 1e6:.1f} M "
        f"events/s ({overall['events_per_second_with_jvm_start'] / 1e6:.1f} M events/s with the JVM's "
        f"{times['spark_start']:.1f} s start); layout {how}; stages {times}: {args.out}/report.html"
    )
    return overall


def _speed(events: int, seconds: float, times: dict, layout: dict, how: str, trace_dir: str) -> dict:
    """The run's speed and its layout, for overall.json and the report: events/s after the
    JVM's start and with it, each stage's seconds, and whether the layout was made or reused."""
    return {
        "seconds": round(seconds, 2),
        "seconds_with_jvm_start": round(seconds + times["spark_start"], 2),
        "events_per_second": int(events / max(1e-9, seconds)),
        "events_per_second_with_jvm_start": int(events / max(1e-9, seconds + times["spark_start"])),
        "stage_seconds": dict(times),
        "path": {
            "given": "laid out by queue",
            "reused": "layout reused",
            "made": "laid out by a Spark job",
            "direct": "read whole by each task",
        }[how],
        "layout": {
            "how": how,
            "reused": how == "reused",
            "directory": None if how == "direct" else trace_dir,
            "made_by": layout.get("made_by", "sweepq trace"),
            "seconds": times["layout"],
            "seconds_when_made": layout.get("seconds"),
        },
    }


def _clear_results(out: str) -> None:
    """Remove a previous run's results (the layout stays, for reuse): a run that fails then
    leaves no report that could be taken for its own."""
    import shutil

    if "://" in out:
        return
    os.makedirs(out, exist_ok=True)
    for sub in ("metrics", "summary", "grid_queues"):
        shutil.rmtree(os.path.join(out, sub), ignore_errors=True)
    for name in ("overall.json", "report.html"):
        if os.path.exists(os.path.join(out, name)):
            os.remove(os.path.join(out, name))


def _why_spark_failed(e: Exception) -> str:
    """The first line of what Spark said (a Java exception's message, not its stack)."""
    java = getattr(e, "java_exception", None)
    text = str(java.toString()) if java is not None else str(e)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(e).__name__)
    return first[:400]


EXIT_INTERRUPTED = 130  # 128 + SIGINT, as every sweepq command interrupted (cli/main.py)


def main(argv: list[str] | None = None) -> int:
    """``sweepq pipeline`` and spark-submit's entry: exit 0 with overall.json on stdout; 2 with
    one line for a bad argument or trace (or no Java); 1 with one line when Spark fails (no
    report is left then); 130 with one line when interrupted (Ctrl-C: pyspark cancels the
    running job first; the JVM, which ignores SIGINT, ends when this process does, and the
    Python daemon and workers with it)."""
    args = build_parser().parse_args(argv)
    from sweepq.sweeper.traces import TraceError

    prog = "sweepq pipeline"
    try:
        overall = run(args, log=lambda s: print(s, file=sys.stderr, flush=True))
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (TraceError, FileNotFoundError) as e:
        print(f"{prog}: error: argument --traces: {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:
        if "needs Java" not in str(e):
            print(
                f"{prog}: error: the Spark job failed: {_why_spark_failed(e)}; no report was written", file=sys.stderr
            )
            return 1
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # Spark's own failures (py4j, pyspark): one line, not a Java stack
        print(f"{prog}: error: the Spark job failed: {_why_spark_failed(e)}; no report was written", file=sys.stderr)
        return 1
    print(json.dumps(overall, indent=2))
    return 0


if __name__ == "__main__":  # spark-submit runs this file
    sys.exit(main())
