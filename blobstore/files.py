"""The data directory's own files: side records beside the database (its side logs:
blobstore/sidelog.py), its privacy, its claim (blobstore/repairing.py repairs it).

*Side records* (``sweepq-<name>``, e.g. the engine's checkpoint of live messages) are small,
checksummed and replaced atomically (write, fsync, rename, fsync the directory), and live
outside RocksDB so that damage to its files cannot take them too.

Privacy: the directory is 0700 and every file in it 0600, whatever the process's umask,
which is never touched (every thread of the host process shares it). On Linux a default
ACL on the directory (owner only) makes every file RocksDB creates in it private from the
start: a default ACL replaces the umask for new files. Where the filesystem has no ACLs the
files created while open are made private at the next open or close, and the 0700
directory keeps other users out meanwhile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import gc
import os
import shutil
import struct
import sys
import threading
import traceback
import zlib
from collections.abc import Callable
from typing import TypeVar

from .kv import KVCorruption, KVError
from .rocksfiles import current_manifest, first_bad_header

SIDE_PREFIX = "sweepq-"
_SIDE_MAGIC = b"SQS1"
_SIDE_HEAD = struct.Struct("<4sII")  # magic, crc32 of the data, its length


def read_side_file(path: str, name: str) -> bytes | None:
    """The side record ``name`` of the data directory ``path`` (None: there is none).

    :raises KVCorruption: it fails its checksum. :raises KVError: it cannot be read."""
    full = os.path.join(path, SIDE_PREFIX + name)
    try:
        with open(full, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KVError(f"reading {full} failed: {e}") from e
    if len(raw) < _SIDE_HEAD.size:
        raise KVCorruption(f"{full} is damaged (cut short)", full)
    magic, crc, n = _SIDE_HEAD.unpack_from(raw)
    data = raw[_SIDE_HEAD.size :]
    if magic != _SIDE_MAGIC or n != len(data) or zlib.crc32(data) != crc:
        raise KVCorruption(f"{full} is damaged (its checksum fails)", full)
    return data


def write_side_file(path: str, name: str, data: bytes, raw: bytes | None = None) -> None:
    """Replace the side record ``name`` atomically and durably (write, fsync, rename, fsync
    the directory), private to its owner whatever the umask (``raw``: these bytes as they
    are, not a side record). :raises KVError: not replaced."""
    full = os.path.join(path, SIDE_PREFIX + name)
    tmp = full + ".tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, raw if raw is not None else _SIDE_HEAD.pack(_SIDE_MAGIC, zlib.crc32(data), len(data)) + data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, full)
        dfd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise KVError(f"writing {full} failed: {e}") from e


def make_private(path: str) -> None:
    """The directory 0700, its files 0600, and files created in it later private from the
    start where the filesystem keeps ACLs (see the module docstring). Never raises: a
    directory of another owner is left as it is."""
    try:
        os.chmod(path, 0o700)
        private_by_default(path)
        for name in os.listdir(path):
            full = os.path.join(path, name)
            if os.path.isfile(full) and not os.path.islink(full):
                os.chmod(full, 0o600)
            elif os.path.isdir(full) and not os.path.islink(full):
                os.chmod(full, 0o700)
    except OSError:  # a directory we may read but not chmod (another owner): leave it be
        pass


# A POSIX default ACL (the "system.posix_acl_default" attribute, version 2): owner rwx,
# group and others nothing. Entries: (tag u16, perm u16, id u32).
_ACL_OWNER_ONLY = struct.pack("<I", 2) + b"".join(
    struct.pack("<HHI", tag, perm, 0xFFFFFFFF) for tag, perm in ((0x01, 7), (0x04, 0), (0x20, 0))
)


def private_by_default(path: str) -> bool:
    setxattr = getattr(os, "setxattr", None)
    if setxattr is None:
        return False
    try:
        setxattr(path, "system.posix_acl_default", _ACL_OWNER_ONLY)
        return True
    except OSError:  # no ACLs on this filesystem
        return False


# -- who has the directory ----------------------------------------------------------------------
#
# RocksDB takes its LOCK only after it has renamed the info log (LOG -> LOG.old.*) and rewritten
# rocksdict's config, and sweepq mends the write-ahead logs and judges the directory (is it a
# store, is it damaged) before either: an open that is then refused has already changed the
# directory of the queue manager that holds it, or judged a directory another process is
# creating (a new store's first files, CURRENT not yet written, look like damage). So a
# directory is *claimed* first, before anything in it is read or touched: refused when this
# process has it (a set of paths), when another process has claimed it (an flock on its LOCK
# file, held until the store is closed, across RocksDB's own reopens), or when another process
# holds RocksDB's lock on LOCK without a claim (probed with a lock of our own, given back at
# once; POSIX drops a process's locks on a file when it closes any descriptor of it, which is
# why the probe runs only when this process holds none). The flock and RocksDB's lock (fcntl)
# are separate on Linux; the claim's descriptor is closed only after the database is.


@dataclasses.dataclass
class _Claim:
    fd: int | None  # holds the flock on LOCK; None when LOCK could not be opened (RocksDB will say)
    created: bool  # the claim created LOCK (nothing of a store was there)


_CLAIMED: dict[str, _Claim] = {}
_CLAIM_LOCK = threading.Lock()


def claim(path: str) -> str:
    """Claim the data directory ``path`` for this process before anything in it is read or
    touched (but LOCK, created empty if missing); returns the key to :func:`release`.
    :raises KVError: a queue manager has it open, or is opening it, here or in another
    process (nothing in the directory was changed)."""
    key = os.path.realpath(path)
    with _CLAIM_LOCK:
        if key in _CLAIMED:
            raise KVError(f"cannot open the store at {path}: another queue manager (in this process) has it open")
        held = _hold(key)
        if held is None or _locked_elsewhere(key):
            if held is not None:
                _let_go(key, held, untouched=True)
            raise KVError(f"cannot open the store at {path}: another queue manager (in another process) has it open")
        _CLAIMED[key] = held
    return key


def release(key: str, untouched: bool = False) -> None:
    """Give the claim ``key`` back (after the database is closed). ``untouched``: the open
    was refused before it wrote anything, so a LOCK file the claim created is removed too."""
    with _CLAIM_LOCK:
        held = _CLAIMED.pop(key, None)
        if held is not None:
            _let_go(key, held, untouched)


T = TypeVar("T")

# RocksDB's words when its own lock on LOCK is held by a database object of this process
# that is closed but not yet freed (see unheld).
_HELD_HERE = "lock hold by current process"


def unheld(open_: Callable[[], T]) -> T:
    """``open_()`` (a RocksDB open or repair of a directory this process has claimed), tried
    once more after a garbage collection when RocksDB says its lock is held in this process.

    The claim proves that no store of this process has the directory open. RocksDB's own
    lock goes only when its database object is freed, and a scan's iterator or a column
    family of a closed database keeps that object alive: in cyclic garbage (an error kept in
    a local of a frame of its own traceback), until the collector runs."""
    try:
        return open_()
    except Exception as e:
        if _HELD_HERE not in str(e):
            raise
    gc.collect()
    return open_()


def let_go_of_frames() -> None:
    """Clear the locals of the finished frames the error being handled (a failed open's)
    passed through; called in its ``except``.

    Their locals (a scan's iterator, a column family) would keep the closed database alive,
    and RocksDB's lock on its directory with it, for as long as the error is kept: inside
    the ``except`` that opens again with ``repair=True``, as the open's error advises. The
    traceback's lines stay; only its frames' variables go."""
    traceback.clear_frames(sys.exc_info()[2])


def _hold(path: str) -> _Claim | None:
    """The flock on ``path``'s LOCK file, or None when another process holds it."""
    lock = os.path.join(path, "LOCK")
    created = True
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        created = False
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
        except OSError:  # not ours to open: RocksDB will say
            return _Claim(None, False)
    except OSError:  # no directory (RocksDB creates it), or not ours to write: RocksDB will say
        return _Claim(None, False)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)  # this process holds no lock on LOCK (it has no claim on it)
        return None
    return _Claim(fd, created)


def _let_go(path: str, held: _Claim, untouched: bool) -> None:
    if held.fd is None:
        return
    if untouched and held.created:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(path, "LOCK"))  # before the flock goes: no one else holds this file
    os.close(held.fd)


