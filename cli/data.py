"""The data-directory commands of ``sweepq``, after IBM MQ's runmqsc DEFINE QLOCAL and its
sample programs amqsput, amqsget and amqsbcg: ``define``, ``put``, ``get`` and ``browse``.

Each command opens the data directory ``--data-dir`` with ``QueueManager.open(path,
sweeping=SweeperSettings(run=False))``, does its work and closes it, so the directory holds only what is durable:
queue definitions and committed persistent messages. A non-persistent message put by
``sweepq put`` is gone when the command ends (as in MQ at a restart); the command says so.

Commands on one directory take turns: each holds an exclusive ``flock`` on the directory
itself (nothing is written into it for that) while its queue manager is open, and waits for
it otherwise. ``sweepq get --wait`` opens the directory for each try and closes it between
tries, so that a ``sweepq put`` from another terminal gets in, as with amqsget and amqsput.

Exit codes: 0 done (also when no message was left to get), 1 an MQ call failed (the line
names the reason and its number, e.g. ``MQRC_UNKNOWN_OBJECT_NAME (2085)``), 2 a usage error
(one line naming the argument and what to pass). Never a traceback.

cli/main.py calls :func:`register` with its subparsers; the argument helpers and the queue
name rule (the engine's own) come from cli/args.py.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import fcntl
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from .advice import for_the_command_line
from .args import EXIT_USAGE, number, queue_name, queue_name_rule
from .args import Usage as _Usage
from .serve import add_server_options

EXIT_MQ = 1
_ID_BYTES = 24  # MsgId and CorrelId are fixed 24-byte fields (shorter ones are padded with NULs)
MAX_UNCOMMITTED = 999_999_999  # MQ's largest MAXUMSGS: `put --syncpoint` holds every message until its commit

# The MQ attribute each QueueAttributes field stands for, as `sweepq define` and `sweepq inspect`
# print them.
MQ_NAMES = {
    "delivery_sequence": "MSGDLVSQ",
    "default_priority": "DEFPRTY",
    "default_persistence": "DEFPSIST",
    "max_depth": "MAXDEPTH",
    "max_msg_length": "MAXMSGL",
    "inhibit_get": "GET(DISABLED)",
    "inhibit_put": "PUT(DISABLED)",
    "shareable": "SHARE",
    "default_input": "DEFSOPT",
    "backout_threshold": "BOTHRESH",
    "backout_requeue_q": "BOQNAME",
    "index_type": "INDXTYPE",
    "usage": "USAGE",
    "current_depth": "CURDEPTH",
}


# -- argument types -----------------------------------------------------------------------


def _id_text(text: str) -> bytes:
    data = os.fsencode(text)
    if len(data) > _ID_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is {len(data)} bytes; pass at most {_ID_BYTES} bytes (shorter ones are padded with NULs)"
        )
    return data


def _id_hex(text: str) -> bytes:
    try:
        data = bytes.fromhex(text)
    except ValueError:
        data = None
    if data is None or len(data) > _ID_BYTES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not hex of at most {_ID_BYTES} bytes; pass up to {2 * _ID_BYTES} hex digits, "
            "e.g. 414243 (shorter ids are padded with NULs)"
        )
    return data


# -- the data directory -------------------------------------------------------------------


def _check_data_dir(path: str, create: bool) -> bool:
    """Refuse a data directory that cannot be one, as a usage error; with ``create``, make a
    missing one (private to the user). True when this call created it."""
    if path is None:
        return False  # --server: the server has its own data directory
    hint = f"sweepq define QUEUE --data-dir {path}"
    if os.path.isdir(path):
        if not create:
            try:
                empty = not os.listdir(path)
            except OSError as e:
                raise _Usage(f"argument --data-dir: cannot read {path} ({e.strerror}); pass a data directory") from e
            if empty:
                raise _Usage(f"argument --data-dir: {path} holds no queues yet; define one first: {hint}")
        return False
    if os.path.exists(path):
        raise _Usage(f"argument --data-dir: {path} is not a directory; pass a data directory (a new one is created)")
    if not create:
        raise _Usage(f"argument --data-dir: {path} does not exist; create it with a queue: {hint}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise _Usage(f"argument --data-dir: {parent} does not exist; create it first (the data directory is created)")
    try:
        os.mkdir(path, 0o700)
    except OSError as e:
        raise _Usage(f"argument --data-dir: cannot create {path} ({e.strerror}); pass a writable place") from e
    return True


@contextlib.contextmanager
def _taking_turns(path: str, prog: str) -> Iterator[None]:
    """Hold an exclusive flock on the directory itself while the body runs, waiting for
    another sweepq command on it to finish (said once on stderr)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        said = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not said:
                    print(f"{prog}: waiting for another sweepq command on {path} to finish", file=sys.stderr)
                    said = True
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # releases the lock


