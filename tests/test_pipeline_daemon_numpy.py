"""Spark's Python daemon (pipeline/daemon.py) loads numpy without its huge-page advice, so a
worker forked from it does not pay the kernel's memory compaction on its first touches of
fresh memory (sweeper/pages.py no_hugepage_advice); a value the user set is kept. The same for
the commands that read a whole trace in a process of their own (replay, trace partition, plan)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweepq.sweeper.pages import no_hugepage_advice

# numpy's switch, read back: _set_madvise_hugepage returns the value it replaces.
SHOW = (
    "import sys\n"
    "from sweepq.pipeline import daemon\n"
    "daemon.preload()\n"
    "import numpy._core.multiarray as m\n"
    "print(m._set_madvise_hugepage(False))\n"
)


def _advice_after_preload(**env: str) -> str:
    pytest.importorskip("pyspark")
    base = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run([sys.executable, "-c", SHOW], env={**base, **env}, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout.strip().splitlines()[-1]


def test_the_daemon_loads_numpy_without_huge_page_advice():
    assert _advice_after_preload() == "False"


def test_a_users_setting_is_kept():
    assert _advice_after_preload(NUMPY_MADVISE_HUGEPAGE="1") == "True"


def test_it_only_sets_a_default():
    env = {"NUMPY_MADVISE_HUGEPAGE": "1"}
    no_hugepage_advice(env)
    assert env == {"NUMPY_MADVISE_HUGEPAGE": "1"}
    env = {}
    no_hugepage_advice(env)
    assert env == {"NUMPY_MADVISE_HUGEPAGE": "0"}


@pytest.mark.parametrize("command", [["replay"], ["trace", "partition"], ["plan"]])
def test_the_commands_that_read_a_whole_trace_load_numpy_without_it(command, tmp_path):
    """`sweepq replay`, `sweepq trace partition` and `sweepq plan` read a whole trace into
    fresh memory in a process of their own: numpy is loaded there without the advice too."""
    from sweepq.sweeper.traces import generate, write

    trace = tmp_path / "t.parquet"
    write(generate("slow-consumer", seconds=10, rate=20, queues=2, seed=1), str(trace))
    argv = [*command, str(trace), *([str(tmp_path / "byq")] if command[0] == "trace" else [])]
    code = (
        "from sweepq.cli import main\n"
        f"assert main({argv!r}) == 0\n"
        "import numpy._core.multiarray as m\n"
        "print(m._set_madvise_hugepage(False))\n"
    )
    base = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=base, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip().splitlines()[-1] == "False"
