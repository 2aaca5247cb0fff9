"""A competing CPU load for ``sweepq demo --busy N``: N processes that spin in pure Python,
started before the demo's runs and ended after them, each tethered to the demo
(bench/children.py) so that none outlives it, whatever ends it.

``python -m sweepq.bench.busy PARENT_PID`` is one burner: it tethers itself, says ``ready``
on stdout and spins until it is ended.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass

from .children import Children, tether

KIND = "busy process"


@dataclass
class BusyLoad:
    """What the burners took: how many ran, the CPU-seconds they used, for how long."""

    processes: int
    cpu_seconds: float
    seconds: float


class Busy:
    """Run ``n`` burners beside the body of a ``with`` block; :attr:`load` says what they took.

    The burners are started (and known to spin) before the body runs, and ended when it
    ends. ``children``: the parent's set of processes; when the body raises (an error,
    Ctrl-C), every one of them is ended (:meth:`Children.end`), not only the burners."""

    def __init__(self, n: int, children: Children) -> None:
        self.n = n
        self.children = children
        self.procs: list[subprocess.Popen] = []
        self.load = BusyLoad(n, 0.0, 0.0)
        self._cpu_before = 0.0

    def __enter__(self) -> Busy:
        argv = [sys.executable, "-m", "sweepq.bench.busy", str(os.getpid())]
        self.procs = [self.children.start(argv, KIND, stdout=subprocess.PIPE) for _ in range(self.n)]
        for p in self.procs:
            assert p.stdout is not None
            if p.stdout.readline() != b"ready\n":
                raise RuntimeError(f"a busy process (pid {p.pid}) did not start (exit {p.poll()})")
        self._t0 = time.monotonic()
        return self

    def cpu_seconds(self) -> float:
        """CPU-seconds the running burners have used so far (user + system)."""
        import psutil

        total = 0.0
        for p in self.procs:
            try:
                t = psutil.Process(p.pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        return total

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None:  # an error or Ctrl-C: end every process of the parent at once
            self.children.end()
            return
        if self.procs:
            self.load = BusyLoad(self.n, self.cpu_seconds(), time.monotonic() - self._t0)
        for p in self.procs:
            if p.poll() is None:
                p.kill()  # nothing to clean up: a burner holds no files
            p.wait()
            for pipe in (p.stdin, p.stdout):
                if pipe:
                    pipe.close()


def spin() -> None:
    """Burn CPU in the interpreter until ended (a linear congruential generator, so that the
    loop does work and allocates nothing)."""
    x = 1
    while True:
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str]) -> int:
    tether(int(argv[0]))
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    spin()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
