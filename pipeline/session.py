"""A Spark session that works on a bare machine: Java as pipeline/java.py chooses it."""

from __future__ import annotations

import contextlib
import os
import sys
import threading


def spark_session(
    master: str | None = "local[*]",
    app: str = "sweepq-pipeline",
    shuffle_partitions: int | None = None,
    ui: bool = False,
    jit: bool = True,
    sql: bool = True,
):
    """A session for the pipeline. ``master`` None: the one spark-submit was given when it runs
    this process (its JVM is up then), else local[*]. The driver keeps Spark's default memory
    (no event reaches it; SWEEPQ_SPARK_DRIVER_MEMORY overrides); ``ui`` keeps the web UI,
    whose address the job prints. The driver's JVM, when this process starts it, maps a cached
    archive of Spark's classes and compiles with C1 only (pipeline/jvm_start.py; ``jit`` False
    keeps the full compiler, for JVM-heavy jobs such as the JVM shuffle). ``sql`` False: a
    :class:`ContextSession`, whose JVM SparkSession is created only if Spark SQL is used."""
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
    # The session's settings, kept here (not read back from the builder) so that the start's
    # SparkContext (_start) is made with the same ones.
    conf = {
        "spark.app.name": app,
        "spark.ui.enabled": "true" if ui else "false",
        "spark.ui.showConsoleProgress": "false",
        # Workers forked from a daemon that has the kernel loaded start warm (pipeline/daemon.py).
        "spark.python.daemon.module": "sweepq.pipeline.daemon",
    }
    if master is not None:  # else spark-submit's
        conf["spark.master"] = master
    if loopback:
        conf["spark.driver.host"] = conf["spark.driver.bindAddress"] = "127.0.0.1"
    options = "" if submitted else driver_options(rt, _spark_jars(), jit)
    if options:  # the JVM this process starts (spark-submit's is up already)
        conf["spark.driver.extraJavaOptions"] = options
    if os.environ.get("SWEEPQ_SPARK_DRIVER_MEMORY"):
        conf["spark.driver.memory"] = os.environ["SWEEPQ_SPARK_DRIVER_MEMORY"]
    if shuffle_partitions:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    workers_python = os.environ["PYSPARK_PYTHON"]
    if prestarts(master, submitted, _jvm_up()) and prestart.start() is not None:
        # The JVM starts the daemon by a launcher that hands over at once (pipeline/launcher.py):
        # this session's workers' interpreter (SparkContext reads it when it starts).
        os.environ["PYSPARK_PYTHON"] = prestart.launcher_script() or workers_python
    warm = first_job_warms(master, submitted, _jvm_up())
    try:
        # Started outside Py4J's calls on this thread: a Ctrl-C meanwhile is one line (interrupt.py).
        spark = on_thread(lambda: _start(builder, conf, warm, sql), _cancel_jobs, name="sweepq-spark-start")
    except BaseException:
        prestart.release()
        raise
    finally:
        prestart.started()
        os.environ["PYSPARK_PYTHON"] = workers_python
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def first_job_warms(master: str | None, submitted: bool, jvm_up: bool) -> bool:
    """Whether the session's start runs a first job of its own (:func:`_start`): on a local
    master whose JVM this process starts, unless ``SWEEPQ_PIPELINE_FIRST_JOB=0``."""
    on = os.environ.get("SWEEPQ_PIPELINE_FIRST_JOB", "1") != "0"
    return on and prestarts(master, submitted, jvm_up)


def _start(builder, conf: dict[str, str], warm: bool, sql: bool = True):
    """``builder.getOrCreate()`` (``conf``: its settings; ``sql`` False: the SparkContext
    alone, in a :class:`ContextSession`); with ``warm``, the SparkContext first, then a no-op
    job (:func:`warm_up`) on a thread of its own while this one creates the JVM's
    SparkSession, if any.

    Why: a run's first job paid 0.4-0.65 s of first-time work outside its task (the JVM's
    first runJob, the task's broadcast, starting the Python daemon and a worker, the result's
    return: docs/pipeline.md, "The first job's fixed cost"). Done here, that work leaves the
    pipeline's own first job (the replay's, on a direct run), which reuses the worker: a move
    more than a saving (measured, 0.36-0.56 s less after the start, about 0.55 s more in it;
    beside a SparkSession's creation it overlaps only where a core is idle)."""
    if not warm and sql:
        return builder.getOrCreate()
    from pyspark import SparkConf, SparkContext

    sc = SparkContext.getOrCreate(SparkConf().setAll(list(conf.items())))
    job = threading.Thread(target=warm_up, args=(sc,), name="sweepq-first-job", daemon=True)
    if warm:
        job.start()
    # The JVM's SparkSession (found the SparkContext), or none yet.
    spark = builder.getOrCreate() if sql else ContextSession(sc, builder)
    if warm:
        job.join()
    return spark


class ContextSession:
    """A session without Spark SQL until something uses it: ``sparkContext`` and :meth:`stop`
    at once; any other attribute creates the JVM's SparkSession then (``builder.getOrCreate()``,
    which finds the SparkContext) and is that session's.

    Why: creating the JVM's SparkSession (Spark SQL's classes, its configuration) took 1.0 to
    1.7 s of the JVM's start, one Py4J call, and a pipeline run uses Spark SQL only for the
    JVM shuffle (pipeline/stages.py ``partition``, ``row_of_id``)."""

    def __init__(self, sc, builder) -> None:
        self.sparkContext = sc
        self._builder = builder
        self._spark = None

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_builder", "_spark"):
            raise AttributeError(name)
        if self._spark is None:
            self._spark = self._builder.getOrCreate()
        return getattr(self._spark, name)

    def stop(self) -> None:
        """Stop the session, or the SparkContext when no session was made."""
        (self._spark or self.sparkContext).stop()


def _nothing(_it) -> list:
    """The warm-up's task: nothing."""
    return []


def _cancel_jobs() -> None:
    """On a Ctrl-C during the start: cancel the warm-up job, if the SparkContext is up (a task
    that ended after the driver had gone would have the JVM log its failure to update the
    driver's accumulators, a Java stack)."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        sc.cancelAllJobs()


def warm_up(sc) -> None:
    """A one-task no-op Python job on ``sc`` (errors are left to the pipeline's own jobs)."""
    with contextlib.suppress(Exception):
        sc.setJobDescription("sweepq warm-up")
        sc.parallelize([0], 1).mapPartitions(_nothing).collect()
        tracker = sc.statusTracker()  # read after each run (stages.failed_tasks): its first calls too
        for job in tracker.getJobIdsForGroup(None):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                tracker.getStageInfo(stage)


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
