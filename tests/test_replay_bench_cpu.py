"""The speed bench's CPU accounting (bench/replay_bench.py): the CPU of living descendants
by kind, and the CPU of processes that outlive their parent, adopted and waited for."""

from __future__ import annotations

import subprocess
import sys

from sweepq.bench import replay_bench

BURN = (
    "import sys, time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass\nprint('ready', flush=True)\n"
)


def test_the_cpu_of_a_living_python_child_is_counted():
    child = subprocess.Popen(
        [sys.executable, "-c", BURN + "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "ready"
        cpu = replay_bench._tree_cpu()
        assert set(cpu) == {"jvm", "python"} and cpu["python"] >= 0.2  # a JVM of another test may be up
    finally:
        child.stdin.close()
        child.wait(timeout=30)


def test_a_grandchild_that_outlives_its_parent_is_waited_for_and_counted():
    """Like Spark's JVM, which ends after the driver that started it: the bench adopts it. Run
    in a process of its own, which becomes the subreaper (never this test process)."""
    spawn = (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {BURN!r}], stdout=subprocess.DEVNULL)\n"
    )  # the parent ends at once; its child burns on
    bench = (
        "import subprocess, sys\n"
        "from sweepq.bench import replay_bench as b\n"
        "b._adopt_orphans()\n"
        "before = b._children_cpu()\n"
        f"subprocess.run([sys.executable, '-c', {spawn!r}], check=True)\n"
        "b._reap_orphans()\n"
        "print(b._children_cpu() - before)\n"
    )
    out = subprocess.run([sys.executable, "-c", bench], capture_output=True, text=True, check=True, timeout=120)
    assert float(out.stdout) >= 0.2
