"""docs/sweeper.md's figures of the resident bound in a fill and a drain come from one
committed run of ``sweepq bench memory ... --out docs/figures/memory-bound`` (its bench.json),
never typed by hand: the tables are what the bench writes from that file, and the page quotes
them as they are (the same rule as tests/test_doc_figures.py, for a run of one scenario)."""

from __future__ import annotations

import json
from pathlib import Path

from sweepq.bench.memory import DRAIN_RUNS
from sweepq.bench.suite import tables

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "figures" / "memory-bound"
QUOTE = "<!-- figures: docs/figures/memory-bound/{} -->\n{}<!-- /figures -->"


def _run() -> dict:
    return json.loads((RUN / "bench.json").read_text())


def test_the_tables_are_what_the_bench_writes_from_the_committed_run():
    run = _run()
    assert run["command"].startswith("sweepq bench memory ")
    assert run["command"].endswith(" --out docs/figures/memory-bound")
    assert {"date", "machine", "load", "load_after", "commit"} <= set(run["run"])
    assert {p.name: p.read_text() for p in RUN.glob("*.md")} == tables(run)


def test_the_run_has_every_case_and_every_item_came_back():
    cases = _run()["figures"]["memory"]["fill_and_drain"]
    assert len(cases) == DRAIN_RUNS
    assert all(c["every_item_once_in_order"] for c in cases)


def test_docs_sweeper_quotes_the_tables_as_they_are():
    page = (ROOT / "docs" / "sweeper.md").read_text()
    for name in ("run.md", "memory.md"):
        assert QUOTE.format(name, (RUN / name).read_text()) in page, name
