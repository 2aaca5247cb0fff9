"""RocksDB's own files, read by sweepq before RocksDB is given them.

**The log format.** The write-ahead logs (``NNNNNN.log``) and the manifest (named by
``CURRENT``) are sequences of records in 32 KiB blocks, each record behind a 7-byte header:
crc32c (4), length (2), type (1); a logical record longer than a block is cut into a first,
middle and last fragment. RocksDB's reader loops for ever (open, repair and listing the
families alike) on a header whose type byte says "recycled log" in a log that is not
recycled, which one flipped bit makes (found by the damage fuzz): :func:`walk` finds such a
header first, and where a file ends inside a record (cut short).

**Recycled logs** (the store's write-ahead logs since issue 31: ``recycle_log_file_num``,
blobstore/rocks.py). A log written to be recycled has 11-byte headers, the types 5 to 8
and after the type the number of the log (4 bytes), and RocksDB writes a new log over an
old one's file in place: past its last record the file holds the old log's records, which
carry an older number. :func:`walk` ends such a log at the first header that is not one of
its own (:attr:`Walk.end`), unless a later block of the file starts with one of its own
headers: then that header is damage (a block starts with a header in every use of the file,
and the writer fills the blocks in turn). RocksDB's strict replay (absolute consistency)
takes the old log's records for damage, so the open cuts them off first (blobstore/files.py
``mend_logs``).

**The manifest** is a log of *version edits*: which table files each column family gained
and lost, the number of the oldest write-ahead log each family still needs, the last
sequence number. :func:`read_manifest` replays them as RocksDB's own recovery does, so that
sweepq can see, before RocksDB opens the directory, which table files the manifest names
(RocksDB deletes every other one at open) and which log each family needs. Checksums are
left to RocksDB: a damaged record that decodes is taken as it reads, one that does not
makes the manifest unreadable here (then nothing is concluded from it).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

BLOCK = 32768
_HEADER = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_RECYCLED = struct.Struct("<IHBI")  # crc32c, length, type, the number of the log
_RECYCLED_TYPES = {5: FULL, 6: FIRST, 7: MIDDLE, 8: LAST}


@dataclass
class Walk:
    """What :func:`walk` found in a log-format file: its whole logical records, the offset
    of the first header RocksDB's reader must not be given (None: none), whether the file
    ends at the end of a whole record (False: cut short inside one), and in a recycled log
    where the older log's records begin (None: the file ends with its own)."""

    records: list[bytes] = field(default_factory=list)
    bad_header: int | None = None
    whole: bool = True
    end: int | None = None


def walk(data: bytes, log_number: int | None = None) -> Walk:
    """The records of a log-format file's bytes (see the module docstring); ``log_number``:
    the file is the write-ahead log of that number (its name's), which may be recycled. A
    zero header ends the walk (preallocated space); a block's tail too short for a header is
    padding."""
    if log_number is not None and len(data) > 6 and data[6] in _RECYCLED_TYPES:
        return _walk_recycled(data, log_number)
    out = Walk()
    pos, n = 0, len(data)
    pending: list[bytes] | None = None  # the fragments of a record cut across blocks
    while pos < n:
        left = BLOCK - pos % BLOCK
        if left < _HEADER.size:  # padding, unless the file ends inside it with bytes that are not
            if any(data[pos : pos + left]):
                out.whole = False
            pos += left
            continue
        if n - pos < _HEADER.size:
            out.whole = not any(data[pos:])
            break
        crc, length, kind = _HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0 and crc == 0:
            break
        if kind not in (FULL, FIRST, MIDDLE, LAST) or _HEADER.size + length > left:
            out.bad_header = pos
            out.whole = False
            return out
        body = data[pos + _HEADER.size : pos + _HEADER.size + length]
        if len(body) < length:  # the file ends inside this record
            out.whole = False
            return out
        pos += _HEADER.size + length
        pending = _add(out, pending, kind, body)
    if pending is not None:
        out.whole = False
    return out


def _add(out: Walk, pending: list[bytes] | None, kind: int, body: bytes) -> list[bytes] | None:
    """One fragment more: a whole record to ``out.records``; returns the fragments pending."""
    if kind == FULL:
        out.records.append(body)
        return None
    if kind == FIRST:
        return [body]
    if pending is not None:
        pending.append(body)
        if kind == LAST:
            out.records.append(b"".join(pending))
            return None
    return pending


