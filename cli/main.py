"""The ``sweepq`` command line: its parser and its entry point.

Each command lives with a ``register(sub)`` function that adds its parser to the ``sweepq``
subparsers; :data:`COMMANDS` lists them in the order ``sweepq --help`` shows them. A new
command is one more line there. Argument helpers: cli/args.py (one set for every command).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
import textwrap
from collections.abc import Callable

from .args import Parser, memory_size, number, output_dir
from .replay import pipeline_command as _pipeline
from .replay import register as register_replay_commands

DESCRIPTION = """\
sweepq: an embedded tiered-storage message queue engine with IBM MQ semantics, whose slow
queue sweeper moves the surplus of growing queues into zstd-compressed blobs in RocksDB.
Start with 'sweepq demo'; 'sweepq COMMAND --help' describes each command.

exit codes: 0 done, 1 the work failed (a check, an MQ call), 2 a usage error (one line on
stderr), 130 interrupted (Ctrl-C)."""

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it

# -- demo -------------------------------------------------------------------------------------

# What --quick changes, unless the user set it: a CI-sized run of a few seconds.
DEMO_QUICK = {"messages": 60_000, "seconds": 3.0, "interval": 1.0, "budget": 32_000_000}
_DEMO_SIZES = ("queues", "producers", "messages", "size", "seconds", "interval", "budget")


def _demo(args: argparse.Namespace) -> int:
    if not output_dir("sweepq demo", args.out):
        return 2
    from sweepq.bench.demo import DemoConfig, run

    values = {k: getattr(args, k) for k in _DEMO_SIZES}
    if args.quick:  # --quick changes the sizes the user did not set
        for k, v in DEMO_QUICK.items():
            if values[k] == _demo_default(k):
                values[k] = v
    if args.channel and (args.clients or args.busy != [0]):
        print("sweepq demo: error: --channel is a form of its own: pass it without --clients, --busy", file=sys.stderr)
        return 2
    if args.channel:  # a form of its own: bench/demo_channel.py
        from sweepq.bench.demo_channel import ChannelDemo
        from sweepq.bench.demo_channel import run as run_channel

        sizes = {k: values[k] for k in ("messages", "size", "seconds", "interval")}
        command = " ".join(["sweepq", *getattr(args, "argv", ["demo", "--channel"])])
        return run_channel(ChannelDemo(**sizes), args.out, command=command)
    cfg = DemoConfig(
        **values,
        consumer_share=args.consumer_share,
        policy=args.policy,
        counts=args.budget_counts,
        seed=args.seed,
        clients=args.clients,
        sample_every=0.1 if values["seconds"] < 10 else 0.25,
    )
    return run(cfg, args.out, compare=not args.no_compare, busy_levels=args.busy)


def _demo_default(name: str) -> object:
    """The default of a demo option (the budget in bytes, as --budget reads a size)."""
    from sweepq.bench.demo import DemoConfig

    return getattr(DemoConfig(), name)


def register_demo_command(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "demo",
        help="the memory-pressure demo: producers outpace a slow consumer, the sweeper bounds memory",
        description="""\
Producers outpace a slow consumer on several queues (priorities, units of work); the slow
queue sweeper keeps memory bounded under a memory budget; then the consumer catches up and
every message comes back. The same workload also runs without sweeping, in a subprocess of
its own, at the same time. --busy runs spinning processes beside both. Shows live progress
and a table, writes demo.png, demo.json, demo.md and peak.md, verifies exactly-once delivery in
order per producer, queue and priority, and exits 1 if it fails. About a minute on 2 cores
(per busy load). MB = 10^6 bytes.

Ctrl-C (or SIGTERM) ends every process the demo started within a second and says what was
left where; if the demo itself is killed, they end with it.""",
        epilog="""\
