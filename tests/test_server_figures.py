"""docs/clients.md's figures of the server against redis-server (issue 31 item 3) come from
committed runs, never typed by hand: ``sweepq bench clients ... --out docs/figures/server``
(64 concurrent clients), the same with 256 (``docs/figures/server-256``), and the callgrind
count of ``python -m sweepq.bench.server_instructions ... --out
docs/figures/server-instructions``. Each directory's tables are what the bench writes from its
bench.json, and the page quotes them as they are (the rule of tests/test_doc_figures.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweepq.bench.suite import tables

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "clients.md"
QUOTE = "<!-- figures: docs/figures/{}/{} -->\n{}<!-- /figures -->"
# The run's directory, the command that writes it, and the table of it the page quotes.
RUNS = {
    "server": ("sweepq bench clients ", "clients.md"),
    "server-256": ("sweepq bench clients ", "clients.md"),
    "server-instructions": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-codec": ("sweepq bench clients ", "clients.md"),
    "server-instructions-codec": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-codec-quiet": ("sweepq bench clients ", "clients.md"),
    "server-loop-quiet": ("sweepq bench clients ", "clients.md"),
    "server-loop-256": ("sweepq bench clients ", "clients.md"),
    "server-instructions-loop": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-poller-quiet": ("sweepq bench clients ", "clients.md"),
    "server-instructions-poller": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-instructions-decode": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-decode-quiet": ("sweepq bench clients ", "clients.md"),
    "server-instructions-kept": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server-instructions-merged": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server54/before": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
    "server54/after": ("python -m sweepq.bench.server_instructions ", "server_instructions.md"),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_the_tables_are_what_the_bench_writes_from_the_committed_run(name):
    run_dir = ROOT / "docs" / "figures" / name
    run = json.loads((run_dir / "bench.json").read_text())
    command, _ = RUNS[name]
    assert run["command"].startswith(command) and run["command"].endswith(f" --out docs/figures/{name}")
    assert {"date", "machine", "load", "load_after", "commit"} <= set(run["run"])
    assert {p.name: p.read_text() for p in run_dir.glob("*.md")} == tables(run)


@pytest.mark.parametrize("name", list(RUNS))
def test_docs_clients_quotes_the_tables_as_they_are(name):
    page = PAGE.read_text()
    run_dir = ROOT / "docs" / "figures" / name
    for table in ("run.md", RUNS[name][1]):
        assert QUOTE.format(name, table, (run_dir / table).read_text()) in page, f"{name}/{table}"


def test_the_256_run_has_256_clients_and_the_64_run_64():
    for name, n in (
        ("server", 64),
        ("server-256", 256),
        ("server-codec", 64),
        ("server-codec-quiet", 64),
        ("server-loop-quiet", 64),
        ("server-loop-256", 256),
    ):
        run = json.loads((ROOT / "docs" / "figures" / name / "bench.json").read_text())
        assert run["options"]["clients_concurrent"] == n
