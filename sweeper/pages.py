"""How a process that reads a whole trace into fresh memory asks numpy to allocate it.

This module imports no numpy: its one function must run before numpy is imported.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def no_hugepage_advice(environ: MutableMapping[str, str] = os.environ) -> None:
    """Have numpy, imported after this, allocate without asking the kernel for huge pages
    (``NUMPY_MADVISE_HUGEPAGE=0``; a value set already is kept).

    numpy advises huge pages (``madvise(MADV_HUGEPAGE)``) for every array of 4 MB or more.
    Where the kernel's ``transparent_hugepage/defrag`` is ``madvise`` (a common default), the
    first touch of such memory compacts memory on the spot to find a huge page, and a process
    reading a trace touches nothing but fresh memory: a direct pipeline task's read of the
    10.8 M-event trace of docs/pipeline.md, in a worker fresh from the daemon, spent 0.5 to
    1.1 s of system CPU on it (and got no huge page: ``AnonHugePages`` stayed 0) against 0.1
    to 0.2 s without the advice; a second read in the same process, on memory touched before,
    had no such cost. ``sweepq replay`` of a 27 M-event trace, alternating at load 18: read
    10.6-11.7 s with the advice, 6.0-7.0 s without."""
    environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")
