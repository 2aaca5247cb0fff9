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
    """Fail with a TraceError naming the column and row of the first bad value."""

    def first(cond, column: str, why) -> None:
        bad = df.filter(cond).orderBy("row").select("row", column, "queue").first()
        if bad is not None:
            raise TraceError(column, int(bad["row"]), why(bad))

    first(F.col("time_us").isNull(), "time_us", lambda b: "time is missing (null)")
    first(F.col("time_us") < 0, "time_us", lambda b: f"negative time {b['time_us']}")
    first(
        ~F.lower(F.col("op")).isin("put", "get") | F.col("op").isNull(),
        "op",
        lambda b: f"unknown operation {b['op']!r} (use put or get)",
    )
    puts = F.lower(F.col("op")) == "put"
    first(
        puts & ((F.col("priority") < 0) | (F.col("priority") > 9) | F.col("priority").isNull()),
        "priority",
        lambda b: f"priority {b['priority']} is outside 0..9",
    )
    first(puts & ((F.col("bytes") < 0) | F.col("bytes").isNull()), "bytes", lambda b: f"bad size {b['bytes']}")

    # Times must not go backwards in the order the trace was written (checked per split).
    def check(batches):
        for pdf in batches:
            t = pdf["time_us"].to_numpy()
            back = np.flatnonzero(np.diff(t) < 0)
            if len(back):
                i = int(back[0]) + 1
                yield pd.DataFrame({"row": [int(pdf["row"].iloc[i])], "time_us": [int(t[i])]})

    bad = df.select("row", "time_us").mapInPandas(check, "row long, time_us long").orderBy("row").first()
    if bad is not None:
        raise TraceError("time_us", int(bad["row"]), f"time {bad['time_us']} is before the previous row's")
    return df


def time_span(df: DataFrame) -> tuple[int, int]:
    row = df.agg(F.min("time_us").alias("lo"), F.max("time_us").alias("hi")).first()
    return int(row["lo"]), int(row["hi"])


def _trace_of(pdf: pd.DataFrame) -> Trace:
    pdf = pdf.sort_values(["time_us", "row"], kind="stable")
    op = np.where(pdf["op"].str.lower().to_numpy() == "put", PUT, GET).astype(np.int8)
    return Trace(
        time_us=pdf["time_us"].to_numpy(np.int64),
        queue=np.zeros(len(pdf), np.int32),
        op=op,
        nbytes=pdf["bytes"].fillna(0).to_numpy(np.int32),
        priority=pdf["priority"].fillna(0).to_numpy(np.int8),
        persistent=pdf["persistent"].fillna(False).to_numpy(bool),
        queues=[str(pdf["queue"].iloc[0])],
    )


def replay_queues(
    df: DataFrame,
    policy: SweepPolicy,
    t0: int,
    n_intervals: int,
    max_blob_bytes: int = DEFAULT_MAX_BLOB_BYTES,
    max_blob_records: int = DEFAULT_MAX_BLOB_RECORDS,
) -> DataFrame:
    """Per queue and interval: the kernel's metrics (one row per queue per interval)."""

    def per_queue(pdf: pd.DataFrame) -> pd.DataFrame:
        trace = _trace_of(pdf)
        r = replay(
            trace,
            policy,
            t0=t0,
            n_intervals=n_intervals,
            max_blob_bytes=max_blob_bytes,
            max_blob_records=max_blob_records,
        )
        out = pd.DataFrame(r.intervals[0], columns=list(METRICS))
        out.insert(0, "interval", np.arange(n_intervals, dtype=np.int32))
        out.insert(0, "queue", trace.queues[0])
        return out

    return df.groupBy("queue").applyInPandas(per_queue, schema=METRICS_SCHEMA)


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


def what_if(df: DataFrame, grid: list[tuple[float, int, int, int]], t0: int, t_end: int) -> DataFrame:
    """Every combination of the grid for every queue, in one job: each queue's events are
    shipped once and replayed once per combination."""

    def per_queue(pdf: pd.DataFrame) -> pd.DataFrame:
        trace = _trace_of(pdf)
        rows = []
        for interval, factor, extra, blob_bytes in grid:
            policy = SweepPolicy(factor=factor, extra=extra, interval=interval)
            n_int = int((t_end - t0) // int(interval * 1e6) + 1)
            r = replay(trace, policy, t0=t0, n_intervals=n_int, max_blob_bytes=blob_bytes, per_interval=False)
            rows.append([trace.queues[0], interval, factor, extra, blob_bytes, *map(int, r.summary[0])])
        return pd.DataFrame(rows, columns=[f.name for f in GRID_SCHEMA.fields])

    return df.groupBy("queue").applyInPandas(per_queue, schema=GRID_SCHEMA)
