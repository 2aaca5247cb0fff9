"""The harness commands: ``sweepq crashtest``, ``crashtest-server``, ``crashtest-channel``
(kill -9 of a worker, a server, either end of a channel) and ``damagetest`` (damage to the
files of data directories). Their parsers and what they print live here; the harnesses
themselves, and the numbers their help states, are bench/'s (bench/crash/,
bench/crash_server.py, bench/crash_channel.py, bench/damage.py).

Exit codes: 0 the verdict passed, 1 a violation, 2 a usage error, 130 interrupted (the
children are killed first, and the directory of the run is kept and named).
cli/main.py lists :func:`register` among its commands.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

from sweepq.bench.harness_sizes import (
    CHANNEL_QUICK_KILLS,
    CORRUPTIONS,
    CRASH_KILLS,
    CRASH_QUICK_KILLS,
    DAMAGE_QUICK_TRIALS,
    DAMAGE_TRIALS,
    SERVER_QUICK_KILLS,
)
from sweepq.bench.harness_sizes import CRASH_INTERVAL as INTERVAL

from .args import HelpFormatter, number, output_dir


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def keeps_work_on_interrupt(command: str, work: str) -> Iterator[None]:
    """Ctrl-C (or SIGTERM) during a harness run: its children are already killed by the
    runners' ``finally``; say where the logs and store are kept (they are what a user
    needs to look at an interrupted run), then let the interrupt end the command (exit 130)."""
    try:
        yield
    except KeyboardInterrupt:
        print(f"sweepq {command}: interrupted; the logs and store are kept in {work}", file=sys.stderr, flush=True)
        raise


def report_verdict(verdict, replay: str, work: str, remove: bool, out: VerdictOut | None = None) -> int:
    """Print the verdict; remove ``work`` when it passed and ``remove``, else say where it is;
    with ``out`` write it there too. Returns the command's exit status
    (1: a violation)."""
    text = verdict.render(replay)
    print(text)
    if out is not None:
        out.write(text, verdict.ok)
    if verdict.ok and remove:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"  logs and store kept in {work}")
    return 0 if verdict.ok else 1


class VerdictOut:
    """Where ``--out`` keeps a harness run's verdict: verdict.md (the run's heading, then the
    verdict as printed) and verdict.json, so a page quotes the run instead of typing its figures.
    The heading's date, commit and load at the start are taken when the run begins."""

    def __init__(self, directory: str, command: str):
        from sweepq.bench.suite import run_info

        self.directory, self.doc = directory, {"command": command, "run": run_info()}

    def write(self, text: str, ok: bool) -> None:
        from sweepq.bench.suite import run_info

        self.doc["run"]["load_after"] = run_info()["load"]
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, "verdict.json"), "w") as f:
            json.dump({**self.doc, "ok": ok, "verdict": text}, f, indent=2)
        with open(os.path.join(self.directory, "verdict.md"), "w") as f:
            f.write(verdict_markdown(self.doc, text))


def verdict_markdown(doc: dict, text: str) -> str:
    """verdict.md from verdict.json's fields: the heading over the verdict as printed."""
    from sweepq.bench.suite import heading

    return heading(doc) + "\n\n```text\n" + text + "\n```\n"


def _verdict_out(args: argparse.Namespace) -> VerdictOut | None:
    """``--out``'s writer (None without it), made as the run begins so that its heading gives
    the load at the start (``output_dir`` has made the directory before, so a bad path fails
    before the run, not after it)."""
    if not args.out:
        return None
    return VerdictOut(args.out, " ".join(["sweepq", *getattr(args, "argv", [])]))


def _begin(command: str, args: argparse.Namespace, quick_kills: int) -> tuple[int, str, bool] | None:
    """A harness run's kills, its directory and whether it made that directory; None after
    saying that ``--data-dir`` holds something. A SIGTERM from now on ends the run as Ctrl-C
    does (the children killed first)."""
    signal.signal(signal.SIGTERM, _interrupt)
    work, made = _empty_work_dir(command, args.data_dir)
    if work is None:
        return None
    return args.kills or (quick_kills if args.quick else CRASH_KILLS), work, made


