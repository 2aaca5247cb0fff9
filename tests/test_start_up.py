"""What a command imports before it runs (issue 35): the ``sweepq`` command's start-up is
paid by every command, so ``sweepq --help`` and ``sweepq replay --help`` load no numerical
library, no RocksDB and no part of the engine beyond its lowest layer; the packages of the
engine, the sweeper and the blob store import their public names at first use (PEP 562);
and the compiled core's two warnings (interpreted, stale) are said at the first import of a
compiled module, not at ``import sweepq.engine``."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from sweepq.cli import build_parser, main
from sweepq.cli.main import ALONE

# Never imported by `sweepq replay`: the store's libraries, the engine's queue, core and
# manager, and the sweeper's cycle.
CORE = ("rocksdict", "zstandard", "sweepq.engine.core", "sweepq.engine.queue", "sweepq.engine.manager")
CORE += ("sweepq.blobstore.store", "sweepq.sweeper.cycle")
# Never imported to print a help: those, and what `sweepq replay` itself needs.
HEAVY = ("numba", "numpy", "pyarrow", "sweepq.sweeper.replay", *CORE)

_MODULES_AFTER = """
import contextlib, io, json, sys
from sweepq.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main({argv!r})
    except SystemExit:
        pass
print(json.dumps(sorted(sys.modules)))
"""


def _modules_after(argv: list[str]) -> list[str]:
    """The modules a fresh interpreter holds after ``sweepq ARGV``."""
    done = subprocess.run(
        [sys.executable, "-c", _MODULES_AFTER.format(argv=argv)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# What `sweepq --help` imports of the engine: its lowest layer, for the queue-name rule that
# the data commands' helps quote (engine/checks.py).
ENGINE_BASE = {"sweepq.engine", "sweepq.engine.checks", "sweepq.engine.constants"}
ENGINE_BASE |= {"sweepq.engine.errors"}


@pytest.mark.parametrize("argv", [["--help"], ["replay", "--help"], ["pipeline", "--help"], ["trace", "--help"]])
def test_a_help_loads_neither_the_engine_nor_numba(argv):
    """The whole parser's help imports the engine's lowest layer only; a simulation command's
    help (built alone, or the pipeline's own parser) imports nothing of the engine."""
    loaded = _modules_after(argv)
    heavy = [m for m in loaded if m.startswith(HEAVY)]
    assert heavy == [], f"sweepq {' '.join(argv)} imported {heavy}"
    engine = {m for m in loaded if m == "sweepq.engine" or m.startswith("sweepq.engine.")}
    assert engine <= (ENGINE_BASE if argv == ["--help"] else set()), sorted(engine)


def test_a_replay_loads_neither_the_engines_core_nor_the_store(tmp_path):
    """``sweepq replay TRACE --out DIR`` imports numba, numpy and Arrow, and of the engine only
    the record's header size: not its queue, core or manager, nor RocksDB; nor pandas, whose
    import by a first ``pa.array`` was a sixth of a 10 M-event replay (sweeper/arrow.py)."""
    import pyarrow.parquet as pq

    from sweepq.sweeper.traces import generate, write

    path = str(tmp_path / "t.parquet")
    write(generate("steady", seconds=2, rate=50, queues=2, seed=1), path)
    loaded = _modules_after(["replay", path, "--out", str(tmp_path / "m")])
    assert "numba" in loaded and "sweepq.sweeper.replay" in loaded
    heavy = [m for m in loaded if m.startswith((*CORE, "pandas"))]
    assert heavy == [], f"sweepq replay imported {heavy}"
    assert pq.read_table(tmp_path / "m" / "queues.parquet").column("queue").to_pylist() == ["Q00000", "Q00001"]


@pytest.mark.parametrize("package", ["sweepq.engine", "sweepq.sweeper", "sweepq.blobstore"])
def test_a_lazy_package_names_each_public_name_once_and_every_one_resolves(package):
    """Its table of names (what its ``__getattr__`` imports) is its ``__all__``, each name
    resolves to the object of the module named for it, and any other name is not there."""
    module = importlib.import_module(package)
    assert sorted(module._WHERE) == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018


_WARNS = """
import json, warnings
warnings.simplefilter("always")
from sweepq import forms
{patch}
with warnings.catch_warnings(record=True) as at_import:
    warnings.simplefilter("always")
    import sweepq.engine
with warnings.catch_warnings(record=True) as at_use:
    warnings.simplefilter("always")
    from sweepq.engine import QueueManager
    import sweepq.engine.core.lanes
print(json.dumps([len(at_import), [str(w.message) for w in at_use]]))
"""


@pytest.mark.parametrize(
    "patch, says",
    [
        ("forms.sources_digest = lambda root: 'another'", "was built from other sources than those beside it"),
        ("forms.built = lambda: []", "runs its interpreted core"),
        ("", None),
    ],
    ids=["stale", "interpreted", "neither"],
)
def test_the_compiled_core_is_checked_at_the_first_import_of_a_compiled_module(patch, says):
    """Stale sources (another digest) or no extension modules: one line, once, when the first
    compiled module is imported; ``import sweepq.engine`` alone imports none and says nothing."""
    done = subprocess.run(
        [sys.executable, "-c", _WARNS.format(patch=patch)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    at_import, said = json.loads(done.stdout.strip().splitlines()[-1])
    assert at_import == 0
    assert len(said) == (0 if says is None else 1) and (says is None or says in said[0]), said


@pytest.mark.parametrize("command", sorted(ALONE))
def test_a_command_built_alone_says_what_the_whole_parser_says(command, capsys):
    """``sweepq replay`` builds its parser without the other commands' (cli/main.py ALONE):
    its help and its usage errors are those of the whole parser."""
    whole = build_parser()
    subs = next(a for a in whole._actions if isinstance(a, argparse._SubParsersAction))
    for argv, code in (([command, "--help"], 0), ([command, "--no-such-option"], 2)):
        with pytest.raises(SystemExit) as alone:
            main(argv)
        said = capsys.readouterr()
        with pytest.raises(SystemExit) as everything:
            whole.parse_args(argv)
        assert (alone.value.code, said) == (everything.value.code, capsys.readouterr())
        assert alone.value.code == code
    with pytest.raises(SystemExit):
        main([command, "--help"])
    assert capsys.readouterr().out == subs.choices[command].format_help()
