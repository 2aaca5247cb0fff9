"""What a queued 100-byte message costs beyond its payload, in each form of the engine
(docs/performance.md, "Memory"): tests/test_memory_per_message.py's count (tracemalloc, so the
figure does not move with the machine's load) over ``MESSAGES`` puts, in a fresh process per
form, the interpreted one under ``SWEEPQ_PURE=1``.

Usage: python docs/figures/memory-forms/forms.py MESSAGES > docs/figures/memory-forms/forms.txt
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]);"
    "from test_memory_per_message import overhead_per_message;"
    "from sweepq import forms;"
    "print(f'{overhead_per_message(int(sys.argv[2])):.1f} B', 'compiled' if forms.running() else 'interpreted')"
)


def main() -> None:
    n = int(sys.argv[1])
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# python docs/figures/memory-forms/forms.py {n}; commit {head}; {when}")
    for pure in ("0", "1"):
        env = {**os.environ, "SWEEPQ_PURE": pure}
        out = subprocess.run(
            [sys.executable, "-c", CHILD, os.path.join(ROOT, "tests"), str(n)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        print(f"{out[2]}: a queued 100 B message costs {out[0]} {out[1]} beyond its payload ({n:,} puts)")


if __name__ == "__main__":
    main()
