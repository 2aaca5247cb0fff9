"""The project's promises about itself: README set-up commands, CI, layering, lint, CLI."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block, "the README must start with a bash block of set-up commands"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_readme_starts_with_exactly_two_setup_commands():
    cmds = _readme_commands()
    assert len(cmds) == 2
    assert "sweepq demo" in cmds[0] and "pytest" in cmds[1]
    for c in cmds:
        assert "pip install" in c, "each command installs what it needs itself"


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    at = ci.index(_readme_commands()[1])
    # ... within a bound: the line is the script of a `timeout N bash` (a here-document)
    assert re.fullmatch(r"timeout (--kill-after=\d+ )?\d+ bash -euo pipefail <<'README'", ci[at - 1]), ci[at - 1]
    assert ci[at + 1] == "README"


LONG_FORM = ".venv/bin/python -m pytest -q -n auto -m long"


def test_the_long_form_is_documented_run_by_ci_within_a_bound_and_not_empty():
    """The README's command leaves out the tests marked long; the README says how to run them,
    CI runs them after it under a timeout, and there are some (pytest -m long selecting nothing
    would exit 5)."""
    assert '-m "not long"' in _readme_commands()[1]
    assert f"`{LONG_FORM}`" in " ".join((ROOT / "README.md").read_text().split())
    assert any(
        re.fullmatch(rf"timeout \d+ {re.escape(LONG_FORM)}", line)
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
    )
    marked = [p.name for p in (ROOT / "tests").glob("test_*.py") if "@pytest.mark.long\n" in p.read_text()]
    assert marked, "no test is marked long"


# The layers, from the top (docs/design.md#layers): each folder, the layers it may import, and
# the libraries that only it imports. The one statement of the rule: every folder's imports are
# checked against it, and so are the layer tables of docs/design.md and docs/layout.md. A new
# layer is a new row here (test_every_package_folder_is_a_layer says so).
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "cli": (("bench", "pipeline", "broker", "queues", "net", "engine", "sweeper", "blobstore"), ()),
    "bench": (("pipeline", "broker", "queues", "net", "engine", "sweeper", "blobstore"), ()),
    "pipeline": (("engine", "sweeper", "blobstore"), ("pyspark",)),
    "broker": (("net", "engine"), ("kombu",)),
    "queues": (("net", "engine"), ()),
    "net": (("engine",), ()),
    "engine": (("sweeper", "blobstore"), ()),
    "sweeper": (("blobstore",), ()),
    "blobstore": ((), ("rocksdict", "zstandard")),
}


def _forbidden(folder: str) -> re.Pattern:
    """The imports ``folder`` must not make: every other layer it may not import, and every
    library another layer owns."""
    may, _ = LAYERS[folder]
    layers = [other for other in LAYERS if other != folder and other not in may]
    libs = [lib for other, (_, owned) in LAYERS.items() if other != folder for lib in owned]
    names = [rf"sweepq\.{name}\b" for name in layers] + [rf"{lib}\b" for lib in libs]
    return re.compile(rf"^\s*(from|import)\s+({'|'.join(names)})", re.M)


def test_every_package_folder_is_a_layer():
    folders = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    assert folders == set(LAYERS), "a folder of the root is a layer: give it a row in LAYERS and docs/design.md"


@pytest.mark.parametrize("folder", list(LAYERS))
def test_layers_import_downwards_only(folder):
    bad = _forbidden(folder)
    files = list((ROOT / folder).rglob("*.py"))
    assert files, f"{folder}/ holds no module"
    offenders = [str(p.relative_to(ROOT)) for p in files if bad.search(p.read_text())]
    assert not offenders, f"{folder}/ reaches the wrong way (docs/design.md#layers): {offenders}"


def test_the_forbidden_imports_are_found():
    assert _forbidden("engine").search("from sweepq.net import Server")
    assert _forbidden("sweeper").search("    import rocksdict")
    assert _forbidden("pipeline").search("from sweepq.net.client import connect")
    assert not _forbidden("pipeline").search("from sweepq.engine.record import HEAD_LEN")
    assert not _forbidden("engine").search("from sweepq.engineering import x")  # a name, not a prefix


def _table_rows(page: str, section: str) -> list[list[str]]:
    """The cells of the rows of the table under the heading ``section`` of docs/``page``."""
    text = (ROOT / "docs" / page).read_text()
    start = re.search(rf"^#+ {section}$", text, re.M).end()
    end = text.find("\n## ", start)
    rows = [line for line in text[start : end if end > 0 else None].splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def test_the_design_pages_layer_table_is_this_one():
    rows = _table_rows("design.md", "Layers")
    assert [r[0] for r in rows] == [f"`{folder}/`" for folder in LAYERS], "rows: the layers from the top"
    for (folder, (may, libs)), (_, package, _, imports) in zip(LAYERS.items(), rows, strict=True):
        assert package == f"`sweepq.{folder}`"
        named = re.findall(r"`([\w.]+)`", imports)
        assert [n for n in named if n in LAYERS] == list(may), f"{folder}: may import {may}"
        assert [n for n in named if n not in LAYERS] == list(libs), f"{folder}: the only importer of {libs}"


def test_the_layout_pages_table_has_a_row_per_layer_in_the_same_order():
    rows = _table_rows("layout.md", "Project layout")
    assert [r[0] for r in rows] == [f"`{folder}/`" for folder in LAYERS] + ["`tests/`"]


def test_the_layout_page_names_every_module():
    """A new module gets its words in docs/layout.md (by its file name, as the page names them)."""
    text = (ROOT / "docs" / "layout.md").read_text()
    modules = [
        p for folder in LAYERS for p in (ROOT / folder).rglob("*.py") if p.name not in ("__init__.py", "__main__.py")
    ]
    missing = sorted(str(p.relative_to(ROOT)) for p in modules if f"`{p.name}`" not in text)
    assert not missing, f"docs/layout.md does not say what these hold: {missing}"


def test_ruff_is_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: install the [dev] extra")
    out = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cli_help_lists_demo_and_bench():
    from sweepq.cli import build_parser

    helptext = build_parser().format_help()
    assert "demo" in helptext and "bench" in helptext  # the demo itself: tests/test_demo.py


def test_nothing_below_the_command_line_imports_it():
    bad = re.compile(r"^\s*(from|import)\s+sweepq\.cli\b|^\s*from\s+sweepq\s+import\s+cli\b", re.M)
    folders = [p for p in ROOT.iterdir() if p.is_dir() and p.name not in ("cli", "tests", "build") and p.name[0] != "."]
    offenders = [str(f.relative_to(ROOT)) for d in folders for f in d.rglob("*.py") if bad.search(f.read_text())]
    assert not offenders, f"only tests and the root __main__.py may import sweepq.cli: {offenders}"


def test_the_command_line_keeps_one_copy_of_each_rule():
    """The queue-name rule is the engine's (check_name); argparse helpers live in cli/args.py
    (on pipeline/args.py's): no second parser class, formatter or number type in cli/."""
    charset = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    helper = re.compile(r"^class \w+\(.*(ArgumentParser|HelpFormatter)|^def _?number\(", re.M)
    for f in (ROOT / "cli").glob("*.py"):
        text = f.read_text()
        assert charset not in text, f"{f.name} copies the engine's queue-name rule"
        if f.name != "args.py":
            assert not helper.search(text), f"{f.name} defines its own argparse helper; use cli/args.py"


def test_cli_without_command_prints_help():
    out = subprocess.run([sys.executable, "-m", "sweepq.cli"], capture_output=True, text=True)
    assert out.returncode == 2 and "commands:" in out.stdout


def test_cli_trace_replay_and_inspect(tmp_path, capsys):
    from sweepq.cli import main
    from sweepq.engine import OO, QueueManager, SweeperSettings

    trace = tmp_path / "t.parquet"
    assert (
        main(["trace", "generate", "--kind", "slow-consumer", "--seconds", "30", "--rate", "100", "--out", str(trace)])
        == 0
    )
    assert main(["replay", str(trace), "--json"]) == 0
    out = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert out["peak_memory_without_sweeping_bytes"] > out["peak_memory_with_sweeper_bytes"] > 0

    bad = tmp_path / "bad.csv"
    bad.write_text("time_us,queue,op,bytes,priority,persistent\n5,Q,put,1,0,false\n3,Q,put,1,0,false\n")
    assert main(["replay", str(bad)]) == 2
    assert "row 1" in capsys.readouterr().err

    data = tmp_path / "data"
    with QueueManager.open(data, sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT)
        for _ in range(50):
            h.put(b"x" * 50)
        qm.sweeper.run_once()
    assert main(["inspect", str(data)]) == 0
    text = capsys.readouterr().out
    assert "chain Q/0" in text and "45 records" in text
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2


def test_readme_api_example_runs():
    """The README's MQ program ("Using it") is what a new user of the MQ API copies: it must
    run as shown. (Its first program, the Queue, runs with every block: tests/test_docs.py.)"""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Using it\n\n.*?```python\n(.*?)```", text, re.S)
    assert block, "the README lost its API example"
    exec(compile(block.group(1), "README.md", "exec"), {"print": lambda *a: None})


def test_the_readme_says_what_the_tests_need():
    """Python 3.11, a C compiler, and the chromium the browser tests drive (.ci/run installs it):
    a machine set up from the README alone runs the suite."""
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "need Python 3.11 and a C compiler" in text
    assert "Debian's `chromium` for the console's browser tests" in text
    assert "apt-get install" in (ROOT / ".ci" / "run").read_text() and "chromium" in (ROOT / ".ci" / "run").read_text()


_LINK = re.compile(r"\]\(([^)\s#]+)(#[^)\s]*)?\)")


def test_a_docs_link_leads_to_a_file_of_the_repository():
    """A reader of the repository follows docs/ links as files: a link to ``index.md`` (the
    home page the site makes from the README, docs/hooks.py) leads nowhere there; the README's
    own address does, and the site's hook turns it into the home page."""
    bad = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for m in _LINK.finditer(page.read_text()):
            target = m.group(1)
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                bad.append(f"{page.name}: {target}")
    assert bad == []
