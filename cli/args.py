"""The command line's argument helpers, one set for every ``sweepq`` command.

The checks that ``spark-submit``'s entry point needs too live in pipeline/args.py (that entry
point cannot import this layer); this module re-exports them and adds what only the command
line uses: bounded numbers with advice, queue names by the engine's own rule, a writable
output directory. A bad value is one line naming the argument and what to pass, exit code 2
(EXIT_USAGE); every option's help says its default.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable

from sweepq.pipeline.args import EXIT_USAGE, HelpFormatter, byte_size, existing_path, one_line
from sweepq.pipeline.args import Parser as _OneLineParser
from sweepq.pipeline.args import number as _at_least

__all__ = [
    "EXIT_USAGE",
    "Formatter",
    "Parser",
    "Usage",
    "address",
    "byte_size",
    "existing_path",
    "memory_size",
    "number",
    "one_line",
    "output_dir",
    "queue_name",
    "queue_name_rule",
]


class Usage(Exception):
    """A usage error found after parsing (a file that cannot be read, a missing option): the
    command prints it as one line and exits with EXIT_USAGE."""


class Formatter(HelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples keep their line breaks; every option's help ends with its
    default, said in words where a value would mislead (pipeline/args.py HelpFormatter)."""


class Parser(_OneLineParser):
    """A parser of the command line: one-line errors and exit code 2 (pipeline/args.py
    Parser), :class:`Formatter` unless told otherwise; its subcommands' parsers are of this
    class too (argparse's default)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)
        # A negative number with a unit ("-5MB") is a value the option's type refuses in its
        # own words, not an unknown option ("expected one argument"); no option of sweepq's
        # looks like a number.
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)\s*[A-Za-z]*$")


def _shown(bound: float) -> str:
    return f"{int(bound):,}" if float(bound).is_integer() else f"{bound:g}"


def number(
    kind: type, low: float | None = None, high: float | None = None, low_open: bool = False, hint: str = ""
) -> Callable[[str], int | float]:
    """An argparse type: a finite ``kind`` within [low, high] ((low, high] when ``low_open``;
    a bound of None is open). Its error says what is expected, then ``hint`` (or what to
    pass). Parsing and the lower bound are pipeline/args.py's ``number``."""
    at_least = _at_least(kind, -math.inf if low is None else low, low_open)
    what = "an integer" if kind is int else "a number"
    bounds = [f"{'>' if low_open else '>='} {_shown(low)}"] if low is not None else []
    bounds += [f"<= {_shown(high)}"] if high is not None else []
    wanted = f"{what} {' and '.join(bounds)}".rstrip()

    def parse(text: str):
        try:
            value = at_least(text)
        except argparse.ArgumentTypeError:
            value = None
        if value is None or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is not {wanted}; {hint or 'pass ' + wanted}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


def memory_size(text: str) -> int:
    """An argparse type: a memory budget as a person writes it ("100MB", "512MiB", bytes; 0:
    none), read by the engine's one size parser (engine/sizes.py), so that the command line
    and ``MemorySettings(budget=)`` accept and refuse the same."""
    from sweepq.engine import MQError
    from sweepq.engine.sizes import MIN_BUDGET, parse_size

    try:
        return parse_size(text, "memory budget", MIN_BUDGET)
    except MQError as e:
        raise argparse.ArgumentTypeError(e.text) from None


def address(text: str) -> str:
    """An argparse type: HOST:PORT, :PORT or PORT with a port in 0..65535 (the server's own
    reading, net/server.py parse_tcp), so that a bad --tcp, --metrics or --console is said in
    the option's terms, not the API's ``tcp=``."""
    host, _, port = text.rpartition(":")
    if not port.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT; pass e.g. 127.0.0.1:8080 or :8080")
    if not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r}: port {int(port)} is outside 0..65535; pass e.g. {host or '127.0.0.1'}:8080"
        )
    return text


def _name_rule(text: str) -> str | None:
    """None when ``text`` is a queue name by the engine's rule, else the rule in the engine's
    words (its error's text ends with it)."""
    from sweepq.engine import MQError
    from sweepq.engine.checks import check_name

    try:
        check_name(text)
    except MQError as e:
        return e.text.rpartition(": ")[2]
    return None


def queue_name(text: str) -> str:
    """An argparse type: a queue name by the engine's rule (``sweepq.engine.checks.check_name``),
    so that the command line and the engine can never disagree on what a name is."""
    rule = _name_rule(text)
    if rule is not None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a queue name; pass {rule}")
    return text


def queue_name_rule() -> str:
    """The engine's name rule in its own words, for help texts."""
    return _name_rule("") or ""


def output_dir(prog: str, path: str | None) -> bool:
    """Create ``--out`` before any work, so that a bad path fails at once in one line on
    stderr (False: said, exit with EXIT_USAGE)."""
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
