"""The pipeline's stages, each a plain DataFrame -> DataFrame function.

read_traces -> validate -> replay_queues (the numba kernel per queue, via applyInPandas)
-> per-interval metrics -> summarize (per queue and overall); what_if runs a grid of rule
parameters in the same single pass over each queue's events.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS, METRICS, SUMMARY, replay
from sweepq.sweeper.traces import COLUMNS, GET, PUT, Trace, TraceError

TRACE_SCHEMA = T.StructType(
    [
        T.StructField("time_us", T.LongType()),
        T.StructField("queue", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("bytes", T.IntegerType()),
        T.StructField("priority", T.ByteType()),
        T.StructField("persistent", T.BooleanType()),
    ]
)
METRICS_SCHEMA = T.StructType(
    [T.StructField("queue", T.StringType()), T.StructField("interval", T.IntegerType())]
    + [T.StructField(m, T.LongType()) for m in METRICS]
)
GRID_SCHEMA = T.StructType(
    [
        T.StructField("queue", T.StringType()),
        T.StructField("interval_s", T.DoubleType()),
        T.StructField("factor", T.IntegerType()),
        T.StructField("extra", T.IntegerType()),
        T.StructField("blob_bytes", T.IntegerType()),
    ]
    + [T.StructField(s, T.LongType()) for s in SUMMARY]
)


def read_traces(spark: SparkSession, path: str) -> DataFrame:
    """Parquet (file or directory) or CSV with a header; columns cast to the trace schema and
    a ``row`` id added (Spark's monotonically increasing id: the row within its split)."""
    df = spark.read.csv(path, header=True, inferSchema=True) if path.endswith(".csv") else spark.read.parquet(path)
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise TraceError(missing[0], None, f"is missing from {path} (a trace needs {', '.join(COLUMNS)})")
    df = df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in TRACE_SCHEMA.fields])
    return df.withColumn("row", F.monotonically_increasing_id())


def validate(df: DataFrame) -> DataFrame:
    """Fail with a TraceError naming the column and row of the first bad value.

    Every rule is a Spark expression evaluated in the JVM, in one aggregation that finds
    each rule's first offending row (rows never travel to Python for this); the message is
    built for that one row. Time order within each queue, which is what the replay relies
    on, is checked where each queue's rows already are: in the replay pass
    (:func:`replay_queues`), which raises the same TraceError."""
    op = F.col("op")
    puts = op.isin("put", "PUT", "Put")
    rules = [
        ("time_us", F.col("time_us").isNull(), lambda r: "time is missing (null)"),
        ("time_us", F.col("time_us") < 0, lambda r: f"negative time {r['time_us']}"),
        (
            "op",
            op.isNull() | ~(puts | op.isin("get", "GET", "Get")),
            lambda r: f"unknown operation {r['op']!r} (use put or get)",
        ),
        (
            "priority",
            puts & (F.col("priority").isNull() | (F.col("priority") < 0) | (F.col("priority") > 9)),
            lambda r: f"priority {r['priority']} is outside 0..9",
        ),
        ("bytes", puts & (F.col("bytes").isNull() | (F.col("bytes") < 0)), lambda r: f"bad size {r['bytes']}"),
    ]
    firsts = df.agg(*[F.min(F.when(cond, F.col("row"))).alias(f"r{i}") for i, (_c, cond, _w) in enumerate(rules)])
    first = firsts.first()
    found = [(first[f"r{i}"], i) for i in range(len(rules)) if first[f"r{i}"] is not None]
    if found:
        row, i = min(found)
        bad = df.filter(F.col("row") == row).first()
        raise TraceError(rules[i][0], int(row), rules[i][2](bad))
    return df


def span(df: DataFrame) -> tuple[int, int, int]:
    """(events, first time, last time) in one pass."""
    row = df.agg(F.count(F.lit(1)).alias("n"), F.min("time_us").alias("lo"), F.max("time_us").alias("hi")).first()
    return int(row["n"]), int(row["lo"] or 0), int(row["hi"] or 0)


def raising_trace_errors(action):
    """Run a Spark action; a TraceError raised inside a task comes back as itself."""
    import re

    try:
        return action()
    except TraceError:
        raise
    except Exception as e:
        m = re.search(r"TraceError: trace column '([^']+)', row (\d+): ([^\n]*)", str(e))
        if m:
            raise TraceError(m.group(1), int(m.group(2)), m.group(3)) from None
        raise


def _slim(df: DataFrame) -> DataFrame:
    """Only what the kernel needs, in narrow types, before rows travel to Python."""
    return df.select(
        "time_us",
        "queue",
        F.when(F.lower(F.col("op")) == "put", F.lit(PUT)).otherwise(F.lit(GET)).cast("byte").alias("op"),
        F.coalesce(F.col("bytes"), F.lit(0)).alias("bytes"),
        F.coalesce(F.col("priority"), F.lit(0)).cast("byte").alias("priority"),
        "row",
    )


def _check_order(pdf: pd.DataFrame) -> None:
    """Times must not go backwards within a queue, in the order the trace was written."""
    by_row = pdf.sort_values(["queue", "row"], kind="stable")
    t = by_row["time_us"].to_numpy()
    same = by_row["queue"].to_numpy()[1:] == by_row["queue"].to_numpy()[:-1]
    back = np.flatnonzero(same & (t[1:] < t[:-1]))
    if len(back):
        i = int(back[0]) + 1
        raise TraceError(
            "time_us",
            int(by_row["row"].iloc[i]),
            f"time {int(t[i])} of queue {by_row['queue'].iloc[i]!r} is before that queue's previous row",
        )


