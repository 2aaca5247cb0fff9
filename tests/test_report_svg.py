"""The report's charts over time as SVG (pipeline/svg.py): well-formed, and labelled as the
matplotlib charts were: title, one unit per axis, a legend naming each line, round ticks."""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

import numpy as np

from sweepq.engine.record import HEAD_LEN
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.replay import replay
from sweepq.sweeper.traces import generate


def _svgs(imgs: list[str]) -> list[str]:
    return [base64.b64decode(re.search(r"base64,([^\"]+)", i).group(1)).decode() for i in imgs]


def _texts(svg: str) -> list[str]:
    ns = "{http://www.w3.org/2000/svg}"
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{ns}text")]


def test_the_charts_are_svg_with_titles_units_and_legends():
    from sweepq.pipeline.report import charts

    t = generate("slow-consumer", seconds=900, rate=60, queues=3, size=300, priorities=True, seed=2)
    r = replay(t, SweepPolicy(memory_budget=50_000), record_header=HEAD_LEN)
    imgs = charts(r.totals, 5.0, budget=50_000)
    assert len(imgs) == 3 and all(i.startswith('<img alt="chart: ') for i in imgs)
    memory, read, swept = (_texts(s) for s in _svgs(imgs))
    assert "Message bytes in memory, all queues" in memory
    assert "time from the trace's start (min)" in memory and any(x.startswith("in memory (") for x in memory)
    assert {"without sweeping", "with the sweeper", "memory budget"} <= set(memory)
    assert "Bytes read back from blobs by gets, per 5 s interval" in read
    assert any(x.startswith("read back (") for x in read)
    assert {"swept", "of them swept before (re-swept)", "messages"} <= set(swept)


def test_ticks_are_round_and_cover_the_values():
    from sweepq.pipeline.svg import log_ticks, nice_ticks

    ticks = nice_ticks(0.0, 937.0)
    assert ticks[0] == 0.0 and ticks[-1] >= 937.0 and len(ticks) <= 8
    steps = np.diff(ticks)
    assert np.allclose(steps, steps[0]) and steps[0] in (100.0, 200.0, 250.0, 500.0)
    assert log_ticks(0.003, 420.0) == [0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]
    assert nice_ticks(5.0, 5.0)[0] <= 5.0 <= nice_ticks(5.0, 5.0)[-1]  # one value: still an axis