def _empty_work_dir(command: str, work: str | None) -> tuple[str | None, bool]:
    """The directory a run keeps its store and logs in (a new temporary one when ``work`` is
    None: then True), or None after saying on stderr that ``work`` holds something."""
    if work is None:
        return tempfile.mkdtemp(prefix=f"sweepq-{command}-"), True
    if os.path.exists(work) and (not os.path.isdir(work) or os.listdir(work)):
        print(f"sweepq {command}: error: {work} is not an empty directory; pass a new or empty one", file=sys.stderr)
        return None, False
    os.makedirs(work, exist_ok=True)
    return work, False


# -- crashtest ---------------------------------------------------------------------------------------


def _crashtest(args: argparse.Namespace) -> int:
    from sweepq.bench.crash.driver import run_crashtest
    from sweepq.bench.crash.trials import corruption_trial

    begun = _begin("crashtest", args, CRASH_QUICK_KILLS)
    if begun is None:
        return 2
    kills, work, made = begun
    if args.corrupt:
        print(f"sweepq crashtest: one worker's backlog, then {args.corrupt}, seed {args.seed}, in {work}", flush=True)
        with keeps_work_on_interrupt("crashtest", work):
            verdict, _ = corruption_trial(work, args.corrupt, args.seed, args.sync)
        print(verdict.render(f"sweepq crashtest --corrupt {args.corrupt} --seed {args.seed} --sync {args.sync}"))
        print(f"  logs and store kept in {work}")
        return 0 if verdict.ok else 1
    replay = f"sweepq crashtest --kills {kills} --seed {args.seed} --sync {args.sync} --interval {args.interval:g}"
    replay += " --quick" if args.quick else ""
    print(f"sweepq crashtest: {kills:,} kill points, seed {args.seed}, in {work}", flush=True)
    with keeps_work_on_interrupt("crashtest", work):
        progress, done = _progress(kills)
        try:
            verdict = run_crashtest(
                work, kills, args.seed, args.sync, args.interval, quick=args.quick, progress=progress
            )
        finally:
            done()
    return report_verdict(verdict, replay, work, remove=made and not args.keep)


