"""``sweepq bench channel``: a channel between two processes against one served queue manager
(issue 20 §5).

* throughput from QM1's put to QM2's get over loopback TCP, messages of ``size`` bytes, batch
  size 50, non-persistent and persistent (``sync="os"``): QM1 embedded in one process puts to a
  remote queue, its sender channel sends to QM2's receiver, and a consumer in QM2's process
  gets. The baseline is the same two processes doing put+get through one served queue
  manager: the first process a client putting to QM2 over loopback TCP, QM2's consumer
  getting in process. Rate = messages / (last get - first put), on the machine's monotonic
  clock, which both processes share; the ratio is channel / served (goal >= 1.0x);
* the put-to-get latency at a light load (``channel_light_rate`` messages per second): p50
  and p99, for both;
* QM1's resident memory while QM2 is down (``channel_down_seconds`` at ``channel_down_rate``
  messages per second, its channel retrying), with and without the sweeper.

Every process is started by this module (``python -m sweepq.bench.channels ROLE``) and talks
to it in JSON lines on its stdin and stdout; contenders run in interleaved rounds, best kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time

from .children import bound

CHANNEL = "QM1.QM2"
TOKEN = "bench-channel-token"
_STAMP = struct.Struct("<d")


def _say(**doc) -> None:
    print(json.dumps(doc), flush=True)


def _payload(size: int) -> bytes:
    return _STAMP.pack(time.monotonic()) + b"x" * max(0, size - _STAMP.size)


# -- the processes ------------------------------------------------------------------------------


def receiver_main(data: str, sync: str, n: int) -> None:
    """QM2: the receiver served on loopback TCP, and a consumer of ``n`` messages on Q. Says
    its URL, then, after the last get, its time and every message's put-to-get latency."""
    from sweepq.engine import GMO, OO, DurabilitySettings, QueueManager, SweeperSettings
    from sweepq.engine.constants import ChannelType

    qm = QueueManager.open(
        data, name="QM2", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync)
    )
    qm.define_queue("Q")
    qm.define_channel(CHANNEL, type=ChannelType.RECEIVER)
    server = qm.serve(None, tcp="127.0.0.1:0", token=TOKEN)
    _say(url=server.urls[-1])
    h = qm.connect().open("Q", OO.INPUT_SHARED)
    lat = []
    for _ in range(n):
        m = h.get(GMO.WAIT, 120_000)
        lat.append(time.monotonic() - _STAMP.unpack_from(m.data)[0])
    _say(t_last=time.monotonic(), lat=lat)
    qm.close()


def sender_main(data: str, sync: str, n: int, url: str, mode: str, persistent: bool, rate: float) -> None:
    """The first process: QM1 with its sender channel to ``url`` (``mode`` channel), or a
    client of QM2 at ``url`` (``mode`` served); puts ``n`` messages (at ``rate`` per second
    when > 0), says when it started, and stays until its stdin closes (the channel sends)."""
    from sweepq.engine import MD, OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings, Usage

    size = int(os.environ.get("SWEEPQ_BENCH_SIZE", "1024"))
    md = MD(persistence=Persistence.PERSISTENT if persistent else Persistence.NOT_PERSISTENT)
    if mode == "channel":
        qm = QueueManager.open(
            data, name="QM1", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync)
        )
        qm.define_queue("QM2", usage=Usage.TRANSMISSION)
        qm.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
        qm.define_channel(CHANNEL, conname=url, xmit_queue="QM2", token=TOKEN, batch_size=50)
        qm.channels.start(CHANNEL)
        h = qm.connect().open("TARGET", OO.OUTPUT)
    else:
        from sweepq.net import client

        h = client.connect(url, TOKEN).open("Q", OO.OUTPUT)
    t0 = time.monotonic()
    _say(t0=t0)
    for i in range(n):
        if rate:
            time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
        h.put(_payload(size), md)
    sys.stdin.read()  # until the driver closes it
    if mode == "channel":
        qm.close()


def down_main(data: str, rate: float, seconds: float, sweeper: bool, interval: float) -> None:
    """QM1 with its partner down (its channel retrying against a closed port): puts at
    ``rate`` for ``seconds``, sampling its own resident memory; says the peak."""
    import psutil

    from sweepq.engine import OO, QueueManager, SweeperSettings, Usage
    from sweepq.sweeper import SweepPolicy

    size = int(os.environ.get("SWEEPQ_BENCH_SIZE", "1024"))
    qm = QueueManager.open(
        data, name="QM1", sweeping=SweeperSettings(run=sweeper, policy=SweepPolicy(interval=interval))
    )
    qm.define_queue("QM2", usage=Usage.TRANSMISSION)
    qm.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
    qm.define_channel(CHANNEL, conname="tcp://127.0.0.1:1", xmit_queue="QM2", short_retry=1_000_000)
    qm.channels.start(CHANNEL)
    h = qm.connect().open("TARGET", OO.OUTPUT)
    me, peak, stop = psutil.Process(), [0], threading.Event()

    def sample():
        while not stop.wait(0.2):
            peak[0] = max(peak[0], me.memory_info().rss)

    threading.Thread(target=sample, daemon=True).start()
    chunk, n, t0 = max(1, int(rate / 100)), 0, time.monotonic()
    while time.monotonic() - t0 < seconds:
        h.put_many([_payload(size)] * chunk)
        n += chunk
        time.sleep(max(0.0, t0 + n / rate - time.monotonic()))
    stop.set()
    peak[0] = max(peak[0], me.memory_info().rss)
    swept = qm.stats()["QM2"].msgs_swept
    _say(peak_rss=peak[0], messages=n, depth=qm.inquire_queue("QM2").current_depth, swept=swept)
    qm.close()


