"""The ``sweepq`` command line."""

from __future__ import annotations

import argparse
import json
import math
import sys

from sweepq.bench.crash import register_crash_command
from sweepq.bench.crash_server import register_crash_server_command

from .data import register as register_data_commands
from .replay import pipeline_command as _pipeline
from .replay import register as register_replay_commands
from .serve import register as register_serve_commands

DESCRIPTION = """\
sweepq: an embedded tiered-storage message queue engine with IBM MQ semantics, whose slow
queue sweeper moves the surplus of growing queues into zstd-compressed blobs in RocksDB.
Start with 'sweepq demo'; 'sweepq COMMAND --help' describes each command."""


class _Formatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """The top-level help: the description keeps its line breaks."""


class _Parser(argparse.ArgumentParser):
    """A bad value is one line naming the argument and what to do, and exit code 2: no usage
    block, no traceback. Subcommand parsers are of this class too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)  # every default shown
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _number(kind: type, low: float | None = None, high: float | None = None, low_open: bool = False, hint: str = ""):
    """An argparse type: a finite ``kind`` within [low, high] (or (low, high] when ``low_open``),
    whose error says what is expected and what to pass instead."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is not None and kind is float and not math.isfinite(value):
            value = None
        ok = value is not None
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value <= high
        if not ok:
            what = "an integer" if kind is int else "a number"

            def show(b: float) -> str:
                return f"{int(b):,}" if float(b).is_integer() else f"{b:g}"

            bounds = []
            if low is not None:
                bounds.append(f"{'>' if low_open else '>='} {show(low)}")
            if high is not None:
                bounds.append(f"<= {show(high)}")
            wanted = f"{what} {' and '.join(bounds)}".rstrip()
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}; {hint or 'pass ' + wanted}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def _output_dir(prog: str, path: str | None) -> bool:
    """Create ``--out`` before any work, so that a bad path fails at once in one line."""
    import os

    if path is None:
        return True
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise PermissionError("not writable")
    except OSError as e:
        why = e.strerror or str(e)
        print(
            f"{prog}: error: argument --out: cannot write to {path!r} ({why}); pass a writable directory",
            file=sys.stderr,
        )
        return False
    return True


def _demo(args: argparse.Namespace) -> int:
    if not _output_dir("sweepq demo", args.out):
        return 2
    from sweepq.bench.demo import DemoConfig, run

    quick = {"messages": 20_000, "size": 512, "seconds": 3.0, "interval": 1.0}
    values = {k: getattr(args, k) for k in ("queues", "producers", "messages", "size", "seconds", "interval")}
    if args.quick:  # --quick changes the sizes the user did not set
        defaults = DemoConfig()
        for k, v in quick.items():
            if values[k] == getattr(defaults, k):
                values[k] = v
    cfg = DemoConfig(
        **values,
        consumer_share=args.consumer_share,
        seed=args.seed,
        sample_every=0.1 if values["seconds"] < 10 else 0.25,
    )
    return run(cfg, args.out, compare=not args.no_compare)


def _bench(args: argparse.Namespace) -> int:
    import dataclasses
    import os

    from sweepq.bench.suite import QUICK, SCENARIOS, BenchOptions, run

    if not _output_dir("sweepq bench", args.out):
        return 2
    names = list(SCENARIOS) if args.what == "all" else [args.what]
    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(BenchOptions) if hasattr(args, f.name)}
    if args.quick:  # --quick shrinks what the user did not set
        defaults = BenchOptions()
        for k, v in QUICK.items():
            if values.get(k, getattr(defaults, k)) == getattr(defaults, k):
                values[k] = v
    opts = BenchOptions(**values)
    figures, report = run(names, opts)
    command = " ".join(["sweepq", *getattr(args, "argv", ["bench"])])
    doc = {"command": command, "options": dataclasses.asdict(opts), "figures": figures, "rows": report.rows}
    doc["notices"] = report.notices
    table = report.markdown()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "bench.json"), "w") as f:
            json.dump(doc, f, indent=2, default=str)
        with open(os.path.join(args.out, "bench.md"), "w") as f:
            f.write(f"`{doc['command']}`\n\n{table}\n")
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(table)
    if args.out:
        print(f"wrote {os.path.join(args.out, 'bench.json')} and {os.path.join(args.out, 'bench.md')}", file=sys.stderr)
    return 0


