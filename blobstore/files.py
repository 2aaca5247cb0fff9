"""The data directory's own files: side records beside the database, its privacy, repair.

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
import os
import struct
import zlib

from rocksdict import Options, Rdict

from .kv import KVCorruption, KVError

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


def write_side_file(path: str, name: str, data: bytes) -> None:
    """Replace the side record ``name`` atomically and durably (write, fsync, rename, fsync
    the directory), private to its owner whatever the umask. :raises KVError: not replaced."""
    full = os.path.join(path, SIDE_PREFIX + name)
    tmp = full + ".tmp"
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, _SIDE_HEAD.pack(_SIDE_MAGIC, zlib.crc32(data), len(data)) + data)
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


def repair(path: str) -> list[str]:
    """RocksDB's repair: rebuild the manifest from the files that can be read; files that
    cannot (a truncated table, a damaged log) are moved to ``lost/``. Returns their names.
    :raises KVError: the repair itself failed."""
    lost = os.path.join(path, "lost")
    before = set(os.listdir(lost)) if os.path.isdir(lost) else set()
    try:
        Rdict.repair(path, Options(raw_mode=True))
    except Exception as e:
        raise KVError(f"repairing the store at {path} failed: {e}") from e
    after = set(os.listdir(lost)) if os.path.isdir(lost) else set()
    make_private(path)
    return sorted(after - before)


def exists_as_store(path: str) -> bool:
    return os.path.isdir(path) and "CURRENT" in os.listdir(path)
