"""``sweepq bench clients``: client connections against what users reach for when a queue is
shared between processes — a local Redis server through redis-py — and against sweepq in
process (issue 19 §7).

* put+get pairs of 1 KiB over a Unix socket: the sweepq client against redis-py's RPUSH and
  LPOP on ``redis-server`` (goal: >= 1.5x, issue 23), and the CPU each server spends per
  request in those rounds (its process's CPU time, user and system, over its requests; goal:
  ``sweepq serve`` <= ``redis-server``); batches of 100 (``put_many`` / ``get_many``
  against a redis-py pipeline of 100 RPUSH, then one of 100 LPOP: goal >= 1.0x);
* 64 concurrent clients (4 processes of 16 threads, a connection each): aggregate pairs per
  second and the p99 latency of a get, for both;
* memory per idle connection in the server, and connections held open at once (goal >=
  1,000), each of them served a call while all are open.

The server is ``sweepq serve`` in a process of its own; ``redis-server`` is started on a Unix
socket when it is on the PATH (no persistence, as sweepq's non-persistent messages), and the
bench says so when it is not (or when redis-py is missing) and reports sweepq alone.
Contenders run in interleaved rounds and keep their best (bench/timing.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

from .children import bound

WORKER = r"""
import json, sys, threading, time
kind, url, threads, pairs, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
payload = b"x" * size
lat, errors = [], []
barrier = threading.Barrier(threads + 1)
def run():
    try:
        if kind == "sweepq":
            from sweepq import client
            from sweepq.engine import OO
            c = client.connect(url)
            h = c.open("BENCH.C", OO.OUTPUT | OO.INPUT_SHARED)
            put, get = (lambda: h.put(payload)), h.get
        else:
            import redis
            r = redis.Redis(unix_socket_path=url, single_connection_client=True)
            put, get = (lambda: r.rpush("bench.c", payload)), (lambda: r.lpop("bench.c"))
        mine = []
        barrier.wait()
        for _ in range(pairs):
            put()
            t = time.perf_counter()
            get()
            mine.append(time.perf_counter() - t)
        lat.extend(mine)
    except BaseException as e:
        errors.append(repr(e))
        barrier.abort()
