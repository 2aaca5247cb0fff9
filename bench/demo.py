"""``sweepq demo``: a short end-to-end run of the engine that prints what happened.

Several producers put orders at different priorities while a consumer takes them in
delivery order; one unit of work is committed and one is backed out, and the backed-out
message comes back in place with its backout count raised. Until the memory-pressure demo
exists, this is the README's main job.
"""

from __future__ import annotations

import threading
from typing import TextIO

from sweepq.engine import GMO, MD, OO, PMO, MQError, QueueManager, Reason


def run(out: TextIO, producers: int = 3, per_producer: int = 4) -> dict:
    """Run the demo, writing a narrative to ``out``; return the counts it printed."""
    say = lambda s="": print(s, file=out, flush=True)  # noqa: E731
    with QueueManager("DEMO") as qm:
        qm.define_queue("ORDERS")
        qm.define_queue("AUDIT")
        say(f"queue manager {qm.name}: queues {', '.join(qm.queue_names())}")

        def producer(p: int) -> None:
            with qm.connect() as c:
                h = c.open("ORDERS", OO.OUTPUT)
                for n in range(per_producer):
                    prio = (p * 3 + n) % 10
                    h.put(f"order p{p}-{n} prio {prio}".encode(), MD(priority=prio))

        threads = [threading.Thread(target=producer, args=(p,)) for p in range(producers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        total = producers * per_producer
        say(f"{producers} producers put {total} orders at priorities 0..9")

        with qm.connect() as c:
            orders = c.open("ORDERS", OO.INPUT_SHARED | OO.OUTPUT)
            audit = c.open("AUDIT", OO.OUTPUT | OO.INPUT_SHARED)

            say("\nunit of work 1 (committed): take the most urgent order, write an audit record")
            m = orders.get(GMO.SYNCPOINT)
            audit.put(b"processed " + m.data, options=PMO.SYNCPOINT)
            c.commit()
            say(f"  got {m.data.decode()!r}; committed, audit depth now {qm.inquire_queue('AUDIT').current_depth}")

            say("\nunit of work 2 (backed out): take the next order, fail, back out")
            m2 = orders.get(GMO.SYNCPOINT)
            audit.put(b"processed " + m2.data, options=PMO.SYNCPOINT)
            c.backout()
            say(f"  got {m2.data.decode()!r}; backed out: the audit record is gone,")
            again = orders.get()
            say(f"  and the order is back in place: {again.data.decode()!r}, backout count {again.backout_count}")

            say("\nconsumer drains the rest in delivery order (priority, then arrival):")
            drained = 1 + 1  # the two taken above
            while True:
                try:
                    m = orders.get(GMO.WAIT, wait_interval=0)
                except MQError as e:
                    if e.reason != Reason.NO_MSG_AVAILABLE:
                        raise
                    break
                say(f"  {m.data.decode()}")
                drained += 1
            say(
                f"\ndone: {drained} of {total} orders delivered exactly once; "
                f"ORDERS depth {qm.inquire_queue('ORDERS').current_depth}, "
                f"AUDIT depth {qm.inquire_queue('AUDIT').current_depth}"
            )
            return {"orders": total, "delivered": drained, "audit": qm.inquire_queue("AUDIT").current_depth}