@contextlib.contextmanager
def _opened(path: str, prog: str, repair: bool = False, server: argparse.Namespace | None = None, **options):
    """The queue manager of the data directory, closed at the end (uncommitted work backed out).
    ``repair``: a file damaged beyond reading is moved aside and the rest recovered;
    ``options`` go to ``QueueManager.open``. With ``server`` (the arguments of a command
    given --server), a running server's queue manager instead, reached with the arguments'
    tokens and --cafile (cli/serve.py ``remote``)."""
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings

    if server is not None and server.server is not None:
        from .serve import remote

        with remote(server) as qm:
            yield qm
        return
    with _taking_turns(path, prog):
        qm = QueueManager.open(
            path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(repair=repair), **options
        )
        try:
            report = getattr(qm, "recovery", None)
            for what in getattr(report, "damaged", None) or ():  # what the open could not bring back
                print(f"{prog}: warning: {' '.join(str(what).split())}", file=sys.stderr)
            yield qm
        finally:
            qm.close()


def _with_hint(e, args: argparse.Namespace) -> str:
    """The MQError's line, its advice said the command line's way for the reasons a user meets."""
    text = for_the_command_line(str(e), NAME=getattr(args, "name", None) or "NAME")
    if e.reason == 2085:  # UNKNOWN_OBJECT_NAME
        where = f"--data-dir {args.data_dir}" if args.data_dir else f"--server {args.server}"
        how = f"define it with: sweepq define {getattr(args, 'queue', 'QUEUE')} {where}"
        generic = "define it with: sweepq define QUEUE"  # advice.py's form, made exact here
        return text.replace(generic, how) if generic in text else f"{text}; {how}"
    if e.reason == 2100:  # OBJECT_ALREADY_EXISTS
        return f"{text}; pass --replace to replace its definition (its messages stay)"
    if e.reason == 2055:  # Q_NOT_EMPTY
        return text.replace("pass purge=True to discard them", "pass --purge to discard them, or clear it first")
    return text


