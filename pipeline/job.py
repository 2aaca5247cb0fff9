"""``sweepq pipeline``: replay the sweep rule over traces with Spark and report.

Runs with a local master by default, with any master URL for a cluster, and through
spark-submit (this file is a script: ``spark-submit .../sweepq/pipeline/job.py --traces ...``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sweepq pipeline",
        description="Replay the slow queue sweeper's rule over message traces with Spark: per-interval "
        "metrics (Parquet), summaries per queue and overall, and an HTML report.",
    )
    p.add_argument("--traces", required=True, help="trace Parquet file or directory, or a .csv file")
    p.add_argument("--out", required=True, help="output directory (created)")
    p.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    p.add_argument("--interval", type=float, default=5.0, help="sweep interval, seconds (default 5)")
    p.add_argument("--factor", type=int, default=2, help="sweep when y > factor * x (default 2)")
    p.add_argument("--extra", type=int, default=5, help="buffer kept: x + extra (default 5)")
    p.add_argument("--blob-bytes", type=int, default=256 * 1024, help="max bytes per blob (default 262144)")
    p.add_argument("--blob-records", type=int, default=1024, help="max records per blob (default 1024)")
    p.add_argument(
        "--grid",
        default=None,
        help="what-if grid, e.g. 'interval=1,5;factor=2,3;extra=0,5;blob_bytes=65536,262144' "
        "(every combination, one Spark job)",
    )
    return p


def run(args: argparse.Namespace, spark=None, log=print) -> dict:
    from sweepq.sweeper import SweepPolicy

    from . import stages
    from .report import render
    from .session import spark_session

    t_start = time.perf_counter()
    spark = spark or spark_session(args.master)
    os.makedirs(args.out, exist_ok=True)
    log(f"reading and validating {args.traces}")
    df = stages.validate(stages.read_traces(spark, args.traces))
    events, t0, t_end = stages.span(df)
    policy = SweepPolicy(factor=args.factor, extra=args.extra, interval=args.interval)
    n_int = int((t_end - t0) // int(policy.interval * 1e6) + 1)
    log(f"{events:,} events, {n_int:,} intervals of {policy.interval} s: replaying each queue")
    metrics = stages.replay_queues(df, policy, t0, n_int, args.blob_bytes, args.blob_records)
    stages.raising_trace_errors(lambda: metrics.write.mode("overwrite").parquet(os.path.join(args.out, "metrics")))
    metrics = spark.read.parquet(os.path.join(args.out, "metrics"))
    per_queue, totals = stages.summarize(metrics)
    per_queue.write.mode("overwrite").parquet(os.path.join(args.out, "summary"))
    pq_pd = per_queue.toPandas()
    tot_pd = totals.toPandas()
    overall = {
        "events": int(events),
        "queues": len(pq_pd),
        "intervals": int(n_int),
        "peak_memory_with_sweeper_bytes": int(tot_pd["mem_bytes"].max()) if len(tot_pd) else 0,
        "peak_memory_without_sweeping_bytes": int(tot_pd["nosweep_bytes"].max()) if len(tot_pd) else 0,
        "bytes_read_back": int(tot_pd["bytes_read"].sum()) if len(tot_pd) else 0,
        "blobs_read_back": int(tot_pd["blobs_read"].sum()) if len(tot_pd) else 0,
    }
    overall["peak_memory_saved_bytes"] = (
        overall["peak_memory_without_sweeping_bytes"] - overall["peak_memory_with_sweeper_bytes"]
    )
    grid_pd = None
    if args.grid:
        grid = stages.parse_grid(args.grid)
        log(f"what-if grid: {len(grid)} combinations")
        g = stages.what_if(df, grid, t0, t_end)
        stages.raising_trace_errors(lambda: g.write.mode("overwrite").parquet(os.path.join(args.out, "grid")))
        grid_pd = g.toPandas()
    overall["seconds"] = round(time.perf_counter() - t_start, 2)
    overall["events_per_second"] = int(events / max(1e-9, overall["seconds"]))
    with open(os.path.join(args.out, "overall.json"), "w") as f:
        json.dump(overall, f, indent=2)
    with open(os.path.join(args.out, "report.html"), "w") as f:
        f.write(render(tot_pd, pq_pd, overall, grid_pd))
    log(f"done in {overall['seconds']} s: {args.out}/report.html")
    return overall


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from sweepq.sweeper.traces import TraceError

    try:
        overall = run(args)
    except TraceError as e:
        print(f"sweepq pipeline: bad trace: {e}", file=sys.stderr)
        return 2
    print(json.dumps(overall, indent=2))
    return 0


if __name__ == "__main__":  # spark-submit runs this file
    sys.exit(main())
