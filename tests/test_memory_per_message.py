"""What a queued message costs beyond its payload, as tracemalloc counts it (issue 23: at most
40 B for a 100-byte message, what ``queue.Queue`` costs holding the caller's bytes objects).
tracemalloc counts the interpreter's allocations exactly, so the figure does not move with
the machine's load; the same count at 200,000 messages is in docs/performance.md."""

from __future__ import annotations

import gc
import os
import tracemalloc

from sweepq import forms
from sweepq.engine import OO, QueueManager, SweeperSettings

N = 50_000
PAYLOAD = 100


def overhead_per_message(n: int = N) -> float:
    """Bytes held per queued message beyond its payload; the caller's bytes are dropped after
    the put, as a producer drops what it sent."""
    qm = QueueManager(sweeping=SweeperSettings(run=False))
    try:
        qm.define_queue("M")
        h = qm.connect().open("M", OO.OUTPUT | OO.INPUT_SHARED)
        h.put(b"warm-up")
        h.get()
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            for _ in range(n):
                h.put(os.urandom(PAYLOAD))
            gc.collect()
            held = tracemalloc.get_traced_memory()[0] - base
        finally:
            tracemalloc.stop()
        assert qm.inquire_queue("M").current_depth == n
        return held / n - PAYLOAD
    finally:
        qm.close()


# The compiled core's flat arrays hold a slot in 15 bytes; the interpreted form keeps the same
# slots in five Python lists, a pointer in each and, for most values, an int object (docs/queue.md,
# "The interpreted form"): its own bound, so that the suite run interpreted holds it too.
BOUND = 40 if forms.running() else 140


def test_a_queued_100_byte_message_costs_at_most_40_bytes_beyond_its_payload():
    cost = overhead_per_message()
    assert 0 < cost <= BOUND, f"{cost:.1f} B per message beyond its payload"