def _silence_stdout() -> None:
    """After a broken pipe: what is still buffered goes nowhere, not to a traceback at exit."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _run(prog: str, body: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A command whose failures are one line on stderr: exit 2 for usage, 1 for the rest."""

    def run(args: argparse.Namespace) -> int:
        try:
            if args.data_dir is None and args.server is None:
                raise _Usage("the following arguments are required: --data-dir (or --server URL)")
            return body(args)
        except _Usage as e:
            print(f"{prog}: error: {e} (see '{prog} --help')", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:  # `sweepq browse ... | head`: the reader had enough
            _silence_stdout()
            if prog != "sweepq put":
                return 0
            print(
                f"{prog}: error: stdout was closed early (with --syncpoint, nothing was put; with "
                "--commit-every, the units of work committed before it stay)",
                file=sys.stderr,
            )
            return EXIT_MQ
        except Exception as e:  # MQError, StoreError, OSError: one line, never a traceback
            from sweepq.engine import MQError

            if isinstance(e, MQError):
                text = _with_hint(e, args)
            elif isinstance(e, OSError):
                text = f"{e.strerror or e} ({e.filename})" if e.filename else str(e)
            else:
                text = f"{type(e).__name__}: {e}"
            print(f"{prog}: error: {' '.join(text.split())}", file=sys.stderr)
            return EXIT_MQ

    return run


# -- describing a message -----------------------------------------------------------------


def _as_json(queue: str, m) -> dict:
    """A message as one JSON object (get --json, browse --json): the console's description
    (net/console/actions.py), so the two never differ, with the queue's name first."""
    from sweepq.net.console.actions import describe

    return {"queue": queue, **describe(m)}


def hex_dump(data: bytes) -> list[str]:
    """amqsbcg's dump: offset, 16 bytes as 8 groups of 2, and the printable ASCII."""
    lines = []
    for off in range(0, len(data), 16):
        chunk = data[off : off + 16]
        groups = " ".join(chunk[i : i + 2].hex().upper() for i in range(0, len(chunk), 2))
        text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{off:08X}:  {groups:<39}  '{text:<16}'")
    return lines


def _as_text(number: int, queue: str, m) -> str:
    """A message as amqsbcg shows it: the descriptor's fields, then the data's dump."""
    from sweepq.net.console.actions import put_time

    md = m.md
    persistence = "PERSISTENT" if md.persistence == 1 else "NOT_PERSISTENT"
    lines = [
        f"message {number} on {queue}",
        f"  MsgId        : X'{md.msg_id.hex().upper()}'",
        f"  CorrelId     : X'{md.correl_id.hex().upper()}'",
        f"  Priority     : {md.priority}",
        f"  Persistence  : {md.persistence} ({persistence})",
        f"  BackoutCount : {md.backout_count}",
        f"  PutDateTime  : {put_time(md.put_time)}",
        f"  Expiry       : {md.expiry}" + (" (unlimited)" if md.expiry < 0 else " (tenths of a second left)"),
    ]
    if md.msg_flags:
        lines += [
            f"  GroupId      : X'{md.group_id.hex().upper()}'",
            f"  MsgSeqNumber : {md.msg_seq_number}",
            f"  Offset       : {md.offset}",
            f"  MsgFlags     : {md.msg_flags}",
        ]
    for name, value in (getattr(md, "properties", None) or {}).items():
        shown = f"X'{value.hex().upper()}'" if isinstance(value, bytes) else repr(value)
        lines.append(f"  Property     : {name} = {shown}")
    lines.append(f"  length       : {m.data_length} bytes")
    lines += ["  " + line for line in hex_dump(m.data)]
    return "\n".join(lines)


def _plural(n: int, word: str = "message") -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# -- define -------------------------------------------------------------------------------


def _define_remote(args: argparse.Namespace) -> int:
    """DEFINE QREMOTE (a queue-manager alias without --remote-queue): docs/channels.md."""
    attrs = {
        "remote_queue": args.remote_queue or "",
        "remote_qmgr": args.remote_qmgr or "",
        "xmit_queue": args.xmitq or "",
    }
    with _opened(args.data_dir, "sweepq define", args.repair, args) as qm:
        r = qm.define_remote_queue(args.queue, **attrs)
    kind = "remote queue" if attrs["remote_queue"] else "queue-manager alias"
    print(f"defined {kind} {args.queue} in {args.data_dir or args.server}")
    for k, v in r.items() if isinstance(r, dict) else dataclasses.asdict(r).items():
        print(f"  {k}: {v}")
    return 0


def _attributes(args: argparse.Namespace) -> dict:
    """The queue attributes given on the command line (define and alter: _attribute_options)."""
    from sweepq.engine import DeliverySequence, MemoryPolicy, Persistence, Usage

    attrs: dict = {}
    if args.usage is not None:
        attrs["usage"] = Usage.TRANSMISSION if args.usage == "xmitq" else Usage.NORMAL
    if args.sequence is not None:
        attrs["delivery_sequence"] = DeliverySequence[args.sequence]
    if args.default_priority is not None:
        attrs["default_priority"] = args.default_priority
    if args.persistence is not None:
        attrs["default_persistence"] = Persistence(args.persistence)
    if args.max_depth is not None:
        attrs["max_depth"] = args.max_depth
    if args.max_msg_length is not None:
        attrs["max_msg_length"] = args.max_msg_length
    if args.memory_policy is not None:
        attrs["memory_policy"] = MemoryPolicy[args.memory_policy.upper()]
    if args.get is not None:
        attrs["inhibit_get"] = args.get == "disabled"
    if args.put is not None:
        attrs["inhibit_put"] = args.put == "disabled"
    return attrs


def _print_info(verb: str, args: argparse.Namespace, info) -> None:
    """What define and alter print: the queue's attributes with their MQ names."""
    print(f"{verb} queue {args.queue} in {args.data_dir or args.server}")
    values = {**dataclasses.asdict(info.attributes), "current_depth": info.current_depth}
    for field in dataclasses.fields(info.attributes):  # asdict turns enums into plain ints
        values[field.name] = getattr(info.attributes, field.name)
    for name, value in values.items():
        shown = value.name if isinstance(value, enum.Enum) and value.name else value
        print(f"  {name:<20} {MQ_NAMES.get(name, ''):<14} {shown if shown != '' else '-'}")


def _define(args: argparse.Namespace) -> int:
    from sweepq.engine import QueueAttributes

    if args.remote_qmgr is not None or args.xmitq is not None:
        return _define_remote(args)
    attrs = _attributes(args)
    created = _check_data_dir(args.data_dir, create=True)
    try:
        with _opened(args.data_dir, "sweepq define", args.repair, args) as qm:
            if args.replace and args.queue in qm.queue_names():
                # MQ's DEFINE ... REPLACE: the attributes not given take their defaults again.
                info = qm.alter_queue(args.queue, **{**dataclasses.asdict(QueueAttributes()), **attrs})
                verb = "replaced the definition of"
            else:
                info = qm.define_queue(args.queue, **attrs)
                verb = "defined"
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(args.data_dir)  # only when still empty: leave nothing behind a failed first define
        raise
    _print_info(verb, args, info)
    return 0


# -- alter, delete, clear -----------------------------------------------------------------


def _alter(args: argparse.Namespace) -> int:
    """ALTER QLOCAL: the attributes given change, the others stay."""
    attrs = _attributes(args)
    if not attrs:
        raise _Usage("give at least one attribute to change (see the options below)")
    _check_data_dir(args.data_dir, create=False)
    with _opened(args.data_dir, "sweepq alter", args.repair, args) as qm:
        info = qm.alter_queue(args.queue, **attrs)
    _print_info("altered", args, info)
    return 0


def _delete(args: argparse.Namespace) -> int:
    """DELETE QLOCAL [PURGE]."""
    _check_data_dir(args.data_dir, create=False)
    with _opened(args.data_dir, "sweepq delete", args.repair, args) as qm:
        depth = qm.inquire_queue(args.queue).current_depth
        qm.delete_queue(args.queue, purge=args.purge)
    gone = f" and its {_plural(depth)}" if depth else ""
    print(f"deleted queue {args.queue}{gone} from {args.data_dir or args.server}")
    return 0


def _clear(args: argparse.Namespace) -> int:
    """CLEAR QLOCAL: every committed message removed, the definition kept (net/console/actions.py)."""
    from sweepq.net.console.actions import clear

    _check_data_dir(args.data_dir, create=False)
    with _opened(args.data_dir, "sweepq clear", args.repair, args) as qm:
        removed = clear(qm, args.queue)
    print(f"cleared {_plural(removed)} from {args.queue}")
    return 0


# -- put ----------------------------------------------------------------------------------


def _stdin_lines() -> Iterator[bytes]:
    """One message per line of stdin, without its line end, as bytes (any encoding passes)."""
    if sys.stdin.isatty():
        print("sweepq put: type one message per line; Ctrl-D ends", file=sys.stderr)
    for line in sys.stdin.buffer:
        if line.endswith(b"\n"):
            line = line[:-1]
            if line.endswith(b"\r"):
                line = line[:-1]
        yield line


class _Progress:
    """A progress line on stderr while a long put runs: on a terminal only, at most once per
    ``every`` seconds, rewritten in place and ended by :meth:`done`."""

    def __init__(self, prog: str, stream: TextIO | None = None, every: float = 1.0) -> None:
        self.prog = prog
        self.stream = stream or sys.stderr
        self.on = self.stream.isatty()
        self.every = every
        self.next = time.monotonic() + every
        self.shown = False

    def show(self, put: int, committed: int | None) -> None:
        if not self.on or time.monotonic() < self.next:
            return
        self.next = time.monotonic() + self.every
        done = "" if committed is None else f" ({committed:,} committed)"
        self.stream.write(f"\r{self.prog}: {_plural(put)} put{done}...")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()


def _put(args: argparse.Namespace) -> int:
    from sweepq.engine import MD, OO, PMO, MessageSettings, MQError

    _check_data_dir(args.data_dir, create=False)
    md = {
        "priority": -1 if args.priority is None else args.priority,  # -1, 2: as the queue's defaults
        "persistence": 2 if args.persistence is None else args.persistence,
    }
    if args.correl_id is not None:
        md["correl_id"] = args.correl_id
    messages = (os.fsencode(m) for m in args.messages) if args.messages else _stdin_lines()
    every = args.commit_every  # None: one unit of work for all (--syncpoint), or none
    syncpoint = args.syncpoint or every is not None
    put = persistent = committed = units = 0
    progress = _Progress("sweepq put")
    with (
        _opened(
            args.data_dir, "sweepq put", args.repair, args, messages=MessageSettings(max_uncommitted=MAX_UNCOMMITTED)
        ) as qm,
        qm.connect() as conn,
    ):
        handle = conn.open(args.queue, OO.OUTPUT)  # first, so that an unknown queue fails before any input
        options = PMO.SYNCPOINT if syncpoint else PMO.NO_SYNCPOINT
        ctrl_c = _Deferred()
        try:
            with ctrl_c:
                for data in messages:  # Ctrl-C while reading the input: nothing is half done
                    with ctrl_c.deferred():  # a put and its count (and a commit) are one step
                        r = handle.put(data, MD(**md), options)
                        put += 1
                        persistent += r.persistent
                        if every and put - committed == every:
                            conn.commit()
                            committed, units = put, units + 1
                    if args.verbose:
                        print(r.msg_id.hex(), flush=True)
                    progress.show(put, committed if syncpoint else None)
                if syncpoint and put > committed:
                    conn.commit()
                    committed, units = put, units + 1
        except KeyboardInterrupt:
            progress.done()
            if syncpoint:
                conn.backout()
            on = f"{_plural(put)} put on {args.queue} ({persistent:,} persistent)"
            kept = _undone(put, committed, units) if syncpoint else on
            print(f"sweepq put: interrupted: {kept}", file=sys.stderr)
            return 130  # 128 + SIGINT, as every interrupted command (cli/main.py EXIT_INTERRUPTED)
        except MQError as e:
            if syncpoint:
                conn.backout()
                e.text += f"; {_undone(put, committed, units)}"
            else:
                e.text += f"; put before it: {_plural(put)}"
            raise MQError(e.reason, e.text) from None
        finally:
            progress.done()
    chunks = f" in {_plural(units, 'unit')} of work" if every else ""
    print(f"put {_plural(put)} on {args.queue}{chunks} ({persistent:,} persistent)")
    if put > persistent and not args.server:  # on a server they stay until it stops
        print(
            f"sweepq put: note: {_plural(put - persistent)} not persistent: gone now that this command has ended "
            "(non-persistent messages do not survive a restart, as in MQ); pass --persistent, "
            "or define the queue with --persistent",
            file=sys.stderr,
        )
    return 0


class _Deferred:
    """SIGINT (Ctrl-C) as KeyboardInterrupt, except inside a :meth:`deferred` step, which it
    ends first: so an interrupted ``put`` knows exactly what it stored (a put done but not yet
    counted would be a message more than it says). Outside the main thread, signals are left
    as they are."""

    def __init__(self) -> None:
        self.inside = False
        self.asked = False
        self.old = None

    def __enter__(self) -> _Deferred:
        if threading.current_thread() is threading.main_thread():
            self.old = signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc) -> None:
        if self.old is not None:
            signal.signal(signal.SIGINT, self.old)

    def _on_sigint(self, signum, frame) -> None:
        self.asked = True
        if not self.inside:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self.inside = True
        try:
            yield
        finally:
            self.inside = False
        if self.asked:
            raise KeyboardInterrupt


