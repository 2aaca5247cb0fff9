"""sweepq installed as a user installs it: a wheel built from a clean copy of the tree, into a
fresh virtual environment, then the README's three lines with warnings as errors; the same
without a C compiler; and what setup.py leaves in the tree (no link back to the root).

Builds compile the whole core (minutes under load): the module is marked long. pip in the
fresh environment takes the dependencies from the registry and the machine's wheels and
cache (pip's own configuration), never from this interpreter's site-packages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.long, pytest.mark.timeout(1800)]  # each test may build a wheel: minutes

BUILD_TIMEOUT = 1200  # a guard against a hang: the build compiles every module (4 min seen under load)
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "*.egg-info", "__pycache__", ".hypothesis", "site", "*.so", "compiled-sources.sha256"
)


def _readme_three_lines() -> str:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## In three lines: `from sweepq import Queue`\n\n```python\n(.*?)```", text, re.S)
    assert block, "the README lost its three lines"
    return block.group(1)


def _copy(tmp: Path) -> Path:
    """A clean copy of the tree, as a fresh clone has it."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=SKIP)
    return src


def _build(src: Path, out: Path, **env: str) -> tuple[Path, subprocess.CompletedProcess, float]:
    """``pip wheel .`` in ``src`` (build isolation, as a user's pip does): the wheel, pip's
    output and the seconds it took."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out), "."],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = out.glob("sweepq-*.whl")
    return wheel, done, time.monotonic() - started


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The wheel of a clean copy whose build/ holds what an older build left in a checkout
    since moved: build/cython-include/sweepq, a link to a root that no longer exists (the
    FileExistsError of issue 33). (wheel, the copy, build seconds)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = _copy(tmp)
    (src / "build" / "cython-include").mkdir(parents=True)
    (src / "build" / "cython-include" / "sweepq").symlink_to(tmp / "the-checkout-before-it-moved")
    wheel, _, seconds = _build(src, tmp / "dist")
    return wheel, src, seconds


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    """A fresh virtual environment (no site-packages of this interpreter): its python."""
    where = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    return where / "bin" / "python"


def _install(python: Path, wheel: Path, *extra: str) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *extra, str(wheel)],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return time.monotonic() - started


def _run(python: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_wheel_holds_every_module_its_compiled_core_and_the_digest(built):
    """`pip install .` (not editable) builds a wheel from pyproject's package list: every module
    of every layer must be in it (subpackages are not found on their own), with the compiled
    modules and the digest of the sources they were built from (forms.py)."""
    wheel, _, _ = built
    names = set(zipfile.ZipFile(wheel).namelist())
    layers = ("cli", "bench", "pipeline", "broker", "queues", "net", "engine", "sweeper", "blobstore")
    want = {f"sweepq/{p.relative_to(ROOT)}" for layer in layers for p in (ROOT / layer).rglob("*.py")}
    want = {w for w in want if "/__pycache__/" not in w}
    want |= {f"sweepq/{p.name}" for p in ROOT.glob("*.py")}
    missing = sorted(want - names)
    assert not missing, f"not in the wheel: {missing[:10]}"
    assert "sweepq/compiled-sources.sha256" in names
    # The Kombu alias's start-up line (build-backend/, broker/alias.py), beside the package.
    assert "sweepq-kombu.pth" in names
    compiled = {n.split(".")[0].replace("/", ".") for n in names if n.endswith(".so")}
    from sweepq import forms

    assert compiled == set(forms.MODULES)


def test_a_moved_checkout_builds_and_setup_leaves_no_link_back_to_the_root(built):
    """The build replaced the dangling link of a moved checkout (the fixture) and laid the .pxd
    files out as copies: nothing under build/ is a link, so no tool walking it goes round."""
    _, src, _ = built
    links = [p for p in (src / "build").rglob("*") if p.is_symlink()]
    assert links == []
    assert (src / "build" / "cython-include" / "sweepq" / "engine" / "core" / "lanes.pxd").is_file()


def test_the_wheel_in_a_fresh_environment_runs_the_readme_with_warnings_as_errors(built, venv, tmp_path):
    """The README's three lines with ``-W error``: an installed wheel imports without a warning
    (the digest, not file times, says whether the compiled core is its sources'), and runs the
    compiled core. The figure of issue 33: build, install and first import times."""
    wheel, _, build_seconds = built
    install_seconds = _install(venv, wheel)
    started = time.monotonic()
    done = _run(venv, tmp_path, "-W", "error", "-c", _readme_three_lines())
    import_seconds = time.monotonic() - started
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "{'order': 1}\n"
    form = _run(venv, tmp_path, "-W", "error", "-c", "from sweepq import forms; print(forms.running())")
    assert form.stdout == "True\n", form.stderr
    print(
        f"\nwheel: build {build_seconds:.0f} s, install into a fresh venv {install_seconds:.0f} s, "
        f"the README's three lines {import_seconds:.1f} s; load average {os.getloadavg()[0]:.1f}"
    )


def test_a_changed_source_beside_the_compiled_core_says_so_in_one_line(built, venv, tmp_path):
    """An installed source edited after the build (so the compiled core is not its code): one
    warning line naming the cure, at the first import of a compiled module (``import
    sweepq.engine`` alone imports none: engine/__init__.py is lazy); the same file put back,
    none."""
    wheel, _, _ = built
    _install(venv, wheel, "--no-deps", "--force-reinstall")
    where = _run(venv, tmp_path, "-c", "import sweepq, os; print(os.path.dirname(sweepq.__file__))").stdout.strip()
    lanes = Path(where) / "engine" / "core" / "lanes.py"
    before = lanes.read_bytes()
    try:
        lanes.write_bytes(before + b"\n# edited\n")
        done = _run(venv, tmp_path, "-c", "import sweepq.engine; from sweepq.engine import QueueManager")
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "was built from other sources than those beside it" in lines[0], done.stderr
    finally:
        lanes.write_bytes(before)
    assert _run(venv, tmp_path, "-W", "error", "-c", "from sweepq.engine import QueueManager").returncode == 0


def test_without_a_c_compiler_the_install_succeeds_and_the_pure_core_says_so_once(built, venv, tmp_path):
    """CC names no program: the build says so in one line and makes a wheel of the sources; the
    installed sweepq runs them interpreted, saying so in one line at import."""
    src = _copy(tmp_path)  # not the compiled build's: its build/ holds the extensions
    wheel, done, _ = _build(src, tmp_path / "dist", CC=str(tmp_path / "no-such-cc"))
    said = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip().startswith("sweepq:")]
    assert len(said) == 1 and "no working C compiler" in said[0], said or done.stderr[-3000:]
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    _install(venv, wheel, "--no-deps", "--force-reinstall")
    run = _run(venv, tmp_path, "-c", _readme_three_lines())
    assert run.returncode == 0 and run.stdout == "{'order': 1}\n", run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "runs its interpreted core" in lines[0], run.stderr
