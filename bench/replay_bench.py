"""Replay benchmarks (issues 4, 12 and 18): the numba kernel's events/s against the same kernel
interpreted (NUMBA_DISABLE_JIT=1, in a subprocess, on a smaller trace), and how it scales
with the lanes it keeps (what bounds it); ``sweepq replay`` end to end (file read -> metrics
written) with its peak RSS per event; and the Spark pipeline's events/s with each stage's
time, on a trace as one file, laid out by queue, by either shuffle, on local[*] and on a
standalone cluster, all in one run (:func:`figures`; ``python -m sweepq.bench.replay_bench``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, sys, time
from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate
n_queues, seconds, rate = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
t = generate("many-queues", seconds=seconds, rate=rate, queues=n_queues, size=200, priorities=True, seed=1)
replay(t, record_header=HEAD_LEN, per_interval=False)  # compile (or warm up); the trace is checked and laid out once
best = 1e9
for _ in range(3):
    t0 = time.perf_counter()
    replay(t, record_header=HEAD_LEN, per_interval=False)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"events": len(t), "seconds": best, "events_per_s": len(t) / best}))
"""


def _run(n_queues: int, seconds: float, rate: float, jit: bool) -> dict:
    env = dict(os.environ)
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(n_queues), str(seconds), str(rate)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def kernel(events_m: float = 10.0) -> dict:
    """Events/s of the compiled kernel alone (the trace already read and checked) on
    ~``events_m`` million events over 100 queues, and of the same code interpreted on a
    hundredth of that."""
    rate = events_m * 1e6 / (100 * 2 * 60 * 1.6)  # ~1.6 events per put/get pair per queue
    jit = _run(100, 60.0, rate, True)
    py = _run(100, 60.0, rate / 100, False)
    return {"numba": jit, "python": py, "ratio": jit["events_per_s"] / py["events_per_s"]}


