"""Side logs of a data directory (:class:`SideLog`, e.g. the change log, blobstore/changes.py).

A side log is appended to, one checksummed record per write at the log's logical end. A
log kept *in place* is zero-filled a chunk (:data:`CHUNK`) ahead, so that a sync
(:meth:`SideLog.sync`, called by the store's sync) writes the records and not the file's
size, which would commit the filesystem's journal as well (issue 31: a synced write of a
growing file costs about two of one written in place); a write over zeros costs a few
microseconds more than one that grows the file, so a log that is rarely synced grows
instead. A log kept *mapped* (a store's logs under sync="os", which are never synced after a
call) is in place, its zeros ahead allocated rather than written, and written through a
shared memory map of 256 KiB of the file from the page of its logical end (moved on when a
record would pass it): an append is a copy, with no system call (issue 31;
docs/figures/mapped57/side-log.txt times the three ways). Compiled only: a file cut under the
map makes the copy a bus error (SIGBUS), which the compiled copy turns into a failed append
(sidelog.pxd) and Python code could not; interpreted, a mapped log is written by ``pwrite``
as one in place is. A process killed at any moment leaves every record written before (the
kernel holds them, written either way); the sync makes them survive a power loss too.
Reading stops at a zero header with nothing but zeros after it (the end), at a record the
file ends inside, that a power loss cut mid-write or whose checksum was not written yet (a
copy into the map is framed length first, checksum last: a cut tail), and at anything else
that fails (damage). They start
afresh, atomically and durably, with one record (and, in place, the first chunk of zeros).

Compiled (sidelog.pxd), the append is C: every durable put and get appends a record to the
change log (issue 31: interpreted, the two appends of a ``sync="os"`` put+get were about
14,000 of its 72,000 instructions). :class:`SideLog` stays a normal class on its hot half
(:class:`_Appending`), so that a test may patch its methods, ``append`` among them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
import threading
from collections.abc import Callable
from typing import Any

import cython
from cython import compiled as COMPILED

from .crc import crc32_at
from .files import SIDE_PREFIX, write_side_file
from .kv import KVError

if COMPILED:  # the C functions the compiled form calls
    from cython.cimports.cpython.bytes import PyBytes_AS_STRING
    from cython.cimports.libc import errno as c_errno
    from cython.cimports.posix.mman import MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE, madvise, mmap, munmap
    from cython.cimports.posix.uio import iovec, pwritev

_LOG_MAGIC = b"SQG1"
_LOG_HEAD = struct.Struct("<II")  # length of the record, crc32 of it
_HEAD = _LOG_HEAD.size  # the compiled form's C copy (sidelog.pxd types it)
_SECTOR = 512  # a power loss tears a write in place at sector boundaries (pages are whole sectors)
CHUNK = 1 << 20  # a side log is kept zero-filled this far ahead of its logical end
_PAGE = 4096  # a map starts at a multiple of it (the page size of Linux on x86-64 and most others)
_WINDOW = 256 << 10  # a map covers this much of a log, or its record: its pages count in the process's RSS
_POPULATE_WRITE = 23  # MADV_POPULATE_WRITE (Linux 5.14): a map's pages made writable in one call


class _Appending:
    """The hot half of :class:`SideLog`: its append. Compiled, a C type whose fields
    (sidelog.pxd) the append reads without a look-up; :class:`SideLog`, a normal class on it,
    holds the rest and sets these fields in its ``__init__``.

    Invariant, while the log takes records (:attr:`failed` None): every byte of the file past
    :attr:`_end` (the logical end, once appending) is zero (a write that fails part way may
    leave bytes there, and the log then takes none until :meth:`SideLog.start` writes it
    afresh); in place, :attr:`_size` is the file's size, at least half a :data:`CHUNK` past
    the end of the last record written but one (extended by a zero chunk when a record would
    not fit); not in place, the file ends at :attr:`_end` and :attr:`_size` is what it was
    when the log was read or started. Mapped (compiled), the map covers the file from
    :attr:`_map_at` for :attr:`_map_len` bytes, within :attr:`_size`, or nothing (both 0)."""

    path: str
    failed: str | None
    unsynced: bool
    _fd: int | None
    _end: int
    _size: int
    _in_place: bool
    _mapped: bool
    _map_at: int
    _map_len: int
    _zeros_after: bool
    _base: Any  # compiled: the map's first byte (an unsigned char *)
    _lock: threading.Lock

    def append(self, record: bytes) -> None:
        """Add ``record`` at the logical end, written in place over zeros. Never raises: a
        log that cannot be written says why in :attr:`failed` and takes nothing more until
        :meth:`SideLog.start`."""
        if self.failed is not None:
            return
        crc = crc32_at(record, 0)  # zlib's, in C where compiled (a redo log's records are whole messages)
        lock = self._lock
        lock.acquire()  # not a with: its look-ups and bound methods cost more than the lock (issue 31)
        try:
            fd = self._fd if self._fd is not None else self._open()
            at = self._end
            end = at + _HEAD + len(record)
            if end > self._size and self._in_place:
                self._extend(fd, end)
            if COMPILED and self._mapped and len(record) <= 0xFFFFFFFF:
                if at < self._map_at or end > self._map_at + self._map_len:
                    self._map(fd, at, end)
                if sweepq_map_put(self._base + (at - self._map_at), PyBytes_AS_STRING(record), len(record), crc):  # type: ignore[name-defined]  # noqa: F821  (sidelog.pxd's C)
                    self._unmap()
                    raise OSError(errno.EFAULT, "a bus error writing through its map: the file was cut under it")
            else:
                _write_record_at(fd, record, crc, at)  # not in place, it grows the file
            self._end = end
            self.unsynced = True
        except OSError as e:
            self.failed = f"appending to {self.path} failed ({e})"
        finally:
            lock.release()

    def _map(self, fd: int, at: int, end: int) -> None:
        """Map the file from the page of ``at`` for 256 KiB, or to ``end`` when that is further,
        never past its size (compiled only: the blocks there are allocated, so no copy into the
        map allocates), its pages made writable at once where the kernel can
        (``MADV_POPULATE_WRITE``; a fault per page otherwise). :raises OSError: the map, or the
        bus-error guard, could not be made."""
        self._unmap()
        if sweepq_bus_guard() != 0:  # type: ignore[name-defined]  # noqa: F821  (sidelog.pxd's C)
            raise OSError(c_errno.errno, "the bus-error guard could not be installed")
        start = at - at % _PAGE
        n = max(min(self._size, start + _WINDOW), end) - start
        p = mmap(cython.NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, start)
        if p == MAP_FAILED:
            e = c_errno.errno
            raise OSError(e, os.strerror(e))
        madvise(p, n, _POPULATE_WRITE)  # an error (an older kernel) leaves the faults to the copies
        self._base = cython.cast(cython.p_uchar, p)
        self._map_at, self._map_len = start, n

    def _unmap(self) -> None:
        """Drop the map (what was copied into it stays in the file: the kernel holds it)."""
        if COMPILED and self._map_len:
            munmap(self._base, self._map_len)
            self._base = cython.NULL
        self._map_at = self._map_len = 0

    def _open(self) -> int:
        """The file opened for appending (under the lock), its logical end known: from the
        :meth:`SideLog.read` before (the store reads its log at open), else read now. A
        record cut short after the last whole one (a power loss, or a kill during a copy into
        the map) is zeroed, durably, before the first record is written over it."""
        fd = os.open(self.path, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0))
        try:
            size = os.fstat(fd).st_size
            if self._end < 0 or self._size != size:
                data = os.pread(fd, size, 0)
                _out, why, end = _scan(self.path, data)
                self._end, self._size = _append_at(data, why, end), size
            cut = 0
            if not self._zeros_after:  # (a log this object started has none: no MiB read)
                rest = os.pread(fd, self._size - self._end, self._end)
                cut = 0 if _zero_from(rest, 0) else len(rest.rstrip(b"\0"))
            if cut:
                _write_at(fd, bytes(cut), self._end)
                os.fdatasync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return fd

    def _extend(self, fd: int, need: int) -> None:
        """Zeros from the file's end past ``need`` by at least half a chunk (in place: the one
        write that grows the file, the next sync commits the filesystem's journal once for it).
        Mapped, the zeros are allocated, not written (``posix_fallocate``: blocks that read as
        zeros, so a copy into the map needs no allocation, and no page is written twice; a
        mapped log is not synced after each call, so what its first sync converts costs once)."""
        size = -(-(need + CHUNK // 2) // CHUNK) * CHUNK
        if self._mapped:
            os.posix_fallocate(fd, self._size, size - self._size)
        else:
            _write_at(fd, bytes(size - self._size), self._size)
        self._size = size


class SideLog(_Appending):
    """One side log of a data directory (see the module docstring). Thread-safe: reserving
    the offset of a record and writing it there happen under one lock, so appends from
    several threads land whole, one after another, and appends wait while the log is
    started again (:meth:`start`). Its invariant is :class:`_Appending`'s."""

    def __init__(self, path: str, name: str, in_place: bool = False, mapped: bool = False):
        self.path = os.path.join(path, SIDE_PREFIX + name)
        self._in_place = in_place or mapped  # zeros kept a chunk ahead (see the module docstring)
        self._mapped = mapped  # written through a map of its end (compiled; see the module docstring)
        self._map_at = self._map_len = 0  # nothing mapped yet
        self._zeros_after = False  # known to be zeros from the logical end on (start wrote them)
        self._fd = None
        self._end = -1  # the logical end, where the next record goes (-1: not known yet)
        self._size = 0  # the file's size (zeros from _end to it)
        self._lock = threading.Lock()  # offsets and writes; an append never lands in a log a start replaces
        self.failed = None  # why an append failed (appends then stop until start)
        self.unsynced = False  # records were appended since the last sync began

    def read(self) -> tuple[list[bytes], str | None]:
        """Every whole record, in order, and why reading stopped before the end (None: it
        did not; a record the file ends inside is a cut tail, and a zero header with nothing
        but zeros after it the end of a preallocated log, neither of them damage).
        No file: ([], None). Read before the first append, it tells that append where the
        log ends (see :meth:`_open`)."""
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return [], None
        except OSError as e:
            return [], f"{self.path} cannot be read ({e})"
        out, why, end = _scan(self.path, data)
        with self._lock:
            if self._fd is None:  # not appending yet: the first append starts there
                self._end, self._size = _append_at(data, why, end), len(data)
        return out, why

    def start(self, record: bytes, first: Callable[[], None] | None = None) -> None:
        """Replace the log with one holding only ``record``, zero-filled to a whole chunk,
        atomically and durably; ``first`` runs before, with appends held: what the records
        dropped stand for must be durable elsewhere first (RocksDB's log synced: a record may
        be the only synced copy of a write under sync="commit", blobstore/changes.py). An
        append waits, then goes to the new log. :raises KVError: not replaced (the old log
        stands)."""
        dirname, name = os.path.split(self.path)
        head = _LOG_MAGIC + _frame(record)
        size = -(-(len(head) + CHUNK // 2) // CHUNK) * CHUNK if self._in_place else len(head)  # zeros after it
        with self._lock:
            if first is not None:
                first()
            write_side_file(dirname, name[len(SIDE_PREFIX) :], b"", raw=head + bytes(size - len(head)))
            self._close()
            self._end, self._size = len(head), size
            self._zeros_after = True  # as written: the first append need not read them
            self.failed = None
            self.unsynced = False  # the new log was written durably

    def sync(self) -> None:
        """Make every record appended so far survive a power loss (one fdatasync, as RocksDB
        syncs its own log: the data, and the length when a chunk was added, not the times;
        the GIL is released meanwhile). A log that takes no more records (:attr:`failed`)
        has nothing to sync. :raises KVError: the sync failed."""
        fd = self._fd
        if fd is None or self.failed is not None:
            return
        self.unsynced = False  # before the sync: an append meanwhile is left to the next one
        try:
            os.fdatasync(fd)
        except OSError as e:
            self.unsynced = True  # what it held is still owed: the retry must sync it
            raise KVError(f"syncing {self.path} failed ({e})") from e

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        self._unmap()
        fd, self._fd = self._fd, None
        self._end = -1
        self._zeros_after = False
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_at(fd: int, data: bytes, at: int) -> None:
    """All of ``data`` written at offset ``at`` of ``fd`` (a write that stops short, at a limit
    on the file's size, goes on with the rest, which then fails). :raises OSError: a write
    failed."""
    done = 0
    while done < len(data):
        wrote = os.pwrite(fd, data[done:] if done else data, at + done)
        if wrote <= 0:  # never loop on a write that makes no progress
            raise OSError(errno.EIO, f"a write of {len(data) - done} bytes wrote nothing")
        done += wrote


def _write_record_at(fd: int, record: bytes, crc: int, at: int) -> None:
    """``record`` framed (:func:`_frame`, ``crc`` its crc32) written at offset ``at`` of
    ``fd``. Compiled, in one ``pwritev`` of the header from the stack and the record where it
    is (no framed copy made), the GIL released meanwhile, as ``os.pwrite`` releases it.
    :raises OSError: as :func:`_write_at`."""
    n = len(record)
    if not COMPILED or n > 0xFFFFFFFF:  # (a record too long for its u32 raises as the pack does)
        _write_at(fd, _LOG_HEAD.pack(n, crc) + record, at)
        return
    head = cython.declare(cython.uchar[8])
    iov = cython.declare(iovec[2])
    for k in range(4):  # both little endian, as _LOG_HEAD packs them
        head[k] = (n >> (8 * k)) & 0xFF
        head[4 + k] = (crc >> (8 * k)) & 0xFF
    iov[0].iov_base = head
    iov[0].iov_len = _HEAD
    iov[1].iov_base = PyBytes_AS_STRING(record)
    iov[1].iov_len = n
    while True:
        with cython.nogil:
            w = pwritev(fd, iov, 2, at)
            e = c_errno.errno
        if w >= 0 or e != c_errno.EINTR:
            break
    if w < 0:
        raise OSError(e, os.strerror(e))
    if w < _HEAD + n:  # stopped short: the rest as _write_at writes it
        _write_at(fd, (_LOG_HEAD.pack(n, crc) + record)[w:], at + w)


def _frame(record: bytes) -> bytes:
    """``record`` as a side log holds it: its length and crc32, then itself."""
    return _LOG_HEAD.pack(len(record), crc32_at(record, 0)) + record


def _scan(path: str, data: bytes) -> tuple[list[bytes], str | None, int]:
    """A side log's whole records, why reading stopped before the end (None: it did not),
    and the offset after the last whole record (the logical end)."""
    if data[:4] != _LOG_MAGIC:
        return [], f"{path} is damaged at byte 0 (not a side log)", len(data)
    out: list[bytes] = []
    pos = 4
    while pos + _LOG_HEAD.size <= len(data):
        n, crc = _LOG_HEAD.unpack_from(data, pos)
        if n == 0 and crc == 0 and _zero_from(data, pos):
            return out, None, pos  # zeros to the end of the file: preallocated, not written yet
        end = pos + _LOG_HEAD.size + n
        body = data[pos + _LOG_HEAD.size : end]
        if len(body) < n:
            return out, None, pos  # cut inside its last record
        if n == 0 or crc32_at(body, 0) != crc:
            if _torn(data, pos, end) or (crc == 0 and _zero_from(data, end)):
                return out, None, pos  # cut by a power loss, or its copy into the map by a kill
            return out, f"{path} is damaged at byte {pos} (a record fails its checksum)", pos
        out.append(body)
        pos += _LOG_HEAD.size + n
    return out, None, pos


def _torn(data: bytes, pos: int, end: int) -> bool:
    """Whether the record at ``pos`` that fails its checksum is the last one, written in
    place but cut by a power loss: its bytes zero from a sector boundary on, and only zeros
    after it (a bit flipped on disk leaves no such run). Like a record the file ends
    inside, that is a cut tail, not damage: no call that wrote it had returned from a sync."""
    if not _zero_from(data, end):
        return False
    written = len(data[pos:end].rstrip(b"\0")) + pos  # after its last byte that is not zero
    return -(-written // _SECTOR) * _SECTOR < end


def _zero_from(data: bytes, start: int) -> bool:
    """Whether every byte of ``data`` from ``start`` on is zero: one compare with zeros (a
    memcmp, where ``count`` and ``rstrip`` look at each byte, each about a millisecond a MiB:
    a log kept in place is mostly zeros, read at every open and before its first append)."""
    n = len(data) - start
    return n <= 0 or data.endswith(bytes(n))


def _append_at(data: bytes, why: str | None, end: int) -> int:
    """Where the first append goes: the logical end, or after damage (read() stops there
    whatever follows), after the last byte that is not zero, as O_APPEND appended."""
    return end if why is None else len(data.rstrip(b"\0"))
