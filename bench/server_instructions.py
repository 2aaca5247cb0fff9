"""User-space instructions a server spends per request, counted by valgrind's callgrind:
``sweepq serve`` against ``redis-server``, each serving put+get pairs of 1 KiB over a Unix
socket from one client (sweepq's client; redis-py's RPUSH and LPOP).

CPU time per request (``sweepq bench clients``) moves with the machine's load; an instruction
count does not. Each server runs under callgrind; after a warm-up the client zeroes its
counters (``callgrind_control -z``), runs ``n`` pairs and has them dumped
(``callgrind_control -d``): the dump's total over the ``2 n`` requests is the figure (every
thread of the server, the kernel's work not included). Run it with
``python -m sweepq.bench.server_instructions [--pairs N] [--out DIR]``; it needs ``valgrind``
(and ``redis-server`` with redis-py for the comparison) on the PATH. ``--out`` writes the run
as ``sweepq bench --out`` does (bench/suite.py ``write_out``: bench.json and its tables), for
the docs to quote.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from .children import bound

PAYLOAD = b"x" * 1024


def _callgrind(out: str) -> list[str]:
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]


def _sweepq(where: str, out: str):
    from sweepq import client
    from sweepq.engine import OO
    from sweepq.net import RemoteQueueManager, auth

    data = os.path.join(where, "q")
    url = "unix://" + os.path.join(data, "sweepq.sock")
    cmd = [*_callgrind(out), sys.executable, "-m", "sweepq", "serve", "--data-dir", data]
    proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(3000):  # a server under valgrind takes a while to start
        try:
            admin = auth.read_token(os.path.join(data, auth.ADMIN_TOKEN_FILE))
            with RemoteQueueManager(url, admin_token=admin) as r:
                r.define_queue("BENCH")
            break
        except Exception:
            if proc.poll() is not None:
                raise RuntimeError("sweepq serve under valgrind ended") from None
            time.sleep(0.1)
    h = client.connect(url).open("BENCH", OO.OUTPUT | OO.INPUT_SHARED)

    def pair() -> None:
        h.put(PAYLOAD)
        h.get()

    return proc, pair


def _redis(where: str, out: str):
    import redis

    path = os.path.join(where, "redis.sock")
    cmd = [*_callgrind(out), "redis-server", "--port", "0", "--unixsocket", path, "--unixsocketperm", "700"]
    cmd += ["--save", "", "--appendonly", "no"]
    proc = subprocess.Popen(bound(cmd), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(3000):
        try:
            r = redis.Redis(unix_socket_path=path, single_connection_client=True)
            r.ping()
            break
        except Exception:
            if proc.poll() is not None:
                raise RuntimeError("redis-server under valgrind ended") from None
            time.sleep(0.1)

    def pair() -> None:
        r.rpush("bench", PAYLOAD)
        r.lpop("bench")

    return proc, pair


def _control(command: str, pid: int) -> None:
    """callgrind_control: -z zeroes the counters, -d dumps them."""
    subprocess.run(
        ["callgrind_control", command, str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )


def count(server: str, pairs: int) -> float:
    """Instructions per request of ``server`` ("sweepq" or "redis") over ``pairs`` pairs."""
    where = tempfile.mkdtemp(prefix="sqsi")
    out = os.path.join(where, "cg.out")
    proc, pair = (_sweepq if server == "sweepq" else _redis)(where, out)
    try:
        for _ in range(1000):
            pair()
        _control("-z", proc.pid)
        for _ in range(pairs):
            pair()
        _control("-d", proc.pid)
        for _ in range(100):  # the dump is written by the server's next scheduled check
            found = None
            for dump in glob.glob(out + "*"):
                with open(dump) as f:
                    found = found or re.search(r"^summary:\s+(\d+)", f.read(), re.M)
            if found:
                return int(found.group(1)) / (2 * pairs)
            time.sleep(0.1)
        raise RuntimeError(f"no callgrind dump from {server}")
    finally:
        proc.terminate()
        proc.wait(60)
        shutil.rmtree(where, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sweepq.bench.server_instructions", description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=5000, help="put+get pairs counted (default 5000)")
    ap.add_argument("--out", help="write the run (bench.json and its Markdown tables) to this directory")
    o = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        print("valgrind is not on the PATH", file=sys.stderr)
        return 2
    from .suite import run_info, write_out

    info = run_info()
    what = f"user-space instructions per request, put+get pairs of {len(PAYLOAD)} B (callgrind, n={o.pairs:,})"
    mine = count("sweepq", o.pairs)
    print(f"sweepq serve: {mine:,.0f} instructions per request")
    figures = {"sweepq serve": mine}
    rows = []
    theirs = None
    if shutil.which("redis-server") is None:
        print("redis-server is not on the PATH: no comparison")
    else:
        theirs = count("redis", o.pairs)
        figures["redis-server"] = theirs
        print(f"redis-server: {theirs:,.0f} instructions per request ({mine / theirs:.2f} x)")
    for name, n in figures.items():
        ratio = "" if theirs is None else f"{n / theirs:.2f} x redis-server"
        if name == "sweepq serve" and theirs is not None:
            ratio += f" (goal <= 1.0 x: {'met' if n <= theirs else 'missed'})"
        rows.append(("server_instructions", f"{what}: {name}", f"{n:,.0f} instr/request", ratio))
    if o.out:
        info["load_after"] = run_info()["load"]  # as sweepq bench --out says it
        out = o.out.rstrip("/")
        doc = {
            "command": f"python -m sweepq.bench.server_instructions --pairs {o.pairs} --out {out}",
            "figures": {"server_instructions": figures},
            "options": {"pairs": o.pairs},
            "rows": rows,
            "notices": [],
            "run": info,
        }
        for path in write_out(doc, out):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
