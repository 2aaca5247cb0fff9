"""The README's programs type-check as a user's would, after the README's own install.

The README's first program (``from sweepq import Queue``) and its MQ program (``## Using
it``) are each written to a file outside the repository and checked by mypy against this
interpreter's environment, installed as the README installs it (``pip install -e``: the
build backend, build-backend/, makes such an install visible to mypy). No project
configuration applies: mypy runs with its defaults, as in a user's project. That the
programs also run as written is tests/test_docs.py's (every README block runs).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _block(after: str) -> str:
    m = re.search(re.escape(after) + r".*?```python\n(.*?)```", README, re.S)
    assert m, f"the README has no python block after {after!r}"
    return m.group(1)


@pytest.fixture(scope="module")
def mypy(tmp_path_factory):
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: install the [dev] extra")
    where = tmp_path_factory.mktemp("user")
    cache = where / ".mypy_cache"

    def check(name: str, program: str) -> subprocess.CompletedProcess[str]:
        (where / name).write_text(program)
        cmd = [sys.executable, "-m", "mypy", "--python-executable", sys.executable, "--cache-dir", str(cache)]
        cmd += ["--show-error-codes", name]
        return subprocess.run(cmd, cwd=where, capture_output=True, text=True, timeout=300)

    return check


def test_the_first_program_is_the_three_line_queue():
    first = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    assert first.startswith("from sweepq import Queue\n"), first
    assert README.index("```python") < README.index("## Memory pressure"), "the Queue comes before the demo"


def test_the_readmes_first_program_type_checks(mypy):
    first = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    done = mypy("first.py", first)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success")


def test_a_mistake_in_it_is_caught(mypy):
    """The check sees sweepq (not Any): the same program, with the item's type wrong, fails."""
    first = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    done = mypy("wrong.py", first + "\nnot_a_str: str = Queue[int]().get()\n")
    assert done.returncode == 1 and "[assignment]" in done.stdout, done.stdout + done.stderr


def test_the_readmes_mq_program_type_checks(mypy):
    """A plain get is typed to return a Message (engine/api.py GetCall), so the README's
    program reads ``.data`` without an isinstance check."""
    done = mypy("mq.py", _block("## Using it"))
    assert done.returncode == 0, done.stdout + done.stderr
