"""The lock rule (engine/queue.py) is what the code does: every public method of the queue
core but the three the rule names (``UNLOCKED``) asserts, with checks on, that the calling
thread holds the queue's lock; a call made without it fails; and sweeps, gets, browses and
commits, which hold it as the rule says, pass those checks (the test suite runs with
checks on: tests/conftest.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sweepq.engine import GMO, OO, QueueManager, SweeperSettings, record
from sweepq.engine.core.flags import GOTTEN
from sweepq.engine.core.lanes import UNLOCKED, LaneSet
from sweepq.engine.core.lock import CHECKS, new_lock
from sweepq.sweeper import ManualClock

ROOT = Path(__file__).resolve().parents[1]
SPEC = (ROOT / "engine" / "queue.py").read_text()


def _public_methods() -> dict[str, ast.FunctionDef]:
    tree = ast.parse((ROOT / "engine" / "core" / "lanes.py").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "LaneSet")
    return {
        f.name: f
        for f in cls.body
        if isinstance(f, ast.FunctionDef)
        and not f.name.startswith("_")
        and not any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list)
    }


def test_checks_are_on_in_the_suite():
    assert CHECKS, "tests/conftest.py sets SWEEPQ_CHECKS=1 before sweepq is imported"


def test_the_spec_names_each_unlocked_method_and_each_exists():
    methods = _public_methods()
    for name in UNLOCKED:
        assert name in methods, f"UNLOCKED names {name}, which LaneSet does not have"
        assert f":meth:`LaneSet.{name}`" in SPEC, f"engine/queue.py's lock rule does not name {name}"


def test_every_other_public_core_method_asserts_the_lock_first():
    missing = []
    for name, f in _public_methods().items():
        if name in UNLOCKED:
            continue
        body = f.body[1:] if isinstance(f.body[0], ast.Expr) else f.body  # after the docstring
        first = ast.unparse(body[0])
        if not first.startswith("if CHECKS:\n    assert_held(self._mutex,"):
            missing.append(f"{name}: starts with {first.splitlines()[0]!r}")
    assert not missing, "LaneSet methods that do not assert the queue's lock first:\n" + "\n".join(missing)


def test_a_core_call_without_the_lock_fails_under_checks():
    lock = new_lock()
    ls = LaneSet(lock)
    recs = [record.encode(i, 0, 0, False, b"r") for i in range(3)]
    with lock:
        refs = ls.add(ls[0], recs, 0, refs=True)
    for call in (
        lambda: ls.add(ls[0], recs, 0),
        lambda: ls.head(),
        lambda: ls.record(refs[0]),
        lambda: ls.take(refs[0]),
        lambda: ls.mark(refs[1], GOTTEN),
        lambda: ls.sweeping(True),
        lambda: list(ls.hits(ls[0], lambda rec: True, {})),
    ):
        with pytest.raises(AssertionError, match="needs the queue's lock"):
            call()
    with lock:  # held: the same calls pass
        assert ls.record(refs[0]) == recs[0]
        assert ls.take(refs[0]) is ls[0]
        ls.check()


def test_the_unlocked_three_run_without_the_lock_during_a_sweep():
    """A sweep calls them between its holds (tiering.QueueTier.choose and link): with checks
    on, none of them asserts, and the sweep, the gets that follow and a browse all pass."""
    qm = QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=True))
    try:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED | OO.BROWSE)
        for i in range(300):
            h.put(b"%04d" % i)
        d = qm.sweeper.run_once().decision("Q")
        assert d.msgs_swept > 0  # the walk, the snapshot and the precheck ran without the lock
        assert h.get(GMO.BROWSE_FIRST).data == b"0000"
        got = [h.get().data for _ in range(300)]
        assert got == [b"%04d" % i for i in range(300)]
    finally:
        qm.close()