def _walk_recycled(data: bytes, log_number: int) -> Walk:
    """:func:`walk` of a log written to be recycled (see the module docstring)."""
    out = Walk()
    pos, n = 0, len(data)
    pending: list[bytes] | None = None
    size = _RECYCLED.size
    while pos < n:
        left = BLOCK - pos % BLOCK
        if left < size and not any(data[pos : pos + left]):
            pos += left  # padding
            continue
        if n - pos < size:
            out.whole = not any(data[pos:])
            break
        _crc, length, kind, number = _RECYCLED.unpack_from(data, pos) if left >= size else (0, 0, 0, -1)
        if number != log_number or kind not in _RECYCLED_TYPES or size + length > left:
            if _own_header_after(data, pos, log_number):
                out.bad_header = pos
                out.whole = False
            else:
                out.end = pos  # the older log's records: this one ends here
                out.whole = pending is None
            return out
        body = data[pos + size : pos + size + length]
        if len(body) < length:  # the file ends inside this record
            out.whole = False
            return out
        pos += size + length
        pending = _add(out, pending, _RECYCLED_TYPES[kind], body)
    if pending is not None:
        out.whole = False
    return out


def _own_header_after(data: bytes, pos: int, log_number: int) -> bool:
    """Whether a block after the one ``pos`` is in starts with a header of log ``log_number``."""
    own = log_number.to_bytes(4, "little")
    for start in range((pos // BLOCK + 1) * BLOCK, len(data) - _RECYCLED.size + 1, BLOCK):
        if data[start + 6] in _RECYCLED_TYPES and data[start + 7 : start + 11] == own:
            return True
    return False


def log_number(path: str) -> int | None:
    """The number of the write-ahead log ``path`` (``NNNNNN.log``); None: not one."""
    name = os.path.basename(path)
    return int(name[:-4]) if name.endswith(".log") and name[:-4].isdigit() else None


def first_bad_header(path: str) -> int | None:
    """The offset of the first record header of the log-format file ``path`` that RocksDB's
    reader must not be given (an unknown type, a length past its block), or None."""
    with open(path, "rb") as f:
        return walk(f.read(), log_number(path)).bad_header


# -- the manifest ------------------------------------------------------------------------------------

# Version edit tags (RocksDB db/version_edit.h); those at or above _SAFE_IGNORE are followed by
# a length and may be skipped, except the few older ones that are not.
_COMPARATOR, _LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _COMPACT_CURSOR = 1, 2, 3, 4, 5
_DELETED_FILE, _NEW_FILE, _PREV_LOG, _MIN_LOG_TO_KEEP = 6, 7, 9, 10
_NEW_FILE2, _NEW_FILE3, _NEW_FILE4 = 100, 102, 103
_CF, _CF_ADD, _CF_DROP, _MAX_CF = 200, 201, 202, 203
_ATOMIC_GROUP = 300
_SAFE_IGNORE = 1 << 13
_UNPREFIXED = (_SAFE_IGNORE + 2, _SAFE_IGNORE + 3, _SAFE_IGNORE + 4, _SAFE_IGNORE + 5)  # old blob and WAL tags


class _Undecodable(Exception):
    pass


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def more(self) -> bool:
        return self.pos < len(self.data)

    def varint(self) -> int:
        shift = value = 0
        while True:
            if self.pos >= len(self.data) or shift > 63:
                raise _Undecodable("varint")
            b = self.data[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if b < 0x80:
                return value
            shift += 7

    def slice(self) -> bytes:
        n = self.varint()
        if self.pos + n > len(self.data):
            raise _Undecodable("slice")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out


@dataclass
class _Edit:
    cf: int = 0
    add_cf: str | None = None
    drop_cf: bool = False
    log_number: int | None = None
    next_file: int | None = None
    last_sequence: int | None = None
    new: list[int] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    group: int | None = None  # entries left in its atomic group, counting this one


def _decode(record: bytes) -> _Edit:
    e, r = _Edit(), _Reader(record)
    while r.more():
        tag = r.varint()
        if tag in (_COMPARATOR, _CF_ADD):
            name = r.slice()
            if tag == _CF_ADD:
                e.add_cf = name.decode("utf-8", "replace")
        elif tag in (_LOG_NUMBER, _NEXT_FILE, _LAST_SEQUENCE, _PREV_LOG, _MIN_LOG_TO_KEEP):
            v = r.varint()
            if tag == _LOG_NUMBER:
                e.log_number = v
            elif tag == _NEXT_FILE:
                e.next_file = v
            elif tag == _LAST_SEQUENCE:
                e.last_sequence = v
        elif tag == _COMPACT_CURSOR:
            r.varint()
            r.slice()
        elif tag == _DELETED_FILE:
            r.varint()
            e.deleted.append(r.varint())
        elif tag in (_NEW_FILE, _NEW_FILE2, _NEW_FILE3, _NEW_FILE4):
            r.varint()  # level
            e.new.append(r.varint())
            if tag == _NEW_FILE3:
                r.varint()  # path id
            r.varint()  # size
            r.slice()  # smallest key
            r.slice()  # largest key
            if tag != _NEW_FILE:
                r.varint()  # smallest seqno
                r.varint()  # largest seqno
            if tag == _NEW_FILE4:  # custom fields up to the terminator
                while (custom := r.varint()) != 1:
                    del custom
                    r.slice()
        elif tag in (_CF, _MAX_CF):
            v = r.varint()
            if tag == _CF:
                e.cf = v
        elif tag == _CF_DROP:
            e.drop_cf = True
        elif tag == _ATOMIC_GROUP:
            e.group = r.varint()
        elif tag & _SAFE_IGNORE and tag not in _UNPREFIXED:
            r.slice()
        else:
            raise _Undecodable(f"tag {tag}")
    return e


@dataclass
class Manifest:
    """The state a manifest describes (see :func:`read_manifest`)."""

    name: str
    size: int
    whole: bool  # it ends at the end of a whole record
    families: dict[int, str] = field(default_factory=dict)
    tables: dict[int, set[int]] = field(default_factory=dict)  # family id -> its table file numbers
    log_numbers: dict[int, int] = field(default_factory=dict)  # family id -> the oldest log it needs
    next_file: int = 0
    last_sequence: int = 0

    def live_tables(self) -> set[int]:
        return set().union(*self.tables.values()) if self.tables else set()

    def oldest_log_needed(self) -> int:
        """The number of the oldest write-ahead log some family still needs (0: none named)."""
        return min(self.log_numbers.values(), default=0)


def read_manifest(path: str) -> Manifest | None:
    """The manifest ``CURRENT`` names in the data directory ``path``, replayed (None: there
    is no readable ``CURRENT``, it names no file, or a record does not decode)."""
    name = current_manifest(path)
    if name is None:
        return None
    full = os.path.join(path, name)
    try:
        with open(full, "rb") as f:
            data = f.read()
    except OSError:
        return None
    w = walk(data)
    m = Manifest(name, len(data), w.whole and w.bad_header is None, {0: "default"}, {0: set()}, {})
    group: list[_Edit] = []
    try:
        for record in w.records:
            e = _decode(record)
            if e.group is not None:  # an atomic group applies whole or not at all
                group.append(e)
                if e.group > 1:
                    continue
                edits, group = group, []
            elif group:
                group = []  # a group cut short is dropped, as RocksDB drops it
                edits = [e]
            else:
                edits = [e]
            for edit in edits:
                _apply(m, edit)
    except _Undecodable:
        return None
    return m


def _apply(m: Manifest, e: _Edit) -> None:
    if e.add_cf is not None:
        m.families[e.cf] = e.add_cf
        m.tables.setdefault(e.cf, set())
    if e.drop_cf:
        m.families.pop(e.cf, None)
        m.tables.pop(e.cf, None)
        m.log_numbers.pop(e.cf, None)
        return
    files = m.tables.setdefault(e.cf, set())
    files.difference_update(e.deleted)
    files.update(e.new)
    if e.log_number is not None:
        m.log_numbers[e.cf] = max(m.log_numbers.get(e.cf, 0), e.log_number)
    if e.next_file is not None:
        m.next_file = e.next_file
    if e.last_sequence is not None:
        m.last_sequence = e.last_sequence


def current_manifest(path: str) -> str | None:
    """The name of the manifest ``CURRENT`` names in ``path`` (None: none readable, or it
    names no manifest file that exists)."""
    try:
        with open(os.path.join(path, "CURRENT"), "rb") as f:
            name = f.read().decode("ascii", "replace").strip()
    except OSError:
        return None
    ok = name.startswith("MANIFEST-") and "/" not in name and os.path.isfile(os.path.join(path, name))
    return name if ok else None


def numbered(path: str, suffix: str) -> dict[int, str]:
    """The files of ``path`` named ``NNNNNN<suffix>`` (".sst", ".log"), by number."""
    out = {}
    for name in os.listdir(path):
        if name.endswith(suffix) and name[: -len(suffix)].isdigit():
            out[int(name[: -len(suffix)])] = name
    return out
