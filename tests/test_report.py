"""The HTML report: its figures are the summary's, in human units, and its charts are there."""

from __future__ import annotations

import re

import pytest

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate

pytest.importorskip("matplotlib")


def test_report_figures_match_the_summary():
    from sweepq.pipeline.report import human_bytes, render

    t = generate("slow-consumer", seconds=900, rate=60, queues=3, size=300, priorities=True, seed=2)
    r = replay(t, SweepPolicy(), record_header=HEAD_LEN)
    overall = {"events": len(t), **r.overall(), "interval_s": 5.0}
    top = [{"queue": q, **r.summary_of(q)} for q in r.queues]
    for row in top:
        row["peak_saved_bytes"] = row["peak_nosweep_bytes"] - row["peak_mem_bytes"]
    grid = [
        {"interval_s": 1.0, "factor": 2, "extra": 5, "blob_bytes": 65536, "peak_mem_bytes": 123_456_789},
        {"interval_s": 5.0, "factor": 3, "extra": 0, "blob_bytes": 262144, "peak_mem_bytes": 2_000},
    ]
    html = render(r.totals, top, overall, grid)
    cells = dict(re.findall(r"<tr><td>([^<]+)</td><td>([^<]+)</td></tr>", html))
    assert cells["events"] == f"{len(t):,}"
    assert cells["peak memory with the sweeper"] == human_bytes(overall["peak_memory_with_sweeper_bytes"])
    assert cells["peak memory without sweeping"] == human_bytes(overall["peak_memory_without_sweeping_bytes"])
    assert cells["memory saved at the peak"] == human_bytes(overall["peak_memory_saved_bytes"])
    assert cells["read back by gets"].startswith(human_bytes(overall["bytes_read_back"]))
    assert f"{overall['msgs_swept']:,}" in cells["messages swept"]
    assert "123.46 MB" in html and "2.00 kB" in html  # the grid table, in human units
    assert html.count("<img") == 4  # memory, read back, swept; the grid chart
    assert "_bytes" not in re.sub(r"<[^>]+>", "", html)  # no raw field names shown


def test_human_units():
    from sweepq.pipeline.report import human_bytes, human_seconds

    assert human_bytes(1013831) == "1.01 MB" and human_bytes(999) == "999 B" and human_bytes(2.5e9) == "2.50 GB"
    assert human_seconds(42) == "42.0 s" and human_seconds(600) == "10.0 min"
