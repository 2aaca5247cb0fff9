"""Kombu's queue names as MQ queue names.

MQ names hold 1..48 characters from A-Z a-z 0-9 . _ / % (engine/queue.py ``check_name``);
Celery's are longer and freer (``celery@host.celery.pidbox``, a uuid with dashes). A name that
is already a valid MQ name is kept, so ``celery`` is the MQ queue ``celery`` that ``sweepq
status`` shows; any other becomes its valid characters (others as ``_``), cut to 31, a dot and
16 hex digits of its SHA-1: the same in every process, and two names never meet in practice.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 48
_INVALID = re.compile(r"[^A-Za-z0-9._/%]")

#: The queue that holds every exchange's bindings (bindings.py).
BINDINGS_QUEUE = "KOMBU.BINDINGS"


def mq_name(queue: str) -> str:
    """The MQ queue name of Kombu's ``queue`` (see the module docstring)."""
    if queue and len(queue) <= MAX_NAME and not _INVALID.search(queue):
        return queue
    digest = hashlib.sha1(queue.encode()).hexdigest()[:16]
    return f"{_INVALID.sub('_', queue)[:31]}.{digest}"
