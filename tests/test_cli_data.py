"""``sweepq define / put / get / browse / inspect --data-dir`` as a user runs them: each call is
the real command in a subprocess, on a data directory under tmp_path, so that what one command
leaves is what the next one finds (queue definitions and persistent messages, nothing else).

Each subprocess costs most of a second of imports: each test batches its assertions per call.
The tests "across processes" need durable data directories (issue 10); the first of them
also needs browse cursors (issue 9).
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys

import pytest

from sweepq.cli import build_parser

MINE = ("define", "put", "get", "browse")


def _sweepq(*args, stdin: bytes | None = None, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sweepq.cli", *map(str, args)],
        input=stdin if stdin is not None else b"",
        stdout=stdout,
        stderr=subprocess.PIPE,
        timeout=120,
    )


def _ok(out: subprocess.CompletedProcess) -> tuple[str, str]:
    """stdout and stderr of a call that must succeed."""
    err = out.stderr.decode()
    assert out.returncode == 0 and "Traceback" not in err, (out.returncode, err)
    return (out.stdout or b"").decode(errors="replace"), err


def _fails(out: subprocess.CompletedProcess, code: int) -> str:
    """The one line a failed call printed."""
    err = out.stderr.decode()
    assert out.returncode == code and "Traceback" not in err, (out.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _attributes(stdout: str) -> dict[str, str]:
    """`sweepq define`'s attribute lines: python name -> value."""
    rows = [line.split() for line in stdout.splitlines()[1:]]
    return {r[0]: r[-1] for r in rows}