# -- the driver ----------------------------------------------------------------------------------


def _child(role: str, *args: object, size: int = 1024) -> subprocess.Popen:
    env = {**os.environ, "SWEEPQ_BENCH_SIZE": str(size)}
    cmd = [sys.executable, "-m", "sweepq.bench.channels", role, *map(str, args)]
    return subprocess.Popen(bound(cmd), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)


def _line(p: subprocess.Popen, timeout: float = 300.0) -> dict:
    box: list = []
    t = threading.Thread(target=lambda: box.append(p.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not box or not box[0]:
        raise RuntimeError(f"a bench process ended or stalled (status {p.poll()})")
    return json.loads(box[0])


def one_run(where: str, mode: str, n: int, persistent: bool, size: int, rate: float = 0.0) -> dict:
    """One transfer of ``n`` messages, QM1 to QM2 (``mode`` channel or served): the rate and
    the latencies."""
    d = tempfile.mkdtemp(dir=where)
    sync = "os"  # persistent messages are written, not synced; non-persistent ones are not written
    recv = _child("receiver", os.path.join(d, "qm2"), sync, n, size=size)
    send = None
    try:
        url = _line(recv, 60)["url"]
        send = _child("sender", os.path.join(d, "qm1"), sync, n, url, mode, int(persistent), rate, size=size)
        t0 = _line(send, 60)["t0"]
        done = _line(recv)
        lat = sorted(done["lat"])
        return {
            "rate": n / (done["t_last"] - t0),
            "p50_ms": lat[len(lat) // 2] * 1e3,
            "p99_ms": lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3,
        }
    finally:
        for p in (send, recv):
            if p is not None:
                with contextlib.suppress(OSError):
                    p.stdin.close()
                try:
                    p.wait(60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(d, ignore_errors=True)


def _down(where: str, o, sweeper: bool) -> dict:
    d = tempfile.mkdtemp(dir=where)
    p = _child(
        "down", os.path.join(d, "qm1"), o.channel_down_rate, o.channel_down_seconds, int(sweeper), 1.0, size=o.size
    )
    try:
        return _line(p, o.channel_down_seconds + 300)
    finally:
        p.stdin.close()
        p.wait(120)
        shutil.rmtree(d, ignore_errors=True)


def channel(o, report, step) -> dict:
    """The ``channel`` scenario (bench/suite.py)."""
    where = tempfile.mkdtemp(prefix="sqbch")
    out: dict = {"throughput": {}, "latency": {}, "down": {}}
    try:
        for persistent in (False, True):
            label = "persistent (sync=os)" if persistent else "non-persistent"
            best: dict = {}
            for _ in range(o.rounds):
                for mode in ("channel", "served"):
                    r = one_run(where, mode, o.channel_messages, persistent, o.size)
                    if mode not in best or r["rate"] > best[mode]["rate"]:
                        best[mode] = r
                step()
            out["throughput"][label] = best
            ratio = best["channel"]["rate"] / best["served"]["rate"]
            for mode, what in (("served", "one served queue manager"), ("channel", "QM1 -> channel -> QM2")):
                report.row(
                    "channel",
                    f"{o.size} B {label}, put to get: {what}",
                    f"{best[mode]['rate'] / 1e3:.1f} k msgs/s",
                    f"{ratio:.2f} x served (goal >= 1.0 x: {'met' if ratio >= 1 else 'missed'})"
                    if mode == "channel"
                    else "",
                )
        light = max(50, o.channel_messages // 20)
        for mode in ("channel", "served"):
            r = one_run(where, mode, light, True, o.size, rate=o.channel_light_rate)
            out["latency"][mode] = r
            report.row(
                "channel",
                f"put-to-get latency at {o.channel_light_rate:g} msgs/s, persistent: {mode}",
                f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms",
                "",
            )
        step()
        for sweeper in (False, True):
            r = _down(where, o, sweeper)
            out["down"]["sweeper" if sweeper else "no sweeper"] = r
            step()
        base = out["down"]["no sweeper"]["peak_rss"]
        for key in ("no sweeper", "sweeper"):
            r = out["down"][key]
            report.row(
                "channel",
                f"QM1's peak RSS, QM2 down {o.channel_down_seconds:g} s at {o.channel_down_rate:g} msgs/s: {key}",
                f"{r['peak_rss'] / 2**20:.0f} MiB ({r['swept']:,} of {r['messages']:,} swept)",
                f"{r['peak_rss'] / base:.2f} x without sweeping",
            )
        return out
    finally:
        shutil.rmtree(where, ignore_errors=True)


def steps(o) -> int:
    return 2 * o.rounds + 3


def main(argv: list[str]) -> None:
    role, args = argv[0], argv[1:]
    if role == "receiver":
        receiver_main(args[0], args[1], int(args[2]))
    elif role == "sender":
        sender_main(args[0], args[1], int(args[2]), args[3], args[4], args[5] == "1", float(args[6]))
    else:
        down_main(args[0], float(args[1]), float(args[2]), args[3] == "1", float(args[4]))


if __name__ == "__main__":
    main(sys.argv[1:])
