"""``sweepq demo --channel``: a sender queue manager whose partner is stopped for a while
(issue 20 §3, the TPF system's own situation).

Two runs, without and with the sweeper. In each, **QM1** (a process of its own) puts
``messages`` messages of ``size`` bytes to a remote queue over ``seconds`` seconds; its sender
channel retries, because **QM2** (another process) is not running yet, so the transmission
queue grows and, with the sweeper, its surplus goes to blobs. Then QM2 starts (its receiver
on loopback TCP and a consumer) and the channel catches up, draining the transmission queue
from its chain in order. The run's process samples QM1's memory and queue, and QM2's
consumer checks that every message arrived exactly once, in order per producer.

Each child (``python -m sweepq.bench.demo_channel qm1|qm2 ...``) is tethered to the run's
process (bench/children.py) and reports in JSON lines on stdout. Ctrl-C (or SIGTERM, SIGHUP)
ends both and removes their files.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from .children import Children, ignoring_interrupts, interrupts_as_ctrl_c, tether

CHANNEL = "QM1.QM2"
QUIET_MS = 60_000  # QM2 gives up once nothing has arrived for this long
TOKEN = "demo-channel-token"


@dataclass
class ChannelDemo:
    messages: int = 200_000
    size: int = 1024
    seconds: float = 20.0  # QM1's producer puts for this long; QM2 is down meanwhile
    interval: float = 5.0  # the sweep interval


def _say(**doc) -> None:
    print(json.dumps(doc), flush=True)


# -- the two queue managers --------------------------------------------------------------------------


def qm1_main(cfg: ChannelDemo, data: str, conname: str, sweeper: bool) -> None:
    """Put ``cfg.messages`` at an even pace over ``cfg.seconds``; report memory and the
    transmission queue every 0.25 s until it is empty."""
    import psutil

    from sweepq.engine import OO, QueueManager, SweeperSettings, Usage
    from sweepq.sweeper import SweepPolicy

    qm = QueueManager.open(
        data, name="QM1", sweeping=SweeperSettings(run=sweeper, policy=SweepPolicy(interval=cfg.interval))
    )
    qm.define_queue("QM2", usage=Usage.TRANSMISSION)
    qm.define_remote_queue("TARGET", remote_queue="Q", remote_qmgr="QM2")
    qm.define_channel(
        CHANNEL, conname=conname, xmit_queue="QM2", token=TOKEN, short_retry=1_000_000, short_interval=0.2
    )
    qm.channels.start(CHANNEL)
    h = qm.connect().open("TARGET", OO.OUTPUT)
    me, put, done = psutil.Process(), [0], threading.Event()

    def report() -> None:
        while not done.wait(0.25):
            _say(
                t=time.monotonic(),
                rss=me.memory_info().rss,
                depth=qm.inquire_queue("QM2").current_depth,
                swept=qm.stats()["QM2"].msgs_swept,
                put=put[0],
                channel=qm.channels.status(CHANNEL)[0]["status"],
            )

    threading.Thread(target=report, daemon=True).start()
    t0, chunk = time.monotonic(), 100
    filler = b"x" * max(0, cfg.size - 12)
    while put[0] < cfg.messages:
        n = min(chunk, cfg.messages - put[0])
        h.put_many([b"%012d" % i + filler for i in range(put[0], put[0] + n)])
        put[0] += n
        time.sleep(max(0.0, t0 + cfg.seconds * put[0] / cfg.messages - time.monotonic()))
    # Closing stops the channel: a batch in flight would end in doubt, and its FAST non-persistent
    # messages, off the transmission queue since the batch was assigned, could be lost (as MQ's
    # NPMSPEED(FAST) allows). So QM1 ends once its channel has committed every message, not when
    # the transmission queue is empty. It gives up once its channel has made no progress for
    # QUIET_MS with nothing left to send (QM2 then reports what did not arrive).
    last, since = -1, time.monotonic()
    while (sent := qm.channels.status(CHANNEL)[0].get("messages", 0)) < put[0] or qm.inquire_queue("QM2").current_depth:
        if sent != last:
            last, since = sent, time.monotonic()
        elif time.monotonic() - since > QUIET_MS / 1000 and not qm.inquire_queue("QM2").current_depth:
            break
        time.sleep(0.1)
    done.set()
    _say(sent=put[0])
    qm.close()


def qm2_main(cfg: ChannelDemo, data: str, conname: str) -> None:
    """Serve the receiver on ``conname`` and get every message; report how many as they come
    and, at the end, what arrived twice, what is missing, and whether the order held."""
    from sweepq.engine import GMO, OO, QueueManager, SweeperSettings
    from sweepq.engine.constants import ChannelType

    qm = QueueManager.open(data, name="QM2", sweeping=SweeperSettings(run=False))
    qm.define_queue("Q")
    qm.define_channel(CHANNEL, type=ChannelType.RECEIVER)
    qm.serve(None, tcp=conname.removeprefix("tcp://"), token=TOKEN)
    _say(ready=True, t=time.monotonic())
    h = qm.connect().open("Q", OO.INPUT_SHARED)
    seen: set[int] = set()
    dups = out_of_order = last = 0
    last = -1
    while len(seen) < cfg.messages:
        got = h.get_many(500, GMO.WAIT, QUIET_MS)
        if not got:  # nothing for a minute: what is missing is reported, not waited for forever
            break
        for m in got:
            i = int(bytes(m.data[:12]))
            dups += i in seen
            out_of_order += i < last
            last = i
            seen.add(i)
        _say(got=len(seen), t=time.monotonic())
    _say(result={"got": len(seen), "duplicates": dups, "out_of_order": out_of_order}, t=time.monotonic())
    qm.close()


# -- the run's process --------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(children: Children, role: str, cfg: ChannelDemo, *args: object) -> subprocess.Popen:
    child = [sys.executable, "-X", "faulthandler", "-m", "sweepq.bench.demo_channel"]  # a crash leaves its stack
    argv = [*child, role, str(os.getpid()), json.dumps(asdict(cfg))]
    return children.start([*argv, *map(str, args)], f"QM{role[-1]}", stdout=subprocess.PIPE, text=True)


def _lines(proc: subprocess.Popen):
    for line in proc.stdout:
        try:
            yield json.loads(line)
        except ValueError:
            continue


def one_run(cfg: ChannelDemo, children: Children, work: str, sweeper: bool, say) -> dict:
    """One run (see the module docstring); its figures."""
    where = tempfile.mkdtemp(dir=work)
    conname = f"tcp://127.0.0.1:{_free_port()}"
    qm1 = _start(children, "qm1", cfg, os.path.join(where, "qm1"), conname, int(sweeper))
    peak_down = peak = depth_at_start = swept_at_start = 0
    qm2 = None
    t_start = t_done = t0 = None
    result: dict = {}
    shown = 0
    for doc in _lines(qm1):
        if "rss" not in doc:
            continue
        t0 = t0 or doc["t"]
        peak = max(peak, doc["rss"])
        if qm2 is None:
            peak_down = peak
            if doc["put"] >= cfg.messages:  # the partner comes back once everything was put
                depth_at_start, swept_at_start = doc["depth"], doc["swept"]
                qm2 = _start(children, "qm2", cfg, os.path.join(where, "qm2"), conname)
                threading.Thread(target=lambda p=qm2: result.update(_consume(p)), daemon=True).start()
                say(f"  QM2 starts: {depth_at_start:,} messages wait on QM1's transmission queue")
        shown += 1
        if shown % 4 == 1 or (qm2 is not None and doc["depth"] == 0):
            say(
                f"  {doc['t'] - t0:5.1f} s  QM1 {doc['rss'] / 2**20:6.0f} MiB  put {doc['put']:>9,}  "
                f"transmission queue {doc['depth']:>9,} ({doc['swept']:,} swept)  channel {doc['channel']}"
            )
    ended = {"QM1": qm1.wait(60)}
    if qm2 is not None:
        ended["QM2"] = qm2.wait(QUIET_MS / 1000 + 60)
    for who, code in ended.items():
        if code:
            say(f"  {who} failed: {_exit_text(code)}")
    t_start, t_done = result.get("t_start"), result.get("t_done")
    shutil.rmtree(where, ignore_errors=True)
    return {
        "sweeper": sweeper,
        "peak_rss_down": peak_down,
        "peak_rss": peak,
        "depth_when_qm2_started": depth_at_start,
        "swept_when_qm2_started": swept_at_start,
        "catch_up_seconds": (t_done - t_start) if t_start and t_done else None,
        "failed": {who: _exit_text(code) for who, code in ended.items() if code},
        **result.get("result", {"got": 0, "duplicates": 0, "out_of_order": 0}),
    }


def _exit_text(code: int) -> str:
    """A child's return code as a person reads it: ``exit code 1`` or ``killed by SIGSEGV``."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _consume(qm2: subprocess.Popen) -> dict:
    out: dict = {}
    for doc in _lines(qm2):
        if doc.get("ready"):
            out["t_start"] = doc["t"]
        if "result" in doc:
            out["result"], out["t_done"] = doc["result"], doc["t"]
    return out