def _trace_of(pdf: pd.DataFrame) -> Trace:
    """The events of one group (one or many queues) as a Trace, in time order."""
    _check_order(pdf)
    pdf = pdf.sort_values(["time_us", "row"], kind="stable")
    queues, codes = np.unique(pdf["queue"].to_numpy(str), return_inverse=True)
    n = len(pdf)
    return Trace(
        time_us=pdf["time_us"].to_numpy(np.int64),
        queue=codes.astype(np.int32),
        op=pdf["op"].to_numpy(np.int8),
        nbytes=pdf["bytes"].to_numpy(np.int32),
        priority=pdf["priority"].to_numpy(np.int8),
        persistent=np.zeros(n, bool),  # recorded in traces, not modelled by the replay
        queues=[str(q) for q in queues],
    )


def _buckets(df: DataFrame, buckets: int | None) -> tuple[DataFrame, int]:
    """Spread queues over a few buckets: one Python task replays a whole bucket in one kernel
    call, instead of one task (and one pandas round trip) per queue."""
    n = buckets or max(2, df.sparkSession.sparkContext.defaultParallelism * 4)
    return _slim(df).withColumn("bucket", F.pmod(F.xxhash64("queue"), F.lit(n))), n


def replay_queues(
    df: DataFrame,
    policy: SweepPolicy,
    t0: int,
    n_intervals: int,
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
    buckets: int | None = None,
) -> DataFrame:
    """Per queue and interval: the kernel's metrics (one row per queue per interval)."""

    def per_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        trace = _trace_of(pdf)
        r = replay(
            trace,
            policy,
            t0=t0,
            n_intervals=n_intervals,
            max_blob_bytes=max_blob_bytes,
            max_blob_records=max_blob_records,
        )
        nq = len(trace.queues)
        out = pd.DataFrame(r.intervals.reshape(nq * n_intervals, len(METRICS)), columns=list(METRICS))
        out.insert(0, "interval", np.tile(np.arange(n_intervals, dtype=np.int32), nq))
        out.insert(0, "queue", np.repeat(np.asarray(trace.queues, dtype=object), n_intervals))
        return out

    bucketed, _ = _buckets(df, buckets)
    return bucketed.groupBy("bucket").applyInPandas(per_bucket, schema=METRICS_SCHEMA)


def summarize(metrics: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(per queue, per interval over all queues). Per queue: peak memory with and without
    sweeping, memory saved at the peak, volume read back, sweeps."""
    per_queue = (
        metrics.groupBy("queue")
        .agg(
            F.max("mem_bytes").alias("peak_mem_bytes"),
            F.max("nosweep_bytes").alias("peak_nosweep_bytes"),
            F.sum("bytes_read").alias("bytes_read"),
            F.sum("blobs_read").alias("blobs_read"),
            F.sum("blobs_written").alias("blobs_written"),
            F.sum(F.when(F.col("decision") >= 0, 1).otherwise(0)).alias("sweeps"),
        )
        .withColumn("peak_saved_bytes", F.col("peak_nosweep_bytes") - F.col("peak_mem_bytes"))
    )
    totals = (
        metrics.groupBy("interval")
        .agg(*[F.sum(m).alias(m) for m in METRICS if m not in ("decision",)])
        .orderBy("interval")
    )
    return per_queue, totals


def parse_grid(text: str) -> list[tuple[float, int, int, int]]:
    """'interval=1,5;factor=2,3;extra=5;blob_bytes=65536,262144' -> every combination."""
    import itertools

    axes = {"interval": [5.0], "factor": [2], "extra": [5], "blob_bytes": [DEFAULT_MAX_BLOB_BYTES]}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        if "=" not in part:
            raise ValueError(f"grid part {part!r}: write name=v1,v2 (names: {', '.join(axes)})")
        name, values = part.split("=", 1)
        name = name.strip()
        if name not in axes:
            raise ValueError(f"unknown grid axis {name!r}; use {', '.join(axes)}")
        cast = float if name == "interval" else int
        axes[name] = [cast(v) for v in values.split(",") if v.strip()]
    return list(itertools.product(axes["interval"], axes["factor"], axes["extra"], axes["blob_bytes"]))


def what_if(
    df: DataFrame, grid: list[tuple[float, int, int, int]], t0: int, t_end: int, buckets: int | None = None
) -> DataFrame:
    """Every combination of the grid for every queue, in one job: each bucket of queues is
    shipped once and replayed once per combination."""

    def per_bucket(pdf: pd.DataFrame) -> pd.DataFrame:
        trace = _trace_of(pdf)
        rows = []
        for interval, factor, extra, blob_bytes in grid:
            policy = SweepPolicy(factor=factor, extra=extra, interval=interval)
            n_int = int((t_end - t0) // int(interval * 1e6) + 1)
            r = replay(trace, policy, t0=t0, n_intervals=n_int, max_blob_bytes=blob_bytes, per_interval=False)
            for qi, q in enumerate(trace.queues):
                rows.append([q, interval, factor, extra, blob_bytes, *map(int, r.summary[qi])])
        return pd.DataFrame(rows, columns=[f.name for f in GRID_SCHEMA.fields])

    bucketed, _ = _buckets(df, buckets)
    return bucketed.groupBy("bucket").applyInPandas(per_bucket, schema=GRID_SCHEMA)