def _json_lines(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# -- help and usage errors ------------------------------------------------------------------


def _examples(text: str, command: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip().startswith(f"sweepq {command} ")]


def test_help_shows_examples_with_a_data_directory():
    out, _ = _ok(_sweepq("put", "--help"))  # one as the user sees it; the rest from the same parsers
    assert out.startswith("usage: sweepq put") and "examples:" in out and "--data-dir DIR" in out
    assert len(_examples(out, "put")) >= 3 and "--syncpoint < " in out
    parsers = _subparsers()
    for command in [*MINE, "inspect"]:
        text = parsers[command].format_help()
        examples = _examples(text, command)
        assert examples and (all if command in MINE else any)("--data-dir" in e for e in examples), text
        for action in parsers[command]._actions:
            assert action.help, f"{command} {action.option_strings or action.dest} has no help text"
    top = build_parser().format_help()
    assert all(f"    {command} " in top for command in MINE)  # listed by `sweepq --help`


BAD = [
    (["put", "Q", "x"], "the following arguments are required: --data-dir", "--help"),
    (["get", "Q", "--data-dir", "{file}"], "argument --data-dir: {file} is not a directory", "pass a data directory"),
    (["put", "Q", "x", "--data-dir", "{missing}"], "argument --data-dir: {missing} does not exist", "sweepq define"),
    (["browse", "Q", "--data-dir", "{empty}"], "{empty} holds no queues yet", "sweepq define QUEUE --data-dir"),
    (["define", "Q", "--data-dir", "{missing}/q"], "argument --data-dir: {missing} does not exist", "create it"),
    (["put", "Q", "x", "--data-dir", "{empty}", "--priority", "10"], "argument --priority", "pass a priority from"),
    (["get", "Q", "--data-dir", "{empty}", "--wait", "nan"], "argument --wait", "pass seconds"),
    (["define", "Q", "--data-dir", "{empty}", "--fifo", "--priority-sequence"], "not allowed with", "--help"),
    (["put", "Q", "--data-dir", "{empty}", "--correl-id", "x" * 25], "argument --correl-id", "at most 24 bytes"),
    (["browse", "no spaces", "--data-dir", "{empty}"], "argument QUEUE: 'no spaces' is not a queue name", "pass 1"),
    (["inspect", "{empty}", "--data-dir", "{file}"], "differ; give one of them", "pass a data directory"),
]


@pytest.mark.parametrize(("args", "names", "advice"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_a_usage_error_is_one_line_and_exit_2(tmp_path, args, names, advice):
    paths = {"file": tmp_path / "a-file", "missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    paths["file"].write_text("x")
    paths["empty"].mkdir()
    line = _fails(_sweepq(*(a.format(**paths) for a in args)), 2)
    assert names.format(**paths) in line and advice in line, line
    assert not paths["missing"].exists() and not os.listdir(paths["empty"])  # nothing created


# -- what works on a directory whatever survives a process ------------------------------------


def test_define_prints_the_attributes_an_unknown_queue_is_2085_and_inspect_takes_either_form(tmp_path):
    d = tmp_path / "q"
    out, _ = _ok(_sweepq("define", "ORDERS", "--data-dir", d, "--fifo", "--default-priority", "3", "--persistent"))
    attrs = _attributes(out)
    assert out.startswith(f"defined queue ORDERS in {d}")
    assert attrs["delivery_sequence"] == "FIFO" and attrs["default_priority"] == "3"
    assert attrs["default_persistence"] == "PERSISTENT" and attrs["max_depth"] == "999999999"
    assert attrs["current_depth"] == "0"
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700  # created private to the user
    for command in (["put", "NOPE", "x"], ["get", "NOPE"], ["browse", "NOPE"]):
        line = _fails(_sweepq(*command, "--data-dir", d), 1)
        assert "MQRC_UNKNOWN_OBJECT_NAME (2085)" in line and f"sweepq define NOPE --data-dir {d}" in line, line
    files = {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in d.iterdir()}
    by_option, _ = _ok(_sweepq("inspect", "--data-dir", d))
    by_position, _ = _ok(_sweepq("inspect", d))
    assert {f.name: (f.stat().st_size, f.stat().st_mtime_ns) for f in d.iterdir()} == files  # read-only
    assert by_option == by_position and f"sweepq store at {d}" in by_option
    assert "queue ORDERS: 0 persistent messages" in by_option and "MSGDLVSQ(FIFO) DEFPRTY(3)" in by_option


def test_a_directory_that_is_not_a_store_is_refused(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "notes.txt").write_text("mine")
    line = _fails(_sweepq("get", "ORDERS", "--data-dir", d), 1)
    assert "not a sweepq store" in line, line
    assert sorted(os.listdir(d)) == ["notes.txt"]


# -- across processes: these need the durable data directory (issue 10, sections 1-4) --------


def test_put_browse_get_across_processes(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "ORDERS", "--data-dir", d, "--persistent"))
    out, _ = _ok(_sweepq("put", "ORDERS", "one", "two", "--data-dir", d, "-v"))
    ids = out.splitlines()[:2]
    assert all(len(i) == 48 for i in ids) and out.splitlines()[2] == "put 2 messages on ORDERS (2 persistent)"
    out, _ = _ok(_sweepq("put", "ORDERS", "--data-dir", d, stdin=b"three\nfour\r\n\xff\x00bin\n\nlast"))
    assert out.strip() == "put 5 messages on ORDERS (5 persistent)"  # the empty line is a message too
    out, err = _ok(_sweepq("put", "ORDERS", "--data-dir", d, "--not-persistent", "fleeting"))
    assert "(0 persistent)" in out and "1 message not persistent: gone" in err

    out, err = _ok(_sweepq("browse", "ORDERS", "--data-dir", d))
    blocks = out.split("message ")[1:]
    assert [b.split()[0] for b in blocks] == [str(n) for n in range(1, 8)], out
    assert f"MsgId        : X'{ids[0].upper()}'" in blocks[0] and f"X'{ids[1].upper()}'" in blocks[1]
    assert "Persistence  : 1 (PERSISTENT)" in blocks[0] and "Priority     : 0" in blocks[0]
    assert "00000000:  6F6E 65" in blocks[0] and "'one             '" in blocks[0]
    assert "00000000:  FF00 6269 6E" in blocks[4] and "'..bin           '" in blocks[4]
    assert "length       : 0 bytes" in blocks[5] and "fleeting" not in out
    assert "browsed 7 messages; no more messages" in err
    out, err = _ok(_sweepq("browse", "ORDERS", "--data-dir", d, "--count", "2", "--json"))
    assert [m["data"] for m in _json_lines(out)] == ["one", "two"] and "no more messages" not in err

    out, err = _ok(_sweepq("get", "ORDERS", "--data-dir", d, "--count", "1"))
    assert out == "one\n" and "got 1 message" in err and "no more messages" not in err
    got = _sweepq("get", "ORDERS", "--data-dir", d, "--json")
    out, err = _ok(got)
    msgs = _json_lines(out)
    assert [m["data"] for m in msgs] == ["two", "three", "four", None, "", "last"]
    assert msgs[0]["msg_id"] == ids[1] and msgs[3]["data_hex"] == "ff0062696e"
    assert {m["persistence"] for m in msgs} == {"PERSISTENT"} and "no more messages" in err
    out, err = _ok(_sweepq("get", "ORDERS", "--data-dir", d))
    assert out == "" and "got 0 messages; no more messages" in err


def test_priority_persistence_and_correl_id_across_processes(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "JOBS", "--data-dir", d))  # not persistent by default, as in MQ
    _ok(_sweepq("put", "JOBS", "low", "--data-dir", d, "--persistent", "--priority", "1"))
    out, err = _ok(_sweepq("put", "JOBS", "lost", "--data-dir", d, "--priority", "9"))
    assert "(0 persistent)" in out and "not persistent" in err
    _ok(_sweepq("put", "JOBS", "urgent", "--data-dir", d, "--persistent", "--priority", "9", "--correl-id-hex", "0a0b"))
    _ok(_sweepq("put", "JOBS", "mid", "--data-dir", d, "--persistent", "--priority", "5", "--correl-id", "order-42"))
    out, _ = _ok(_sweepq("inspect", "--data-dir", d))
    assert "queue JOBS: 3 persistent messages" in out  # "lost" was not persistent
    out, err = _ok(_sweepq("get", "JOBS", "--data-dir", d, "--correl-id", "order-42", "--json"))
    (mid,) = _json_lines(out)
    assert mid["data"] == "mid" and mid["priority"] == 5
    assert mid["correl_id"] == b"order-42".hex() + "00" * 16 and "no more messages" in err
    out, _ = _ok(_sweepq("get", "JOBS", "--data-dir", d, "--json"))
    msgs = _json_lines(out)
    assert [(m["data"], m["priority"]) for m in msgs] == [("urgent", 9), ("low", 1)]
    assert msgs[0]["correl_id"] == "0a0b" + "00" * 22


def test_syncpoint_all_or_nothing_a_full_queue_and_a_get_that_cannot_write(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "SMALL", "--data-dir", d, "--max-depth", "3", "--persistent"))
    line = _fails(_sweepq("put", "SMALL", "a", "b", "c", "d", "--data-dir", d, "--syncpoint"), 1)
    assert "MQRC_Q_FULL (2053)" in line and "nothing was put" in line, line
    line = _fails(_sweepq("put", "SMALL", "a", "b", "c", "d", "--data-dir", d), 1)
    assert "MQRC_Q_FULL (2053)" in line and "put before it: 3 messages" in line, line
    r, w = os.pipe()
    os.close(r)  # nobody reads: writing the first message fails (EPIPE), so it must stay on the queue
    try:
        unread = _sweepq("get", "SMALL", "--data-dir", d, stdout=w)
    finally:
        os.close(w)
    assert "Traceback" not in unread.stderr.decode()
    out, _ = _ok(_sweepq("get", "SMALL", "--data-dir", d))
    assert out.splitlines() == ["a", "b", "c"]


def test_define_replace_resets_what_is_not_given_and_keeps_the_messages(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "R", "--data-dir", d, "--fifo", "--max-depth", "5", "--persistent"))
    _ok(_sweepq("put", "R", "kept", "--data-dir", d))
    line = _fails(_sweepq("define", "R", "--data-dir", d), 1)
    assert "MQRC_OBJECT_ALREADY_EXISTS (2100)" in line and "--replace" in line
    out, _ = _ok(_sweepq("define", "R", "--data-dir", d, "--replace", "--default-priority", "4"))
    attrs = _attributes(out)
    assert out.startswith("replaced the definition of queue R")
    assert attrs["delivery_sequence"] == "PRIORITY" and attrs["max_depth"] == "999999999"
    assert attrs["default_priority"] == "4" and attrs["default_persistence"] == "NOT_PERSISTENT"
    assert attrs["current_depth"] == "1"


