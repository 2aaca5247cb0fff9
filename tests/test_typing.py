"""sweepq as an installed, typed library.

The package tree a wheel holds has the root's and each layer's py.typed (PEP 561; that it
holds every module is tests/test_project.py's real wheel build). mypy, configured in
pyproject.toml's [tool.mypy], is clean on the public API of that tree; and a script that
misuses the public API, checked against the tree installed as a user installs it, gets
exactly the errors its mistakes deserve (so the check cannot pass by seeing nothing).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIRS: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]
MYPY_SCOPE: dict[str, list[str]] = PYPROJECT["tool"]["mypy"]
TIMEOUT = 180  # seconds: a hang guard; each mypy run takes a few seconds from a cold cache


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tree a wheel holds (setuptools' build_py from pyproject.toml), outside the checkout."""
    out = tmp_path_factory.mktemp("built")
    cmd = ["-q", "egg_info", "--egg-base", str(out), "build_py", "--build-lib", str(out / "lib")]
    done = subprocess.run(
        [sys.executable, "-c", "from setuptools import setup; setup()", *cmd],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return out / "lib"


def test_each_package_ships_its_py_typed_marker(built: Path) -> None:
    # PEP 561: without it mypy treats every import of sweepq.engine as untyped (Any). `sweepq`
    # is the repository root (its __init__.py exports Queue and AsyncQueue) and each layer a
    # subpackage of it: the root has a marker, and so has each layer.
    unmarked = [p for p in PACKAGE_DIRS if not (built / Path(*p.split(".")) / "py.typed").is_file()]
    assert not unmarked, f"add an empty py.typed to their folders: {unmarked}"


def _mypy(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    if importlib.util.find_spec("mypy") is None:
        pytest.fail("mypy is not installed: install the [dev] extra")
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache)]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT)


def _in_checkout(report: str) -> str:
    """mypy's report on the built tree with each path as it is in the checkout."""
    for package, folder in sorted(PACKAGE_DIRS.items(), key=lambda kv: -len(kv[0])):
        prefix = "" if folder == "." else folder + "/"
        report = report.replace(package.replace(".", "/") + "/", prefix)
    return report


def test_mypy_is_clean_on_the_public_api(built: Path, tmp_path: Path) -> None:
    # The scope is [tool.mypy]'s packages and modules; mypy finds them in the built tree (its
    # working directory), reports on every module they import, and knows numpy & co. from
    # this interpreter. By hand: see the "Type checking" section of docs/getting-started.md.
    scope = [a for p in MYPY_SCOPE["packages"] for a in ("-p", p)]
    scope += [a for m in MYPY_SCOPE["modules"] for a in ("-m", m)]
    done = _mypy("--python-executable", sys.executable, *scope, cwd=built, cache=tmp_path / "cache")
    assert done.returncode == 0, _in_checkout(done.stdout + done.stderr)
    assert done.stdout.startswith("Success: no issues found")


# A user's script. Each line marked `# E: code` is a mistake mypy must report with that error
# code; every other line is a correct use and must pass, among them code written against
# the connection protocols (engine/api.py) given the in-process and the client objects.
MISUSE = """\
from sweepq.blobstore import MemoryStore
from sweepq.client import connect
from sweepq.engine import GMO, MD, OO, Message, MQError, QueueManager, Reason, SweeperSettings
from sweepq.engine.api import QueueAdmin, QueueConnection, QueueHandle

with QueueManager(store=MemoryStore(), sweeping=SweeperSettings(run=False)) as qm:
    admin: QueueAdmin = qm
    qm.define_queue("Q", max_depth=10)
    with qm.connect() as conn:
        api_conn: QueueConnection = conn
        h = conn.open("Q", OO.OUTPUT | OO.INPUT_SHARED, selector="Color = 'red'")
        api_handle: QueueHandle = h
        h.put(b"hello", MD(priority=5, properties={"Color": "red"}))
        h.put(123)  # E: arg-type
        h.put(b"hello", MD(prio=5))  # E: call-arg
        h.put(b"hello", options="SYNCPOINT")  # E: arg-type
        conn.open("Q", "OUTPUT")  # E: arg-type
        got = h.get(GMO.NO_WAIT, wait_interval=0)  # a Message: no isinstance needed
        data: bytes = got.data
        size: str = got.data_length  # E: assignment
        unlocked = h.get(GMO.UNLOCK)  # a Status, the one get that returns no message
        unlocked.data  # E: attr-defined
        try:
            h.get(wait=True)  # E: call-overload  (get is overloaded: GMO.UNLOCK returns a Status)
        except MQError as e:
            reason: Reason = e.reason
QueueManager(store="memory")  # E: arg-type
QueueManager(clock=5)  # E: arg-type


def remote(url: str) -> QueueConnection:
    return connect(url)
"""


def test_mypy_reports_each_misuse_of_the_installed_api(built: Path, tmp_path: Path) -> None:
    # The built tree as a user's environment holds it: a venv whose site-packages point at it
    # (a .pth), so mypy reads sweepq as an installed package, which it types only with py.typed.
    env = tmp_path / "env"
    venv.create(env, with_pip=False)
    site = next(env.glob("lib/python*/site-packages"))
    (site / "built.pth").write_text(str(built) + "\n")
    script = tmp_path / "use_sweepq.py"
    script.write_text(MISUSE)
    python = env / "bin" / "python"
    done = _mypy(
        "--python-executable", str(python), "--show-error-codes", script.name, cwd=tmp_path, cache=tmp_path / "c"
    )
    expected = {
        (n, m.group(1)) for n, line in enumerate(MISUSE.splitlines(), 1) if (m := re.search(r"# E: ([\w-]+)", line))
    }
    reported = set(re.findall(r"^use_sweepq\.py:(\d+): error: .*\[([\w-]+)\]$", done.stdout, re.M))
    assert {(int(n), code) for n, code in reported} == expected, done.stdout + done.stderr
    assert expected, "the script marks no mistake"
