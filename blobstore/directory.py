"""The data directory a :class:`~sweepq.blobstore.BlobStore` lives in: made when missing,
and judged before RocksDB opens it, so that a directory which is not a store, or a store
whose ``CURRENT`` file is gone, is refused instead of being taken for a new database.

Judging runs only under the directory's claim (blobstore/files.py ``claim``): a directory
another opener is creating at the same moment is in use, never damaged.
"""

from __future__ import annotations

import os

from .access import store_error
from .files import SIDE_PREFIX
from .kv import CFS as FAMILIES
from .kv import KVError
from .protocol import StoreDamageError, StoreError
from .rocks import RocksKV

CHECKPOINT = "checkpoint"  # the side record Checkpointing keeps (SIDE_PREFIX + this, a file)


def make_directory(path: str, read_only: bool) -> None:
    """Create the store's directory when it does not exist (another opener may create it at
    the same time); refuse a path that cannot be one.

    :raises StoreError: naming what is wrong with ``path`` and what to do."""
    if os.path.islink(path) and not os.path.exists(path):
        raise StoreError(
            f"{path} is a symbolic link to {os.readlink(path)}, which does not exist; "
            "create that directory, or give the path of a real one"
        )
    if not os.path.exists(path):
        if read_only:
            raise StoreError(f"{path} does not exist")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise StoreError(f"the parent directory {parent} does not exist; create it first (a typo in the path?)")
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # another opener made it: the claim tells which of the two goes on
        except OSError as e:
            raise StoreError(f"cannot create the store directory {path}: {e}") from e
    if not os.path.isdir(path):
        raise StoreError(f"{path} is not a directory")


def check_directory(path: str) -> None:
    """Refuse a directory that is not a store, or one RocksDB would take for a new database
    over a store's files (``CURRENT`` missing). Only under the claim.

    :raises StoreDamageError: a store's files without what opens them.
    :raises StoreError: not a sweepq store."""
    entries = os.listdir(path)
    if entries and "CURRENT" not in entries and _holds_a_database(entries):
        # RocksDB would take the directory for a new database, and delete every table file.
        raise StoreDamageError(
            f"the store at {path} is damaged: its CURRENT file is missing (the table files and logs are there)",
            os.path.join(path, "CURRENT"),
        )
    if entries and "CURRENT" not in entries and not _only_store_files(entries):
        raise StoreError(f"{path} is not a sweepq store (it holds other files); choose an empty directory")
    if "CURRENT" in entries:
        try:
            cfs = RocksKV.column_families(path)
        except KVError as e:
            raise store_error(e) from e
        if not cfs & set(FAMILIES) and not any(n.startswith(SIDE_PREFIX) for n in entries):
            raise StoreError(f"{path} is a RocksDB database but not a sweepq store")
        if not cfs & set(FAMILIES):  # sweepq's own files are here: its manifest lost them
            raise StoreDamageError(
                f"the manifest of the store at {path} names none of its families: it is damaged", path
            )


def _holds_a_database(entries: list[str]) -> bool:
    """Whether a directory holds a database's own files (a manifest, tables, logs, sweepq's
    checkpoint): then it is a store, whatever else is missing."""
    return any(n.startswith(("MANIFEST-", SIDE_PREFIX + CHECKPOINT)) or n.endswith((".sst", ".log")) for n in entries)


def _only_store_files(entries: list[str]) -> bool:
    """A data directory whose RocksDB files are gone but for ones a queue manager writes."""
    return all(n.startswith(("sweepq-", "LOG", "LOCK", "rocksdict-config")) for n in entries)