def _progress(kills: int):
    """(progress callback, close) of a run: a progress bar (rich) or, without rich, a line
    every 50 kills and at every problem."""
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:

        def say(i: int, plan, problem: str) -> None:
            if i % 50 == 0 or problem:
                print(f"kill {i}/{kills}: {plan.describe()} {problem}", flush=True)

        return say, lambda: None
    columns = (TextColumn("kills"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    bar = Progress(*columns, TextColumn("{task.description}"))
    bar.start()
    task = bar.add_task("", total=kills)

    def show(i: int, plan, problem: str) -> None:
        bar.update(task, completed=i, description=plan.describe() + (f"  ! {problem}" if problem else ""))

    return show, bar.stop


def _crash_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--kills",
        type=number(int, 1),
        default=None,
        help=f"kill points, each a worker run ended by SIGKILL (default: {CRASH_KILLS:,}; --quick: "
        f"{CRASH_QUICK_KILLS})",
    )
    p.add_argument("--quick", action="store_true", help="the CI form: short worker runs, 50 kill points by default")
    p.add_argument(
        "--data-dir",
        default=None,
        help="an empty or new directory for the store and the logs (default: a temporary one, removed when the "
        "verdict passes)",
    )
    p.add_argument("--seed", type=number(int, 0), default=1, help="seed of every random choice; replays a run")
    p.add_argument("--sync", choices=("commit", "os", "none"), default="commit", help="the queue manager's sync option")
    p.add_argument("--interval", type=number(float, 0, low_open=True), default=INTERVAL, help="sweep interval, seconds")
    p.add_argument("--keep", action="store_true", help="keep a temporary directory even when the verdict passes")
    p.add_argument(
        "--corrupt",
        choices=CORRUPTIONS,
        default=None,
        help="instead of kills: build a backlog, damage the store's files this way, drain and judge (every "
        "committed message must come back or be named damaged by MsgId)",
    )


# -- crashtest-server and crashtest-channel ------------------------------------------------------------


def _kill_progress(kills: int) -> Callable[[int, Any, str], None]:
    """The progress line of a kill harness: every 25th kill, each problem, and the last."""

    def progress(i: int, plan: Any, problem: str) -> None:
        if i % 25 == 0 or problem or i == kills:
            print(f"kill {i}/{kills}: {plan.describe()} {problem}", flush=True)

    return progress


def _crashtest_server(args: argparse.Namespace) -> int:
    from sweepq.bench.crash_server import run_server_crashtest

    if not output_dir("sweepq crashtest-server", args.out):
        return 2
    begun = _begin("crashtest-server", args, SERVER_QUICK_KILLS)
    if begun is None:
        return 2
    kills, work, made = begun
    print(f"sweepq crashtest-server: {kills:,} server kills, seed {args.seed}, in {work}", flush=True)

    progress, out = _kill_progress(kills), _verdict_out(args)
    with keeps_work_on_interrupt("crashtest-server", work):
        verdict = run_server_crashtest(work, kills, args.seed, args.sync, args.interval, args.quick, progress)
    replay = f"sweepq crashtest-server --kills {kills} --seed {args.seed}" + (" --quick" if args.quick else "")
    return report_verdict(verdict, replay, work, remove=made, out=out)


def _crashtest_channel(args: argparse.Namespace) -> int:
    from sweepq.bench.crash_channel import run_channel_crashtest

    if not output_dir("sweepq crashtest-channel", args.out):
        return 2
    begun = _begin("crashtest-channel", args, CHANNEL_QUICK_KILLS)
    if begun is None:
        return 2
    kills, work, made = begun
    print(f"sweepq crashtest-channel: {kills:,} kills of QM1 or QM2, seed {args.seed}, in {work}", flush=True)

    progress, out = _kill_progress(kills), _verdict_out(args)
    with keeps_work_on_interrupt("crashtest-channel", work):  # both children are killed first
        verdict = run_channel_crashtest(work, kills, args.seed, args.sync, args.interval, args.quick, progress)
    replay = f"sweepq crashtest-channel --kills {kills} --seed {args.seed}" + (" --quick" if args.quick else "")
    return report_verdict(verdict, replay, work, remove=made, out=out)


def _two_process_options(p: argparse.ArgumentParser, kills: str, quick: int) -> None:
    """The options of crashtest-server and crashtest-channel (``kills`` says what is killed;
    ``quick``: the --quick kills)."""
    p.add_argument(
        "--kills", type=number(int, 1), default=None, help=f"{kills} (default {CRASH_KILLS}; --quick: {quick})"
    )
    p.add_argument("--quick", action="store_true", help="the CI form: short lives, a few kills")
    p.add_argument("--seed", type=number(int, 0), default=1, help="seed of every random choice")
    p.add_argument("--data-dir", default=None, help="a new directory for the store and logs (default: temporary)")
    p.add_argument("--sync", choices=("commit", "os"), default="commit", help="the queue manager's sync option")
    p.add_argument("--interval", type=number(float, 0, low_open=True), default=INTERVAL, help="sweeps")
    p.add_argument(
        "--out",
        default=None,
        help="a directory to write the verdict into as well: verdict.md (the command, date, commit, machine and "
        "load over the verdict) and verdict.json",
    )


# -- damagetest ------------------------------------------------------------------------------------------


def _damagetest(args: argparse.Namespace) -> int:
    from sweepq.bench.damage import Trial, arm_watchdog, disarm_watchdog, run_fuzz

    trials = args.trials or (DAMAGE_QUICK_TRIALS if args.quick else DAMAGE_TRIALS)
    work = tempfile.mkdtemp(prefix="sweepq-damage-")
    say = (lambda *a, **k: print(*a, **k, file=sys.stderr)) if args.json else print
    say(f"sweepq damagetest: {trials} trials, seed {args.seed}, in {work}", flush=True)

    def progress(k: int, t: Trial) -> None:
        arm_watchdog()
        if k % 25 == 0 or t.violations:
            flag = f"  ! {t.violations[0][:120]}" if t.violations else ""
            say(f"  trial {k}/{trials}: {t.state}, {t.damage} {t.target}{flag}", flush=True)

    arm_watchdog()
    try:
        verdict = run_fuzz(work, trials, args.seed, progress)
    except KeyboardInterrupt:
        print(f"sweepq damagetest: interrupted; the trial directories are in {work}", file=sys.stderr)
        return 130
    finally:
        disarm_watchdog()
    replay = f"sweepq damagetest --trials {trials} --seed {args.seed}"
    if args.json:
        print(json.dumps(verdict.as_json(replay)))
    else:
        print(verdict.render(replay))
    shutil.rmtree(work, ignore_errors=True)
    return 0 if verdict.ok else 1


# -- registration ------------------------------------------------------------------------------------------


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``crashtest``, ``damagetest``, ``crashtest-server`` and ``crashtest-channel`` to the
    ``sweepq`` subparsers."""
    c = sub.add_parser(
        "crashtest",
        help="the kill -9 harness: kill a worker at random moments, restart, verify nothing lost or duplicated",
        description="Run a worker that puts and gets persistent messages under syncpoint with the sweeper at a "
        "short interval; SIGKILL it at random moments (in commits, sweeps, unsweeps, recovery), restart it on the "
        "same directory, N times; then drain and judge from the workers' logs: 0 committed messages lost, 0 "
        "delivered twice, order kept per priority. Exits 1 on any violation.",
        formatter_class=HelpFormatter,
    )
    _crash_options(c)
    c.set_defaults(func=_crashtest)

    d = sub.add_parser(
        "damagetest",
        help="the damage fuzz: cut, zero, flip and delete every kind of file of data directories, verify "
        "nothing wrong comes back",
        description="Build data directories with real traffic (closed cleanly, killed with SIGKILL, or open; gets "
        "in delivery order and by MsgId, CorrelId and GroupId under syncpoint, also in the killed session), "
        "damage one file of each kind in turn (the manifest, CURRENT, OPTIONS, the logs, the table files, "
        "sweepq's own files: cut short, a page zeroed, bits flipped, deleted), open it (with repair=True when "
        "refused), drain it, and verify: no wrong data, no consumed message back, none twice, FIFO kept, no loss "
        "without a report, none named lost that was not, the queue manager usable. Exits 1 on any violation.",
        formatter_class=HelpFormatter,
    )
    d.add_argument(
        "--trials",
        type=number(int, 1),
        default=None,
        help=f"trials (default {DAMAGE_TRIALS}; --quick: {DAMAGE_QUICK_TRIALS})",
    )
    d.add_argument("--quick", action="store_true", help=f"the CI form: {DAMAGE_QUICK_TRIALS} trials")
    d.add_argument("--seed", type=number(int, 0), default=1, help="seed of every random choice; replays a run")
    d.add_argument("--json", action="store_true", help="print every trial as JSON (progress goes to stderr)")
    d.set_defaults(func=_damagetest)

    s = sub.add_parser(
        "crashtest-server",
        help="the kill -9 harness in server mode: SIGKILL a server under a client's load, restart, verify",
        description="A client worker puts and gets persistent messages through 'sweepq serve'-like server; "
        "the server is SIGKILLed at random moments and after commits and restarted on the same directory, N "
        "times; then the directory is drained and judged from the worker's logs: every committed message "
        "exactly once, in order per priority. Exits 1 on any violation.",
        formatter_class=HelpFormatter,
    )
    _two_process_options(s, "server kills", SERVER_QUICK_KILLS)
    s.set_defaults(func=_crashtest_server)

    ch = sub.add_parser(
        "crashtest-channel",
        help="the kill -9 harness of a channel: SIGKILL the sender or the receiver, restart, verify",
        description="QM1 puts persistent messages under syncpoint to a remote queue; its sender channel "
        "sends them over loopback TCP to QM2, where a consumer gets them. Either process is SIGKILLed at "
        "random moments (during a batch, between the two commits, during a sweep) and restarted, N times; "
        "then everything is delivered and judged from the logs: every committed message exactly once, in "
        "order per priority. Exits 1 on any violation; Ctrl-C stops both processes and says where the "
        "logs are.",
        formatter_class=HelpFormatter,
    )
    _two_process_options(ch, "kills of QM1 or QM2", CHANNEL_QUICK_KILLS)
    ch.set_defaults(func=_crashtest_channel)