def run(cfg: ChannelDemo, out_dir: str, say=print, command: str = "sweepq demo --channel") -> int:
    """Both runs, the table, demo-channel.json and .md in ``out_dir``. 0 when every message
    arrived exactly once and in order in both runs, 1 when not, 130 when interrupted (every
    process it started is ended and its files removed first)."""
    say(
        f"sweepq demo --channel: QM1 puts {cfg.messages:,} messages of {cfg.size} B over {cfg.seconds:g} s while "
        "its partner QM2 is stopped; then QM2 starts and the channel catches up. Twice: without and with the "
        f"sweeper (interval {cfg.interval:g} s)."
    )
    from .suite import run_info  # when, where, at which commit and under what load

    run_doc: dict[str, Any] = {"command": command, "run": run_info()}
    children = Children()
    work = tempfile.mkdtemp(prefix="sweepq-demo-channel-")
    runs = []
    try:
        with interrupts_as_ctrl_c():
            for sweeper in (False, True):
                say(f"run {'with' if sweeper else 'without'} the sweeper:")
                runs.append(one_run(cfg, children, work, sweeper, say))
    except KeyboardInterrupt as e:
        with ignoring_interrupts():
            ended = children.end()
            shutil.rmtree(work, ignore_errors=True)
            what = ", ".join(f"{n} {k}" for k, n in ended.items()) or "nothing"
            say(f"sweepq demo --channel: interrupted ({e or 'Ctrl-C'}); stopped {what}; removed {work}")
        return 130
    finally:
        children.end()
        shutil.rmtree(work, ignore_errors=True)
    run_doc["run"]["load_after"] = run_info()["load"]
    doc = {**run_doc, "config": asdict(cfg), "runs": runs}
    say(_table(cfg, runs))
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "demo-channel.json"), "w") as f:
        json.dump(doc, f, indent=2)
    with open(os.path.join(out_dir, "demo-channel.md"), "w") as f:
        f.write(markdown(doc))
    ok = all(
        r["got"] == cfg.messages and not r["duplicates"] and not r["out_of_order"] and not r["failed"] for r in runs
    )
    say(f"every message delivered once, in order: {'yes' if ok else 'NO'}; figures in {os.path.abspath(out_dir)}")
    return 0 if ok else 1