def _locked_elsewhere(path: str) -> bool:
    try:
        fd = os.open(os.path.join(path, "LOCK"), os.O_RDWR | os.O_CLOEXEC)
    except OSError:  # no LOCK yet (a new store), or not ours to open: RocksDB will say
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # gives the probe's lock back
    return False


# -- RocksDB's log-format files, checked before RocksDB reads them (blobstore/rocksfiles.py) ---------


def check_manifest(path: str) -> None:
    """:raises KVCorruption: the manifest of ``path`` has a record header RocksDB cannot read."""
    name = current_manifest(path)
    manifest = os.path.join(path, name) if name else None
    at = first_bad_header(manifest) if manifest else None
    if at is not None:
        raise KVCorruption(
            f"the manifest {manifest} is damaged at byte {at} (a record header that cannot be read)",
            manifest,  # type: ignore[arg-type]  # a str: `at` is None when there is no manifest
        )


def mend_logs(path: str) -> list[str]:
    """Cut every write-ahead log of ``path`` at its first record header RocksDB cannot read,
    keeping the original in ``lost/``: what RocksDB's point-in-time recovery would have done
    had it not looped. Returns what was done, one line per log."""
    done = []
    for name in sorted(os.listdir(path)):
        if not (name.endswith(".log") and name[:-4].isdigit()):
            continue
        full = os.path.join(path, name)
        at = first_bad_header(full)
        if at is None:
            continue
        lost = os.path.join(path, "lost")
        os.makedirs(lost, mode=0o700, exist_ok=True)
        shutil.copy2(full, os.path.join(lost, name))
        os.truncate(full, at)
        done.append(
            f"the write-ahead log {name} was damaged at byte {at} (a record header that cannot be read): "
            f"cut there (the whole file is kept in lost/{name}); the writes after it are lost"
        )
    return done