def _undone(put: int, committed: int, units: int) -> str:
    """What a failed put under syncpoint leaves: the committed units of work stay."""
    backed_out = f"the unit of work ({_plural(put - committed)} put before it) was backed out"
    if not committed:
        return f"nothing was put: {backed_out}"
    return f"{_plural(committed)} stay, committed in {_plural(units, 'unit')} of work; {backed_out}"


# -- get ----------------------------------------------------------------------------------


def _write(out, data: bytes) -> None:
    out.write(data)
    out.flush()


def _get(args: argparse.Namespace) -> int:
    from sweepq.engine import GMO, OO, MQError, Reason

    _check_data_dir(args.data_dir, create=False)
    out = sys.stdout.buffer
    got = 0
    deadline = None  # while waiting: when to give up on the next message
    poll = 0.25
    while True:
        started = time.monotonic()
        before = got
        with _opened(args.data_dir, "sweepq get", args.repair, args) as qm, qm.connect() as conn:
            handle = conn.open(args.queue, OO.INPUT_AS_Q_DEF)
            opened = time.monotonic() - started
            while args.count is None or got < args.count:
                try:
                    m = handle.get(GMO.SYNCPOINT, correl_id=args.correl_id)
                except MQError as e:
                    if e.reason == Reason.NO_MSG_AVAILABLE:
                        break
                    raise
                line = json.dumps(_as_json(args.queue, m)).encode() if args.json else m.data
                try:
                    _write(out, line + b"\n")
                except BrokenPipeError:  # the reader is gone: the message stays on the queue
                    conn.backout()
                    _silence_stdout()
                    return 0
                conn.commit()  # removed only once it is written out
                got += 1
        if args.count is not None and got >= args.count:
            print(f"sweepq get: got {_plural(got)}", file=sys.stderr)
            return 0
        now = time.monotonic()
        if args.wait > 0 and (deadline is None or got > before):
            deadline = now + args.wait  # MQ's wait interval: for each next message
            print(f"sweepq get: waiting up to {args.wait:g} s for a message on {args.queue}", file=sys.stderr)
        if deadline is None or now >= deadline:
            print(f"sweepq get: got {_plural(got)}; no more messages", file=sys.stderr)
            return 0
        # Closed between tries, so that another process can put; each try costs an open.
        time.sleep(min(max(poll, 2 * opened), 2.0, deadline - now))


