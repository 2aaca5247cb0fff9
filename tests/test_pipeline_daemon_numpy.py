"""Spark's Python daemon (pipeline/daemon.py) loads numpy without its huge-page advice, so a
worker forked from it does not pay the kernel's memory compaction on its first touches of
fresh memory (daemon.no_hugepage_advice); a value the user set is kept."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sweepq.pipeline import daemon

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
    daemon.no_hugepage_advice(env)
    assert env == {"NUMPY_MADVISE_HUGEPAGE": "1"}
    env = {}
    daemon.no_hugepage_advice(env)
    assert env == {"NUMPY_MADVISE_HUGEPAGE": "0"}
