"""docs/cli.md against the command line, both ways (issues 24 and 26): every command and
every option of its parser appears in an example on that page, every option an example uses
is one its command has, and every example runs as written, in order, in an empty directory
(a served queue manager started by the page's own `sweepq serve ... &` lines), ending as the
page shows: exit 0, or the one error line it prints."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from sweepq.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "cli.md"
NESTED = ("trace", "channel")  # commands whose first argument is an action with a parser of its own


@dataclass
class Example:
    line: int
    command: str
    output: list[str] = field(default_factory=list)

    @property
    def argv(self) -> list[str]:
        """The sweepq part of the shell line: its words after 'sweepq', up to a pipe or redirection."""
        words = shlex.split(self.command, comments=True)
        start = words.index("sweepq") + 1
        out = []
        for w in words[start:]:
            if w in ("|", ">", "<", "&", ";", "&&"):
                break
            out.append(w)
        return out

    @property
    def path(self) -> tuple[str, ...]:
        argv = self.argv
        if not argv or argv[0].startswith("-"):
            return ()
        if argv[0] in NESTED and len(argv) > 1:
            return (argv[0], argv[1])
        return (argv[0],)

    @property
    def options(self) -> set[str]:
        return {a.split("=")[0] for a in self.argv if a.startswith("-")}


def examples() -> list[Example]:
    """The `$ ` lines of the page's console blocks, with the lines they print."""
    out: list[Example] = []
    in_block = False
    for n, line in enumerate(DOC.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block = line.strip() == "```console"
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            out.append(Example(n, line[2:]))
        elif out:
            out[-1].output.append(line)
    return out


def leaves() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every command's parser, by its path (("channel", "define"), ...)."""
    from sweepq.pipeline.job import build_parser as pipeline_parser

    out: dict[tuple[str, ...], argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, path: tuple[str, ...]) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and path:
            out[path] = p
        for s in subs:
            for name, sp in s.choices.items():
                walk(sp, (*path, name))

    walk(build_parser(), ())
    out[("pipeline",)] = pipeline_parser()  # `sweepq pipeline` hands its arguments to the Spark job's parser
    return out


def options_of(p: argparse.ArgumentParser) -> set[str]:
    return {o for a in p._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


def server_group(p: argparse.ArgumentParser) -> set[str]:
    """The options of cli/serve.py add_server_options (one group, the same on every command
    that reaches a server): documented once, in the page's "Reaching a server" table."""
    group = {o for g in p._action_groups if g.title == SERVER_GROUP for a in g._group_actions for o in a.option_strings}
    return group | ({"--server"} if group else set())


SERVER_GROUP = "reaching a server (--server)"


def test_every_command_and_option_is_on_the_page_and_every_option_there_exists():
    docs = examples()
    parsers = leaves()
    used: dict[tuple[str, ...], set[str]] = {}
    for e in docs:
        if e.path:
            assert e.path in parsers, f"docs/cli.md:{e.line}: `sweepq {' '.join(e.path)}` is no command"
            used.setdefault(e.path, set()).update(o for o in e.options if o.startswith("--") and o != "--help")
    table = DOC.read_text().split("## Reaching a server", 1)[1].split("\n## ", 1)[0]
    problems = []
    for path, parser in sorted(parsers.items()):
        group = server_group(parser)
        missing = sorted(o for o in group if f"`{o}" not in table)
        if missing:
            problems.append(f"sweepq {' '.join(path)}: server options not in the table: {missing}")
        if group and "--server" not in used.get(path, set()):
            problems.append(f"sweepq {' '.join(path)}: no example reaches a server")
        have = options_of(parser) - group
        shown = used.get(path, set()) - group
        if not shown and path not in used:
            problems.append(f"sweepq {' '.join(path)}: no example")
        if have - shown:
            problems.append(f"sweepq {' '.join(path)}: options in no example: {sorted(have - shown)}")
        if shown - have:
            problems.append(f"sweepq {' '.join(path)}: examples use options it does not have: {sorted(shown - have)}")
    every = {o for e in docs for o in e.options}
    groups = set().union(*(server_group(p) for p in parsers.values()))
    assert groups <= every, f"server options in no example at all: {sorted(groups - every)}"
    top = {o for e in docs if not e.path for o in e.options}
    assert top >= options_of(build_parser()), "sweepq --version is on the page"
    assert not problems, "docs/cli.md and the parsers differ:\n" + "\n".join(problems)


# -- running the page ---------------------------------------------------------------------------


# What differs from run to run in a line the page shows: an elision (...), a message or
# correlation id in hex, a time stamp. Everything else is printed as shown.
_VARIES = re.compile(r"(\.\.\.|[0-9A-Fa-f]{16,}|\d{4}-\d\d-\d\dT[\d:.]+Z)")


def not_printed(shown: list[str], printed: str) -> str | None:
    """The first line of ``shown`` (what docs/cli.md prints under a command) that is not among
    the ``printed`` lines in the same order, or None. Lines match whole, but for what
    ``_VARIES`` names; a line of "..." alone stands for lines left out."""
    lines = [line.strip() for line in printed.splitlines()]
    at = 0
    for want in shown:
        want = want.strip()
        if want in ("", "..."):
            continue
        parts = _VARIES.split(want)
        pattern = re.compile(
            "".join(".*" if p == "..." else "[0-9A-Za-z:.T-]+" if _VARIES.fullmatch(p) else re.escape(p) for p in parts)
        )
        found = next((i for i in range(at, len(lines)) if pattern.fullmatch(lines[i])), None)
        if found is None:
            return want
        at = found + 1
    return None


def test_a_shown_output_is_matched_line_by_line_in_order():
    printed = "message 1 on ORDERS\n  MsgId : X'53575120AB'\n  PutDateTime : 2026-12-02T03:01:17.822Z\ndone\n"
    assert not_printed(["message 1 on ORDERS", "  PutDateTime : 2026-11-24T21:01:17.822Z", "..."], printed) is None
    assert not_printed(["  MsgId : X'5357512074479211FBB6'"], "  MsgId : X'0011223344556677AA'") is None
    assert not_printed(['{"queue": "Q", ..., "data": "x"}'], '{"queue": "Q", "n": 1, "data": "x"}') is None
    assert not_printed(["done", "message 1 on ORDERS"], printed) == "message 1 on ORDERS"  # out of order
    assert not_printed(["put 2 messages on Q"], "put 3 messages on Q") == "put 2 messages on Q"
    assert not_printed(["got 3 messages"], "sweepq get: got 3 messages") == "got 3 messages"  # whole lines


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certificates(where: Path) -> None:
    trustme = pytest.importorskip("trustme")  # the [dev] extra installs it
    ca = trustme.CA()
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(where / "server.pem"))
    ca.cert_pem.write_to_path(str(where / "ca.pem"))


@pytest.mark.long  # 102 commands in order, demos, benches and a Spark job among them: minutes
@pytest.mark.timeout(1800)
def test_every_example_runs_as_written(tmp_path):
    _certificates(tmp_path)
    text = DOC.read_text()
    ports = {p: str(_free_port()) for p in sorted(set(re.findall(r"127\.0\.0\.1:(\d{4})\b", text)))}
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("SWEEPQ_TOKEN", None)
    env.pop("SWEEPQ_ADMIN_TOKEN", None)
    background: list[tuple[Example, subprocess.Popen, Path]] = []
    timings: list[tuple[float, int]] = []
    try:
        for e in examples():
            cmd = re.sub(r"127\.0\.0\.1:(\d{4})\b", lambda m: "127.0.0.1:" + ports[m.group(1)], e.command)
            where = f"docs/cli.md:{e.line}: {e.command}"
            if cmd.rstrip().endswith("&"):
                log = tmp_path / f"background-{e.line}.log"
                with open(log, "wb") as f:
                    proc = subprocess.Popen(
                        ["bash", "-c", "exec " + cmd.rstrip()[:-1]], cwd=tmp_path, env=env, stdout=f, stderr=f
                    )
                background.append((e, proc, log))
                deadline = time.monotonic() + 60
                wanted = ["listening on", *(["console on"] if "--console" in cmd else [])]
                while not all(w in log.read_text() for w in wanted):
                    assert proc.poll() is None, f"{where}: exited {proc.returncode}: {log.read_text()}"
                    assert time.monotonic() < deadline, f"{where}: not listening after 60 s"
                    time.sleep(0.05)
                continue
            t0 = time.monotonic()
            run = subprocess.run(
                ["bash", "-c", cmd], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
            )
            timings.append((time.monotonic() - t0, e.line))
            assert "Traceback" not in run.stderr, f"{where}:\n{run.stderr}"
            errors = [line for line in e.output if ": error: " in line]
            said = re.search(r"# exits (\d+)", e.command)  # a failure the page announces
            if said:
                assert run.returncode == int(said.group(1)), f"{where}: exit {run.returncode}"
            elif errors:
                assert run.returncode in (1, 2), f"{where}: exit {run.returncode}, the page shows an error"
                assert run.stderr.strip() == errors[0], f"{where}: printed {run.stderr.strip()!r}"
            else:
                assert run.returncode == 0, (
                    f"{where}: exit {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
                )
            missing = not_printed(e.output, run.stdout + run.stderr)
            assert missing is None, f"{where}: the page shows {missing!r}; it printed:\n{run.stdout}{run.stderr}"
    finally:
        for e, proc, log in background:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                code = proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = "killed"
            assert code == 0, f"docs/cli.md:{e.line}: sweepq serve ended {code}: {log.read_text()[-2000:]}"
    print("slowest examples:", sorted(timings, reverse=True)[:8])


def _commands_reaching_a_server() -> list[tuple[str, ...]]:
    return sorted(path for path, p in leaves().items() if server_group(p))


@pytest.mark.parametrize("path", _commands_reaching_a_server(), ids=" ".join)
def test_every_command_that_reaches_a_server_takes_every_server_option(path, tmp_path, capsys):
    """The "Reaching a server" table's options, all at once, on each command that has them,
    against a TLS server in this process (an option wins over its file)."""
    import ssl

    from net_env import short_dir

    from sweepq.cli import main
    from sweepq.engine import QueueManager, SweeperSettings

    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(ctx)
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    (tmp_path / "token").write_text("T\n")
    (tmp_path / "admin").write_text("A\n")
    args = {
        ("alter",): ["Q", "--max-depth", "7"],
        ("browse",): ["Q"],
        ("clear",): ["Q"],
        ("define",): ["NEW"],
        ("delete",): ["GONE"],
        ("get",): ["Q"],
        ("put",): ["Q", "hello"],
        ("channel", "define"): ["C2", "--conname", "tcp://127.0.0.1:9", "--xmitq", "XQ"],
        ("channel", "alter"): ["C", "--batch-size", "3"],
        ("channel", "delete"): ["GONE.C"],
        ("channel", "start"): ["C"],
        ("channel", "stop"): ["C"],
        ("channel", "status"): ["C"],
        ("channel", "reset"): ["C", "--seq", "0"],
        ("channel", "resolve"): ["C", "--backout"],
    }.get(path, [])
    with QueueManager(sweeping=SweeperSettings(run=False)) as qm:
        for q in ("Q", "GONE"):
            qm.define_queue(q)
        qm.define_queue("XQ", usage=1)
        qm.define_channel("C", conname="tcp://127.0.0.1:9", xmit_queue="XQ")
        qm.define_channel("GONE.C", conname="tcp://127.0.0.1:9", xmit_queue="XQ")
        server = qm.serve(short_dir() + "/s.sock", tcp="127.0.0.1:0", tls=ctx, token="T", admin_token="A")
        url = f"tls://127.0.0.1:{server.tcp[1]}"
        options = ["--server", url, "--token", "T", "--token-file", str(tmp_path / "token")]
        options += [
            "--admin-token",
            "A",
            "--admin-token-file",
            str(tmp_path / "admin"),
            "--cafile",
            str(tmp_path / "ca.pem"),
        ]
        code = main([*path, *args, *options])
        err = capsys.readouterr().err
    assert "Traceback" not in err
    assert code == 0, err