# -- browse -------------------------------------------------------------------------------


def _browse(args: argparse.Namespace) -> int:
    from sweepq.engine import GMO, OO, MQError, Reason

    _check_data_dir(args.data_dir, create=False)
    seen = 0
    with _opened(args.data_dir, "sweepq browse", args.repair, args) as qm, qm.connect() as conn:
        handle = conn.open(args.queue, OO.BROWSE)
        options = GMO.BROWSE_FIRST
        while args.count is None or seen < args.count:
            try:
                m = handle.get(options, correl_id=args.correl_id)
            except MQError as e:
                if e.reason == Reason.NO_MSG_AVAILABLE:
                    break
                raise
            options = GMO.BROWSE_NEXT
            seen += 1
            print(json.dumps(_as_json(args.queue, m)) if args.json else _as_text(seen, args.queue, m), flush=True)
    done = "" if args.count is not None and seen >= args.count else "; no more messages"
    print(f"sweepq browse: browsed {_plural(seen)}{done}", file=sys.stderr)
    return 0


# -- registration -------------------------------------------------------------------------


def _intermixed(parser: argparse.ArgumentParser) -> None:
    """Let ``parser`` take options between its positionals (``put Q --data-dir D a b``): argparse
    otherwise gives QUEUE and an empty MESSAGE list the first positional run, and refuses the
    rest. The subcommand action calls ``parse_known_args``; route it to the intermixed form,
    which calls ``parse_known_args`` itself (the plain one, while it runs)."""
    plain = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        parser.parse_known_args = plain
        try:
            return parser.parse_known_intermixed_args(args, namespace)
        finally:
            parser.parse_known_args = parse_known_args

    parser.parse_known_args = parse_known_args


