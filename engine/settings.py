"""A queue manager's settings, in groups: the sweeper's, durability's, memory's and the
limits on messages and units of work.

Each group is a frozen dataclass that checks itself once, when it is made, with MQ's reason
code (PARM_VALUE_ERROR, 3229, naming the wrong field): a group that exists is valid.
``QueueManager(name, path=, clock=, store=, sweeping=SweeperSettings(...), durability=...,
memory=..., messages=...)`` takes them whole: each setting has one spelling, a group's field,
and each check one place. Where the blobs go (``path`` or ``store``) is the queue manager's
own pair, checked by :func:`check_place`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sweepq.blobstore import STORE_OPTIONS, Store
from sweepq.sweeper import SweepPolicy

from . import checks
from .budget import COUNTS
from .constants import Reason
from .durable import SYNC_POLICIES
from .errors import MQError
from .sizes import MIN_BUDGET, parse_size

MAX_MSG_LENGTH = 100 * 1024 * 1024  # MQ's largest MAXMSGL


@dataclass(frozen=True)
class SweeperSettings:
    """The slow queue sweeper's settings (docs/sweeper.md).

    ``run``: start the sweeper on a background thread, every ``policy.interval`` seconds; off,
    sweeps happen only when called (``qm.sweeper.run_once()``).
    ``policy``: the rule (the seed's by default).
    ``duty``: the share of the time the background sweeper's own Python work may take while it
    sweeps, so that under the GIL the application keeps the rest.
    ``readahead_low_water``: when a swept lane's in-memory messages fall below it, the next
    blobs (that many messages' worth; under a memory budget, no more than a 32nd of its
    bytes) are read in the background.
    ``trace_path``: record every successful put and get to a Parquet trace there, the input
    ``sweepq replay`` and ``sweepq plan`` replay through other policies to choose these
    settings (docs/replay.md, docs/plan.md); None: no recording.

    :raises MQError: PARM_VALUE_ERROR (3229) naming the first wrong field."""

    run: bool = True
    policy: SweepPolicy = field(default_factory=SweepPolicy)
    duty: float = 0.1
    readahead_low_water: int = 4096
    trace_path: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        checks.boolean(self.run, "SweeperSettings.run")
        if not isinstance(self.policy, SweepPolicy):
            raise MQError(Reason.PARM_VALUE_ERROR, "SweeperSettings.policy must be a SweepPolicy")
        duty = self.duty
        if isinstance(duty, bool) or not isinstance(duty, int | float) or not 0 < duty <= 1:
            raise MQError(Reason.PARM_VALUE_ERROR, f"SweeperSettings.duty {duty!r}: a share of the time in (0, 1]")
        checks.integer(self.readahead_low_water, "readahead_low_water", Reason.PARM_VALUE_ERROR, 0)
        if self.trace_path is not None and not _is_path(self.trace_path):
            raise MQError(
                Reason.PARM_VALUE_ERROR,
                f"SweeperSettings.trace_path must be a path (a str or os.PathLike), not {self.trace_path!r}",
            )


def _is_path(value: object) -> bool:
    return isinstance(value, str | os.PathLike) and isinstance(os.fspath(value), str)


def check_place(path: object, store: object) -> None:
    """Check where a queue manager's blobs go: ``path``, the data directory (None: a private
    temporary store, removed at close), or ``store``, a given
    :class:`~sweepq.blobstore.Store` (a ``MemoryStore`` keeps blobs off the disk; tests inject
    a ``FaultyStore``), not both.

    :raises MQError: PARM_VALUE_ERROR (3229) naming the wrong one."""
    if path is not None and not _is_path(path):
        raise MQError(
            Reason.PARM_VALUE_ERROR, f"the data directory must be a path (a str or os.PathLike), not {path!r}"
        )
    if store is not None and not isinstance(store, Store):
        raise MQError(
            Reason.PARM_VALUE_ERROR,
            f"store must be a sweepq.blobstore.Store (BlobStore, MemoryStore, ...), not {type(store).__name__}",
        )
    if path is not None and store is not None:
        raise MQError(Reason.PARM_VALUE_ERROR, "give a data directory (path) or a store, not both")


@dataclass(frozen=True)
class DurabilitySettings:
    """What survives a restart and how the store is written (docs/durability.md); where the
    blobs go is the queue manager's ``path`` or ``store``.

    ``durable``: queue definitions and persistent messages are kept and come back at the
    next open (None: on with a ``path``, off otherwise; see :meth:`keeps`). ``sync``: when a
    durable change is safe, ``"commit"`` (on disk before the call returns), ``"os"`` (in the
    log) or ``"none"`` (no log).
    ``repair``: open a damaged data directory by setting the damaged files aside.
    ``store_options`` go to :class:`~sweepq.blobstore.BlobStore` (``level``,
    ``max_blob_bytes``, ``max_blob_records``, ``sync``, ``dictionaries``).

    :raises MQError: PARM_VALUE_ERROR (3229) naming the first wrong field."""

    durable: bool | None = None
    sync: str = "commit"
    repair: bool = False
    store_options: dict | None = None

    def __post_init__(self) -> None:
        options = self.store_options
        if not isinstance(self.sync, str) or self.sync not in SYNC_POLICIES:
            raise MQError(Reason.PARM_VALUE_ERROR, f"sync={self.sync!r}: use one of {', '.join(SYNC_POLICIES)}")
        if self.durable is not None:
            checks.boolean(self.durable, "durable")
        checks.boolean(self.repair, "repair")
        if options is not None and not isinstance(options, dict):
            raise MQError(Reason.PARM_VALUE_ERROR, "store_options must be a dict of store settings")
        unknown = set(options or {}) - STORE_OPTIONS
        if unknown:
            raise MQError(
                Reason.PARM_VALUE_ERROR,
                f"unknown store option(s) {sorted(unknown)}; known: {sorted(STORE_OPTIONS)}",
            )

    def keeps(self, on_disk: bool) -> bool:
        """Whether definitions and persistent messages are written for durability, for a
        queue manager with a data directory (``on_disk``) or without one."""
        return on_disk if self.durable is None else self.durable


@dataclass(frozen=True)
class MemorySettings:
    """The memory budget (engine/budget.py, docs/sweeper.md "The memory budget").

    ``budget``: a size, bytes or a string such as ``"100MB"`` or ``"512MiB"`` (engine/sizes.py),
    kept as bytes; 0: none; a non-zero budget under 16 KiB is refused (``memory_budget=`` at
    the other doors, ``Queue`` and ``sweepq serve --memory-budget``). ``counts``: what it
    counts, ``"resident"`` (the default with a budget: the process's resident memory above
    its baseline when the queue manager opened, what the OS, a container's limit and the OOM
    killer see) or ``"held"`` (the messages in memory and the store's memtables and cache)
    (``budget_counts=`` at the other doors). One default for every door (``QueueManager``,
    ``Queue``, ``sweepq serve``, the demo): a budget bounds what the process takes unless
    asked otherwise. Without a budget nothing is counted (``"held"``
    is kept); ``"resident"`` asked for without one is refused.

    :raises MQError: PARM_VALUE_ERROR (3229) naming the first wrong field."""

    budget: int | str = 0
    counts: str = ""  # "": the default, resolved below

    def __post_init__(self) -> None:
        budget = parse_size(self.budget, "memory_budget", MIN_BUDGET, " (0: no budget)")
        object.__setattr__(self, "budget", budget)  # bytes from here on
        if self.counts == "":
            object.__setattr__(self, "counts", "resident" if budget else "held")
        if self.counts not in COUNTS:
            raise MQError(
                Reason.PARM_VALUE_ERROR,
                f"budget_counts must be 'held' (what the queues and the store hold) or 'resident' (the process's "
                f"resident memory above its baseline), not {self.counts!r:.40}",
            )
        if self.counts == "resident" and not budget:
            raise MQError(Reason.PARM_VALUE_ERROR, "budget_counts='resident' needs a memory_budget, e.g. '100MB'")

    @property
    def limit(self) -> int:
        """The budget in bytes (0: none)."""
        return int(self.budget)


@dataclass(frozen=True)
class MessageSettings:
    """What one message and one unit of work may be, and what a get does with a message
    backed out too often.

    ``max_msg_length``: the manager's MAXMSGL (a longer put fails with 2031).
    ``max_uncommitted``: MAXUMSGS, messages in one unit of work (2024 beyond it).
    ``backout_handling``: gets move a message whose backout count reached its queue's
    ``backout_threshold`` to the queue's ``backout_requeue_q`` (off by default, as in MQ).

    :raises MQError: PARM_VALUE_ERROR (3229) naming the first wrong field."""

    max_msg_length: int = MAX_MSG_LENGTH
    max_uncommitted: int = 10_000
    backout_handling: bool = False

    def __post_init__(self) -> None:
        checks.integer(self.max_msg_length, "max_msg_length", Reason.PARM_VALUE_ERROR, 0, MAX_MSG_LENGTH)
        checks.integer(self.max_uncommitted, "max_uncommitted", Reason.PARM_VALUE_ERROR, 1)
        checks.boolean(self.backout_handling, "backout_handling")
