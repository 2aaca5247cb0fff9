"""docs/pipeline.md's speed figures come from one committed run of ``python -m
sweepq.bench.replay_bench speed ... --out docs/figures/pipeline`` (run.json), never typed by
hand: the table file is what the bench writes from run.json, and the page quotes it as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweepq.bench.replay_bench import speed_table, work_table

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "docs" / "figures" / "pipeline"
QUOTE = "<!-- figures: docs/figures/pipeline/speed.md -->\n{}<!-- /figures -->"


def test_the_table_is_what_the_bench_writes_from_the_committed_run():
    doc = json.loads((RUN / "run.json").read_text())
    assert doc["command"].startswith("python -m sweepq.bench.replay_bench speed ")
    assert (RUN / "speed.md").read_text() == speed_table(doc)


def test_every_pipeline_run_of_it_has_the_figures_of_sweepq_replay():
    rows = json.loads((RUN / "run.json").read_text())["rows"]
    assert all(r["same"] for r in rows if r["what"] != "sweepq replay")


def test_docs_pipeline_quotes_the_table_as_it_is():
    page = (ROOT / "docs" / "pipeline.md").read_text()
    assert QUOTE.format((RUN / "speed.md").read_text()) in page


# Later runs beside it, each in a folder of its own: after the pre-started daemon under load
# (prestart, issue 35 item 5), and two quiet runs, before it (quiet) and after (quiet-prestart);
# the layout made by the first job, under load (layout-first-job) and at load 2 (layout-first-job-ab),
# each alternating with the tree before it; the direct replay, no layout (direct), under load;
# and its workers without numpy's huge-page advice (direct-no-hugepage), under load, alternating;
# quiet runs after the huge-page advice was dropped (hugepage-quiet) and after the launcher (launcher-quiet);
# the direct task's columns in memory made while the JVM starts, under load alternating with main
# (arena-ab); the kernel's work arrays pooled and laid in the arena, under load (workspace), and
# alternating with main (workspace-ab), and with each array mapped in as laid (workspace-2,
# workspace-3, a compiler on one core), alternating with main after it had merged the rest
# (workspace-ab-2) and with the tree before this work (workspace-ab-3).
LATER = (
    "prestart",
    "quiet",
    "quiet-prestart",
    "layout-first-job",
    "layout-first-job-ab",
    "direct",
    "direct-quiet",
    "direct-no-hugepage",
    "hugepage-quiet",
    "launcher-quiet",
    "arena-ab",
    "idle",
    "arena-quiet",
    "arena-quiet-2",
    "workspace",
    "workspace-ab",
    "workspace-2",
    "workspace-3",
    "workspace-ab-2",
    "workspace-ab-3",
    "workspace-quiet",
    "workspace-quiet-2",
    "workspace-quiet-3",
)


@pytest.mark.parametrize("name", LATER)
def test_each_later_runs_table_is_what_the_bench_writes_and_the_page_quotes_it(name):
    run = RUN / name
    doc = json.loads((run / "run.json").read_text())
    assert doc["command"].startswith("python -m sweepq.bench.replay_bench speed ")
    assert (run / "speed.md").read_text() == speed_table(doc)
    assert all(r["same"] for r in doc["rows"] if r["what"] != "sweepq replay")
    page = (ROOT / "docs" / "pipeline.md").read_text()
    quote = f"<!-- figures: docs/figures/pipeline/{name}/speed.md -->\n{{}}<!-- /figures -->"
    assert quote.format((run / "speed.md").read_text()) in page


def test_the_work_arrays_run_is_what_the_bench_writes_and_the_page_quotes_it():
    run = RUN / "workspace-work"
    doc = json.loads((run / "run.json").read_text())
    assert doc["command"].startswith("python -m sweepq.bench.replay_bench work ")
    assert {r["work"] for r in doc["rows"]} == {"fresh", "pooled"}
    assert (run / "work.md").read_text() == work_table(doc)
    page = (ROOT / "docs" / "pipeline.md").read_text()
    quote = "<!-- figures: docs/figures/pipeline/workspace-work/work.md -->\n{}<!-- /figures -->"
    assert quote.format((run / "work.md").read_text()) in page