def _attribute_options(p: argparse.ArgumentParser, alter: bool) -> None:
    """The queue attributes define and alter take (read back by :func:`_attributes`); for
    alter, each default is "unchanged"."""
    default = (lambda _d: "unchanged") if alter else (lambda d: d)
    seq = p.add_mutually_exclusive_group()
    seq.add_argument(
        "--priority-sequence",
        dest="sequence",
        action="store_const",
        const="PRIORITY",
        help=f"deliver by priority, then in order within a priority (MSGDLVSQ(PRIORITY); {default('the default')})",
    )
    seq.add_argument(
        "--fifo",
        dest="sequence",
        action="store_const",
        const="FIFO",
        help="deliver in arrival order whatever the priority (MSGDLVSQ(FIFO))",
    )
    p.add_argument(
        "--default-priority",
        type=number(int, 0, 9, hint="pass a priority from 0 to 9"),
        metavar="N",
        help=f"priority of messages put without one (DEFPRTY; default {default('0')})",
    )
    pers = p.add_mutually_exclusive_group()
    pers.add_argument(
        "--persistent",
        dest="persistence",
        action="store_const",
        const=1,
        help="messages put without a persistence are persistent: they survive the command and a restart "
        f"(DEFPSIST(YES); default: {default('not persistent, as in MQ')})",
    )
    pers.add_argument(
        "--not-persistent",
        dest="persistence",
        action="store_const",
        const=0,
        help="messages put without a persistence are not persistent (DEFPSIST(NO))",
    )
    p.add_argument(
        "--max-depth",
        type=number(int, 0, 999_999_999, hint="pass 0 to 999999999 messages"),
        metavar="N",
        help=f"most messages the queue holds (MAXDEPTH; default {default('999999999')})",
    )
    p.add_argument(
        "--max-msg-length",
        type=number(int, 0, 100 * 1024 * 1024, hint="pass 0 to 104857600 bytes"),
        metavar="N",
        help=f"longest message in bytes (MAXMSGL; default {default('4194304')})",
    )
    p.add_argument(
        "--usage",
        choices=("normal", "xmitq"),
        help="xmitq: a transmission queue, which a sender channel serves (USAGE(XMITQ); docs/channels.md)",
    )
    p.add_argument(
        "--memory-policy",
        choices=("page", "block", "fail"),
        help="what a put does once the queue manager's memory budget is reached: page writes new messages out, "
        f"block waits for room, fail refuses (2071) (default {default('page')})",
    )
    p.add_argument(
        "--get", choices=("enabled", "disabled"), help=f"whether gets are allowed (GET; default {default('enabled')})"
    )
    p.add_argument(
        "--put", choices=("enabled", "disabled"), help=f"whether puts are allowed (PUT; default {default('enabled')})"
    )


