"""A Spark standalone cluster on this machine, started from pyspark's own launcher.

:class:`LocalCluster` starts a master and N workers with ``bin/spark-class
org.apache.spark.deploy.master.Master`` / ``...worker.Worker`` (the scripts pip installs with
pyspark), on 127.0.0.1 only, on ports chosen free, with the Java of pipeline/java.py; waits
until every worker has registered; and stops them all, executors included, whatever
happened (a context manager; each process is the leader of its own process group, and the
group is what is stopped). It is what the tests and ``sweepq bench replay --cluster`` run
the pipeline on, and what docs/pipeline.md shows by hand::

    with LocalCluster(workers=2) as cluster:
        run(... --master cluster.url ...)

Not thread-safe; one cluster per object. Logs go to ``<work dir>/logs``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping

HOST = "127.0.0.1"
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the OS's choice)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def spark_env(base: Mapping[str, str] | None = None) -> dict:
    """The environment for Spark's scripts and JVMs here: ``base`` (default: this process's)
    with SPARK_HOME, JAVA_HOME (java.py's choice in ``base``), 127.0.0.1 as the local address,
    and this interpreter for the Python workers."""
    from .java import java_home, runtime

    env = dict(os.environ if base is None else base)
    env.update(
        SPARK_HOME=spark_home(),
        JAVA_HOME=java_home(runtime(env)),
        SPARK_LOCAL_IP=HOST,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    return env


class ClusterError(RuntimeError):
    """The cluster did not start: says which process and the end of its log."""


class LocalCluster:
    """A master and ``workers`` workers of ``cores`` cores and ``memory`` each (see the module
    docstring), started in the environment ``env`` (default: this process's; its Java is
    chosen by java.py). ``url`` is the master's ``spark://127.0.0.1:PORT``; ``env`` is the
    environment to run a driver in (spark-submit, ``sweepq pipeline``) against it."""

    def __init__(
        self,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        work_dir: str | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._own_dir = work_dir is None
        self.work_dir = work_dir or tempfile.mkdtemp(prefix="sweepq-cluster-")
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://{HOST}:{self.port}"
        self.procs: list[subprocess.Popen] = []
        self.env = spark_env(env)

    # -- start ------------------------------------------------------------------------------

    def _launch(self, name: str, *args: str) -> subprocess.Popen:
        logs = os.path.join(self.work_dir, "logs")
        os.makedirs(logs, exist_ok=True)
        log = open(os.path.join(logs, f"{name}.log"), "wb")  # noqa: SIM115 (kept open by the child)
        cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
        p = subprocess.Popen(cmd, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        p.name = name  # type: ignore[attr-defined]
        self.procs.append(p)
        return p

    def start(self, timeout: float = 90.0) -> LocalCluster:
        """Start the master, then the workers; return when all have registered.

        :raises ClusterError: a process exited, or the workers did not register in
            ``timeout`` seconds (the cluster is stopped before raising)."""
        try:
            self._launch("master", MASTER, "--host", HOST, "--port", str(self.port), "--webui-port", str(self.ui_port))
            for w in range(self.workers):
                work = os.path.join(self.work_dir, f"worker-{w}")
                self._launch(
                    f"worker-{w}",
                    WORKER,
                    self.url,
                    "--host",
                    HOST,
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                    "--work-dir",
                    work,
                )
            self._wait(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def state(self) -> dict:
        """The master's view (its web UI's JSON): workers, cores, applications."""
        with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=5) as r:
            return json.load(r)

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for p in self.procs:
                if p.poll() is not None:
                    raise ClusterError(f"the {p.name} exited with code {p.returncode}: {self.log_tail(p.name)}")
            try:
                if self.state().get("aliveworkers", 0) >= self.workers:
                    return
            except (OSError, ValueError):
                pass  # the master's UI is not up yet (no answer, or an empty page while it starts)
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"{self.workers} workers did not register in {timeout:.0f} s: {self.log_tail('master')}"
                )
            time.sleep(0.2)

    def log_tail(self, name: str, lines: int = 15) -> str:
        try:
            with open(os.path.join(self.work_dir, "logs", f"{name}.log"), errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    # -- executors and stop -----------------------------------------------------------------

    def executor_pids(self) -> list[int]:
        """The process ids of the executors the workers run now (their JVMs)."""
        import psutil

        pids = []
        for p in self.procs:
            if not p.name.startswith("worker"):
                continue
            try:
                children = psutil.Process(p.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                continue
            pids += [c.pid for c in children if "CoarseGrainedExecutorBackend" in " ".join(_cmdline(c))]
        return pids

    def stop(self) -> None:
        """Stop every process the cluster started, executors and Python workers included:
        SIGTERM to each process group, SIGKILL after a grace period. Idempotent."""
        for sig, grace in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            alive = [p for p in self.procs if p.poll() is None or _group_alive(p.pid)]
            if not alive:
                break
            for p in alive:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and any(p.poll() is None or _group_alive(p.pid) for p in alive):
                time.sleep(0.1)
        for p in self.procs:
            p.poll()
        self.procs = []
        if self._own_dir:
            import shutil

            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _cmdline(proc) -> list[str]:
    try:
        return proc.cmdline()
    except Exception:
        return []


def _group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (signal 0 checks without signalling)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
