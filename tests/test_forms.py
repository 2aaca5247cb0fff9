"""The two forms of the compiled modules (forms.py): the compiled one runs here, is built from
the sources as they are, and the interpreted one passes the model-based tests as well."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sweepq import forms

ROOT = Path(__file__).resolve().parent.parent
# The hypothesis state machines: the engine against a reference model, browse against one,
# and the core's lanes against a model of their lists.
MACHINES = ["tests/test_model.py", "tests/test_model_browse.py", "tests/test_lane.py"]


def test_the_compiled_form_runs_and_is_built_from_these_sources():
    """The README's install builds the compiled modules (a C compiler is there); a source
    changed since the build would leave its old code running."""
    assert forms.running(), "the engine runs interpreted: install with a C compiler (pip install -e .)"
    assert forms.stale() == [], "compiled modules older than their source: run pip install -e . again"


def test_the_interpreted_form_passes_the_model_tests_too():
    """The same sources, interpreted (SWEEPQ_PURE=1), against the same models: both forms must
    agree with them, step by step."""
    _interpreted("from sweepq import forms; assert not forms.running()", MACHINES, SWEEPQ_CHECKS="1")


def test_the_interpreted_form_without_checks_puts_gets_and_waits_on_its_direct_lock():
    """What a user without a C compiler runs: interpreted, lock checks off. The queue's lock
    is then the ``_thread`` lock's own acquire and release (engine/core/lock.py
    ``new_lock``), which no other test runs (the suite turns checks on): puts, gets, waits
    woken across threads and the standard library's queue tests on it."""
    probe = (
        "from sweepq.engine.core.lock import new_lock; import _thread; lock = new_lock();"
        "assert type(lock.take) is type(_thread.allocate_lock().acquire), type(lock.take)"
    )
    tests = ["tests/test_put.py", "tests/test_get.py", "tests/test_get_path.py", "tests/test_queue_stdlib.py"]
    _interpreted(probe, tests, SWEEPQ_CHECKS="0")


def _interpreted(probe: str, tests: list[str], **extra: str) -> None:
    """Run ``tests`` under SWEEPQ_PURE=1 (and ``extra`` in the environment), once ``probe``
    shows that form runs."""
    env = {**os.environ, "SWEEPQ_PURE": "1", **extra}
    subprocess.run([sys.executable, "-c", probe], env=env, check=True, cwd=ROOT)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]


# The server's per-request path is compiled too (net/frames.py, net/protocol.py, net/session.py,
# net/poller.py): frames read and refused, requests done once across a lost reply and a
# reconnect, and the loop's turns (select.epoll in the interpreted form).
# (The kill -9 harnesses of tests/test_reconnect.py run in the compiled form only: minutes.)
SERVED = [
    "tests/test_frames.py",
    "tests/test_frames_ready.py",
    "tests/test_reconnect.py",
    "tests/test_server_loop.py",
    "-k",
    "not kill",
]


def test_every_listed_module_runs_compiled():
    """Each module forms.py lists, the server's and the blob store's too, runs in its compiled form."""
    import importlib

    interpreted = [n for n in forms.MODULES if importlib.import_module(n).__file__.endswith(".py")]
    assert interpreted == []


def test_the_interpreted_form_serves_the_same_frames_and_calls():
    _interpreted("import sweepq.net.session as s; assert s.__file__.endswith('.py')", SERVED)


# The blob store's write of a durable put or get (forms.py: its hot halves, C types under the
# normal classes the tests patch): imported from the blob store itself, with no engine.
BLOBSTORE = [name for name in forms.MODULES if name.startswith("sweepq.blobstore.")]


def test_the_interpreted_form_journals_the_same_durable_writes():
    """engine/durable/journal.py and the blob store's write path are compiled (issue 31: every
    durable put and get passes them): the durability, group-commit, store and gate tests hold
    their interpreted form to the same answers."""
    assert BLOBSTORE, "forms.py lists no module of the blob store"
    probe = (
        f"import importlib, sys; files = [importlib.import_module(n).__file__ for n in {BLOBSTORE!r}];"
        "assert all(f.endswith('.py') for f in files), files;"
        "assert not [m for m in sys.modules if m.startswith('sweepq.engine')];"
        "import sweepq.engine.durable.journal as j; assert j.__file__.endswith('.py')"
    )
    tests = ["tests/test_durability.py", "tests/test_group_commit.py", "tests/test_blobstore.py"]
    _interpreted(probe, [*tests, "tests/test_rocks_gate.py"])


def test_a_process_that_imports_the_blob_store_first_has_its_form_decided():
    """forms.py is the top package's, not the engine's: a process that imports the blob store
    alone (its own tests, the kv floor of bench/instructions.py) has the finders that decide
    the form of every compiled module (``SWEEPQ_PURE=1``) and check the build installed
    without importing the engine, so no compiled module of blobstore/ escapes them (issue 31)."""
    probe = (
        "import sys; import sweepq.blobstore.rocks; from sweepq import forms;"
        "assert not [m for m in sys.modules if m.startswith('sweepq.engine')];"
        "print(forms._Interpreted in sys.meta_path, forms._FirstUse in sys.meta_path)"
    )
    for pure, says in (("1", ["True", "True"]), ("0", ["False", "True"])):
        env = {**os.environ, "SWEEPQ_PURE": pure}
        out = subprocess.run([sys.executable, "-c", probe], env=env, cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.split() == says, out.stdout + out.stderr[-2000:]


def test_each_declaration_of_a_pxd_has_its_own_locals():
    """Two ``@cython.locals`` in a row apply to the one declaration below them and leave the
    one above untyped, silently (a function then runs with Python objects where C types were
    meant: this happened twice). Each declaration carries at most one."""
    for pxd in sorted(ROOT.glob("**/*.pxd")):
        if ".venv" in pxd.parts or "build" in pxd.parts:
            continue
        lines = [line.strip() for line in pxd.read_text().splitlines()]
        stacked = [
            n + 1
            for n in range(1, len(lines))
            if lines[n].startswith("@cython.locals") and lines[n - 1].startswith("@cython.locals")
        ]
        assert not stacked, f"{pxd.relative_to(ROOT)}: @cython.locals stacked at line {stacked[0]}"
