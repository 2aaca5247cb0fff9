"""A Spark session that works on a bare machine: Java as pipeline/java.py chooses it."""

from __future__ import annotations

import os
import sys


def spark_session(
    master: str | None = "local[*]",
    app: str = "sweepq-pipeline",
    shuffle_partitions: int | None = None,
    ui: bool = False,
    jit: bool = True,
):
    """A session for the pipeline. ``master`` None: the one spark-submit was given when it runs
    this process (its JVM is up then), else local[*]. The driver keeps Spark's default memory
    (no event reaches it; SWEEPQ_SPARK_DRIVER_MEMORY overrides); ``ui`` keeps the web UI,
    whose address the job prints. The driver's JVM, when this process starts it, maps a cached
    archive of Spark's classes and compiles with C1 only (pipeline/jvm_start.py; ``jit`` False
    keeps the full compiler, for JVM-heavy jobs such as the JVM shuffle)."""
    from pyspark.sql import SparkSession

    from . import prestart
    from .interrupt import on_thread
    from .java import java_home, runtime
    from .jvm_start import driver_options

    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM and this process
    if master is None and not submitted:
        master = "local[*]"
    rt = runtime()
    os.environ["JAVA_HOME"] = java_home(rt)
    loopback = master is not None and (master.startswith("local") or _host(master) in ("127.0.0.1", "localhost"))
    if loopback:  # a machine's own cluster: bind to 127.0.0.1, not to whatever the hostname resolves to
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Spark's Python workers must run this interpreter (the one sweepq is installed in).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    builder = (
        builder.appName(app)
        .config("spark.ui.enabled", "true" if ui else "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Workers forked from a daemon that has the kernel loaded start warm (pipeline/daemon.py).
        .config("spark.python.daemon.module", "sweepq.pipeline.daemon")
    )
    if loopback:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    options = "" if submitted else driver_options(rt, _spark_jars(), jit)
    if options:  # the JVM this process starts (spark-submit's is up already)
        builder = builder.config("spark.driver.extraJavaOptions", options)
    if os.environ.get("SWEEPQ_SPARK_DRIVER_MEMORY"):
        builder = builder.config("spark.driver.memory", os.environ["SWEEPQ_SPARK_DRIVER_MEMORY"])
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    workers_python = os.environ["PYSPARK_PYTHON"]
    if prestarts(master, submitted, _jvm_up()) and prestart.start() is not None:
        # The JVM starts the daemon by a launcher that hands over at once (pipeline/launcher.py):
        # this session's workers' interpreter (SparkContext reads it when it starts).
        os.environ["PYSPARK_PYTHON"] = prestart.launcher_script() or workers_python
    try:
        # Started outside Py4J's calls on this thread: a Ctrl-C meanwhile is one line (interrupt.py).
        spark = on_thread(builder.getOrCreate, name="sweepq-spark-start")
    except BaseException:
        prestart.release()
        raise
    finally:
        prestart.started()
        os.environ["PYSPARK_PYTHON"] = workers_python
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def prestarts(master: str | None, submitted: bool, jvm_up: bool) -> bool:
    """Whether to pre-start the Python daemon while the JVM starts (pipeline/prestart.py): on
    a local master, whose one daemon is the driver JVM's, when this process starts that JVM
    (under spark-submit, or with a JVM up already, its environment lacks the daemon's socket;
    a cluster's daemons run beside its executors)."""
    return not submitted and not jvm_up and master is not None and master.startswith("local")


def _jvm_up() -> bool:
    """Whether this process has a Spark JVM already (a session's builder reuses it)."""
    from pyspark import SparkContext

    return SparkContext._gateway is not None


def _spark_jars() -> str:
    """The jars of the Spark that pyspark starts: ``$SPARK_HOME/jars``, else pyspark's own."""
    import pyspark

    return os.path.join(os.environ.get("SPARK_HOME") or os.path.dirname(pyspark.__file__), "jars")


def _host(master: str) -> str:
    """The host of a ``spark://host:port`` master URL ('' for any other)."""
    return master.split("://", 1)[1].rsplit(":", 1)[0] if master.startswith("spark://") else ""
