"""Figures in the docs come from one committed bench run, never typed by hand.

docs/figures/ is what `sweepq bench ... --out docs/figures` wrote: bench.json (the figures,
the rows, the options, and the run's date, machine, load and commit), run.md (a line: the
command, date, commit, machine and load) and one Markdown table a scenario (bench/suite.py
``tables``). A page quotes a table between two markers:

    <!-- figures: docs/figures/throughput.md -->
    ...the file's text, as it is...
    <!-- /figures -->

and this file holds every such copy equal to its file, and every file equal to what the bench
writes from the committed bench.json. A new run (its command is in run.md) changes the files;
this test then names each page to copy them into.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from sweepq.bench.suite import SCENARIOS, BenchOptions, tables

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "docs" / "figures"
BLOCK = re.compile(r"<!-- figures: (\S+) -->\n(.*?)<!-- /figures -->", re.S)
# The pages whose figures come from the run, and the tables each must quote.
PAGES = {
    "docs/performance.md": {"docs/figures/run.md"}
    | {f"docs/figures/{name}.md" for name in SCENARIOS if name not in ("queue", "clients", "channel", "celery")},
    "docs/queue.md": {"docs/figures/run.md", "docs/figures/queue.md"},
    "docs/celery.md": {"docs/figures/run.md", "docs/figures/celery.md"},
    "docs/clients.md": {"docs/figures/run.md", "docs/figures/clients.md"},
}


def _run() -> dict:
    return json.loads((FIGURES / "bench.json").read_text())


def _blocks(page: str) -> list[tuple[str, str]]:
    return BLOCK.findall((ROOT / page).read_text())


def test_the_committed_run_is_whole_and_says_when_where_and_how():
    run = _run()
    assert run["command"].startswith("sweepq bench ") and run["command"].endswith(" --out docs/figures")
    assert set(run["figures"]) == set(SCENARIOS)  # every scenario, in one run
    assert set(run["options"]) == {f.name for f in dataclasses.fields(BenchOptions)}
    assert {"date", "machine", "load", "load_after", "commit", "python"} <= set(run["run"])


def test_each_table_is_what_the_bench_writes_from_the_committed_run():
    written = tables(_run())
    on_disk = {p.name: p.read_text() for p in FIGURES.glob("*.md")}
    assert on_disk == written, "docs/figures/ differs from its bench.json: write the run again with --out"


@pytest.mark.parametrize("page", sorted(PAGES))
def test_a_page_quotes_its_tables_as_they_are(page):
    blocks = _blocks(page)
    assert {src for src, _ in blocks} >= PAGES[page], f"{page} does not quote every table it should"
    for src, text in blocks:
        assert (ROOT / src).is_file(), f"{page} quotes {src}, which is not there"
        assert text == (ROOT / src).read_text(), f"{page}: its copy of {src} differs from the file: copy it again"


def test_the_readme_types_no_figure_and_quotes_the_runs_headline():
    """The README's comparison table names the bench whose tables hold the figures, with no
    figure typed into it; below it the README quotes the run's headline rows
    (docs/figures/headline.md, bench/suite.py ``HEADLINE``) as they are, so none there can be
    older than the run."""
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Why sweepq") :].split("\n\n")[1]
    assert table.startswith("| | what it gives |")
    assert not re.search(r"\d[\d.,]* ?(x|MB|k/s|%)(\W|$)", table), "a figure typed into the README's table"
    assert "docs/queue.md#figures" in table
    quoted = dict(BLOCK.findall(text))
    assert quoted.get("docs/figures/headline.md") == (FIGURES / "headline.md").read_text()
    assert len((FIGURES / "headline.md").read_text().splitlines()) >= 3 + 5  # the heading and five rows at least


DEMO = "docs/figures/demo"


@pytest.mark.parametrize(("page", "table"), [("README.md", "peak.md"), ("docs/demo.md", "demo.md")])
def test_the_demo_figures_are_quoted_from_the_committed_demo_run(page, table):
    """The main job's figures (README, docs/demo.md) are a committed ``sweepq demo --out
    docs/figures/demo`` run's tables, quoted as they are, and those tables are what the demo
    makes from that run's demo.json: no figure of the demo typed by hand."""
    from sweepq.bench import demo

    doc = json.loads((ROOT / DEMO / "demo.json").read_text())
    levels = demo.levels_of(doc)
    made = {
        "demo.md": demo.markdown(levels) + "\n" + demo.peak_rss_table(levels),
        "peak.md": demo.peak_rss_table(levels),
    }
    assert (ROOT / DEMO / table).read_text() == made[table]
    assert {"date", "commit", "load"} <= set(doc["run"])
    assert (f"{DEMO}/{table}", made[table]) in _blocks(page), f"{page} does not quote {DEMO}/{table} as it is"


def test_the_blocks_are_found():
    page = "a\n<!-- figures: docs/figures/x.md -->\n| t |\n<!-- /figures -->\nb\n"
    assert BLOCK.findall(page) == [("docs/figures/x.md", "| t |\n")]


def _pages_with_blocks() -> list[str]:
    return sorted(
        str(p.relative_to(ROOT))
        for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
        if BLOCK.search(p.read_text())
    )


@pytest.mark.parametrize("page", _pages_with_blocks())
def test_every_quoted_block_on_every_page_is_its_file_as_it_is(page):
    """Any page may quote a run's file (a bench's table, a harness's verdict); wherever it does,
    the copy is the file's text, so no page keeps a figure its run no longer says."""
    for src, text in _blocks(page):
        assert (ROOT / src).is_file(), f"{page} quotes {src}, which is not there"
        assert text == (ROOT / src).read_text(), f"{page}: its copy of {src} differs from the file: copy it again"


def test_the_pages_that_quote_are_found():
    assert {"README.md", "docs/queue.md", "docs/performance.md"} <= set(_pages_with_blocks())


CHANNELS = "docs/figures/channels"


def test_the_channel_runs_are_what_their_json_says_and_channels_md_quotes_them():
    """docs/channels.md's demo table and kill -9 verdict are committed runs' files (sweepq demo
    --channel --out, sweepq crashtest-channel --out), each what its command makes from its JSON,
    and both runs passed."""
    from sweepq.bench import demo_channel
    from sweepq.cli.harness import verdict_markdown

    demo = json.loads((ROOT / CHANNELS / "demo" / "demo-channel.json").read_text())
    assert (ROOT / CHANNELS / "demo" / "demo-channel.md").read_text() == demo_channel.markdown(demo)
    assert all(r["got"] == demo["config"]["messages"] and not r["duplicates"] for r in demo["runs"])
    verdict = json.loads((ROOT / CHANNELS / "crashtest" / "verdict.json").read_text())
    assert (ROOT / CHANNELS / "crashtest" / "verdict.md").read_text() == verdict_markdown(verdict, verdict["verdict"])
    assert verdict["ok"] and verdict["command"].startswith("sweepq crashtest-channel --kills ")
    quoted = {src for src, _ in _blocks("docs/channels.md")}
    assert {f"{CHANNELS}/demo/demo-channel.md", f"{CHANNELS}/crashtest/verdict.md", "docs/figures/channel.md"} <= quoted
