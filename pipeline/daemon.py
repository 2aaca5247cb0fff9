"""Spark's Python daemon with the replay kernel already loaded, so the workers it forks start warm.

Spark starts one daemon per executor (``spark.python.daemon.module``, set by session.py) and
forks a worker from it for each task. pyspark's own daemon imports nothing of ours, so every
worker paid numba's start-up and the load of the compiled kernel and layout scatter (about a
second each) at the start of the first job. Here the daemon pays it once, before it forks:
numba and the compiled functions, and pyarrow's modules (imported, not used: no Arrow
thread pool runs before the fork; the one thread the import starts, jemalloc's background
thread, is fork-safe and started again in a child on demand). No thread of our own. And
pyspark's worker module and the pipeline's stages (the module of the tasks' functions, which
imports pyspark.sql), which each forked worker imported again before its first task (0.08 to
0.13 s each, no thread started).
"""

from __future__ import annotations

if __name__ == "__main__":
    import pyarrow.ipc
    import pyarrow.parquet  # noqa: F401

    from sweepq.pipeline import layout, units  # noqa: F401
    from sweepq.sweeper.replay import warm_up

    warm_up()
    layout.warm_up()
    import pyspark.worker  # noqa: F401
    from pyspark.daemon import manager

    from sweepq.pipeline import stages  # noqa: F401

    manager()