def end_to_end(events_m: float = 20.0) -> dict:
    """``sweepq replay TRACE --out DIR`` as a user runs it, in a subprocess: wall seconds and
    peak RSS, per event, on ~``events_m`` million events over 100 queues (one run after a
    warm-up run that compiles)."""
    from sweepq.sweeper.traces import generate, write

    rate = events_m * 1e6 / (100 * 2 * 600 * 1.6)
    t = generate("many-queues", seconds=600, rate=rate, queues=100, size=200, priorities=True, seed=1)
    n = len(t)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.parquet")
        write(t, path)
        del t
        cmd = [sys.executable, "-m", "sweepq.cli", "replay", path, "--out", os.path.join(d, "m")]
        subprocess.run(cmd, check=True, capture_output=True)  # compiles, if the cache is cold
        # The timed run's peak RSS: ru_maxrss of a fresh wrapper process's only child.
        wrapper = (
            "import resource, subprocess, sys, time\n"
            "t0 = time.perf_counter()\n"
            "subprocess.run(sys.argv[1:], check=True, capture_output=True)\n"
            "print(time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        )
        out = subprocess.run([sys.executable, "-c", wrapper, *cmd], check=True, capture_output=True, text=True)
        secs_text, peak_kib = out.stdout.split()
        secs, peak = float(secs_text), int(peak_kib) * 1024
    return {
        "events": n,
        "seconds": secs,
        "events_per_s": n / secs,
        "peak_rss_bytes": peak,
        "rss_bytes_per_event": peak / n,
    }


def pipeline(events_m: float = 10.0, master: str = "local[*]", by_queue: bool = True) -> dict:
    """Events/s of ``sweepq pipeline`` on a synthetic trace laid out by queue (or not), after
    the JVM start, with each stage's time (the workers' warm-up is a stage of its own)."""
    from sweepq.pipeline.job import build_parser, run
    from sweepq.sweeper.traces import generate, write, write_by_queue

    rate = events_m * 1e6 / (100 * 2 * 600 * 1.6)
    t = generate("many-queues", seconds=600, rate=rate, queues=100, size=200, priorities=True, seed=2)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t" if by_queue else "t.parquet")
        if by_queue:
            write_by_queue(t, path, 16)
        else:
            write(t, path)
        n = len(t)
        del t
        args = build_parser().parse_args(["--traces", path, "--out", os.path.join(d, "out"), "--master", master])
        overall = run(args, log=lambda s: None)
    stages = overall["stage_seconds"]
    work = sum(v for k, v in stages.items() if k not in ("spark_start", "warm_up"))
    return {
        "events": n,
        "path": overall["path"],
        "stage_seconds": stages,
        "seconds": overall["seconds"],  # after the JVM start
        "events_per_s": n / overall["seconds"],
        "events_per_s_after_warm_up": n / max(work, 1e-9),
    }


def _best_seconds(fn, repeat: int = 5) -> float:
    """The fastest of ``repeat`` runs of ``fn`` after one that warms up (compiles, loads)."""
    import time

    fn()
    best = 1e9
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def kernel_lanes(events: int = 4_000_000, queues=(1, 100, 1000, 4000, 16000)) -> list[dict]:
    """The kernel's speed as the number of queues (so of lane states and of the streams of
    writes into ``prefix``) grows, at the same number of events: what bounds it. Few queues:
    each event waits for the previous one's update of the same lane (a chain through memory);
    thousands: the lane table and the lanes' tails leave the caches, and every eighth put of a
    lane writes a new line that the CPU must first read from memory."""

    from sweepq.engine.record import HEAD_LEN
    from sweepq.sweeper.replay import replay
    from sweepq.sweeper.traces import generate

    rows = []
    for q in queues:
        t = generate("steady", seconds=60, rate=events / (q * 60 * 2), queues=q, size=200, seed=1)
        best = _best_seconds(lambda t=t: replay(t, record_header=HEAD_LEN, per_interval=False))
        rows.append({"queues": q, "events": len(t), "events_per_s": len(t) / best, "ns_per_event": best / len(t) * 1e9})
    return rows


FIGURES_TRACE = ["--kind", "many-queues", "--queues", "2000", "--rate", "80", "--seconds", "60", "--seed", "7"]


def _sweepq(*args: str, env=None, python: str | None = None) -> tuple[dict | None, float, str]:
    """Run ``sweepq ARGS`` as a user does (by ``python``, default this interpreter); (its JSON on
    stdout if any, wall seconds, the command)."""
    import shlex
    import time

    cmd = [python or sys.executable, "-m", "sweepq", *args]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    secs = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{shlex.join(['sweepq', *args])} failed: {p.stderr[-2000:]}")
    out = p.stdout[p.stdout.find("{") :] if "{" in p.stdout else ""
    return (json.loads(out) if out else None), secs, shlex.join(["sweepq", *args])


def _pipeline_row(name: str, overall: dict, command: str) -> dict:
    st = overall["stage_seconds"]
    return {
        "name": name,
        "command": command,
        "events": overall["events"],
        "events_per_s": overall["events_per_second"],
        "events_per_s_with_jvm_start": overall["events_per_second_with_jvm_start"],
        "jvm_start_s": st["spark_start"],
        "stage_seconds": st,
        "layout": overall["layout"]["how"],
        "layout_seconds": st["layout"],
    }


def figures(directory: str, cluster: bool = True, log=print) -> dict:
    """Issue 18's figures in one run: the 27.5 M-event trace as one file and laid out by queue;
    ``sweepq replay`` on the file; the kernel alone; ``sweepq pipeline`` on local[*] (the
    layout made, then reused; the trace laid out already; the JVM shuffle for comparison) and
    on a standalone cluster of two one-core workers; each with the JVM's start apart. Leaves
    the traces and outputs in ``directory`` (the caller deletes them)."""

    from sweepq.engine.record import HEAD_LEN
    from sweepq.sweeper.replay import replay
    from sweepq.sweeper.traces import read

    os.makedirs(directory, exist_ok=True)
    one, byq = os.path.join(directory, "t.parquet"), os.path.join(directory, "t_by_queue")
    out: dict = {"commands": {}}
    for target, more in ((one, []), (byq, ["--buckets", "16"])):
        if not os.path.exists(target):
            _, secs, cmd = _sweepq("trace", "generate", *FIGURES_TRACE, *more, "--out", target)
            out["commands"][f"generate {os.path.basename(target)}"] = cmd
    r, secs, cmd = _sweepq("replay", one, "--json")
    out["replay"] = {
        "command": cmd,
        "events": r["events"],
        "wall_s": secs,
        "events_per_s_wall": r["events"] / secs,
        "seconds": r["seconds"],
        "events_per_s": r["events_per_second"],
    }
    log(f"replay: {out['replay']}")
    t = read(one, persistent=False)
    best = _best_seconds(lambda t=t: replay(t, record_header=HEAD_LEN, per_interval=False))
    out["kernel"] = {"events": len(t), "seconds": best, "events_per_s": len(t) / best}
    del t
    log(f"kernel: {out['kernel']}")
    rows = []

    def pipe(name, traces, dest, *more, env=None):
        o, _, cmd = _sweepq("pipeline", "--traces", traces, "--out", os.path.join(directory, dest), *more, env=env)
        rows.append(_pipeline_row(name, o, cmd))
        log(f"{name}: {rows[-1]}")

    for d in ("o_file", "o_jvm"):
        shutil.rmtree(os.path.join(directory, d), ignore_errors=True)
    pipe("local[*], one file, layout made (Arrow)", one, "o_file")
    pipe("local[*], one file, layout reused", one, "o_file")
    pipe("local[*], laid out by queue", byq, "o_byq")
    pipe("local[*], one file, JVM shuffle", one, "o_jvm", "--shuffle", "jvm")
    if cluster:
        from sweepq.pipeline.cluster import LocalCluster

        with LocalCluster(workers=2, cores=1, memory="2g") as c:
            shutil.rmtree(os.path.join(directory, "o_cluster"), ignore_errors=True)
            pipe(
                "standalone cluster (2 x 1 core), one file, layout made", one, "o_cluster", "--master", c.url, env=c.env
            )
            pipe(
                "standalone cluster (2 x 1 core), laid out by queue", byq, "o_cluster_byq", "--master", c.url, env=c.env
            )
    out["pipeline"] = rows
    return out


# Issue 35's trace: the figures' kind and seed, 21 s of it, 10,841,371 events.
SPEED_TRACE = ["--kind", "many-queues", "--queues", "2000", "--rate", "80", "--seconds", "21", "--seed", "7"]
# What a pipeline run and `sweepq replay` must agree on (every figure both report).
SAME = (
    "peak_memory_with_sweeper_bytes",
    "peak_memory_without_sweeping_bytes",
    "bytes_read_back",
    "blobs_read_back",
    "blobs_written",
    "msgs_swept",
    "msgs_reswept",
    "sweeps",
    "intervals",
    "queues",
)


def _adopt_orphans() -> None:
    """Make this process the subreaper of its descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    a process whose parent ends (Spark's JVM, the Python daemon it started) becomes this one's
    child, so its CPU is counted when it is waited for. Elsewhere: nothing (they are not)."""
    import ctypes

    if sys.platform == "linux":
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _reap_orphans(bound_s: float = 120.0) -> None:
    """Wait for the adopted descendants to end (at most ``bound_s``: a JVM that hangs is left)."""
    import time

    end = time.monotonic() + bound_s
    while time.monotonic() < end:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def _children_cpu() -> float:
    """CPU seconds (user and system) of this process's children that have ended."""
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def speed(directory: str, rounds: int = 3, baseline: str | None = None, log=print) -> dict:
    """Issue 35's figures in one run, on the 10.8 M-event trace (``SPEED_TRACE``): ``sweepq
    replay`` (events/s in the process, as it reports them, and with Python's start) and
    ``sweepq pipeline`` on local[*] (the layout made, then reused: events/s after the JVM start,
    each stage's time), ``rounds`` times each after one unrecorded round (numba compiles and
    caches for each tree). With ``baseline`` (the root of another source tree of sweepq, put
    first on PYTHONPATH, or the Python of another installation, such as another checkout's
    ``.venv/bin/python``) each run alternates with the same command run by that tree, so both
    see the same load. Every run notes the load average before and after it and the CPU
    seconds of every process it ran (for the pipeline: the driver, Spark's JVM until it has
    exited, the Python daemon and workers); every pipeline run's figures are compared with
    ``sweepq replay``'s (``same``)."""
    import time

    from .suite import run_info

    os.makedirs(directory, exist_ok=True)
    trace = os.path.join(directory, "t.parquet")
    doc: dict = {"run": run_info(), "trace": ["sweepq", "trace", "generate", *SPEED_TRACE, "--out", "t.parquet"]}
    if not os.path.exists(trace):
        _sweepq("trace", "generate", *SPEED_TRACE, "--out", trace)
    trees = {"this": None} if baseline is None else {"this": None, "baseline": os.path.abspath(baseline)}
    doc["baseline"] = trees.get("baseline")
    _adopt_orphans()
    rows: list[dict] = []
    expected = None
    for r in range(-1, rounds):  # round -1 compiles and caches for each tree; it is not recorded
        for tree, root in trees.items():
            python = root if root is not None and os.path.isfile(root) else None
            env = None if root is None or python else {**os.environ, "PYTHONPATH": root}
            before = _load()
            t0, cpu0 = time.perf_counter(), _children_cpu()
            out, wall, _ = _sweepq("replay", trace, "--json", env=env, python=python)
            row = {"what": "sweepq replay", "tree": tree, "round": r, "load_before": before, "load_after": _load()}
            row.update(
                cpu_s=round(_children_cpu() - cpu0, 3),  # under load, the figure that the load does not inflate
                events=out["events"],
                events_per_s=out["events_per_second"],
                events_per_s_with_python_start=out["events"] / wall,
                seconds=out["seconds"],
                wall_s=round(time.perf_counter() - t0, 3),
            )
            if r >= 0:
                rows.append(row)
            log(f"{row}")
            expected = expected or {k: out[k] for k in SAME}
            for how in ("made", "reused"):
                dest = os.path.join(directory, f"o_{tree}")
                if how == "made":
                    shutil.rmtree(dest, ignore_errors=True)
                before, cpu0 = _load(), _children_cpu()
                o, _, _ = _sweepq("pipeline", "--traces", trace, "--out", dest, env=env, python=python)
                _reap_orphans()  # the JVM ends after the driver: its CPU is the run's
                # A direct replay (pipeline/direct.py) makes no layout, and finds none to reuse.
                said = "no layout, direct" if o["layout"]["how"] == "direct" else f"layout {how}"
                row = {"what": f"sweepq pipeline, local[*], {said}", "tree": tree, "round": r}
                row.update(load_before=before, load_after=_load(), events=o["events"])
                row.update(
                    events_per_s=o["events_per_second"],
                    events_per_s_with_jvm_start=o["events_per_second_with_jvm_start"],
                    stage_seconds=o["stage_seconds"],
                    task_cpu_seconds=o.get("task_cpu_seconds"),
                    cpu_s=round(_children_cpu() - cpu0, 3),
                    layout=o["layout"]["how"],
                    same=all(o[k] == expected[k] for k in SAME),
                )
                if r >= 0:
                    rows.append(row)
                log(f"{row}")
    doc["rows"] = rows
    doc["run"]["load_after"] = _load()
    return doc


def _tree_cpu() -> dict[str, float]:
    """CPU seconds (user and system) of this process's living descendants, by kind: Spark's JVM
    ("jvm") and the Python daemon and workers it started ("python")."""
    import psutil

    out = {"jvm": 0.0, "python": 0.0}
    for p in psutil.Process().children(recursive=True):
        try:
            kind = "jvm" if "java" in p.name() else "python" if p.name().startswith("python") else None
            if kind:
                c = p.cpu_times()
                out[kind] += c.user + c.system
        except psutil.Error:  # ended meanwhile
            pass
    return out


def first_job(master: str = "local[*]") -> dict:
    """Issue 35's warm-up, taken apart: a pipeline session's start and its first Python job (the
    pipeline's warm-up job), then a second one, each with its wall time and the CPU seconds that
    the JVM and the Python processes (the daemon, its workers) spent in it."""
    import time

    from sweepq.pipeline import stages
    from sweepq.pipeline.session import spark_session

    t0 = time.perf_counter()
    spark = spark_session(master)
    doc: dict = {"spark_start_s": round(time.perf_counter() - t0, 3), "load_before": _load()}
    cpu0 = _tree_cpu()
    doc["spark_start_cpu_s"] = {k: round(v, 2) for k, v in cpu0.items()}
    for name in ("first_job", "second_job"):
        t = time.perf_counter()
        stages.warm_up_workers(spark)
        doc[f"{name}_s"] = round(time.perf_counter() - t, 3)
        cpu1 = _tree_cpu()
        doc[f"{name}_cpu_s"] = {k: round(cpu1[k] - cpu0[k], 2) for k in cpu1}
        cpu0 = cpu1
    doc["load_after"] = _load()
    spark.stop()
    return doc


def work(path: str, rounds: int = 5, rest: float = 0.0) -> dict:
    """The kernel's call with fresh work arrays against pooled ones (sweeper/workspace.py), on
    the trace at ``path`` read once: ``rounds`` pairs, alternating, after one call that
    compiles (or loads numba's cache). A fresh call drops the workspace first, so its
    ``prefix``, ``marker`` and ``swept_at`` are new memory whose pages the kernel faults in
    (zeroed by the system: its system CPU); a pooled call reuses the last call's. Each call's
    wall seconds and this process's user and system CPU seconds in it, with the load. With
    ``rest``, each call waits that many seconds first (both kinds, so that they see the same
    caches): long enough, the pages a fresh call gets back were free long enough for a
    balloon's free page reporting to hand them to the host, as a new worker's are. Run with
    numpy's huge-page advice off (``NUMPY_MADVISE_HUGEPAGE=0``), as ``sweepq replay`` and the
    pipeline's workers run (sweeper/pages.py)."""
    import resource
    import time

    from sweepq.engine.record import HEAD_LEN
    from sweepq.sweeper.replay import WORK_BYTES_PER_SLOT, drop_work, lane_counts, replay, work_slots
    from sweepq.sweeper.traces import read

    t = read(path, persistent=False)
    slots = work_slots(lane_counts(t))
    replay(t, record_header=HEAD_LEN, per_interval=False)  # compiles or loads; lays the trace out once

    def call(fresh: bool) -> dict:
        if fresh:
            drop_work()
        time.sleep(rest)
        ru0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        replay(t, record_header=HEAD_LEN, per_interval=False)
        secs, ru1 = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
        return {
            "work": "fresh" if fresh else "pooled",
            "seconds": round(secs, 4),
            "events_per_s": len(t) / secs,
            "user_s": round(ru1.ru_utime - ru0.ru_utime, 4),
            "system_s": round(ru1.ru_stime - ru0.ru_stime, 4),
            "minor_faults": ru1.ru_minflt - ru0.ru_minflt,
        }

    rows = []
    for r in range(rounds):
        for fresh in (True, False):
            rows.append({"round": r + 1, **call(fresh), "load": _load()})
    return {"trace": path, "events": len(t), "work_bytes": slots * WORK_BYTES_PER_SLOT, "rest_s": rest, "rows": rows}


def work_table(doc: dict) -> str:
    """The Markdown table of a :func:`work` run, with each kind's range."""
    said = ""
    if "run" in doc:  # a run of the command line: when, where, the load
        run = doc["run"]
        said = (
            f"One run of `{doc['command']}`: {run['date']}, commit {run['commit']}; {run['machine']}; "
            f"load average {run['load']} at the start, {run['load_after']} at the end. "
        )
    out = [
        f"{said}{doc['events']:,} events, work arrays {doc['work_bytes'] / 1e6:.0f} MB a call"
        + (f", {doc['rest_s']:g} s of rest before each." if doc.get("rest_s") else "."),
        "",
        "| round | work arrays | s a call | M events/s | user CPU (s) | system CPU (s) | page faults | load |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in doc["rows"]:
        out.append(
            f"| {r['round']} | {r['work']} | {r['seconds']:.3f} | {r['events_per_s'] / 1e6:.1f} | {r['user_s']:.3f} "
            f"| {r['system_s']:.3f} | {r['minor_faults']:,} | {r['load']} |"
        )
    ranges = []
    for kind in ("fresh", "pooled"):
        secs = [r["seconds"] for r in doc["rows"] if r["work"] == kind]
        ranges.append(f"{kind} {min(secs):.3f}-{max(secs):.3f} s a call")
    out += ["", "; ".join(ranges) + "."]
    return "\n".join(out) + "\n"


def speed_table(doc: dict) -> str:
    """The Markdown table of a :func:`speed` run: one row per run, in the order they ran."""
    out = [
        f"One run of `python -m sweepq.bench.replay_bench speed` on `{' '.join(doc['trace'])}`: "
        f"{doc['run']['date']}, commit {doc['run']['commit']}; {doc['run']['machine']}; "
        f"load average {doc['run']['load']} at the start, {doc['run']['load_after']} at the end.",
        "",
        "| round | tree | run | M events/s | M events/s with the start | stages (s) | CPU (s) | load before -> after |",
        "| ---: | --- | --- | ---: | ---: | --- | ---: | --- |",
    ]
    for r in doc["rows"]:
        if r["what"] == "sweepq replay":
            sec = r["seconds"]
            start = f"{r['events_per_s_with_python_start'] / 1e6:.1f} (Python's)"
            stages = f"read {sec['read']:.2f}, kernel {sec['kernel']:.2f}"
            cpu = f"{r['cpu_s']:.2f}"
        else:
            st = r["stage_seconds"]
            start = f"{r['events_per_s_with_jvm_start'] / 1e6:.1f} (the JVM's {st['spark_start']:.1f} s)"
            stages = ", ".join(f"{k.replace('_', ' ')} {v:.2f}" for k, v in st.items() if k != "spark_start")
            stages += "" if r["same"] else "; FIGURES DIFFER from sweepq replay's"
            tasks = r["task_cpu_seconds"]
            cpu = f"tasks: {tasks['layout'] + tasks['replay']:.2f}"
            if "cpu_s" in r:  # runs before the bench counted every process have the tasks' alone
                cpu = f"all: {r['cpu_s']:.2f}, {cpu}"
        out.append(
            f"| {r['round'] + 1} | {r['tree']} | {r['what']} | {r['events_per_s'] / 1e6:.1f} | {start} | {stages} "
            f"| {cpu} | {r['load_before']} -> {r['load_after']} |"
        )
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # python -m sweepq.bench.replay_bench [figures DIR|lanes|speed DIR|work TRACE|first-job]
    import argparse

    p = argparse.ArgumentParser(prog="python -m sweepq.bench.replay_bench")
    sub = p.add_subparsers(dest="what", required=True)
    f = sub.add_parser("figures", help="issue 18's figures on the 27.5 M-event trace, in one run")
    f.add_argument("directory", help="where the traces and outputs go (several hundred MB)")
    f.add_argument("--no-cluster", action="store_true", help="skip the standalone cluster")
    sub.add_parser("lanes", help="the kernel's speed as the number of queues grows")
    sp = sub.add_parser("speed", help="issue 35's figures: replay and pipeline on the 10.8 M-event trace, in one run")
    sp.add_argument("directory", help="where the trace and outputs go (about 300 MB)")
    sp.add_argument("--rounds", type=int, default=3, help="runs of each command (and of the baseline's)")
    sp.add_argument(
        "--baseline",
        default=None,
        help="to alternate with: the root of another sweepq source tree, or another installation's Python",
    )
    sp.add_argument("--out", default=None, help="directory to write run.json and speed.md to (what docs quote)")
    wk = sub.add_parser("work", help="the kernel's call with fresh work arrays against pooled ones, alternating")
    wk.add_argument("trace", help="a trace (Parquet or CSV); the speed command's is DIR/t.parquet")
    wk.add_argument("--rounds", type=int, default=5, help="pairs of calls (fresh, pooled)")
    wk.add_argument("--rest", type=float, default=0.0, help="seconds to wait before each call (default 0)")
    wk.add_argument("--json", action="store_true", help="print the run as JSON, not a table")
    wk.add_argument("--out", default=None, help="directory to write run.json and work.md to (what docs quote)")
    fj = sub.add_parser(
        "first-job", help="the session's start and its first Python job, with the JVM's and Python's CPU"
    )
    fj.add_argument("--rounds", type=int, default=1, help="sessions to start, one after the other")
    fj.add_argument("--baseline", default=None, help="another installation's Python to alternate with")
    a = p.parse_args()
    if a.what == "first-job":
        import inspect

        # The functions' own source, so that another installation's Python runs them on its sweepq.
        code = "import json, os, time\n" + "".join(map(inspect.getsource, (_load, _tree_cpu, first_job)))
        code += "print(json.dumps(first_job()))\n"
        pythons = {"this": sys.executable, **({"baseline": a.baseline} if a.baseline else {})}
        for r in range(a.rounds):  # each session in a process of its own (a JVM per process)
            for tree, python in pythons.items():
                out = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True).stdout
                print(json.dumps({"round": r + 1, "tree": tree, **json.loads(out.strip().splitlines()[-1])}))
    elif a.what == "speed":
        doc = speed(a.directory, a.rounds, a.baseline, log=lambda s: print(s, file=sys.stderr, flush=True))
        doc["command"] = "python -m sweepq.bench.replay_bench " + " ".join(sys.argv[1:])
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "run.json"), "w") as f:
                json.dump(doc, f, indent=1)
            with open(os.path.join(a.out, "speed.md"), "w") as f:
                f.write(speed_table(doc))
        print(speed_table(doc))
    elif a.what == "work":
        if os.environ.get("NUMPY_MADVISE_HUGEPAGE") != "0":  # as sweepq replay and the workers run numpy
            from sweepq.sweeper.pages import no_hugepage_advice

            env = dict(os.environ)
            no_hugepage_advice(env)
            env["NUMPY_MADVISE_HUGEPAGE"] = "0"
            os.execve(sys.executable, [sys.executable, "-m", "sweepq.bench.replay_bench", *sys.argv[1:]], env)
        from .suite import run_info

        doc = {"run": run_info(), **work(a.trace, a.rounds, a.rest)}
        doc["command"] = "python -m sweepq.bench.replay_bench " + " ".join(sys.argv[1:])
        doc["run"]["load_after"] = _load()
        if a.out:
            os.makedirs(a.out, exist_ok=True)
            with open(os.path.join(a.out, "run.json"), "w") as f:
                json.dump(doc, f, indent=1)
            with open(os.path.join(a.out, "work.md"), "w") as f:
                f.write(work_table(doc))
        print(json.dumps(doc, indent=1) if a.json else work_table(doc))
    elif a.what == "lanes":
        for row in kernel_lanes():
            rate, ns = row["events_per_s"] / 1e6, row["ns_per_event"]
            print(f"{row['queues']:6d} queues: {rate:6.1f} M events/s ({ns:.1f} ns/event)")
    else:
        print(
            json.dumps(
                figures(a.directory, cluster=not a.no_cluster, log=lambda s: print(s, file=sys.stderr)), indent=2
            )
        )
