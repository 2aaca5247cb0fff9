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

Spark puts its own copies of pyspark and py4j first on the daemon's ``sys.path``
(``SPARK_HOME/python/lib/pyspark.zip`` and ``py4j-*-src.zip``). Those zips hold sources only,
so the daemon compiled every pyspark module it imported, on every run: importing
``pyspark.worker`` took 0.46 s of CPU from the zip against 0.08 s from the installed
package's cached bytecode. When this interpreter has the same pyspark (and py4j) installed,
the same version, :func:`prefer_installed` moves the zips behind it; a different version, or
none installed, keeps Spark's copy first, as Spark has it.

On a local master the driver starts such a daemon before the JVM (pipeline/prestart.py):
this module, run by the JVM, then hands its pipes over to that one when it can, and runs
the daemon itself when it cannot.
"""

from __future__ import annotations

import functools
import os
import sys

from sweepq.sweeper.pages import no_hugepage_advice

PR_SET_THP_DISABLE = 41  # <linux/prctl.h>
# Spark's zips on the workers' path, by the package each holds.
SPARK_ZIPS = {"pyspark": "pyspark.zip", "py4j": "py4j-"}


def _zip_version(zip_path: str, package: str) -> bytes | None:
    try:
        st = os.stat(zip_path)
    except OSError:
        return None
    return _zip_version_of(zip_path, package, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _zip_version_of(zip_path: str, package: str, _size: int, _mtime_ns: int) -> bytes | None:
    """The package's ``version.py`` in a zip of that size and time (the pre-started daemon reads
    Spark's zips once, before the JVM asks for it: 0.03 s that were on the first task's path)."""
    import zipfile

    try:
        with zipfile.ZipFile(zip_path) as z:
            return z.read(f"{package}/version.py")
    except (OSError, KeyError, zipfile.BadZipFile):
        return None


def _installed_version(package: str, path: list[str]) -> bytes | None:
    from importlib.machinery import PathFinder

    spec = PathFinder.find_spec(package, path)  # finds, does not import
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        with open(os.path.join(next(iter(spec.submodule_search_locations)), "version.py"), "rb") as f:
            return f.read()
    except OSError:
        return None


def spark_zips() -> list[str]:
    """Spark's zips of pyspark and py4j that its JVM puts on the daemon's path: those of
    ``SPARK_HOME``, else of the installed pyspark (its own Spark home)."""
    import glob

    home = os.environ.get("SPARK_HOME")
    if not home:
        from importlib.util import find_spec

        spec = find_spec("pyspark")
        home = os.path.dirname(spec.origin) if spec is not None and spec.origin else ""
    return sorted(glob.glob(os.path.join(home, "python", "lib", "*.zip"))) if home else []


def prefer_installed(path: list[str]) -> list[str]:
    """``path`` (a ``sys.path``) with each of Spark's source-only zips of pyspark and py4j moved
    to the end when the same version of that package is installed on the rest of the path (its
    ``version.py`` is the same), so it is imported from the installed copy's bytecode; any
    other ``path`` as it is. Call it before pyspark is imported."""
    zips = {
        p: package
        for p in path
        for package, name in SPARK_ZIPS.items()
        if os.path.basename(p).startswith(name) and p.endswith(".zip")
    }
    rest = [p for p in path if p not in zips]
    moved = [
        p
        for p, package in zips.items()
        if (v := _zip_version(p, package)) is not None and v == _installed_version(package, rest)
    ]
    return [p for p in path if p not in moved] + moved


def no_huge_pages() -> bool:
    """Turn transparent huge pages off for this process and the workers it forks
    (``prctl(PR_SET_THP_DISABLE)``); whether it could.

    Arrow's allocator (mimalloc) has its segments backed by huge pages, as numpy did before
    :func:`no_hugepage_advice`: after pipeline/arena.py took the columns' zeroing away, the
    system CPU left in a direct task's read was ``clear_page_erms`` under
    ``do_huge_pmd_anonymous_page`` from ``mi_page_free_list_extend`` and Arrow's decoders
    (``perf record`` of a worker forked as the daemon forks them): a 2 MB page zeroed, and
    memory compacted to find one (``defrag`` is ``madvise`` here), on the first touch of each
    Arrow buffer."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # not Linux
        return False


def preload() -> None:
    """Load what every worker needs before the daemon forks them (the module docstring);
    call it after :func:`prefer_installed` has set ``sys.path``, and before numpy is imported
    (:func:`no_hugepage_advice`). Starts no thread of ours."""
    no_hugepage_advice()
    no_huge_pages()
    import pyarrow.ipc
    import pyarrow.parquet  # noqa: F401

    from sweepq.pipeline import direct, layout, units  # noqa: F401
    from sweepq.sweeper.replay import warm_up

    warm_up()
    layout.warm_up()
    direct.warm_up()
    import pyspark.worker  # noqa: F401

    from sweepq.pipeline import stages  # noqa: F401


def run_manager() -> None:
    """pyspark's daemon loop: it writes its port to stdout and forks a worker per connection."""
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    # A daemon pre-started by the driver (pipeline/prestart.py) takes over when it can.
    if os.environ.get("SWEEPQ_DAEMON_SOCKET"):
        import signal

        from sweepq.pipeline import prestart

        # A SIGTERM (the JVM stopping the daemon) waits until it can be passed on, or acted on.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        pid = prestart.hand_over(os.environ["SWEEPQ_DAEMON_SOCKET"])
        if pid is not None:
            prestart.stand_in(pid)
            sys.exit(0)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    sys.path[:] = prefer_installed(sys.path)
    preload()
    run_manager()
