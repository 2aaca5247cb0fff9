"""The command line as a user meets it: help, and a one-line error with exit code 2 for every
bad value, never a traceback (each case runs the real command in a subprocess)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from sweepq.cli import build_parser

MINE = ("demo", "bench", "inspect")  # trace, replay and pipeline have their own tests


def _sweepq(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sweepq.cli", *args], capture_output=True, text=True, timeout=120, cwd=cwd
    )


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def test_no_arguments_prints_help():
    out = _sweepq()
    assert out.returncode == 2 and "usage: sweepq" in out.stdout and "commands:" in out.stdout
    assert "Traceback" not in out.stderr


def test_help_lists_each_command_once():
    out = _sweepq("--help")
    assert out.returncode == 0
    commands = out.stdout.split("commands:", 1)[1]
    for name in ("demo", "bench", "trace", "replay", "pipeline", "inspect"):
        listed = [line for line in out.stdout.splitlines() if line.startswith(f"    {name} ")]
        assert len(listed) == 1, (name, commands)
    assert "{demo," not in out.stdout  # no second listing in the usage line


@pytest.mark.parametrize("command", MINE)
def test_every_option_has_help_and_says_its_default(command):
    parser = _subparsers(build_parser())[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command} {action.option_strings or action.dest} has no help text"
        if action.option_strings:
            assert "default" in formatter._get_help_string(action), (command, action.option_strings)
    text = " ".join(parser.format_help().split())
    assert "(default: 600000)" in text or command != "demo"
    assert "(default: 30000)" in text or command != "bench"


def _every_command(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the parser, nested ones too (``trace generate``)."""
    out = []
    for name, sub in _subparsers(parser).items():
        out.append((*path, name))
        out += _every_command(sub, (*path, name))
    return out


COMMANDS = _every_command(build_parser())


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_has_help_that_exits_0(path, capsys):
    from sweepq.cli import main

    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code in (0, None)
    out = capsys.readouterr().out
    assert out.startswith(f"usage: sweepq {' '.join(path)}"), out[:200]
    assert "Traceback" not in out


def test_the_two_ways_to_start_it_show_the_same_help():
    """``python -m sweepq`` (the root __main__.py) and the ``sweepq`` script (pyproject.toml)."""
    script = Path(sys.executable).with_name("sweepq")
    by_module = subprocess.run([sys.executable, "-m", "sweepq", "--help"], capture_output=True, text=True, timeout=60)
    by_script = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=60)
    for out in (by_module, by_script):
        assert out.returncode == 0 and out.stderr == "", out
        assert out.stdout.startswith("usage: sweepq ") and "commands:" in out.stdout
        listed = {line.split()[0] for line in out.stdout.split("COMMAND\n", 1)[1].splitlines() if line[4:5].isalpha()}
        assert listed == {p[0] for p in COMMANDS}
    assert by_module.stdout == by_script.stdout


