"""Sizes as a person writes them: ``"100MB"``, ``"64KiB"``, ``"1.5 GB"``, or an int of bytes.

One parser for the API (``MemorySettings(budget=...)``, ``sweepq.Queue(memory_budget=...)``)
and the command line (every ``--memory-budget``-like option), so a size means the same
everywhere. Units follow the SI and IEC prefixes: ``kB``/``KB``, ``MB``, ``GB``, ``TB`` are
powers of 1000, ``KiB``, ``MiB``, ``GiB``, ``TiB`` powers of 1024 (``K``, ``M``, ``G``, ``T``
alone are read as the IEC units, as ``ulimit`` and Kubernetes' ``Ki`` read them, which is what
people mean by "512M"); ``B`` or no unit is bytes. Case is ignored except that ``b`` alone is
bytes.

A bad size is an :class:`~sweepq.engine.errors.MQError` with ``Reason.PARM_VALUE_ERROR``, as
for every other bad argument of the queue manager, with a text that shows the form to use;
the command line prints that text as its one line.

Beside them, :func:`item_bytes`: what an object a queue keeps (``sweepq.Queue``'s items)
weighs, as the memory budget counts a put of it and a sweep cuts its runs by it.
"""

from __future__ import annotations

import re
from sys import getsizeof

from .constants import Reason
from .errors import MQError

MIN_BUDGET = 16 * 1024  # a smaller memory budget holds no more than a few messages: refused as a likely missing unit

UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "k": 2**10,
    "m": 2**20,
    "g": 2**30,
    "t": 2**40,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*")
MAX_SIZE = 2**62


def parse_size(value: object, what: str = "size", minimum: int = 0, hint: str = "") -> int:
    """Bytes from ``value``: an int (bytes) or a str such as ``"100MB"`` or ``"512MiB"``.

    ``minimum``: a non-zero size below it is refused (0 always passes: "none"), with a text
    that suggests the unit the caller probably meant (``memory_budget=100`` is 100 bytes,
    not 100 MB). ``hint`` ends the error's text.

    :raises MQError: PARM_VALUE_ERROR for a value that is not a size, is negative, or is
        non-zero and under ``minimum``."""
    n = _bytes(value, what)
    if n and n < minimum:
        # Only a number without a unit was perhaps meant as megabytes: "1KB" was meant as 1 kB.
        bare = not isinstance(value, str) or value.strip().isdigit()
        unit = f"; did you mean {n} MB? write '{n}MB' or '{n}MiB'" if bare and n < 10**6 else ""
        least = format_size(minimum)
        raise MQError(Reason.PARM_VALUE_ERROR, f"{what} {n} bytes is too small (at least {least}){unit}{hint}")
    return n


def _bytes(value: object, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= MAX_SIZE:
            raise MQError(Reason.PARM_VALUE_ERROR, f"{what} {value} is outside 0..{MAX_SIZE} bytes")
        return int(value)
    if isinstance(value, str):
        if value.strip().startswith("-"):
            raise MQError(Reason.PARM_VALUE_ERROR, f"{what} {value!r} is negative: pass 0 (none) or a size, e.g. 100MB")
        m = _SIZE.fullmatch(value)
        unit = m.group(2).lower() if m else None
        if m is None or unit not in UNITS:
            raise MQError(
                Reason.PARM_VALUE_ERROR,
                f"{what} {value!r} is not a size: write bytes or a number with a unit, e.g. 100MB, 512MiB, 64KiB",
            )
        n = int(float(m.group(1)) * UNITS[unit]) if "." in m.group(1) else int(m.group(1)) * UNITS[unit]
        if n > MAX_SIZE:
            raise MQError(Reason.PARM_VALUE_ERROR, f"{what} {value!r} is more than {MAX_SIZE} bytes")
        return n
    raise MQError(
        Reason.PARM_VALUE_ERROR,
        f"{what} must be a size such as '100MB' or an int of bytes, not {type(value).__name__} ({value!r:.40})",
    )


def format_size(n: int) -> str:
    """``n`` bytes the way this module reads them back: ``"100MB"``, ``"64KiB"``, ``"123B"``."""
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n}B"


__all__ = ["format_size", "parse_size"]


_CONTAINERS = (tuple, list, dict, set, frozenset)
_SAMPLE = 16  # members of a container measured; a larger one is counted at their mean


def item_bytes(item: object) -> int:
    """What an item a queue keeps as an object (engine/putpath.py ``put_items``) adds to
    memory, as the budget counts a put of it: its own size and, for a tuple, list, dict or
    set, its members' (one level down; past ``_SAMPLE`` members, their mean times the length).

    ``sys.getsizeof`` alone sees a container's slots, not what they hold: a tuple of a name,
    a number and 1 KiB of bytes counted 64 bytes of its 1,200, so puts of such items went 17
    times further than the count between two counts, and two producers took resident memory
    to 1.3 x budget + baseline before the budget saw it (bench/memory.py ``fill_and_drain``)."""
    size = getsizeof(item)
    if type(item) in _CONTAINERS:
        members = item.values() if type(item) is dict else item
        n = len(item)  # type: ignore[arg-type]
        seen = inside = 0
        for m in members:  # type: ignore[attr-defined]
            inside += getsizeof(m)
            seen += 1
            if seen == _SAMPLE:
                break
        if seen:
            size += inside * n // seen
    return size