ts = [threading.Thread(target=run) for _ in range(threads)]
for t in ts: t.start()
barrier.wait()
t0 = time.perf_counter()
for t in ts: t.join()
print(json.dumps({"seconds": time.perf_counter() - t0, "lat": lat, "errors": errors}))
"""


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


class _Sweepq:
    """``sweepq serve`` on a temporary data directory, with queues BENCH and BENCH.C."""

    def __init__(self, where: str):
        from sweepq.net import RemoteQueueManager, auth

        self.data = os.path.join(where, "q")
        self.url = "unix://" + os.path.join(self.data, "sweepq.sock")
        cmd = [sys.executable, "-m", "sweepq", "serve", "--data-dir", self.data]
        self.proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                admin = auth.read_token(os.path.join(self.data, auth.ADMIN_TOKEN_FILE))
                with RemoteQueueManager(self.url, admin_token=admin) as r:
                    r.define_queue("BENCH")
                    r.define_queue("BENCH.C")
                break
            except Exception:
                time.sleep(0.05)
        else:
            raise RuntimeError("sweepq serve did not start")

    def rss(self) -> int:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(60)


class _Redis:
    """``redis-server`` on a Unix socket (no persistence), or why there is none."""

    def __init__(self, where: str):
        self.proc = None
        self.why = ""
        self.version = ""
        exe = shutil.which("redis-server")
        try:
            import redis
        except ImportError:
            self.why = "redis-py is not installed (pip install redis): Redis is left out"
            return
        if exe is None:
            self.why = "redis-server is not on the PATH (e.g. apt-get install redis-server): Redis is left out"
            return
        self.path = os.path.join(where, "redis.sock")
        cmd = [exe, "--port", "0", "--unixsocket", self.path, "--unixsocketperm", "700"]
        cmd += ["--save", "", "--appendonly", "no", "--maxclients", "4096"]
        self.proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(600):
            try:
                self.client = redis.Redis(unix_socket_path=self.path, single_connection_client=True)
                self.version = self.client.info()["redis_version"]
                break
            except Exception:
                time.sleep(0.02)
        else:
            self.why = "redis-server did not start: Redis is left out"
            self.close()

    def close(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)
            self.proc = None


def _cpu_seconds(pid: int) -> float:
    """The CPU time of every thread of process ``pid`` so far: from the scheduler's own count
    (nanoseconds, /proc/PID/task/*/schedstat) where there is one, else psutil's (ticks)."""
    tasks = f"/proc/{pid}/task"
    try:
        total = 0
        for tid in os.listdir(tasks):
            with contextlib.suppress(OSError), open(f"{tasks}/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except OSError:
        import psutil

        t = psutil.Process(pid).cpu_times()
        return t.user + t.system


def _pairs(o, report, step, sq: _Sweepq, rd: _Redis) -> dict:
    from sweepq import client
    from sweepq.engine import OO, QueueManager, SweeperSettings

    from .timing import interleaved

    n, payload = o.messages, b"x" * o.size
    batch = o.batch
    conn = client.connect(sq.url)
    h = conn.open("BENCH", OO.OUTPUT | OO.INPUT_SHARED)
    local = QueueManager(sweeping=SweeperSettings(run=False))
    local.define_queue("B")
    lh = local.connect().open("B", OO.OUTPUT | OO.INPUT_SHARED)

    def pairs_of(handle):
        def run():
            for _ in range(n):
                handle.put(payload)
                handle.get()

        return run

    def batches_of(handle):
        chunk = [payload] * batch

        def run():
            for _ in range(n // batch):
                handle.put_many(chunk)
                handle.get_many(batch)

        return run

    server_cpu: dict[str, float] = {}  # the least CPU per request a server spent in a round

    def server_measured(name: str, pid: int, run):
        def measured():
            before = _cpu_seconds(pid)
            run()
            per_request = (_cpu_seconds(pid) - before) / (2 * n)
            server_cpu[name] = min(server_cpu.get(name, per_request), per_request)

        return measured

    single = {
        "sweepq in process": pairs_of(lh),
        "sweepq client (unix socket)": server_measured("sweepq serve", sq.proc.pid, pairs_of(h)),
    }
    batched = {"sweepq in process": batches_of(lh), "sweepq client (unix socket)": batches_of(h)}
    if rd.proc is not None:
        r = rd.client

        def redis_pairs():
            for _ in range(n):
                r.rpush("bench", payload)
                r.lpop("bench")

        def redis_batches():
            for _ in range(n // batch):
                p = r.pipeline(transaction=False)
                for _ in range(batch):
                    p.rpush("bench", payload)
                p.execute()
                p = r.pipeline(transaction=False)
                for _ in range(batch):
                    p.lpop("bench")
                p.execute()

        single["redis-py (unix socket)"] = server_measured("redis-server", rd.proc.pid, redis_pairs)
        batched["redis-py pipelined (unix socket)"] = redis_batches
    out = {}
    for name, contenders, ops in (("pairs", single, n), ("batched", batched, n // batch * batch)):
        res = interleaved(contenders, ops, o.rounds, progress=lambda _: step())
        out[name] = {k: v.rate for k, v in res.items()}
    conn.disconnect()
    local.close()
    what = f"put+get pairs, {o.size} B"
    for kind, label, redis_name in (
        ("pairs", what, "redis-py (unix socket)"),
        ("batched", f"{what}, {batch} per call", "redis-py pipelined (unix socket)"),
    ):
        rates = out[kind]
        base = rates.get(redis_name)
        goal = 1.5 if kind == "pairs" else 1.0
        for name, rate in rates.items():
            ratio = "" if base is None else f"{rate / base:.2f} x {redis_name.split(' (')[0]}"
            if name.startswith("sweepq client") and base is not None:
                ratio += f" (goal >= {goal} x: {'met' if rate >= goal * base else 'missed'})"
            report.row("clients", f"{label}: {name}", f"{rate / 1e3:.1f} k pairs/s", ratio)
    base = server_cpu.get("redis-server")
    for name, per in server_cpu.items():
        ratio = "" if base is None else f"{per / base:.2f} x redis-server"
        if name == "sweepq serve" and base is not None:
            ratio += f" (goal <= 1.0 x: {'met' if per <= base else 'missed'})"
        report.row("clients", f"{what}: {name}'s CPU per request", f"{per * 1e6:.1f} us", ratio)
    out["server_cpu_us_per_request"] = {k: v * 1e6 for k, v in server_cpu.items()}
    return out


def _concurrent(o, report, step, sq: _Sweepq, rd: _Redis) -> dict:
    procs, threads = 4, max(1, o.clients_concurrent // 4)
    pairs = max(10, o.messages // o.clients_concurrent)
    out = {}
    targets = [("sweepq", sq.url)] + ([("redis", rd.path)] if rd.proc is not None else [])
    for kind, url in targets:
        best = None
        for _ in range(2):
            args = [sys.executable, "-c", WORKER, kind, url, str(threads), str(pairs), str(o.size)]
            ps = [subprocess.Popen(bound(args), stdout=subprocess.PIPE) for _ in range(procs)]
            t0 = time.perf_counter()
            docs = [json.loads(p.communicate(timeout=600)[0]) for p in ps]
            wall = time.perf_counter() - t0
            errors = [e for d in docs for e in d["errors"]]
            if errors:
                raise RuntimeError(f"{kind} clients failed: {errors[:3]}")
            lat = sorted(x for d in docs for x in d["lat"])
            slowest = max(d["seconds"] for d in docs)
            run = {
                "pairs_per_s": procs * threads * pairs / slowest,
                "p99_get_ms": lat[int(len(lat) * 0.99)] * 1e3,
                "p50_get_ms": lat[len(lat) // 2] * 1e3,
                "wall_s": wall,
            }
            if best is None or run["pairs_per_s"] > best["pairs_per_s"]:
                best = run
        out[kind] = best
        step()
    base = out.get("redis")
    n = procs * threads
    for kind, r in out.items():
        ratio = "" if base is None else f"{r['pairs_per_s'] / base['pairs_per_s']:.2f} x redis-py"
        report.row(
            "clients",
            f"{n} concurrent clients ({procs} processes x {threads} threads): {kind}",
            f"{r['pairs_per_s'] / 1e3:.1f} k pairs/s, p99 get {r['p99_get_ms']:.2f} ms",
            ratio,
        )
    return out


def _held(o, report, step, sq: _Sweepq) -> dict:
    from sweepq import client

    _raise_fd_limit()
    before = sq.rss()
    conns = []
    t0 = time.perf_counter()
    try:
        for _ in range(o.clients_held):
            conns.append(client.connect(sq.url))
        opened = time.perf_counter() - t0
        time.sleep(0.5)
        after = sq.rss()
        served = sum(1 for c in conns if c.queue_names())  # every one of them answers while all are open
    finally:
        for c in conns:
            with contextlib.suppress(Exception):
                c.disconnect()
    step()
    per = (after - before) / max(1, len(conns))
    report.row(
        "clients",
        f"connections held open at once, each served a call ({len(conns):,} opened in {opened:.1f} s)",
        f"{served:,}",
        f"goal >= 1,000: {'met' if served >= 1000 else 'missed'}",
    )
    report.row("clients", "server memory per idle connection (RSS)", f"{per / 1024:.0f} KiB", "")
    return {"held": served, "opened_seconds": opened, "rss_bytes_per_idle_connection": per}


def clients(o, report, step) -> dict:
    """The ``clients`` scenario (bench/suite.py)."""
    where = tempfile.mkdtemp(prefix="sqb")
    sq = _Sweepq(where)
    rd = _Redis(where)
    try:
        if rd.why:
            report.notice(rd.why)
        else:
            report.notice(f"Redis {rd.version} (redis-server on a Unix socket, no persistence), redis-py")
        out = {"redis_version": rd.version or None}
        out["pairs"] = _pairs(o, report, step, sq, rd)
        out["concurrent"] = _concurrent(o, report, step, sq, rd)
        out["held"] = _held(o, report, step, sq)
        return out
    finally:
        rd.close()
        sq.close()
        shutil.rmtree(where, ignore_errors=True)


def steps(o) -> int:
    return 2 * o.rounds + 3