examples:
  sweepq demo                      # the README's run: 600,000 messages of 1 KiB over 40 s
  sweepq demo --quick --busy 1     # a few seconds, one spinning process beside it
  sweepq demo --busy 0 2           # quiet, then 2 busy: peak RSS with/without sweeping, both loads
  sweepq demo --quick --clients    # producers and consumer in processes of their own, as clients
  sweepq demo --quick --channel    # a sender queue manager whose partner is down, then the catch-up
  sweepq demo --budget 150MB --out results/""",
    )
    d.add_argument("--quick", action="store_true", help="a CI-sized run of a few seconds (sweep interval 1 s)")
    d.add_argument("--queues", type=number(int, 1, 1000, hint="pass 1 to 1000 queues"), default=3, help="queues")
    d.add_argument(
        "--producers",
        type=number(int, 0, 256, hint="pass 0 to 256 producer threads"),
        default=4,
        help="producer threads",
    )
    d.add_argument(
        "--messages",
        type=number(int, 0, 100_000_000, hint="pass how many messages the producers put in all"),
        default=600_000,
        help="messages put in all (--quick: 60000)",
    )
    d.add_argument(
        "--size",
        type=number(int, 1, 16 * 1024 * 1024, hint="pass a payload size in bytes, 1 to 16777216"),
        default=1024,
        help="payload bytes",
    )
    d.add_argument(
        "--seconds",
        type=number(float, 0, 3600, low_open=True, hint="pass how many seconds the producers take, e.g. 40"),
        default=40.0,
        help="how long the producers take to put the messages (--quick: 3)",
    )
    d.add_argument(
        "--consumer-share",
        type=number(float, 0, 1, low_open=True, hint="pass a share of the producers' rate, e.g. 0.1"),
        default=0.1,
        help="the slow consumer's rate while the producers run, as a share of theirs",
    )
    d.add_argument(
        "--interval",
        type=number(float, 0, 3600, low_open=True, hint="pass the sweep interval in seconds, e.g. 5"),
        default=5.0,
        help="sweep interval in seconds (the sweeper's default is 5; --quick: 1)",
    )
    d.add_argument(
        "--budget",
        type=memory_size,
        default=_demo_default("budget"),
        metavar="SIZE",
        help="memory budget of the sweeping run, as serve --memory-budget reads it: 100MB, 512MiB or bytes "
        "(MemorySettings(budget=)): the resident memory above the baseline, or with --budget-counts held "
        "the messages in memory and RocksDB's memtables and cache, are to stay under it; 0: none; --quick: 32MB",
    )
    d.add_argument(
        "--budget-counts",
        choices=("resident", "held"),
        default="resident",
        help="what the budget counts (MemorySettings.counts): resident, the process's resident memory "
        "above its baseline at open, what the OS and a container's limit see (the demo checks peak RSS <= "
        "1.15 x budget + baseline); held, the messages in memory and RocksDB's memtables and cache (the demo "
        "checks that count against the budget)",
    )
    d.add_argument(
        "--policy",
        choices=("page", "block", "fail"),
        default="page",
        help="what a put does once the budget is reached (the queues' memory_policy): page writes new messages "
        "out in blobs as they come, block waits for room (then MQRC 2071), fail refuses at once (2071; the "
        "demo's producers then retry); the budget's high mark wakes the sweeper at once in every case",
    )
    d.add_argument(
        "--busy",
        type=number(int, 0, 64, hint="pass 0 to 64 spinning processes"),
        nargs="+",
        default=[0],
        metavar="N",
        help="run N spinning processes (pure CPU burners) beside the runs; several values run the demo once "
        "per value, one table for all (e.g. --busy 0 2; default: 0, nothing beside them)",
    )
    d.add_argument("--seed", type=number(int, 0, hint="pass a non-negative integer"), default=1, help="workload seed")
    d.add_argument(
        "--out",
        default="sweepq-demo",
        help="directory for demo.png, demo.json, demo.md and peak.md (demo.md's last table alone)",
    )
    d.add_argument("--no-compare", action="store_true", help="skip the run without sweeping")
    d.add_argument(
        "--clients",
        action="store_true",
        help="the producers and the consumer are processes of their own, client connections to the run's "
        "queue manager (a process per producer, one for the consumer) instead of threads beside it",
    )
    d.add_argument(
        "--channel",
        action="store_true",
        help="a sender queue manager (QM1) puts --messages over --seconds while its partner QM2 is stopped, then "
        "QM2 starts and the channel catches up: QM1's memory without and with sweeping, every message once "
        "(bench/demo_channel.py)",
    )
    d.set_defaults(func=_demo)


# -- bench ------------------------------------------------------------------------------------


def _bench(args: argparse.Namespace) -> int:
    import os

    from sweepq.bench.suite import QUICK, SCENARIOS, BenchOptions, run

    unknown = [w for w in args.what if w not in SCENARIOS and w != "all"]
    if unknown:
        print(
            f"sweepq bench: error: argument SCENARIO: {unknown[0]!r} is not a scenario; "
            f"give some of {', '.join(SCENARIOS)}, or all (the default)",
            file=sys.stderr,
        )
        return 2
    if not output_dir("sweepq bench", args.out):
        return 2
    if args.durable_dir is not None and not os.path.isdir(args.durable_dir) and not args.create_durable_dir:
        print(
            f"sweepq bench: error: argument --durable-dir: {args.durable_dir!r} is not a directory; "
            "give an existing one, or pass --create-durable-dir",
            file=sys.stderr,
        )
        return 2
    # In the order given, each once: "durable queue" is one run of both (the docs quote one run).
    names = list(SCENARIOS) if not args.what or "all" in args.what else list(dict.fromkeys(args.what))
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(BenchOptions) if hasattr(args, f.name)}
    if args.quick:  # --quick shrinks what the user did not set
        defaults = BenchOptions()
        for k, v in QUICK.items():
            if values.get(k, getattr(defaults, k)) == getattr(defaults, k):
                values[k] = v
    opts = BenchOptions(**values)
    from sweepq.bench.children import interrupts_as_ctrl_c
    from sweepq.bench.suite import run_info, write_out

    info = run_info()
    with interrupts_as_ctrl_c():  # SIGTERM and SIGHUP end the scenarios as Ctrl-C does: servers stopped
        figures, report = run(names, opts)
    info["load_after"] = run_info()["load"]
    command = " ".join(["sweepq", *getattr(args, "argv", ["bench"])])
    doc = {"command": command, "run": info, "options": dataclasses.asdict(opts), "figures": figures}
    doc["rows"] = report.rows
    doc["notices"] = report.notices
    written = write_out(json.loads(json.dumps(doc, default=str)), args.out) if args.out else []
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(report.markdown())
    if written:
        print(f"wrote {', '.join(written)}", file=sys.stderr)
    return 0


def register_bench_command(sub: argparse._SubParsersAction) -> None:
    from sweepq.bench.suite import ABOUT, INSTRUCTION_SCENARIOS, SCENARIOS

    pos_int = number(int, 1)
    pos_float = number(float, 0, low_open=True)
    b = sub.add_parser(
        "bench",
        help="benchmarks against the queues users pick instead, as ratios to baselines in the same run",
        description="Run benchmark scenarios. Figures are ratios against a baseline measured in the same\n"
        "run (interleaved rounds, best round each), because machines are shared and noisy. Prints a\n"
        "Markdown table (or JSON with --json); --out writes both to a directory, with a table a\n"
        "scenario and run.md (the run's date, machine, load and commit) that the docs quote.\n\n"
        "scenarios:\n"
        + "\n".join(
            textwrap.fill(f"{name}: {ABOUT[name]}", 100, initial_indent="  ", subsequent_indent="    ")
            for name in SCENARIOS
        ),
    )
    b.add_argument(
        "what",
        nargs="*",
        metavar="SCENARIO",
        help="the scenarios to run, in this order, in one run (default: all of them)",
    )
    b.add_argument("--quick", action="store_true", help="CI-sized runs of every scenario (figures are noisier)")
    b.add_argument("--messages", type=pos_int, default=30_000, help="messages per round (throughput, batch)")
    b.add_argument("--size", type=pos_int, default=1024, help="payload bytes (throughput, batch, persistent)")
    b.add_argument("--rounds", type=pos_int, default=15, help="interleaved rounds, best kept")
    b.add_argument("--batch", type=pos_int, default=100, help="messages per put_many / get_many")
    b.add_argument(
        "--instructions-n",
        type=number(int, 100, hint="pass at least 100 operations"),
        default=50_000,
        help="operations per child process counted under callgrind (instructions)",
    )

    def rows(text: str) -> tuple[str, ...]:
        names = tuple(n.strip() for n in text.split(",") if n.strip())
        unknown = [n for n in names if n not in INSTRUCTION_SCENARIOS]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"{', '.join(map(repr, unknown)) or 'nothing'}: give rows among {', '.join(INSTRUCTION_SCENARIOS)}"
            )
        return names

    b.add_argument(
        "--instructions-rows",
        type=rows,
        default=(),
        metavar="ROWS",
        help=f"rows to count, comma-separated, among {', '.join(INSTRUCTION_SCENARIOS)} (instructions; default all)",
    )
    b.add_argument("--persistent-messages", type=pos_int, default=2_000, help="messages per round (persistent)")
    b.add_argument("--memory-messages", type=pos_int, default=1_000_000, help="messages (memory, in memory)")
    b.add_argument("--memory-payload", type=pos_int, default=100, help="payload bytes (memory)")
    b.add_argument(
        "--sweep-messages",
        type=number(int, 1000, hint="pass at least 1000 messages"),
        default=100_000,
        help="messages for the sweep rates and the drain latency (sweep)",
    )
    b.add_argument(
        "--sweep-memory-messages", type=pos_int, default=1_000_000, help="messages for bytes per swept message (memory)"
    )
    b.add_argument("--backlog", type=pos_int, default=500_000, help="messages waiting before consumers start (backlog)")
    b.add_argument(
        "--backlog-rate",
        type=pos_float,
        default=20_000.0,
        help="fixed publish rate, msgs/s, before and during the drain",
    )
    b.add_argument("--backlog-size", type=pos_int, default=1024, help="payload bytes (backlog)")
    b.add_argument("--backlog-interval", type=pos_float, default=1.0, help="sweep interval, seconds (backlog)")
    b.add_argument("--gc-messages", type=pos_int, default=1_000_000, help="backlog while GC pauses are timed (gc)")
    b.add_argument("--replay-events-m", type=pos_float, default=10.0, help="M events for the replay kernel (replay)")
    b.add_argument(
        "--replay-file-events-m",
        type=pos_float,
        default=20.0,
        help="M events for `sweepq replay FILE` end to end, in a subprocess (replay)",
    )
    b.add_argument(
        "--pipeline-events-m",
        type=number(float, 0, hint="pass 0 to skip, or millions of events"),
        default=0.0,
        help="M events for the Spark pipeline (replay; 0: skip)",
    )
    b.add_argument("--durable-messages", type=pos_int, default=2_000, help="put+get per round, crash-safe (durable)")
    b.add_argument(
        "--durable-sync-messages", type=pos_int, default=300, help="messages per round, power-safe (durable)"
    )
    b.add_argument("--durable-producers", type=pos_int, default=8, help="producer threads (durable)")
    b.add_argument("--durable-rounds", type=pos_int, default=7, help="interleaved rounds (durable)")
    b.add_argument("--recovery-messages", type=pos_int, default=1_000_000, help="messages recovered (durable)")
    b.add_argument(
        "--retrieval-depth", type=pos_int, default=100_000, help="queue depth a get by CorrelId searches (retrieval)"
    )
    b.add_argument("--browse-messages", type=pos_int, default=1_000_000, help="messages browsed (retrieval)")
    b.add_argument("--clients-concurrent", type=pos_int, default=64, help="client connections at once (clients)")
    b.add_argument("--clients-held", type=pos_int, default=1_000, help="idle connections held open (clients)")
    b.add_argument("--channel-messages", type=pos_int, default=20_000, help="messages per transfer (channel)")
    b.add_argument("--channel-light-rate", type=pos_float, default=200.0, help="msgs/s of the latency run (channel)")
    b.add_argument("--channel-down-seconds", type=pos_float, default=60.0, help="seconds QM2 is down (channel)")
    b.add_argument("--channel-down-rate", type=pos_float, default=10_000.0, help="msgs/s put meanwhile (channel)")
    # sweepq.Queue and sweepq.AsyncQueue against what they replace (bench/queues.py).
    b.add_argument("--queue-messages", type=pos_int, default=30_000, help="put+get pairs per round (queue)")
    b.add_argument(
        "--queue-persistent-messages", type=pos_int, default=1_000, help="items per round, path= and peers (queue)"
    )
    b.add_argument(
        "--queue-budget",
        type=memory_size,
        default=50_000_000,
        help="the backlog's memory budget: 50MB, 64MiB (queue, memory)",
    )
    b.add_argument(
        "--queue-backlog",
        dest="queue_backlog_factor",
        type=pos_float,
        default=10.0,
        help="backlog, in budgets (queue, memory)",
    )
    # Celery through sweepq and through Redis (bench/celery_bench.py).
    b.add_argument("--celery-tasks", type=pos_int, default=20_000, help="tasks through a worker, per broker (celery)")
    b.add_argument(
        "--celery-backlog",
        type=pos_int,
        default=1_000_000,
        help="tasks waiting with no worker, then drained by one (celery)",
    )
    b.add_argument(
        "--celery-budget",
        type=memory_size,
        default=100_000_000,
        help="sweepq serve's memory budget under the backlog: 100MB (celery)",
    )
    b.add_argument("--durable-dir", default=None, help="directory on the disk to measure (durable; default: TMPDIR)")
    b.add_argument("--create-durable-dir", action="store_true", help="create --durable-dir if it does not exist")
    b.add_argument("--json", action="store_true", help="print the figures as JSON instead of the table")
    b.add_argument(
        "--out", default=None, help="directory to write bench.json, bench.md, run.md and a SCENARIO.md each to"
    )
    b.set_defaults(func=_bench)


# -- the parser and the entry point -----------------------------------------------------------

Register = Callable[[argparse._SubParsersAction], None]


def _from(module: str) -> Register:
    """The ``register`` function of the command module ``sweepq.cli.<module>``, imported when a
    parser with its commands is built (each command module imports what its help names)."""

    def register(sub: argparse._SubParsersAction) -> None:
        importlib.import_module(f"sweepq.cli.{module}").register(sub)

    return register


# Every command's registration, in the order `sweepq --help` lists them: one line each.
COMMANDS: list[Register] = [
    register_demo_command,  # demo: here, the demo itself in bench/demo.py
    register_bench_command,  # bench: here, the scenarios in bench/suite.py
    register_replay_commands,  # trace, replay, pipeline: cli/replay.py
    _from("plan"),  # plan: cli/plan.py
    _from("data"),  # define, put, get, browse: cli/data.py
    _from("serve"),  # serve, status: cli/serve.py
    _from("channel"),  # channel: cli/channel.py
    _from("inspect"),  # inspect: cli/inspect.py
    _from("harness"),  # crashtest, damagetest, crashtest-server, crashtest-channel: cli/harness.py
]

# The commands whose parser main() builds alone, without the others' (whose modules import
# the harnesses, the demo and the bench for their helps): trace and replay, whose speed is
# measured with Python's start (issue 35). Their help and errors are the same either way.
ALONE = {"trace": register_replay_commands, "replay": register_replay_commands}


def version() -> str:
    """The installed distribution's version (pyproject.toml's, through the package metadata)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("sweepq")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class _Version(argparse.Action):
    """``--version``: argparse's version action, with the version read when it is asked for
    (importlib.metadata costs every other command's start-up more than the rest of a parser)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"sweepq {version()}")  # on stdout, as argparse's own version action prints it
        parser.exit()


def build_parser(commands: list[Register] | None = None) -> argparse.ArgumentParser:
    """The ``sweepq`` parser with the commands of ``commands`` (default: every one of
    :data:`COMMANDS`)."""
    p = Parser(prog="sweepq", description=DESCRIPTION)
    p.add_argument("--version", action=_Version, help="print sweepq's version")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for register in COMMANDS if commands is None else commands:
        register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    """Run ``sweepq ARGV``; returns the exit code (0 done, 1 failed, 2 usage, 130 interrupted)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pipeline"]:  # its own parser (and --help) lives with the pipeline
        return _pipeline(argparse.Namespace(rest=argv[1:]))
    alone = ALONE.get(argv[0]) if argv else None
    parser = build_parser(None if alone is None else [alone])
    if not argv:
        parser.print_help()
        return 2
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    args.argv = argv
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"sweepq {args.command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (sweepq inspect DIR | head -1): stop quietly, as cat does.
        # stdout is pointed at devnull so that the interpreter's final flush cannot fail.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