BAD = [
    (["demo", "--seconds", "-5"], "argument --seconds", "pass how many seconds"),
    (["demo", "--seconds", "inf"], "argument --seconds", "is not a number > 0"),
    (["demo", "--interval", "0"], "argument --interval", "pass the sweep interval"),
    (["demo", "--interval", "nan"], "argument --interval", "pass the sweep interval"),
    (["demo", "--producers", "-1"], "argument --producers", "pass 0 to 256 producer threads"),
    (["demo", "--producers", "many"], "argument --producers", "is not an integer"),
    (["demo", "--queues", "0"], "argument --queues", "pass 1 to 1000 queues"),
    (["demo", "--messages", "-1"], "argument --messages", "pass how many messages"),
    (["demo", "--size", "0"], "argument --size", "pass a payload size"),
    (["demo", "--consumer-share", "2"], "argument --consumer-share", "pass a share"),
    (["demo", "--colour"], "unrecognized arguments: --colour", "--help"),
    (["demo", "--busy", "-1"], "argument --busy", "pass 0 to 64 spinning processes"),
    (["demo", "--busy", "2", "x"], "argument --busy", "is not an integer"),
    (["demo", "--busy"], "argument --busy", "expected at least one argument"),
    # --budget reads a size as serve --memory-budget does (engine/sizes.py): 100MB, 64KiB, bytes
    (["demo", "--budget", "-5"], "argument --budget", "is negative: pass 0 (none) or a size, e.g. 100MB"),
    (["demo", "--budget", "lots"], "argument --budget", "is not a size"),
    (["demo", "--budget", "100"], "argument --budget", "did you mean 100 MB? write '100MB'"),
    (["serve", "--data-dir", "d", "--memory-budget", "-5MB"], "argument --memory-budget", "is negative"),
    (["serve", "--data-dir", "d", "--memory-budget", "1KB"], "argument --memory-budget", "1000 bytes is too small"),
    (["serve", "--data-dir", "d", "--console", "127.0.0.1:99999"], "argument --console", "port 99999 is outside"),
    (["serve", "--data-dir", "d", "--tcp", "localhost"], "argument --tcp", "is not HOST:PORT"),
    (["bench", "--messages", "0"], "argument --messages", "pass an integer >= 1"),
    (["bench", "throughput", "--messages", "0"], "argument --messages", "pass an integer >= 1"),
    (["bench", "--sweep-memory-messages", "0"], "argument --sweep-memory-messages", "pass an integer >= 1"),
    (["bench", "sweep", "--sweep-messages", "10"], "argument --sweep-messages", "pass at least 1000"),
    (["bench", "--rounds", "x"], "argument --rounds", "is not an integer"),
    (["bench", "--backlog-rate", "-3"], "argument --backlog-rate", "pass a number > 0"),
    (["bench", "--pipeline-events-m", "-1"], "argument --pipeline-events-m", "pass 0 to skip"),
    (["bench", "nonsense"], "argument SCENARIO: 'nonsense' is not a scenario", "give some of throughput"),
    (["inspect"], "the following arguments are required: path", "--help"),
    (["inspect", "/nonexistent/sweepq"], "argument path: /nonexistent/sweepq does not exist", "pass a data directory"),
    (["nosuchcommand"], "invalid choice", "choose from"),
]


@pytest.mark.parametrize(("args", "names", "advice"), BAD, ids=[" ".join(a) for a, _, _ in BAD])
def test_a_bad_value_is_one_line_and_exit_2(args, names, advice):
    out = _sweepq(*args)
    assert out.returncode == 2, out
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert names in lines[0] and advice in lines[0], lines[0]


def test_a_size_with_a_unit_is_not_second_guessed():
    """ "1KB" was meant as 1 kB: the floor's error says so without asking whether MB was meant
    (a bare number still gets that question: BAD above)."""
    from sweepq.engine import MQError
    from sweepq.engine.sizes import MIN_BUDGET, parse_size

    with pytest.raises(MQError) as e:
        parse_size("1KB", "memory_budget", MIN_BUDGET)
    assert "too small" in e.value.text and "did you mean" not in e.value.text


@pytest.mark.parametrize("command", ["demo", "bench"])
def test_an_output_directory_that_cannot_be_written_fails_first(tmp_path, command):
    f = tmp_path / "a-file"
    f.write_text("x")
    for bad in (str(f), str(f / "below")):
        out = _sweepq(command, "--quick", "--out", bad)
        assert out.returncode == 2, out
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and "argument --out: cannot write to" in lines[0] and "pass a writable" in lines[0]


def test_inspect_of_a_file_or_a_foreign_directory(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    out = _sweepq("inspect", str(f))
    assert out.returncode == 2 and "is not a directory" in out.stderr and len(out.stderr.splitlines()) == 1
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    out = _sweepq("inspect", str(tmp_path / "other"))
    assert out.returncode == 2 and "not a sweepq store" in out.stderr and len(out.stderr.splitlines()) == 1


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """`sweepq inspect DIR | head -1`: the pipe closes early; no BrokenPipeError traceback."""
    from sweepq.engine import DurabilitySettings, QueueManager, SweeperSettings

    with QueueManager.open(
        tmp_path / "d", sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="none")
    ) as qm:
        for i in range(1500):
            qm.define_queue(f"A.LONG.QUEUE.NAME.FOR.A.LONG.LISTING.{i:05d}")
    p = subprocess.Popen(
        [sys.executable, "-m", "sweepq", "inspect", str(tmp_path / "d")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdout.readline().startswith(b"sweepq store at")
    p.stdout.close()  # as head -1 does
    err = p.stderr.read().decode()
    assert p.wait(60) == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
