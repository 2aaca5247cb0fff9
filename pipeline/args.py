"""Argument checks shared by ``sweepq trace / replay`` (cli/replay.py) and the pipeline's
own parser (job.py, which spark-submit runs without the sweepq CLI): a bad value is one line
naming the argument and what to pass, and exit code 2. No pyspark here."""

from __future__ import annotations

import argparse
import math
import os
import types

EXIT_USAGE = 2


def one_line(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report a bad argument as one line and exit 2 (no usage block)."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    parser.error = types.MethodType(error, parser)
    return parser


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Every option's help ends with its default, said once and in words where a value would
    mislead: nothing for a required argument, 'off' for a flag, 'none' for an absent value."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.required or not action.option_strings or action.default is argparse.SUPPRESS:
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        if action.default is None:
            return f"{text} (default: none)"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Nested parsers (``trace generate``, ``trace partition``) get one-line errors too."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        one_line(self)


def number(kind: type, low: float, low_open: bool = False):
    """An argparse type: a finite ``kind`` >= ``low`` (> when ``low_open``); its error says what to pass."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and math.isfinite(value) and (value > low if low_open else value >= low)
        if not ok:
            what = "an integer" if kind is int else "a number"
            bound = f"{'>' if low_open else '>='} {low:g}"
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} {bound}; pass {what} {bound}")
        return value

    parse.__name__ = kind.__name__
    return parse


def existing_path(text: str) -> str:
    """An argparse type: a path that exists (URIs such as s3:// are left to the reader)."""
    if "://" not in text and not os.path.exists(text):
        raise argparse.ArgumentTypeError(f"{text!r} does not exist; pass a trace file (.parquet, .csv) or directory")
    return text


def byte_size(text: str) -> int:
    """An argparse type: bytes as engine/sizes.py reads every size of sweepq (500MB, 512MiB,
    64KiB or an integer of bytes; M alone is MiB), so that --memory-budget means the same here
    as for ``sweepq serve`` and ``MemorySettings(budget=)``."""
    from sweepq.engine import MQError
    from sweepq.engine.sizes import parse_size

    try:
        return parse_size(text, "size")
    except MQError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size; pass bytes such as 500000000, 500MB or 512MiB"
        ) from None


def add_rule_options(p: argparse.ArgumentParser) -> None:
    """The sweep rule's options, the same for ``sweepq replay`` and ``sweepq pipeline``."""
    from sweepq.blobstore.format import DEFAULT_MAX_BLOB_BYTES, DEFAULT_MAX_BLOB_RECORDS

    pos_int, nonneg_int, pos_float = number(int, 1), number(int, 0), number(float, 0, low_open=True)
    p.add_argument("--interval", type=pos_float, default=5.0, help="sweep interval in seconds")
    p.add_argument("--factor", type=nonneg_int, default=2, help="sweep when y > factor * x")
    p.add_argument("--extra", type=nonneg_int, default=5, help="buffer kept in memory: x + extra messages")
    p.add_argument("--blob-bytes", type=pos_int, default=DEFAULT_MAX_BLOB_BYTES, help="max bytes per blob")
    p.add_argument("--blob-records", type=pos_int, default=DEFAULT_MAX_BLOB_RECORDS, help="max records per blob")
    p.add_argument(
        "--rule",
        choices=("seed", "adaptive"),
        default="seed",
        help="the sweep rule: the seed's (y > factor * x), or the adaptive one that does not re-sweep",
    )
    p.add_argument(
        "--memory-budget",
        type=byte_size,
        default=0,
        help="sweep beyond the rule when the messages in memory exceed this many bytes (e.g. 500MB; 0: none)",
    )
