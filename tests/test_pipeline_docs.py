"""docs/pipeline.md's first two command blocks run as written, in order, in an empty directory
(issue 35: every CLI form the docs show): the traces made, laid out and replayed, then the
pipeline over the trace file, with the what-if grid, and over the trace laid out by queue, and
its ``--help``. The ``pip install`` line is the one line not run (the suite runs installed).

What could fail: a command the page shows exiting non-zero or with a traceback; and the three
ways to the same figures disagreeing: ``sweepq replay``, the pipeline on the file (a direct
replay on this machine) and the pipeline on the layout by queue must report the same events,
peak memory and bytes read back."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "pipeline.md"


def _block(name: str) -> list[str]:
    """The command lines of docs/pipeline.md's ```bash block containing ``name``."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    (block,) = [b for b in blocks if name in b]
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _run(line: str, cwd: Path, env: dict) -> str:
    p = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    where = f"docs/pipeline.md: {line}"
    assert "Traceback" not in p.stderr, f"{where}:\n{p.stderr[-3000:]}"
    assert p.returncode == 0, f"{where}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
    return p.stdout + p.stderr


def _replay_figures(output: str) -> dict[str, int]:
    """`sweepq replay`'s events, peak memory with the sweeper (MB, as printed) and blobs read back."""
    events = re.search(r"^([\d,]+) events on", output, re.M)
    peak = re.search(r"peak memory: ([\d.]+) MB with the sweeper", output)
    blobs = re.search(r"read back by gets: [\d.]+ MB in ([\d,]+) blobs", output)
    assert events and peak and blobs, output
    return {
        "events": int(events.group(1).replace(",", "")),
        "peak_mb_x100": round(float(peak.group(1)) * 100),
        "blobs_read_back": int(blobs.group(1).replace(",", "")),
    }


def _overall(report: Path) -> dict[str, int]:
    doc = json.loads((report / "overall.json").read_text())
    return {
        "events": doc["events"],
        "peak_mb_x100": round(doc["peak_memory_with_sweeper_bytes"] / 1e4),
        "blobs_read_back": doc["blobs_read_back"],
    }


@pytest.mark.long  # 27 M events made twice, laid out, replayed, and three Spark jobs: minutes
@pytest.mark.timeout(2400)
def test_the_pages_commands_run_as_written_and_agree(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    traces = _block("sweepq trace generate")
    pipeline = [line for line in _block("sweepq pipeline --help") if not line.startswith("pip ")]
    assert len(traces) == 4 and len(pipeline) == 4, (traces, pipeline)
    out = {}
    for line in traces + pipeline:
        out[line] = _run(line, tmp_path, env)
    replay_line = next(line for line in traces if shlex.split(line)[1] == "replay")
    by_replay = _replay_figures(out[replay_line])
    for report in ("report", "report_byq"):
        got = _overall(tmp_path / report)
        # Peak memory as replay prints it, to 0.01 MB: the last digit may round either way.
        assert abs(got.pop("peak_mb_x100") - by_replay["peak_mb_x100"]) <= 1, (report, got, by_replay)
        assert got == {k: v for k, v in by_replay.items() if k != "peak_mb_x100"}, (report, got)
    assert "usage: sweepq pipeline" in out[pipeline[-1]] and "--shuffle" in out[pipeline[-1]]
    # The grid's run came after the plain one into report/: its what-if results are there.
    assert any((tmp_path / "report" / "grid_queues").iterdir()), "the --grid run wrote no grid_queues/"
