"""Browse rate, in memory and swept, against draining (issue 9 §6).

``python -m sweepq.bench.browse [N]`` puts N messages (100 bytes, default 1,000,000), then:

* browses them all in memory (BROWSE_FIRST, then BROWSE_NEXT to 2033);
* sweeps every one of them (sweeper rule with a buffer of x + 0), browses them all again from
  the blobs, and checks that nothing was unswept;
* drains them with get_many (which brings the chain back blob by blob).

Each figure is messages per second of the same run. The goal: browsing swept messages at
least 0.5x the rate of browsing them in memory.
"""

from __future__ import annotations

import sys
import time

from sweepq.engine import GMO, OO, MQError, QueueManager, Reason, SweeperSettings
from sweepq.sweeper import ManualClock, SweepPolicy


def _browse_all(h) -> tuple[int, float]:
    n, opt = 0, GMO.BROWSE_FIRST
    t = time.perf_counter()
    while True:
        try:
            h.get(opt)
        except MQError as e:
            if e.reason != Reason.NO_MSG_AVAILABLE:
                raise
            return n, time.perf_counter() - t
        n += 1
        opt = GMO.BROWSE_NEXT


def run(n: int) -> dict[str, float]:
    """Rates (messages per second) of one run on ``n`` messages."""
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0))) as qm:
        qm.define_queue("Q")
        h = qm.connect().open("Q", OO.OUTPUT | OO.BROWSE | OO.INPUT_SHARED)
        data = b"x" * 100
        for k in range(0, n, 10_000):
            h.put_many([data] * min(10_000, n - k))
        count, secs = _browse_all(h)
        assert count == n
        memory = n / secs
        for _ in range(3):
            qm.sweeper.run_once()
        info = qm.inquire_queue("Q")
        assert info.swept == n, info
        count, secs = _browse_all(h)
        stats = qm.internal.queue("Q").sweep.stats()
        assert count == n and stats.unsweeps == 0 and stats.msgs_swept == n
        swept = n / secs
        t = time.perf_counter()
        got = 0
        while got < n:
            got += len(h.get_many(10_000))
        drain = n / (time.perf_counter() - t)
    return {"browse in memory": memory, "browse swept": swept, "drain swept (get_many)": drain}


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 1_000_000
    rates = run(n)
    base = rates["browse in memory"]
    print(f"| {n:,} messages of 100 B | messages/s | x browse in memory |")
    print("|---|---|---|")
    for what, rate in rates.items():
        print(f"| {what} | {rate / 1e3:,.1f} k/s | {rate / base:.2f} x |")


if __name__ == "__main__":
    main()