def register(sub: argparse._SubParsersAction) -> None:
    """Add define, put, get and browse to the ``sweepq`` subparsers."""

    def command(name: str, summary: str, description: str, examples: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=summary, description=description, epilog="examples:\n" + examples)
        where = p.add_mutually_exclusive_group()  # one of them: _run says so
        where.add_argument(
            "--data-dir",
            metavar="DIR",
            help="the data directory: queue definitions and persistent messages (QueueManager.open(DIR))",
        )
        add_server_options(p, where)  # instead, a running 'sweepq serve' (changes need its admin token)
        p.add_argument(
            "--repair",
            action="store_true",
            help="if a file of the directory is damaged beyond reading (a truncated table file), move it "
            "aside to DIR/lost/ and recover every message the other files hold (QueueManager.open(DIR, "
            "durability=DurabilitySettings(repair=True))); what only that file held is reported and gone",
        )
        return p

    def correl(p: argparse.ArgumentParser, what: str) -> None:
        g = p.add_mutually_exclusive_group()
        g.add_argument("--correl-id", dest="correl_id", type=_id_text, metavar="TEXT", help=f"{what} (UTF-8 text)")
        g.add_argument("--correl-id-hex", dest="correl_id", type=_id_hex, metavar="HEX", help=f"{what} (hex)")

    queue_help = f"the queue's name ({queue_name_rule()})".replace("%", "%%")

    d = command(
        "define",
        "define a local queue in a data directory (MQ's DEFINE QLOCAL)",
        "Define a local queue in the data directory, which is created if it does not exist (its\n"
        "parent must). The definition is durable. Prints the queue's attributes.",
        "  sweepq define ORDERS --data-dir /var/lib/myapp/queues --persistent\n"
        "  sweepq define JOBS --data-dir ./q --fifo --max-depth 10000\n"
        "  sweepq define JOBS --data-dir ./q --replace --default-priority 4",
    )
    d.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    _attribute_options(d, alter=False)
    d.add_argument(
        "--replace",
        action="store_true",
        help="if the queue exists, replace its definition, as MQ's DEFINE ... REPLACE: attributes not "
        "given take their defaults again; its messages stay",
    )
    remote = d.add_argument_group("a remote queue instead (DEFINE QREMOTE, docs/channels.md)")
    remote.add_argument("--remote-qmgr", metavar="QMGR", help="the queue manager that holds the queue (RQMNAME)")
    remote.add_argument(
        "--remote-queue", metavar="QUEUE", help="its name there (RNAME; without it: a queue-manager alias)"
    )
    remote.add_argument("--xmitq", metavar="QUEUE", help="the transmission queue to it (XMITQ; default: resolved)")
    d.set_defaults(func=_run("sweepq define", _define))

    a = command(
        "alter",
        "change a queue's attributes; those not given stay (MQ's ALTER QLOCAL)",
        "Change the attributes given of a local queue; the others keep their values, and its messages\n"
        "stay. Prints the queue's attributes.",
        "  sweepq alter ORDERS --data-dir ./q --max-depth 50000 --memory-policy block\n"
        "  sweepq alter ORDERS --server unix://$PWD/q/sweepq.sock --put disabled",
    )
    a.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    _attribute_options(a, alter=True)
    a.set_defaults(func=_run("sweepq alter", _alter))

    x = command(
        "delete",
        "delete a local queue (MQ's DELETE QLOCAL)",
        "Delete a local queue. As MQ, it is refused while the queue has open handles or uncommitted work,\n"
        "and while it holds messages unless --purge is given (MQRC_Q_NOT_EMPTY, 2055).",
        "  sweepq delete OLD --data-dir ./q\n  sweepq delete OLD --data-dir ./q --purge",
    )
    x.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    x.add_argument("--purge", action="store_true", help="discard the messages it holds (PURGE; default: refuse)")
    x.set_defaults(func=_run("sweepq delete", _delete))

    c = command(
        "clear",
        "remove every message of a queue, keeping the queue (MQ's CLEAR QLOCAL)",
        "Remove every committed message of a local queue, swept ones too; its definition stays. As MQ, it\n"
        "is refused while an application has the queue open for input or output (MQRC_OBJECT_IN_USE, 2042).\n"
        "Messages are removed in units of work of 1000, so an interrupted clear leaves the rest.",
        "  sweepq clear ORDERS --data-dir ./q\n"
        "  sweepq clear ORDERS --server tcp://127.0.0.1:1414 --token-file q/sweepq.token",
    )
    c.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    c.set_defaults(func=_run("sweepq clear", _clear))

    p = command(
        "put",
        "put messages on a queue, from arguments or one per stdin line (IBM MQ's amqsput)",
        "Put messages on a queue: each MESSAGE argument is one message; without any, each line of\n"
        "stdin is one (its line end removed; Ctrl-D ends), put as it is read. Prints how many were\n"
        "put (on a terminal, a progress line every second while it runs). Only persistent messages\n"
        "outlive the command: a queue defined with --persistent makes them so, or pass --persistent.\n"
        "Units of work: --syncpoint puts all of them or none, with no limit on how many;\n"
        "--commit-every N commits every N, so that a huge input is not held in memory.",
        "  sweepq put ORDERS --data-dir ./q 'first order' 'second order'\n"
        "  sweepq put ORDERS --data-dir ./q --persistent --priority 9 urgent\n"
        "  sweepq put ORDERS --data-dir ./q --syncpoint < orders.txt      # all lines or none\n"
        "  sweepq put ORDERS --data-dir ./q --commit-every 1000 < big.txt  # committed 1000 at a time\n"
        "  sweepq put REPLIES --data-dir ./q --correl-id order-42 -v 'done'  # -v: the MsgIds",
    )
    _intermixed(p)  # options may come after the first MESSAGE too
    p.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    p.add_argument("messages", nargs="*", metavar="MESSAGE", help="message data; none: one message per stdin line")
    p.add_argument(
        "--priority",
        type=number(int, 0, 9, hint="pass a priority from 0 to 9"),
        metavar="N",
        help="priority 0 (lowest) to 9 (default: the queue's default priority)",
    )
    pers = p.add_mutually_exclusive_group()
    pers.add_argument(
        "--persistent",
        dest="persistence",
        action="store_const",
        const=1,
        help="persistent: survives this command and a restart (default: as the queue's DEFPSIST)",
    )
    pers.add_argument(
        "--not-persistent",
        dest="persistence",
        action="store_const",
        const=0,
        help="not persistent: gone when this command ends (default: as the queue's DEFPSIST)",
    )
    correl(p, "the messages' CorrelId, padded with NULs to 24 bytes")
    unit = p.add_mutually_exclusive_group()
    unit.add_argument(
        "--syncpoint",
        action="store_true",
        help="put every message in one unit of work, committed at the end: all of them or none, however many "
        "(they are held in memory until the commit; MQ's MAXUMSGS is raised to its largest, 999999999)",
    )
    unit.add_argument(
        "--commit-every",
        type=number(int, 1, MAX_UNCOMMITTED, hint="pass how many messages per unit of work, e.g. 1000"),
        metavar="N",
        help="put in units of work of N messages, each committed once full (and the last at the end): a "
        "failure backs out only the current one and says how many stay (default: none)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print each message's MsgId (hex) as it is put")
    p.set_defaults(func=_run("sweepq put", _put))

    g = command(
        "get",
        "get messages from a queue and print their data, removing them (IBM MQ's amqsget)",
        "Get messages from a queue in delivery order and print each one's data on a line of its\n"
        "own (or a JSON object per line with --json), removing it: each message is removed only\n"
        "once it has been written out. Ends when the queue has no more messages (exit 0, 'no more\n"
        "messages' on stderr) or after --count. --wait waits that long for each next message:\n"
        "the directory is closed between tries, so that 'sweepq put' from elsewhere gets in.",
        "  sweepq get ORDERS --data-dir ./q                    # every message, then 'no more messages'\n"
        "  sweepq get ORDERS --data-dir ./q --count 1 --wait 15\n"
        "  sweepq get REPLIES --data-dir ./q --correl-id order-42 --json",
    )
    g.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    g.add_argument(
        "--count",
        type=number(int, 1, hint="pass how many messages to get, at least 1"),
        metavar="N",
        help="get at most N messages (default: until none is left)",
    )
    g.add_argument(
        "--wait",
        type=number(float, 0, 24 * 3600, hint="pass seconds to wait for each next message, e.g. 15"),
        default=0.0,
        metavar="SECONDS",
        help="wait up to SECONDS for each next message (MQ's wait interval; default 0: no wait)",
    )
    correl(g, "get only messages with this CorrelId")
    g.add_argument("--json", action="store_true", help="print each message as a JSON object on a line")
    g.set_defaults(func=_run("sweepq get", _get))

    b = command(
        "browse",
        "show messages with their descriptors, leaving them on the queue (IBM MQ's amqsbcg)",
        "Browse a queue in delivery order without removing anything: each message's descriptor\n"
        "(MsgId, CorrelId, priority, persistence, backout count, put time) and its data as a hex\n"
        "and text dump, or a JSON object per line with --json.",
        "  sweepq browse ORDERS --data-dir ./q\n  sweepq browse ORDERS --data-dir ./q --count 1 --json",
    )
    b.add_argument("queue", type=queue_name, metavar="QUEUE", help=queue_help)
    b.add_argument(
        "--count",
        type=number(int, 1, hint="pass how many messages to show, at least 1"),
        metavar="N",
        help="show at most N messages (default: all)",
    )
    correl(b, "show only messages with this CorrelId")
    b.add_argument("--json", action="store_true", help="print each message as a JSON object on a line")
    b.set_defaults(func=_run("sweepq browse", _browse))
