"""docs/plan.md's worked example runs as written: every `$ ` line of its console blocks, in
order, in an empty directory, ends as the page says (exit 0, or the code its `# exits N`
comment announces), and writes what the page says it writes. (Its ```python block runs in
tests/test_docs.py with every page's.)"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "plan.md"


def commands() -> list[tuple[int, str]]:
    out, in_block = [], False
    for n, line in enumerate(DOC.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block = line.strip() == "```console"
        elif in_block and line.startswith("$ "):
            out.append((n, line[2:]))
    return out


def test_the_worked_example_runs_as_written(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    cmds = commands()
    assert len(cmds) >= 4
    for n, cmd in cmds:
        run = subprocess.run(["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        said = re.search(r"# exits (\d+)", cmd)
        want = int(said.group(1)) if said else 0
        assert run.returncode == want, f"docs/plan.md:{n}: {cmd}\nexit {run.returncode}\n{run.stderr[-2000:]}"
        assert "Traceback" not in run.stderr, f"docs/plan.md:{n}:\n{run.stderr}"
    doc = json.loads((tmp_path / "plan-out" / "plan.json").read_text())
    assert doc["frontier"] and (tmp_path / "plan-out" / "plan.png").stat().st_size > 10_000
    goal = json.loads((tmp_path / "plan-goal" / "plan.json").read_text())
    assert goal["chosen"] is not None  # the page's goal is one the grid meets
    assert goal["settings"][goal["chosen"]]["peak_memory_bytes"] <= 2_000_000
