"""The multi-process proof (issue 19 §6): 4 producer processes and 4 consumer processes through
one ``sweepq serve``, persistent messages under syncpoint, the sweeper on at a short interval:
0 lost, 0 duplicated, FIFO per producer within a priority. Sized for CI on 2 shared cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from net_env import ServeProcess, short_dir

from sweepq.engine import Persistence
from sweepq.net import RemoteQueueManager, auth

PRODUCERS = CONSUMERS = 4
PER_PRODUCER = 400

PRODUCER = """
import random, struct, sys
from sweepq import client
from sweepq.engine import MD, OO, PMO, Persistence
p, n = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(p)
with client.connect(sys.argv[1], client=f"producer {p}") as c:
    h = c.open("PROOF", OO.OUTPUT)
    seqs = [0] * 10
    for i in range(n):
        prio = rng.randrange(1, 10)  # 0 is for the stop messages
        md = MD(priority=prio, persistence=Persistence.PERSISTENT)
        h.put(struct.pack("<iii", p, prio, seqs[prio]), md, PMO.SYNCPOINT)
        seqs[prio] += 1
        if i % 10 == 9 or i == n - 1:
            c.commit()
"""

CONSUMER = """
import json, struct, sys
from sweepq import client
from sweepq.engine import GMO, OO
got = []
with client.connect(sys.argv[1], client="consumer") as c:
    h = c.open("PROOF", OO.INPUT_SHARED)
    while True:
        batch = []
        for _ in range(7):
            m = h.get(GMO.WAIT | GMO.SYNCPOINT, wait_interval=60_000)
            if m.priority == 0:
                break
            batch.append(struct.unpack("<iii", m.data))
        c.commit()
        got += batch
        if len(batch) < 7:
            break
print(json.dumps(got))
"""


def test_four_producer_and_four_consumer_processes_through_one_server():
    data = os.path.join(short_dir(), "d")
    with ServeProcess(data, "--sweep-interval", "0.2") as srv:
        admin = auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))
        with RemoteQueueManager(srv.url, admin_token=admin) as r:
            r.define_queue("PROOF", default_persistence=Persistence.PERSISTENT)
        py = sys.executable
        producers = [
            subprocess.Popen([py, "-c", PRODUCER, srv.url, str(p), str(PER_PRODUCER)]) for p in range(PRODUCERS)
        ]
        for p in producers:
            assert p.wait(120) == 0
        consumers = [subprocess.Popen([py, "-c", CONSUMER, srv.url], stdout=subprocess.PIPE) for _ in range(CONSUMERS)]
        with RemoteQueueManager(srv.url) as r, r.connect() as c:
            from sweepq.engine import MD, OO

            h = c.open("PROOF", OO.OUTPUT)
            for _ in range(CONSUMERS):
                h.put(b"stop", MD(priority=0))
        outs = [json.loads(c.communicate(timeout=120)[0]) for c in consumers]
        assert all(c.returncode == 0 for c in consumers)
        assert srv.terminate() == 0
    with open(os.path.join(data, "sweepq-stats.json")) as f:
        stats = json.load(f)
    assert stats["PROOF"]["sweeps"] > 0 and stats["PROOF"]["total_msgs_swept"] > 0  # the sweeper was on

    everything = [tuple(r) for out in outs for r in out]
    assert len(everything) == PRODUCERS * PER_PRODUCER  # 0 lost
    assert len(set(everything)) == len(everything)  # 0 duplicated
    for out in outs:  # in order per producer and priority, as each consumer saw them
        last: dict = {}
        for p, prio, n in map(tuple, out):
            assert last.get((p, prio), -1) < n
            last[(p, prio)] = n