def _inspect(args: argparse.Namespace) -> int:
    import os

    from .inspect import describe

    def bad(why: str) -> int:
        name = "path" if args.data_dir is None else "--data-dir"
        print(
            f"sweepq inspect: error: argument {name}: {why}; pass a data directory that QueueManager.open(path) wrote",
            file=sys.stderr,
        )
        return 2

    if args.server is not None:  # a running server's view: cli/serve.py
        from .serve import inspect_server

        return inspect_server(args)
    if args.path is None and args.data_dir is None:
        print(
            "sweepq inspect: error: the following arguments are required: path (or --data-dir DIR) "
            "(see 'sweepq inspect --help')",
            file=sys.stderr,
        )
        return 2
    if args.path is not None and args.data_dir is not None and args.path != args.data_dir:
        return bad(f"{args.data_dir} and the path {args.path} differ; give one of them")
    args.path = args.path if args.path is not None else args.data_dir
    if not os.path.exists(args.path):
        return bad(f"{args.path} does not exist")
    if not os.path.isdir(args.path):
        return bad(f"{args.path} is not a directory")
    try:
        text = describe(args.path, as_json=args.json)
    except Exception as e:  # the store's errors already say what is wrong
        return bad(" ".join(str(e).split()))
    print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sweepq", description=DESCRIPTION, formatter_class=_Formatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    pos_int = _number(int, 1)
    pos_float = _number(float, 0, low_open=True)

    d = sub.add_parser(
        "demo",
        help="the memory-pressure demo: producers outpace a slow consumer, the sweeper bounds memory",
        description="Producers outpace a slow consumer on several queues (priorities, units of work); the "
        "slow queue sweeper keeps memory bounded; then the consumer catches up and every message comes "
        "back. The same workload also runs without sweeping, in a subprocess of its own. Shows live "
        "progress and a table, writes demo.png and demo.json, verifies exactly-once delivery in order per "
        "producer, queue and priority, and exits 1 if it fails. About a minute on 2 cores.",
    )
    d.add_argument("--quick", action="store_true", help="a CI-sized run of a few seconds (sweep interval 1 s)")
    d.add_argument("--queues", type=_number(int, 1, 1000, hint="pass 1 to 1000 queues"), default=3, help="queues")
    d.add_argument(
        "--producers",
        type=_number(int, 0, 256, hint="pass 0 to 256 producer threads"),
        default=4,
        help="producer threads",
    )
    d.add_argument(
        "--messages",
        type=_number(int, 0, 100_000_000, hint="pass how many messages the producers put in all"),
        default=600_000,
        help="messages put in all (--quick: 20000)",
    )
    d.add_argument(
        "--size",
        type=_number(int, 1, 16 * 1024 * 1024, hint="pass a payload size in bytes, 1 to 16777216"),
        default=1024,
        help="payload bytes (--quick: 512)",
    )
    d.add_argument(
        "--seconds",
        type=_number(float, 0, 3600, low_open=True, hint="pass how many seconds the producers take, e.g. 40"),
        default=40.0,
        help="how long the producers take to put the messages (--quick: 3)",
    )
    d.add_argument(
        "--consumer-share",
        type=_number(float, 0, 1, low_open=True, hint="pass a share of the producers' rate, e.g. 0.1"),
        default=0.1,
        help="the slow consumer's rate while the producers run, as a share of theirs",
    )
    d.add_argument(
        "--interval",
        type=_number(float, 0, 3600, low_open=True, hint="pass the sweep interval in seconds, e.g. 5"),
        default=5.0,
        help="sweep interval in seconds (the sweeper's default is 5; --quick: 1)",
    )
    d.add_argument("--seed", type=_number(int, 0, hint="pass a non-negative integer"), default=1, help="workload seed")
    d.add_argument("--out", default="sweepq-demo", help="directory for demo.png and demo.json")
    d.add_argument("--no-compare", action="store_true", help="skip the run without sweeping")
    d.set_defaults(func=_demo)

    from sweepq.bench.suite import SCENARIOS

    b = sub.add_parser(
        "bench",
        help="benchmarks against the queues users pick instead, as ratios to baselines in the same run",
        description="Run benchmark scenarios. Figures are ratios against a baseline measured in the same "
        "run (interleaved rounds, best round each), because machines are shared and noisy. Prints a "
        "Markdown table (or JSON with --json); --out writes both to a directory. Scenarios: " + ", ".join(SCENARIOS),
    )
    b.add_argument("what", nargs="?", default="all", choices=[*SCENARIOS, "all"], help="the scenario to run")
    b.add_argument("--quick", action="store_true", help="CI-sized runs of every scenario (figures are noisier)")
    b.add_argument("--messages", type=pos_int, default=30_000, help="messages per round (throughput, batch)")
    b.add_argument("--size", type=pos_int, default=1024, help="payload bytes (throughput, batch, persistent)")
    b.add_argument("--rounds", type=pos_int, default=15, help="interleaved rounds, best kept")
    b.add_argument("--batch", type=pos_int, default=100, help="messages per put_many / get_many")
    b.add_argument("--persistent-messages", type=pos_int, default=2_000, help="messages per round (persistent)")
    b.add_argument("--memory-messages", type=pos_int, default=1_000_000, help="messages (memory, in memory)")
    b.add_argument("--memory-payload", type=pos_int, default=100, help="payload bytes (memory)")
    b.add_argument(
        "--sweep-messages",
        type=_number(int, 1000, hint="pass at least 1000 messages"),
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
        type=_number(float, 0, hint="pass 0 to skip, or millions of events"),
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
    b.add_argument("--durable-dir", default=None, help="directory on the disk to measure (durable; default: TMPDIR)")
    b.add_argument("--json", action="store_true", help="print the figures as JSON instead of the table")
    b.add_argument("--out", default=None, help="directory to write bench.json and bench.md to")
    b.set_defaults(func=_bench)

    register_replay_commands(sub)  # trace, replay, pipeline: cli/replay.py
    register_data_commands(sub, _number)  # define, put, get, browse: cli/data.py
    register_serve_commands(sub, _number)  # serve, status: cli/serve.py

    i = sub.add_parser(
        "inspect",
        help="show what a data directory holds",
        description="Open a sweepq data directory read-only and print its chains, blobs,\n"
        "dictionaries and the statistics its queue manager left at close.",
        epilog="examples:\n  sweepq inspect --data-dir ./queues\n  sweepq inspect ./queues --json",
        formatter_class=_Formatter,
    )
    i.add_argument("path", nargs="?", help="the data directory (QueueManager.open(path)), or give --data-dir")
    i.add_argument("--data-dir", metavar="DIR", help="the data directory, as for define, put, get and browse")
    i.add_argument("--json", action="store_true", help="print as JSON")
    i.add_argument("--server", metavar="URL", help="instead: a running server's queues and connections (sweepq status)")
    i.set_defaults(func=_inspect)
    register_crash_command(sub)  # crashtest: bench/crash.py
    register_crash_server_command(sub)  # crashtest-server: bench/crash_server.py
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pipeline"]:  # its own parser (and --help) lives with the pipeline
        return _pipeline(argparse.Namespace(rest=argv[1:]))
    parser = build_parser()
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
        print("sweepq: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
