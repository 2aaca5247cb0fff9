"""Retrieval figures (issue 9 §6): a get by CorrelId on a deep queue with an index, without
one, and swept (found through the per-blob summaries), against a linear scan of a Python
list as the baseline measured in the same run.

Each figure is microseconds per get, best of ``rounds`` interleaved rounds (the machines
are shared and noisy); the ratios are to the baseline of the same run.
"""

from __future__ import annotations

import random
import time

from sweepq.engine import MD, OO, QueueManager, SweeperSettings
from sweepq.engine.constants import IndexType
from sweepq.sweeper import ManualClock, SweepPolicy


def _cid(i: int) -> bytes:
    return b"C%023d" % i


def _queue(depth: int, index: bool, swept: bool) -> tuple[QueueManager, object]:
    qm = QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)))
    kind = IndexType.CORREL_ID if index else IndexType.NONE
    qm.define_queue("Q", index_type=kind, max_depth=depth * 2 + 10)
    h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    for i in range(depth):
        h.put(b"m", MD(correl_id=_cid(i)))
    if swept:
        qm.sweeper.run_once()
    return qm, h


def get_by_correl_id(depth: int = 100_000, gets: int = 100, rounds: int = 3, seed: int = 1) -> dict:
    """Microseconds per get of a random CorrelId from a queue of ``depth`` messages.

    The scans (the list baseline, the unindexed queue, the swept one) do ``gets`` gets a
    round; the indexed queues do twenty times as many (each get costs microseconds)."""
    rnd = random.Random(seed)
    setups = {
        "indexed": _queue(depth, True, False),
        "indexed_1k_deep": _queue(1000, True, False),  # the same get on a shallow queue
        "unindexed": _queue(depth, False, False),
        "swept": _queue(depth, False, True),
    }
    small = 1000
    # Each get removes its message: a round takes fresh ones (the 1,000-deep queue has room
    # for 1,000 gets in all).
    counts = {
        "indexed": gets * 20,
        "indexed_1k_deep": min(gets * 20, small // rounds),
        "unindexed": gets,
        "swept": gets,
    }
    baseline_list = [(_cid(i), b"m") for i in range(depth)]
    taken: dict[str, set[int]] = {k: set() for k in [*setups, "list_scan"]}

    def pick(name: str, n: int, size: int) -> list[int]:
        out = []
        while len(out) < n:
            i = rnd.randrange(size)
            if i not in taken[name]:
                taken[name].add(i)
                out.append(i)
        return out

    best: dict[str, float] = {}
    for _ in range(rounds):
        ids = pick("list_scan", gets, depth)
        t0 = time.perf_counter()
        for i in ids:  # the baseline: find and remove from a Python list by a linear scan
            want = _cid(i)
            for j, (c, _d) in enumerate(baseline_list):
                if c == want:
                    del baseline_list[j]
                    break
        best["list_scan"] = min(best.get("list_scan", 1e9), (time.perf_counter() - t0) / gets * 1e6)
        for name, (_qm, h) in setups.items():
            sel = pick(name, counts[name], small if name == "indexed_1k_deep" else depth)
            t0 = time.perf_counter()
            for i in sel:
                h.get(correl_id=_cid(i))
            best[name] = min(best.get(name, 1e9), (time.perf_counter() - t0) / len(sel) * 1e6)
    stats = setups["swept"][0].stats()["Q"]
    for qm, _h in setups.values():
        qm.close()
    base = best["list_scan"]
    return {
        "depth": depth,
        "us_per_get": best,
        "speedup_over_list_scan": {k: base / v for k, v in best.items() if k != "list_scan"},
        "swept_msgs": stats.msgs_swept,
        "swept_unsweeps": stats.unsweeps,
        "goal_indexed_us": 2.0,
    }


if __name__ == "__main__":
    import json

    print(json.dumps(get_by_correl_id(), indent=1))
