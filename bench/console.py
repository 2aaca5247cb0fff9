"""The web console's cost to the server, and how fast a change reaches the page (issue 26).

``python -m sweepq.bench.console [--seconds S] [--clients N] [--out FILE]``:

* ``sweepq serve`` in a process of its own, with 64 client connections (4 processes of 16
  threads) putting and getting 1 KiB messages on one queue for ``--seconds``, four times:
  without a console, with the console and no page open, with 1 page and with 10 pages
  (headless Chromium, Debian's, driven by Playwright): the server's CPU seconds per second
  and its peak resident memory, and the clients' put+get pairs per second, side by side;
* with 1 page open, under the same load: a probe puts one message on a queue of its own at
  random moments and the page records when it drew each snapshot (``window.sweepqApplied``,
  the browser's clock is this machine's), so the delay from the put's return to the page
  showing the new depth is measured ``--probes`` times (p50, p99).

``--screenshot FILE`` instead draws the page over a small scene (queues swept under a
memory budget, one crossing the rule) for docs/console.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from .children import bound

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

WORKER = r"""
import sys, threading, time
from sweepq import client
from sweepq.engine import OO
url, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
payload = b"x" * 1024
counts = [0] * threads
start = threading.Barrier(threads + 1)
def run(i):
    with client.connect(url) as conn:
        h = conn.open("LOAD", OO.INPUT_AS_Q_DEF | OO.OUTPUT)
        start.wait()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            h.put(payload)
            h.get()
            counts[i] += 1
ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for t in ts: t.start()
start.wait()
for t in ts: t.join()
print(sum(counts))
"""


class Served:
    """``sweepq serve`` on a new data directory holding LOAD and PROBE, with or without a console."""

    def __init__(self, console: bool):
        self.dir = os.path.join(tempfile.mkdtemp(prefix="sqc"), "q")
        for q in ("LOAD", "PROBE"):
            subprocess.run(
                [sys.executable, "-m", "sweepq", "define", q, "--data-dir", self.dir], check=True, capture_output=True
            )
        cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.dir]
        if console:
            cmd += ["--console", "127.0.0.1:0"]
        self.log = self.dir + ".log"
        with open(self.log, "wb") as f:
            self.proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=f)
        deadline = time.monotonic() + 60
        while "listening on" not in self._log() or (console and "console on" not in self._log()):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sweepq serve did not start: {self._log()}")
            time.sleep(0.05)
        self.url = "unix://" + os.path.join(self.dir, "sweepq.sock")
        found = re.search(r"console on (\S+)", self._log())
        self.console = found.group(1) if found else None
        with open(os.path.join(self.dir, "sweepq.token")) as f:
            self.token = f.read().strip()

    def _log(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


def _load(url: str, clients: int, seconds: float) -> list[subprocess.Popen]:
    per = max(1, clients // 4)
    return [
        subprocess.Popen(
            bound([sys.executable, "-c", WORKER, url, str(per), str(seconds)]), stdout=subprocess.PIPE, text=True
        )
        for _ in range(max(1, clients // per))
    ]


def _measure(served: Served, clients: int, seconds: float, pages: int, probes: int, browser) -> dict:
    import psutil

    proc = psutil.Process(served.proc.pid)
    opened = []
    for _ in range(pages):
        page = browser.new_page()
        page.goto(served.console + "?token=" + served.token)
        page.wait_for_selector("#live.on")
        opened.append(page)
    workers = _load(served.url, clients, seconds)
    time.sleep(min(1.0, seconds / 10))  # the workers connect
    cpu0, t0 = sum(proc.cpu_times()[:2]), time.monotonic()
    peak = 0
    delays: list[float] = []
    probe = threading.Thread(target=_probe, args=(served, probes, seconds * 0.8, delays)) if probes and pages else None
    if probe is not None:
        probe.start()
    while any(w.poll() is None for w in workers):
        peak = max(peak, proc.memory_info().rss)
        for page in opened[:1]:
            page.wait_for_timeout(100)  # lets Playwright deliver the page's events meanwhile
        if not opened:
            time.sleep(0.1)
    cpu = sum(proc.cpu_times()[:2]) - cpu0
    wall = time.monotonic() - t0
    pairs = sum(int(w.stdout.read() or 0) for w in workers)
    if probe is not None:
        probe.join()
        applied = opened[0].evaluate("window.sweepqApplied")
        delays = _delays(delays, applied)
    for page in opened:
        page.close()
    out = {
        "pages": pages,
        "server_cpu_per_s": cpu / wall,
        "server_peak_rss_mb": peak / 1e6,
        "pairs_per_s": pairs / seconds,
    }
    if delays:
        delays.sort()
        out["probes"] = len(delays)
        out["latency_p50_ms"] = 1000 * statistics.median(delays)
        out["latency_p99_ms"] = 1000 * delays[min(len(delays) - 1, int(0.99 * len(delays)))]
    return out


def _probe(served: Served, n: int, seconds: float, puts: list) -> None:
    """Puts on PROBE at random moments; ``puts`` gets (time the put returned, depth after it)."""
    from sweepq import client
    from sweepq.engine import OO

    rng = random.Random(1)
    with client.connect(served.url) as conn:
        h = conn.open("PROBE", OO.OUTPUT)
        for depth in range(1, n + 1):
            time.sleep(rng.uniform(0.3, 0.7) * seconds / n * 2 if n else 0)
            h.put(b"probe")
            puts.append((time.time(), depth))


def _delays(puts: list, applied: list[dict]) -> list[float]:
    """For each probe put, the delay until the first snapshot the page drew showing its depth."""
    out = []
    for t, depth in puts:
        shown = [a["at"] / 1000 for a in applied if a["depths"].get("PROBE", 0) >= depth and a["at"] / 1000 >= t - 1]
        if shown:
            out.append(max(0.0, min(shown) - t))
    return out


def measure(seconds: float, clients: int, probes: int) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        for console, pages in ((False, 0), (True, 0), (True, 1), (True, 10)):
            served = Served(console)
            try:
                row = _measure(served, clients, seconds, pages, probes if pages == 1 else 0, browser)
            finally:
                served.close()
            row["console"] = console
            rows.append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
        browser.close()
    return rows


def table(rows: list[dict]) -> str:
    base = rows[0]
    lines = [
        "| server | CPU s/s | vs no console | CPU ms per 1,000 pairs | peak RSS MB | pairs/s | latency p50 / p99 ms |",
        "|---|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        what = "no console" if not r["console"] else f"console, {r['pages']} page(s) open"
        lat = f"{r['latency_p50_ms']:.0f} / {r['latency_p99_ms']:.0f}" if "latency_p50_ms" in r else "-"
        lines.append(
            f"| {what} | {r['server_cpu_per_s']:.2f} | {r['server_cpu_per_s'] / base['server_cpu_per_s']:.2f} | "
            f"{1e6 * r['server_cpu_per_s'] / r['pairs_per_s']:.1f} | {r['server_peak_rss_mb']:.0f} | "
            f"{r['pairs_per_s']:,.0f} | {lat} |"
        )
    return "\n".join(lines)


def screenshot(path: str) -> None:
    """The page over a small scene, for docs/console.md."""
    from playwright.sync_api import sync_playwright

    from sweepq.engine import OO, MemorySettings, QueueManager, SweeperSettings
    from sweepq.sweeper import ManualClock

    clock = ManualClock()
    with QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget="8MB"), clock=clock) as qm:
        for q in ("ORDERS", "AUDIT", "REPLIES"):
            qm.define_queue(q)
        server = qm.serve(
            os.path.join(tempfile.mkdtemp(prefix="sqs"), "s.sock"),
            console=":0",
            token="t",
            admin_token="a",
            console_interval=0.2,
        )
        conn = qm.connect()
        orders, audit, replies = (conn.open(q, OO.OUTPUT | OO.INPUT_AS_Q_DEF) for q in ("ORDERS", "AUDIT", "REPLIES"))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1250})
            page.goto(server.console_url + "?token=t")
            page.wait_for_selector("#live.on")
            for step in range(24):
                orders.put_many([b'{"order": %d, "item": "widget"}' % (step * 400 + i) for i in range(400)])
                audit.put_many([b"audit %d" % (step * 40 + i) for i in range(40)])
                replies.put_many([b"reply %d" % i for i in range(30)])
                replies.get_many(28)
                orders.get_many(60)
                if step % 4 == 3:
                    clock.advance(5)
                    qm.sweeper.run_once()
                if step > 16:
                    orders.get_many(400)  # the consumer catches up: blobs come back
                page.wait_for_timeout(250)
            page.locator('tr[data-queue="ORDERS"] button.browse').click()
            page.wait_for_selector("#message-table tbody tr")
            page.fill("#browse-count", "3")
            page.click("#browse-again")
            page.wait_for_timeout(500)
            page.screenshot(path=path, full_page=True)
            browser.close()
        conn.disconnect()


def main() -> int:
    p = argparse.ArgumentParser(
        prog="python -m sweepq.bench.console", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seconds", type=float, default=10.0, help="load per configuration (default 10)")
    p.add_argument("--clients", type=int, default=64, help="client connections putting and getting (default 64)")
    p.add_argument("--probes", type=int, default=100, help="depth changes timed to the page (default 100)")
    p.add_argument("--out", help="write the rows as JSON here")
    p.add_argument("--screenshot", metavar="FILE", help="instead, draw the page over a small scene to FILE (PNG)")
    p.add_argument("--table", metavar="JSON", help="instead, print the table of rows written by --out")
    args = p.parse_args()
    if args.screenshot:
        screenshot(args.screenshot)
        return 0
    if args.table:
        with open(args.table) as f:
            print(table(json.load(f)))
        return 0
    rows = measure(args.seconds, args.clients, args.probes)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=2)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