def markdown(doc: dict) -> str:
    """demo-channel.md: the run's heading (command, date, commit, machine, load) over its table,
    made from demo-channel.json alone, so a page quoting it can be checked against the run."""
    from .suite import heading

    return heading(doc) + "\n\n" + _table(ChannelDemo(**doc["config"]), doc["runs"]) + "\n"


def _table(cfg: ChannelDemo, runs: list[dict]) -> str:
    rows = ["| | without sweeping | with sweeping |", "|---|---|---|"]

    def row(what: str, f) -> None:
        rows.append(f"| {what} | " + " | ".join(f(r) for r in runs) + " |")

    row("QM1's peak RSS while QM2 is down", lambda r: f"{r['peak_rss_down'] / 2**20:.0f} MiB")
    row(
        "waiting when QM2 starts (swept)",
        lambda r: f"{r['depth_when_qm2_started']:,} ({r['swept_when_qm2_started']:,})",
    )
    row("catch-up: QM2's start to its last get", lambda r: f"{r['catch_up_seconds'] or 0:.1f} s")
    row("delivered (duplicates, out of order)", lambda r: f"{r['got']:,} ({r['duplicates']}, {r['out_of_order']})")
    return "\n".join(rows)


def _child_main(argv: list[str]) -> int:
    role, parent, cfg = argv[0], int(argv[1]), ChannelDemo(**json.loads(argv[2]))
    tether(parent)
    if role == "qm1":
        qm1_main(cfg, argv[3], argv[4], argv[5] == "1")
    else:
        qm2_main(cfg, argv[3], argv[4])
    return 0


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
