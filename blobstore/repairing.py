"""Repair of a data directory: RocksDB's repair, given what it needs to keep every family.

RocksDB's repair rebuilds the manifest from the table files alone: it learns a column
family only from a table file that names it, and replays the write-ahead logs into the
families it learnt, skipping every write to any other. A family that was never flushed is
therefore lost whole, its writes with it, and the repaired manifest does not name it
(RocksDB's own documentation: "un-flushed column families will be lost after repair", with
or without the column families given to it). A kill -9 during a store's first flush, then
a write-ahead log cut short, is such a directory: every family lives in the log, the
flush's table file is cut short, and the repair named none of sweepq's families (the crash
harness's ``wal-truncate``).

So before RocksDB's repair, while the manifest still maps the log's family ids to their
names, the directory is opened through that manifest and every family flushed: each family
that holds a write then has a table file naming it. Nothing is taken away by that: the
table files the manifest does not name (which that open would delete) are held aside and
put back (under a free number when the open reused theirs, and under their own again if the
repair moves them to ``lost/``), and so are the logs (which the flush makes obsolete), so
RocksDB's repair reads every file it read before, and more. After it, a family the old
manifest named that is still missing (it held no write at all) is created empty. When the
manifest cannot be read or that open fails, RocksDB's repair runs on the files as they are.
"""

from __future__ import annotations

import os
import shutil

from rocksdict import DBCompressionType, DBRecoveryMode, Options, Rdict

from .files import claim, make_private, mend_logs, release, unheld
from .kv import KVError
from .rocksfiles import numbered, read_manifest

HELD = "repair-held"  # where the open before RocksDB's repair keeps the files it must not touch
DEFAULT = "default"


def repair(path: str) -> list[str]:
    """Rebuild the manifest of ``path`` from the files that can be read (see the module
    docstring); table files that cannot (a truncated table) are moved to ``lost/``. Returns
    their names. (The logs, turned into table files, and the old manifest go to ``lost/``
    too, but nothing is lost with them: they are not named.)

    :raises KVError: the repair itself failed, or the store is open (:func:`~.files.claim`)."""
    lost = os.path.join(path, "lost")
    key = claim(path)
    try:
        before = set(os.listdir(lost)) if os.path.isdir(lost) else set()
        renamed = _put_back(path)  # a repair cut short by a crash held these aside
        mend_logs(path)  # RocksDB's repair reads the logs too (and would loop on a bad header)
        m = read_manifest(path)
        families = sorted(n for n in m.families.values() if n != DEFAULT) if m is not None else []
        if m is not None and families:
            more = _flush_through_the_manifest(path, families, m.live_tables())
            renamed.update({new: renamed.pop(old, old) for new, old in more.items()})
        unheld(lambda: Rdict.repair(path, Options(raw_mode=True)))
        if families:
            _create_missing(path, families)
        _name_as_before(lost, renamed)
    except KVError:
        raise
    except Exception as e:
        raise KVError(f"repairing the store at {path} failed: {e}") from e
    finally:
        release(key)
    after = set(os.listdir(lost)) if os.path.isdir(lost) else set()
    make_private(path)
    return sorted(n for n in after - before if n.endswith(".sst"))


def _options() -> Options:
    o = Options(raw_mode=True)
    # Tables written here are read again by RocksDB's repair and kept: uncompressed, as the
    # repair's own are (a message record in them stays readable record by record).
    o.set_compression_type(DBCompressionType.none())
    # The open must only write the logs out: a compaction would rewrite the table files
    # RocksDB's repair is about to read.
    o.set_disable_auto_compactions(True)
    return o


def _flush_through_the_manifest(path: str, families: list[str], named: set[int]) -> dict[str, str]:
    """Open ``path`` through its manifest and flush every family (see the module docstring),
    holding aside the table files it does not name (``named``: those it does) and a copy of
    every log, which are put back whether the open works or not. Returns the table files
    put back under another name (new name -> old)."""
    held = os.path.join(path, HELD)
    os.makedirs(held, mode=0o700, exist_ok=True)
    for number, name in numbered(path, ".sst").items():
        if number not in named:
            os.replace(os.path.join(path, name), os.path.join(held, name))
    for name in numbered(path, ".log").values():
        shutil.copy2(os.path.join(path, name), os.path.join(held, name))
    try:
        opts = _options()
        opts.create_if_missing(False)
        opts.set_wal_recovery_mode(DBRecoveryMode.point_in_time())
        db = unheld(lambda: Rdict(path, options=opts, column_families={n: _options() for n in families}))
        try:
            for n in families:
                db.get_column_family(n).flush()
        finally:
            db.close()
            del db
    except Exception:  # RocksDB's repair then runs on the files as they were
        pass
    finally:
        renamed = _put_back(path)
    return renamed


def _put_back(path: str) -> dict[str, str]:
    """Put back what :func:`_flush_through_the_manifest` held aside: the table files it moved,
    and each log the open made obsolete (deleted), as it was. Returns the table files put
    back under another name (new name -> old)."""
    held = os.path.join(path, HELD)
    renamed: dict[str, str] = {}
    if not os.path.isdir(held):
        return renamed
    for name in sorted(os.listdir(held)):
        target = name
        if name.endswith(".sst"):
            # The open reuses the numbers of the table files its manifest never recorded: such
            # a file comes back under the next free number (RocksDB's repair reads any).
            taken = _numbers(path)
            if int(name[:-4]) in taken:
                target = f"{max(taken) + 1:06d}.sst"
                renamed[target] = name
        os.replace(os.path.join(held, name), os.path.join(path, target))
    shutil.rmtree(held, ignore_errors=True)
    return renamed


def _name_as_before(lost: str, renamed: dict[str, str]) -> None:
    """Give a table file that was put back under another name and that RocksDB's repair then
    moved to ``lost/`` its own name again (the one the open that was refused named)."""
    for new, old in renamed.items():
        if os.path.exists(os.path.join(lost, new)) and not os.path.exists(os.path.join(lost, old)):
            os.replace(os.path.join(lost, new), os.path.join(lost, old))


def _numbers(path: str) -> set[int]:
    """The numbers RocksDB's files in ``path`` carry (tables, logs, manifests, options)."""
    out = set()
    for name in os.listdir(path):
        digits = name.split("-")[-1].split(".")[0]
        if digits.isdigit():
            out.add(int(digits))
    return out


def _create_missing(path: str, families: list[str]) -> None:
    """Create empty each of ``families`` the repaired manifest does not name (it held no write
    RocksDB's repair could place)."""
    have = set(Rdict.list_cf(path, Options(raw_mode=True)))
    if not set(families) - have:
        return
    opts = Options(raw_mode=True)
    opts.create_missing_column_families(True)
    named = {n: Options(raw_mode=True) for n in have | set(families)}
    db = unheld(lambda: Rdict(path, options=opts, column_families=named))
    db.close()
    del db
