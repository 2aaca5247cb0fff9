"""Spark's Python daemon started before Spark's JVM, so its imports overlap the JVM's start.

The daemon (pipeline/daemon.py) loads numba, the compiled kernel, pyarrow and pyspark's
worker before it forks the workers: about half a second of one core, which Spark spends
only when the first Python task runs, after the JVM is up. The JVM's start leaves one of
this machine's two cores mostly idle for a second or more; a driver that starts Spark's JVM
on a local master starts a daemon-to-be first (:func:`start`), which loads the same modules
while the JVM starts and then waits on a Unix socket in a private directory.

When the JVM starts the daemon (``python -m sweepq.pipeline.daemon``, as Spark always does),
that process finds the socket's path in ``SWEEPQ_DAEMON_SOCKET`` (the JVM's environment,
inherited from the driver) and hands itself over (:func:`hand_over`): its standard input,
output and error (the pipes the JVM reads the daemon's port from, and writes the pids of
workers to kill to), its environment, arguments and working directory. The pre-started
process checks that it is the same daemon the JVM asked for: the same interpreter, the
packages it loaded found at the same place on the JVM's ``sys.path`` (after
:func:`daemon.prefer_installed`), and the same variables that act when an interpreter or
numba starts (``PYTHONHASHSEED`` and the like, ``NUMBA_*``, ``LD_PRELOAD`` and
``LD_LIBRARY_PATH``). If so it takes those over and runs pyspark's daemon ``manager()``;
else it refuses, ends, and the process the JVM started runs the daemon itself, as without
it. The one it handed over to stays as the JVM's handle on the daemon: it passes a SIGTERM
(the JVM stopping it) on, and ends when the daemon ends.

One pre-started daemon per driver; one claim. The driver releases it after its first job
(:func:`release`, and at exit): one that was not claimed (the JVM had its daemon already, or
ran no Python task) ends then; one that was is the JVM's daemon and ends with it (its stdin,
the JVM's pipe, closes). ``SWEEPQ_PIPELINE_PRESTART=0`` turns it off.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading

from . import launcher
from .launcher import CLAIM_TIMEOUT_S, ENV, stand_in  # noqa: F401  (stand_in: daemon.py's)

# Packages the daemon loads before it forks (daemon.preload): the JVM's path must find each
# at the same place as the pre-started daemon loaded it from.
PACKAGES = ("sweepq", "pyspark", "py4j", "numba", "numpy", "pyarrow")
# Variables read when an interpreter, numba or the dynamic linker starts: what a process
# that started with other values would do otherwise. PYTHONPATH is checked through PACKAGES;
# PYTHONUNBUFFERED is applied on hand-over.
STARTUP = re.compile(r"PYTHON[A-Z]|NUMBA_|LD_PRELOAD$|LD_LIBRARY_PATH$")
NOT_COMPARED = ("PYTHONPATH", "PYTHONUNBUFFERED")


def _startup_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if STARTUP.match(k) and k not in NOT_COMPARED}


def mismatch(request: dict) -> str | None:
    """Why this process cannot be the daemon that ``request`` (what :func:`hand_over` sends)
    describes, or None when it can (the module docstring's checks)."""
    from importlib.machinery import PathFinder

    if request["executable"] != sys.executable:
        return f"interpreter {request['executable']} is not {sys.executable}"
    for name in PACKAGES:
        mine = getattr(sys.modules.get(name), "__file__", None)
        spec = PathFinder.find_spec(name, request["path"])
        theirs = spec.origin if spec is not None else None
        if mine is None or theirs is None or os.path.realpath(mine) != os.path.realpath(theirs):
            return f"{name} is {theirs} on the daemon's path, not {mine}"
    ours, theirs_env = _startup_env(dict(os.environ)), _startup_env(request["env"])
    if ours != theirs_env:
        differ = sorted(k for k in ours.keys() | theirs_env.keys() if ours.get(k) != theirs_env.get(k))
        return f"start-up variables differ: {', '.join(differ)}"
    return None


class Prestarted:
    """The driver's handle on a pre-started daemon: the process, the directory of its socket."""

    def __init__(self, proc: subprocess.Popen, directory: str, socket_path: str) -> None:
        self.proc = proc
        self.directory = directory
        self.socket_path = socket_path
        self.claimed: bool | None = None  # known once released

    def release(self, timeout: float = 60.0) -> bool:
        """Let it go: one not claimed ends (waited for, killed past ``timeout``); one claimed is
        the JVM's daemon and is waited for by a thread (so it is reaped when it ends). Returns
        whether it was claimed. Idempotent."""
        if self.claimed is not None:
            return self.claimed
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        with contextlib.suppress(OSError):
            proc.stdin.close()  # an unclaimed one ends on end of file
        # It says "claimed" before it takes the JVM's pipes (closing ours), or ends unclaimed.
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        said = proc.stdout.read() if ready else b""
        proc.stdout.close()
        self.claimed = said.startswith(b"claimed")
        if self.claimed:
            threading.Thread(target=proc.wait, name="sweepq-daemon-reaper", daemon=True).start()
        else:
            try:
                proc.wait(timeout if ready else 0.1)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(OSError):
            os.remove(self.socket_path)  # one not claimed leaves it
        with contextlib.suppress(OSError):
            os.rmdir(self.directory)
        return self.claimed


_current: Prestarted | None = None
_trace: str | None = None  # the trace a direct task will read: its columns' memory made ready


def expect_trace(path: str | None) -> None:
    """The trace that the next pre-started daemon is to make a direct task's memory ready for
    while the JVM starts (pipeline/arena.py); None for none."""
    global _trace
    _trace = path


def start(environ: dict[str, str] | None = None) -> Prestarted | None:
    """Start a daemon-to-be for the JVM this driver is about to start, and put its socket's
    path in ``os.environ`` (the JVM inherits it; remove it once the JVM is up, see
    :func:`started`). None when ``SWEEPQ_PIPELINE_PRESTART=0``, when Spark's workers run
    another interpreter (``PYSPARK_PYTHON``), or when one is running already."""
    global _current
    env = dict(os.environ if environ is None else environ)
    if env.get("SWEEPQ_PIPELINE_PRESTART", "1") == "0" or (_current is not None and _current.claimed is None):
        return None
    if env.get("PYSPARK_PYTHON", sys.executable) != sys.executable:
        return None  # the daemon runs another interpreter: it would refuse this one
    # The daemon Spark starts gets PYTHONHASHSEED from the driver's SparkContext ("0" unless set).
    env.setdefault("PYTHONHASHSEED", "0")
    env.pop(ENV, None)
    directory = tempfile.mkdtemp(prefix="sweepq-daemon-")
    path = os.path.join(directory, "s")
    # Bound here, before the JVM can start a daemon that looks for it; the child inherits it.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(path)
        listener.listen(1)
        proc = subprocess.Popen(
            [sys.executable, "-m", "sweepq.pipeline.prestart", path, str(listener.fileno()), _trace or ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            pass_fds=[listener.fileno()],
            # A group of its own, as pyspark's daemon makes itself (and the JVM ignores SIGINT):
            # a Ctrl-C at the terminal is the driver's to act on; this one ends when released.
            process_group=0,
        )
    if _current is None:
        atexit.register(release)
    _current = Prestarted(proc, directory, path)
    os.environ[ENV] = path
    return _current


def started() -> None:
    """The JVM is up (it has the socket's path): later processes of this driver do not."""
    os.environ.pop(ENV, None)


def release() -> bool | None:
    """Release this driver's pre-started daemon (:meth:`Prestarted.release`); None if none."""
    return _current.release() if _current is not None else None


def hand_over(path: str, timeout: float = CLAIM_TIMEOUT_S) -> int | None:
    """In the daemon process the JVM started (the interpreter itself, pipeline/daemon.py): give
    this process's standard streams, environment, arguments, directory and ``sys.path`` to the
    pre-started daemon at ``path`` (launcher.py :func:`~sweepq.pipeline.launcher.hand_over`)."""
    from sweepq.pipeline.daemon import prefer_installed

    request = {
        "executable": sys.executable,
        "path": prefer_installed(sys.path),
        "env": dict(os.environ),
        "argv": sys.argv,
        "cwd": os.getcwd(),
    }
    return launcher.hand_over(path, request, timeout)


def as_started(request: dict, own_path: list[str], own_pythonpath: str) -> dict:
    """``request`` with the ``sys.path`` and ``sys.argv`` that ``python -m
    sweepq.pipeline.daemon`` would have had, run by the same interpreter in its directory with
    its ``PYTHONPATH``, when it came from the launcher (launcher.py, which has neither): the
    directory, then each ``PYTHONPATH`` entry made absolute (an empty one is the directory),
    then this interpreter's own path after its own directory and ``PYTHONPATH`` entries
    (``own_path`` and ``own_pythonpath``, as this process started). Any other request as it is."""
    from sweepq.pipeline import daemon

    if request.get("path") is not None:
        return request
    cwd = request["cwd"]
    theirs = request["env"].get("PYTHONPATH", "")
    entries = [os.path.join(cwd, e) for e in theirs.split(os.pathsep)] if theirs else []
    skip = 1 + (len(own_pythonpath.split(os.pathsep)) if own_pythonpath else 0)
    path = [cwd, *[os.path.normpath(e) for e in entries], *own_path[skip:]]
    argv = [os.path.abspath(daemon.__file__), *request.get("args", [])]
    return {**request, "path": daemon.prefer_installed(path), "argv": argv}


def launcher_script(directory: str | None = None) -> str | None:
    """The launcher for the JVM to run as the workers' interpreter on a session with a
    pre-started daemon (launcher.py): a script in ``directory`` (default: the user's cache
    directory, pipeline/jvm_start.py ``cache_dir``), written once per interpreter and text
    (its name a digest of them). None when it cannot be (an interpreter path that a script's
    first line cannot hold, or no directory to write to): the JVM runs the interpreter."""
    import hashlib

    from .jvm_start import cache_dir

    if any(c.isspace() for c in sys.executable) or len(sys.executable) > 200:
        return None
    text = launcher.script(sys.executable)
    directory = directory or os.path.join(cache_dir(), "daemon")
    path = os.path.join(directory, f"python-daemon-{hashlib.sha1(text.encode()).hexdigest()[:16]}")
    if os.access(path, os.X_OK):
        return path
    try:
        os.makedirs(directory, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except OSError:
        return None
    return path


def _serve(path: str, fd: int, trace: str = "") -> None:
    """The pre-started daemon: listen, load the daemon's modules, make the memory of a direct
    task reading ``trace`` ready (until a claim comes), wait for one claim (or for the driver
    to close our stdin), check it, take it over and run pyspark's manager."""
    from sweepq.pipeline import arena, daemon

    own_path, own_pythonpath = list(sys.path), os.environ.get("PYTHONPATH", "")
    sys.path[:] = daemon.prefer_installed(sys.path)
    listener = socket.socket(fileno=fd)  # bound by the driver: a claim made meanwhile waits
    daemon.preload()
    daemon.prefer_installed([*daemon.spark_zips(), *sys.path])  # reads Spark's zips now, not when claimed
    poller = select.poll()
    poller.register(0, select.POLLIN)
    poller.register(listener, select.POLLIN)
    arena.prepare(trace or None, stop=lambda: bool(poller.poll(0)))
    while True:
        ready = {fd for fd, _ in poller.poll()}
        if 0 in ready and not os.read(0, 1):
            return  # the driver released us unclaimed
        if listener.fileno() in ready:
            break
    conn, _ = listener.accept()
    listener.close()
    os.remove(path)
    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
    while chunk := conn.recv(1 << 20):
        data += chunk
    request = as_started(json.loads(data), own_path, own_pythonpath)
    why = "got no standard streams" if len(fds) != 3 else mismatch(request)
    if why is not None:
        conn.sendall(f"no: {why}".encode())
        conn.close()
        for fd in fds:
            os.close(fd)
        return
    os.write(1, b"claimed\n")  # to the driver (release), before fd 1 becomes the JVM's pipe
    conn.sendall(f"ok {os.getpid()}".encode())
    conn.close()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv[:] = request["argv"]
    sys.stdout.flush()
    sys.stderr.flush()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    if os.environ.get("PYTHONUNBUFFERED"):
        sys.stdout.reconfigure(write_through=True)  # type: ignore[union-attr]
        sys.stderr.reconfigure(write_through=True)  # type: ignore[union-attr]
    daemon.run_manager()


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4])