def test_get_waits_for_a_put_from_another_process(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "W", "--data-dir", d, "--persistent"))
    getter = subprocess.Popen(
        [sys.executable, "-m", "sweepq.cli", "get", "W", "--data-dir", str(d), "--wait", "60", "--count", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        waiting = getter.stderr.readline().decode()  # it found the queue empty and waits
        assert "waiting up to 60 s for a message on W" in waiting, waiting
        _ok(_sweepq("put", "W", "hello", "--data-dir", d))
        out, err = getter.communicate(timeout=60)
    finally:
        getter.kill()
    assert getter.returncode == 0 and out == b"hello\n", err


def test_browse_shows_what_an_application_put(tmp_path):
    from sweepq.engine import MD, OO, Persistence, QueueManager, SweeperSettings

    d = tmp_path / "q"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm, qm.connect() as conn:
        qm.define_queue("APP", default_persistence=Persistence.PERSISTENT)
        props = {"colour": "red", "raw": b"\x01\x02"}
        conn.open("APP", OO.OUTPUT).put(b"hi", MD(priority=4, correl_id=b"c1", properties=props))
    out, err = _ok(_sweepq("browse", "APP", "--data-dir", d))
    assert "Priority     : 4" in out and "CorrelId     : X'6331" in out
    assert "Property     : colour = 'red'" in out and "Property     : raw = X'0102'" in out
    assert "00000000:  6869" in out and "browsed 1 message; no more messages" in err


def test_a_damaged_directory_is_refused_and_repair_recovers_the_rest(tmp_path):
    """A truncated table file: the command says to pass --repair; with it, what the other
    files hold comes back and the damage is reported as a warning."""
    import os

    from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings

    d = tmp_path / "q"
    with QueueManager.open(d, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os")) as qm:
        qm.define_queue("BIG", default_persistence=Persistence.PERSISTENT)
        qm.define_queue("KEEP", default_persistence=Persistence.PERSISTENT)
        h = qm.connect().open("BIG", OO.OUTPUT)
        for i in range(500):
            h.put(b"b%03d" % i)
        qm._storage.store().flush()
        qm.connect().open("KEEP", OO.OUTPUT).put(b"kept")
    tables = sorted((f for f in os.listdir(d) if f.endswith(".sst")), key=lambda f: os.path.getsize(d / f))
    data = (d / tables[-1]).read_bytes()
    (d / tables[-1]).write_bytes(data[: len(data) // 2])
    line = _fails(_sweepq("get", "KEEP", "--data-dir", d), 1)
    assert "--repair" in line
    out, err = _ok(_sweepq("get", "KEEP", "--data-dir", d, "--repair"))
    assert out.splitlines() == ["kept"] and "lost/" in err


def test_syncpoint_puts_more_than_mq_default_maxumsgs_all_or_none(tmp_path):
    """MQ's default MAXUMSGS (10,000) once stopped `put --syncpoint` at the 10,001st line."""
    d = tmp_path / "q"
    _ok(_sweepq("define", "BIG", "--data-dir", d, "--persistent"))
    lines = b"".join(b"line %d\n" % i for i in range(10_050))
    out, _ = _ok(_sweepq("put", "BIG", "--data-dir", d, "--syncpoint", stdin=lines))
    assert out.strip() == "put 10,050 messages on BIG (10,050 persistent)"
    out, _ = _ok(_sweepq("inspect", "--data-dir", d))
    assert "queue BIG: 10,050 persistent messages" in out


def test_commit_every_keeps_the_committed_units_when_a_later_put_fails(tmp_path):
    d = tmp_path / "q"
    _ok(_sweepq("define", "SMALL", "--data-dir", d, "--max-depth", "5", "--persistent"))
    out, _ = _ok(_sweepq("put", "SMALL", "a", "b", "--data-dir", d, "--commit-every", "1"))
    assert out.strip() == "put 2 messages on SMALL in 2 units of work (2 persistent)"
    line = _fails(_sweepq("put", "SMALL", "--data-dir", d, "--commit-every", "2", stdin=b"c\nd\ne\nf\n"), 1)
    assert "MQRC_Q_FULL (2053)" in line, line
    stay = "2 messages stay, committed in 1 unit of work; the unit of work (1 message put before it) was backed out"
    assert stay in line, line
    out, _ = _ok(_sweepq("get", "SMALL", "--data-dir", d))
    assert out.splitlines() == ["a", "b", "c", "d"]
    line = _fails(_sweepq("put", "SMALL", "x", "--data-dir", d, "--commit-every", "0"), 2)
    assert "argument --commit-every" in line and "pass how many messages per unit of work" in line
    line = _fails(_sweepq("put", "SMALL", "x", "--data-dir", d, "--commit-every", "2", "--syncpoint"), 2)
    assert "not allowed with" in line


def test_a_long_put_shows_progress_on_a_terminal_only():
    import io

    from sweepq.cli.data import _Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown, hidden = Terminal(), io.StringIO()
    for stream in (shown, hidden):
        p = _Progress("sweepq put", stream, every=0.0)
        p.show(1_500, 1_000)
        p.show(2_000, None)
        p.done()
    assert shown.getvalue() == (
        "\rsweepq put: 1,500 messages put (1,000 committed)...\rsweepq put: 2,000 messages put...\n"
    )
    assert hidden.getvalue() == ""  # a pipe or a file gets only the final line, on stdout


NAMES = ["Q", "a.b_c/d%e", "x" * 48, "x" * 49, "", "no spaces", "Ünïcode", "q-1", "ok.1"]


@pytest.mark.parametrize("name", NAMES)
def test_a_queue_name_is_what_the_engine_says_it_is(name):
    """The command line asks the engine's own rule (sweepq.engine.checks.check_name)."""
    from sweepq.cli.args import queue_name
    from sweepq.engine import MQError
    from sweepq.engine.checks import check_name

    try:
        check_name(name)
        engine_ok = True
    except MQError:
        engine_ok = False
    try:
        queue_name(name)
        cli_ok = True
    except argparse.ArgumentTypeError as e:
        cli_ok = False
        assert f"{name!r} is not a queue name; pass 1..48 characters" in str(e)
    assert cli_ok == engine_ok


@pytest.mark.parametrize("syncpoint", [False, True], ids=["no syncpoint", "commit every 100"])
def test_ctrl_c_of_put_says_exactly_what_it_stored(tmp_path, syncpoint):
    """Ctrl-C in the middle of a put from a pipe: exit 130 and one line with the final count,
    which is what the queue holds (the progress line lags: 1,263 shown, 1,271 stored before)."""
    import signal

    from sweepq.engine import QueueManager, SweeperSettings

    d = tmp_path / "q"
    _ok(_sweepq("define", "ORDERS", "--data-dir", d, "--persistent"))
    extra = ["--commit-every", "100"] if syncpoint else []
    cmd = [sys.executable, "-m", "sweepq", "put", "ORDERS", "--data-dir", str(d), "-v", *extra]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        proc.stdin.write(b"m\n" * 5000)
        proc.stdin.flush()
        for _ in range(250):  # -v: a line for each message put; the rest of the input is still coming
            assert proc.stdout.readline()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    lines = err.decode().strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1, err
    with QueueManager.open(d, sweeping=SweeperSettings(run=False)) as qm:
        depth = qm.inquire_queue("ORDERS").current_depth
    if syncpoint:
        assert f"sweepq put: interrupted: {depth:,} messages stay, committed in" in lines[0], (lines, depth)
    else:
        assert lines[0] == f"sweepq put: interrupted: {depth:,} messages put on ORDERS ({depth:,} persistent)"
