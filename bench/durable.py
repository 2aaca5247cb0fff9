"""Durability figures (issue 10 §7): sweepq's persistent messages beside what a Python user
would pick instead, at the same guarantee, all measured in one run.

* :func:`crash_safe`: put ``n`` persistent 1 KiB messages, then get them, where a returned
  call survives a crash of the *process*: sweepq ``sync="os"`` (the RocksDB log written to
  the OS, never fsynced) against persist-queue's ``SQLiteQueue`` (WAL journal with
  ``PRAGMA synchronous=NORMAL``, and with ``OFF``: each commit hands its WAL frames to the
  OS, fsync only at checkpoints or never), persist-queue's file ``Queue`` (``autosave=True``:
  every put and get flushes its chunk and rewrites its info file; fsync only when a chunk of
  100 fills) and ``diskcache.Deque`` (its defaults: WAL, ``synchronous=NORMAL``).
  Beside them two floors of sweepq's own (issue 31): its store alone
  (``BlobStore.write_messages`` per put and get, no queue manager) and what every durable call
  writes at least, one RocksDB log write and one change-log append (``RocksKV``, no store
  layers): a row's distance to them is what its layers above cost.
* :func:`power_safe`: the same where a returned call survives a *power loss*: sweepq
  ``sync="commit"`` against the machine's fsync floor (``os.write`` of 1 KiB then
  ``os.fsync``, per message, on a fresh file in the same directory) and the peers made
  power-safe (``SQLiteQueue``'s default ``synchronous=FULL``, ``diskcache`` with
  ``sqlite_synchronous=2``). A put and a get are each one synced write, so the floor does two
  write+fsync per message too.
* :func:`producers`: 1 and ``k`` producer threads (a connection each) putting persistent
  messages with ``sync="commit"``, outside syncpoint and under syncpoint with a commit per
  message; group commit (engine/durable/journal.py ``GroupSync``) should let ``k`` threads
  share each fsync. Reports syncs per commit (``qm.journal.group.syncs``; each syncs
  RocksDB's log and the change log). Beside them, in the same rounds, the ceiling: 1 and
  ``k`` threads writing with a pwrite each and no queue manager, syncing by a bare group
  commit (a shared fdatasync) and by an fdatasync per write (shared by the kernel).
* :func:`recovery`: a data directory with ``n`` persistent 100-200 B messages, half of them
  swept into blobs, then the time of ``QueueManager.open(path)`` with the sweeper off in each of
  three fresh processes one after the other, what ``qm.recovery`` found, and a drain that
  checks every message comes back once, in put order. With ``profile`` (or when it misses
  its goal) the last open runs again under cProfile and the costliest functions are returned.

Every contender runs in a fresh directory under ``base`` each round, rounds interleaved, the
best round kept (bench/timing.py explains why): the ratios are the figures, not the rates.
Opening and closing are not timed.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

# The goals of issue 10 §7 (the crash-safe one as issue 31 set it again: 5 x SQLite OFF).
GOAL_CRASH_SAFE_VS_PERSIST_QUEUE = 5.0
GOAL_POWER_SAFE_VS_FLOOR = 1.0  # issue 31: one producer at least the fsync floor (issue 10 asked for 0.8)
GOAL_PRODUCERS_VS_ONE = 8.0  # issue 31 (issue 10 asked for 5 x)
GOAL_RECOVERY_SECONDS = 1.0  # issue 23 (issue 10 §7 asked for 2 s)
SQLITE_OFF = "persist-queue SQLiteQueue, synchronous=OFF"  # the crash-safe goals' baseline
RECOVERY_OPENS = 3  # issue 31: the goal holds "in three fresh-process runs", each in the same run


@dataclass
class Opened:
    """One contender opened on a directory: its put and get of bytes, and how to close it.

    ``syncs`` (optional) counts the fsyncs it has made so far."""

    put: Callable[[bytes], object]
    get: Callable[[], bytes]
    close: Callable[[], None]
    syncs: Callable[[], int] | None = None


# -- the contenders ----------------------------------------------------------------------------


def open_sweepq(path: str, sync: str) -> Opened:
    from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings

    qm = QueueManager.open(path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync=sync))
    qm.define_queue("Q", default_persistence=Persistence.PERSISTENT)
    h = qm.connect().open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    get = h.get
    group = qm.journal.group
    return Opened(h.put, lambda: get().data, qm.close, (lambda: group.syncs) if group else None)


def open_queue_path(path: str) -> Opened:
    """``sweepq.Queue(path=, sync="os")``, the ``queue.Queue``-style door on the same durable
    put and get (bench/queues.py times it; bench/instructions.py counts it)."""
    from sweepq import Queue

    q: Queue[bytes] = Queue(path=path, sync="os")
    return Opened(q.put, q.get_nowait, q.close)


def _sqlite_queue(path: str, synchronous: str | None) -> Opened:
    import persistqueue

    q = persistqueue.SQLiteQueue(path, auto_commit=True)
    if synchronous is not None:  # one connection: multithreading=False makes _putter the getter too
        q._putter.execute(f"PRAGMA synchronous={synchronous}")
    return Opened(q.put, lambda: q.get(block=False), lambda: q._putter.close())


def sqlite_synchronous(path: str, synchronous: str | None) -> int:
    """The ``PRAGMA synchronous`` an SQLiteQueue opened as :func:`_sqlite_queue` runs with
    (0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA), read back from its connection."""
    import persistqueue

    q = persistqueue.SQLiteQueue(path, auto_commit=True)
    if synchronous is not None:
        q._putter.execute(f"PRAGMA synchronous={synchronous}")
    value = q._putter.execute("PRAGMA synchronous").fetchone()[0]
    q._putter.close()
    return value


def _file_queue(path: str) -> Opened:
    import persistqueue

    parent = os.path.dirname(path)
    q = persistqueue.Queue(path, autosave=True, tempdir=parent)  # its info file's temp copies beside it
    return Opened(q.put, lambda: q.get(block=False), lambda: None)


def _diskcache_deque(path: str, synchronous: int | None) -> Opened:
    import diskcache

    if synchronous is None:
        d = diskcache.Deque(directory=path)
    else:
        d = diskcache.Deque.fromcache(diskcache.Cache(path, eviction_policy="none", sqlite_synchronous=synchronous))
    return Opened(d.append, d.popleft, d._cache.close)


def _floor(path: str) -> Opened:
    """The fsync floor: every put and every get is one ``os.write`` of the payload and one
    ``os.fsync`` of a file of its own (appending, as a log does)."""
    os.makedirs(path)
    fd = os.open(os.path.join(path, "floor"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    last = [b""]

    def put(data: bytes) -> None:
        os.write(fd, data)
        os.fsync(fd)
        last[0] = data

    def get() -> bytes:
        os.write(fd, last[0])  # a get is a synced write too (a removal record, here the size of a message)
        os.fsync(fd)
        return last[0]

    return Opened(put, get, lambda: os.close(fd))


def _fifo_of_records(write: Callable[[list, list], object], close: Callable[[], None]) -> Opened:
    """Put and get over ``write(puts, deletes)`` of message records: a put writes the next
    key, a get deletes the oldest (a queue's durable work without the queue)."""
    keys: list[bytes] = []
    values: dict[bytes, bytes] = {}
    count = iter(range(1 << 62))
    first = [0]

    def put(data: bytes) -> None:
        key = b"Q\0%016x" % next(count)
        write([(key, data)], [])
        keys.append(key)
        values[key] = data

    def get() -> bytes:
        key = keys[first[0]]
        first[0] += 1
        write([], [key])
        return values.pop(key)

    return Opened(put, get, close)


def _store_alone(path: str) -> Opened:
    """The floor of the store's layers: sweepq's store alone (``BlobStore.write_messages``, a
    record written per put and deleted per get, the change log started as a queue manager's
    checkpoint starts it, each write deferred as under sync="os": blobstore/redolog.py), no
    queue manager above it."""
    from sweepq.blobstore import BlobStore

    store = BlobStore(path, redo=False, defer=True)
    store.write_checkpoint(b"")
    return _fifo_of_records(lambda puts, deletes: store.write_messages(puts, deletes), store.close)


def _kv_alone(path: str) -> Opened:
    """The floor of what a durable call writes: per put (and per get) one RocksDB write to its
    log (a put, or a delete) and one change-log record appended (blobstore/rocks.py, no store
    layers): the two files each call is in when it returns, each written once."""
    from sweepq.blobstore import changes
    from sweepq.blobstore.kv import CF_MESSAGES
    from sweepq.blobstore.rocks import RocksKV

    os.makedirs(path)
    kv = RocksKV(path)
    kv.start_log(changes.NAME, changes.start(True, {}, {}))

    def write(puts: list, deletes: list) -> None:
        op = (CF_MESSAGES, *puts[0]) if puts else (CF_MESSAGES, deletes[0], None)
        kv.append_log(changes.NAME, changes.write(kv.write([op]), puts, deletes, whole=False))  # as sync="os"

    return _fifo_of_records(write, kv.close)


def _logs_alone(path: str) -> Opened:
    """The floor of what a deferred durable call writes (sync="os", blobstore/redolog.py): per
    put (and per get) its record whole appended to the redo log and by its head to the change
    log (blobstore/sidelog.py's appends through a map, as a store that defers makes them; no
    store layers, no RocksDB)."""
    from sweepq.blobstore import changes, redolog
    from sweepq.blobstore.sidelog import SideLog

    os.makedirs(path)
    redo, log = SideLog(path, redolog.NAME, mapped=True), SideLog(path, changes.NAME, mapped=True)
    redo.start(redolog.start(0))
    log.start(changes.start(True, {}, {}))
    numbers = iter(range(1, 1 << 62))

    def write(puts: list, deletes: list) -> None:
        key, value = puts[0] if puts else (deletes[0], None)
        number = next(numbers)
        redo.append(changes.one(number, key, value, True))
        log.append(changes.one(number, key, value, False, True))

    def close() -> None:
        redo.close()
        log.close()

    return _fifo_of_records(write, close)


STORE_ALONE = "floor: sweepq's store alone (BlobStore.write_messages, no queue manager)"
KV_ALONE = "a RocksDB log write + a change-log append per call, as before deferred writes (no store layers)"
LOGS_ALONE = "floor: a redo-log + a change-log append per call, as a deferred call makes them (no store layers)"


def crash_safe_contenders() -> tuple[dict[str, Callable[[str], Opened]], list[str]]:
    """The process-crash-safe contenders (absent peers left out) and notices for what is missing."""
    out: dict[str, Callable[[str], Opened]] = {'sweepq sync="os"': lambda p: open_sweepq(p, "os")}
    missing = []
    try:
        import persistqueue  # noqa: F401

        out["persist-queue SQLiteQueue, synchronous=NORMAL"] = lambda p: _sqlite_queue(p, "NORMAL")
        out[SQLITE_OFF] = lambda p: _sqlite_queue(p, "OFF")
        out["persist-queue Queue (file), autosave=True"] = _file_queue
    except ImportError:
        missing.append("persist-queue")
    try:
        import diskcache  # noqa: F401

        out["diskcache.Deque (defaults: synchronous=NORMAL)"] = lambda p: _diskcache_deque(p, None)
    except ImportError:
        missing.append("diskcache")
    return out, missing


def floor_contenders() -> dict[str, Callable[[str], Opened]]:
    """sweepq's own floors under its crash-safe put and get (see the module docstring): rows
    of :func:`crash_safe`, not peers (other benches take the peers alone)."""
    return {STORE_ALONE: _store_alone, LOGS_ALONE: _logs_alone, KV_ALONE: _kv_alone}


def power_safe_contenders() -> dict[str, Callable[[str], Opened]]:
    out: dict[str, Callable[[str], Opened]] = {
        "fsync floor (os.write 1 KiB + os.fsync)": _floor,
        'sweepq sync="commit"': lambda p: open_sweepq(p, "commit"),
    }
    try:
        import persistqueue  # noqa: F401

        out["persist-queue SQLiteQueue (default synchronous=FULL)"] = lambda p: _sqlite_queue(p, None)
    except ImportError:
        pass
    try:
        import diskcache  # noqa: F401

        out["diskcache.Deque, sqlite_synchronous=2 (FULL)"] = lambda p: _diskcache_deque(p, 2)
    except ImportError:
        pass
    return out


# -- timing --------------------------------------------------------------------------------------


def fill_drain_rounds(
    contenders: dict[str, Callable[[str], Opened]],
    n: int,
    payload: bytes,
    rounds: int,
    base: str | None = None,
    progress: Callable[[], None] | None = None,
) -> dict[str, dict]:
    """Each contender, opened once on a fresh directory, puts ``n`` then gets ``n`` per round,
    rounds interleaved (A, B, C, A, B, C, ...), so neighbouring rounds of different contenders
    share the machine's state (what an fsync costs on a shared disk changes by 10 x within
    seconds). Per contender, from its best round: ``pairs_per_s`` (messages put and got per
    second), ``ops_per_s`` (puts and gets per second), ``put_per_s``, ``get_per_s``; the same
    from its median round as ``median_ops_per_s``; ``round_seconds`` (every round, in order,
    for paired ratios); and, when it counts them, ``syncs_per_op``.

    :raises AssertionError: a contender gave back something else than it was given."""
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in contenders}
    syncs: dict[str, int | None] = dict.fromkeys(contenders)
    d = tempfile.mkdtemp(prefix="sweepq-durable-", dir=base)
    opened: dict[str, Opened] = {}
    try:
        for i, (name, make) in enumerate(contenders.items()):
            opened[name] = make(os.path.join(d, f"q{i}"))
        for _ in range(rounds):
            for name, o in opened.items():
                put, get = o.put, o.get
                s0 = o.syncs() if o.syncs else 0
                gc.collect()
                t0 = time.perf_counter()
                for _ in range(n):
                    put(payload)
                t1 = time.perf_counter()
                for _ in range(n - 1):
                    get()
                last = get()
                t2 = time.perf_counter()
                assert last == payload, f"{name}: the last get returned {last!r:.40}"
                times[name].append((t1 - t0, t2 - t1))
                if o.syncs:
                    syncs[name] = (syncs[name] or 0) + o.syncs() - s0
            if progress:
                progress()
    finally:
        for o in opened.values():
            o.close()
        shutil.rmtree(d, ignore_errors=True)
    out = {}
    for name, ts in times.items():
        totals = sorted(p + g for p, g in ts)
        r = {
            "pairs_per_s": n / totals[0],
            "ops_per_s": 2 * n / totals[0],
            "put_per_s": n / min(p for p, _ in ts),
            "get_per_s": n / min(g for _, g in ts),
            "median_ops_per_s": 2 * n / totals[len(totals) // 2],
            "round_seconds": [p + g for p, g in ts],
        }
        if syncs[name] is not None:
            r["syncs_per_op"] = syncs[name] / (2 * n * rounds)
        out[name] = r
    return out


def _paired(mine: list[float], base: list[float]) -> float:
    """The median over rounds of base time / my time: a ratio of rates, each round against
    the baseline's round next to it."""
    ratios = sorted(b / m for m, b in zip(mine, base, strict=True))
    k = len(ratios)
    return ratios[k // 2] if k % 2 else (ratios[k // 2 - 1] + ratios[k // 2]) / 2


def crash_safe(n: int, size: int, rounds: int, base: str | None = None, progress=None) -> dict:
    """Process-crash-safe put+get (see the module docstring), against the persist-queue row
    with the best median round (``persist_queue_baseline``): ``ratio_vs_persist_queue`` is
    paired (the median over rounds of its round time over the contender's round next to it),
    ``best_ratio_vs_persist_queue`` compares best rounds."""
    contenders, missing = crash_safe_contenders()
    res = fill_drain_rounds({**contenders, **floor_contenders()}, n, b"x" * size, rounds, base, progress)
    pq = [k for k in res if k.startswith("persist-queue")]
    out: dict = {"messages": n, "size": size, "rounds": rounds, "contenders": res, "missing": missing}
    if pq:
        name = max(pq, key=lambda k: res[k]["median_ops_per_s"])
        ref = res[name]
        for r in res.values():
            r["ratio_vs_persist_queue"] = _paired(r["round_seconds"], ref["round_seconds"])
            r["best_ratio_vs_persist_queue"] = r["pairs_per_s"] / ref["pairs_per_s"]
        out["persist_queue_baseline"] = name
        out["sweepq_vs_persist_queue"] = res['sweepq sync="os"']["ratio_vs_persist_queue"]
    return out


def profile_put_get(n: int, size: int, sync: str = "os", base: str | None = None, top: int = 8) -> dict:
    """cProfile of sweepq putting ``n`` persistent messages then getting them (``sync``): the
    costliest functions by own time, and the shares of the time in the store's writes of
    message records (``store_write_share``: ``ChangeLog.write_message``, a lone caller's write
    of one record, and ``BlobStore._write_group``, a group's, with everything under them: every
    write of ``BlobStore.write_messages`` and ``BlobStore.write_message`` is one of the two)
    and in RocksDB's own write calls (``rocksdb_write_share``: put, delete, write).
    ``compiled``: the store's write path runs compiled, where cProfile sees none of it (the
    shares are then 0; callgrind counts it: bench/instructions.py)."""
    import cProfile
    import pstats

    from sweepq import forms

    d = tempfile.mkdtemp(prefix="sweepq-durable-", dir=base)
    try:
        o = open_sweepq(os.path.join(d, "q"), sync)
        payload = b"x" * size
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(n):
            o.put(payload)
        for _ in range(n):
            o.get()
        prof.disable()
        o.close()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    st = pstats.Stats(prof)
    rows, cum = [], {}
    for (file, line, func), (_cc, _ncalls, tottime, cumtime, _callers) in st.stats.items():
        rows.append({"function": f"{os.path.basename(file)}:{line}({func})" if line else func, "tottime": tottime})
        cum[(os.path.basename(file), func)] = cumtime
    total = sum(r["tottime"] for r in rows)
    rows.sort(key=lambda r: r["tottime"], reverse=True)
    # A change of one record is an Rdict put or delete; several are one Rdict write (a batch).
    rocks = sum(
        r["tottime"]
        for r in rows
        if "Rdict" in r["function"] and any(f"'{m}'" in r["function"] for m in ("write", "put", "delete"))
    )
    return {
        "seconds": total,
        "compiled": "sweepq.blobstore.changelog" in forms.built(),
        "top": [{**r, "share": r["tottime"] / total} for r in rows[:top]],
        "rocksdb_write_share": rocks / total,
        # Not write_messages: a durable put or get outside a unit of work reaches the change
        # log's write through the store's message_writer() (issue 31), no store method between.
        "store_write_share": (
            cum.get(("changelog.py", "write_message"), 0.0) + cum.get(("store.py", "_write_group"), 0.0)
        )
        / total,
    }


FLOOR = "fsync floor (os.write 1 KiB + os.fsync)"

# The power-safe comparison cuts its messages into this many times more, shorter rounds: what
# one fsync costs on a shared disk swings between 0.3 and 4 ms within a second, so the shorter
# the rounds, the more often neighbouring rounds of two contenders see the same disk.
POWER_SAFE_SPLIT = 6


def power_safe(n: int, size: int, rounds: int, base: str | None = None, progress=None) -> dict:
    """Power-safe put+get, one producer, against the fsync floor of the same run.

    ``ratio_vs_floor`` is paired: the median over rounds of the floor's round time over the
    contender's round next to it (best rounds alone would compare different moments of a
    shared disk); ``all_rounds_ratio_vs_floor`` divides the floor's time summed over every
    round by the contender's; ``best_ratio_vs_floor`` compares the best rounds."""
    contenders = power_safe_contenders()
    res = fill_drain_rounds(contenders, n, b"x" * size, rounds, base, progress)
    floor = res[FLOOR]
    for r in res.values():
        r["ratio_vs_floor"] = _paired(r["round_seconds"], floor["round_seconds"])
        r["all_rounds_ratio_vs_floor"] = sum(floor["round_seconds"]) / sum(r["round_seconds"])
        r["best_ratio_vs_floor"] = r["ops_per_s"] / floor["ops_per_s"]
        r["put_ratio_vs_floor"] = r["put_per_s"] / floor["put_per_s"]
        r["get_ratio_vs_floor"] = r["get_per_s"] / floor["get_per_s"]
    return {
        "messages": n,
        "size": size,
        "rounds": rounds,
        "contenders": res,
        "sweepq_vs_floor": res['sweepq sync="commit"']["ratio_vs_floor"],
    }


class _Producers:
    """A sync="commit" queue manager with ``k`` connections, each putting from a thread of its own."""

    def __init__(self, path: str, k: int, commit: bool, max_depth: int):
        from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings

        self.qm = QueueManager.open(
            path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="commit")
        )
        self.qm.define_queue("Q", default_persistence=Persistence.PERSISTENT, max_depth=max_depth)
        self.conns = [self.qm.connect() for _ in range(k)]
        self.handles = [c.open("Q", OO.OUTPUT) for c in self.conns]
        self.k, self.commit = k, commit

    def run(self, n: int, payload: bytes) -> tuple[float, int]:
        """Put ``n // k`` persistent messages from each thread: (seconds, fsyncs)."""
        from sweepq.engine import PMO

        each, commit, group = n // self.k, self.commit, self.qm.journal.group

        def producer(i: int) -> None:
            put, c = self.handles[i].put, self.conns[i]
            if commit:
                for _ in range(each):
                    put(payload, None, PMO.SYNCPOINT)
                    c.commit()
            else:
                for _ in range(each):
                    put(payload)

        depth0 = self.qm.inquire_queue("Q").current_depth
        dt, syncs = _together(self.k, producer, lambda: group.syncs)
        depth = self.qm.inquire_queue("Q").current_depth - depth0
        assert depth == each * self.k, f"{self.k} producers put {depth} messages, not {each * self.k}"
        return dt, syncs

    def close(self) -> None:
        self.qm.close()


class _BareGroup:
    """The least a group commit of Python threads does, as the ceiling of :func:`producers`
    (issue 31): each thread writes its message (one ``os.pwrite`` at the next offset of one
    preallocated file, written in place as sweepq's change log is under ``sync="commit"``) and
    returns once an ``os.fdatasync`` that began after its write has ended. No queue manager,
    no store, no record: what ``k`` threads can gain over one on this machine and disk,
    whatever a queue engine does above it. Same interface as :class:`_Producers`.

    Two ways to share a sync, the ceiling being the better of the two:

    * ``leader`` (``BARE``): whoever finds no sync running makes one, and it covers every
      thread that wrote before it began; the rest wait on one condition (the textbook form:
      SQLite's WAL and RocksDB's write groups share a sync so);
    * not ``leader`` (``BARE_OWN``): each thread makes its own ``fdatasync`` right after its
      write, with no coordination in Python; the kernel's flush of a sync that finds another
      under way waits for it and goes out as one with the others waiting (Linux's block
      layer merges pending flushes), so the disk's flushes are shared below Python."""

    SPAN = 16 << 20  # the file's preallocated bytes; writes wrap around inside them

    def __init__(self, path: str, k: int, leader: bool = True):
        os.makedirs(path)
        self._fd = os.open(os.path.join(path, "log"), os.O_RDWR | os.O_CREAT, 0o600)
        os.posix_fallocate(self._fd, 0, self.SPAN)
        os.fsync(self._fd)
        self._cond = threading.Condition(threading.Lock())
        self._at = 0  # where the next write goes
        self._started = self._finished = 0  # syncs begun, and the last one that ended
        self._busy = False
        self._after_write = self._lead if leader else self._own
        self.syncs = 0  # fdatasync calls made
        self.k = k

    def _put(self, payload: bytes) -> None:
        with self._cond:
            at = self._at
            self._at = (at + len(payload)) % (self.SPAN - len(payload))
        os.pwrite(self._fd, payload, at)
        self._after_write()

    def _own(self) -> None:
        os.fdatasync(self._fd)
        with self._cond:
            self.syncs += 1

    def _lead(self) -> None:
        with self._cond:
            need = self._started + 1  # a sync that begins from now on covers this write
            while self._finished < need:
                if self._busy:
                    self._cond.wait()
                    continue
                self._busy = True
                self._started += 1
                gen = self._started
                self._cond.release()
                try:
                    os.fdatasync(self._fd)
                finally:
                    self._cond.acquire()
                    self._busy = False
                    self._finished = gen
                    self.syncs += 1
                    self._cond.notify_all()

    def run(self, n: int, payload: bytes) -> tuple[float, int]:
        """``n // k`` messages from each of ``k`` threads: (seconds, fsyncs)."""
        each = n // self.k

        def producer(_i: int) -> None:
            for _ in range(each):
                self._put(payload)

        return _together(self.k, producer, lambda: self.syncs)

    def close(self) -> None:
        os.close(self._fd)


def _together(k: int, body: Callable[[int], None], syncs: Callable[[], int]) -> tuple[float, int]:
    """``body(i)`` on ``k`` threads, released together once all have started, timed from the
    release to the last one's end: (seconds, how far ``syncs()`` moved meanwhile). A thread's
    failure is raised after the join."""
    start = threading.Barrier(k + 1)
    errors: list[BaseException] = []

    def run(i: int) -> None:
        start.wait()
        try:
            body(i)
        except BaseException as e:  # reported after the join
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(k)]
    for t in threads:
        t.start()
    gc.collect()
    s0 = syncs()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    dt = time.perf_counter() - t0
    if errors:
        raise errors[0]
    return dt, syncs() - s0


# producers()'s ceiling (_BareGroup), beside sweepq's two kinds: its two ways to share a sync
BARE = "bare group commit"
BARE_OWN = "bare fdatasync per write"
BARES = (BARE, BARE_OWN)


def producers(n: int, size: int, k: int, rounds: int, base: str | None = None, progress=None) -> dict:
    """1 and ``k`` producers, persistent puts outside syncpoint and put+commit, sync="commit",
    and the same counts of threads on :class:`_BareGroup` in its two forms (``BARES``), the
    ceiling of what sharing syncs can make of ``k`` Python threads here; ``n`` messages in all
    per round, rounds interleaved.

    Per kind (``put``, ``put+commit``, each of ``BARES``) and producer count: ``per_s``
    (messages made durable per second, best round), ``syncs_per_msg`` (fdatasync calls per put
    or commit, all rounds) and ``ratio_vs_one`` (paired: median over rounds of the one-producer
    round time over this one's). ``ceiling``: the larger ``ratio_vs_one`` of the bare forms
    with ``k`` threads."""
    payload = b"x" * size
    n = max(k, n - n % k)
    kinds = [(kind, p) for kind in ("put", "put+commit", *BARES) for p in (1, k)]
    times: dict[tuple[str, int], list[float]] = {c: [] for c in kinds}
    syncs = dict.fromkeys(kinds, 0)
    d = tempfile.mkdtemp(prefix="sweepq-durable-", dir=base)
    runners: dict[tuple[str, int], _Producers | _BareGroup] = {}
    try:
        for i, (kind, p) in enumerate(kinds):
            where = os.path.join(d, f"p{i}")
            runners[(kind, p)] = (
                _BareGroup(where, p, kind == BARE)
                if kind in BARES
                else _Producers(where, p, kind == "put+commit", n * rounds + 1000)
            )
        for _ in range(rounds):
            for c, runner in runners.items():
                dt, s = runner.run(n, payload)
                times[c].append(dt)
                syncs[c] += s
            if progress:
                progress()
    finally:
        for runner in runners.values():
            runner.close()
        shutil.rmtree(d, ignore_errors=True)
    out: dict = {"messages": n, "size": size, "producers": k, "rounds": rounds}
    for kind, p in kinds:
        out[f"{kind}, {p} producer{'s' if p > 1 else ''}"] = {
            "per_s": n / min(times[(kind, p)]),
            "median_per_s": n / sorted(times[(kind, p)])[rounds // 2],
            "syncs_per_msg": syncs[(kind, p)] / (n * rounds),
            "ratio_vs_one": _paired(times[(kind, p)], times[(kind, 1)]),
            "round_seconds": times[(kind, p)],
        }
    out["ceiling"] = max(out[f"{kind}, {k} producer{'s' if k > 1 else ''}"]["ratio_vs_one"] for kind in BARES)
    return out


# -- recovery ------------------------------------------------------------------------------------


_WORDS = b"order item quantity price customer account status shipped pending region euro dollar note".split()
_FILLERS = [
    b" ".join(_WORDS[(j * 7 + k * 3) % len(_WORDS)] + b"=%d" % ((j * 31 + k) % 1000) for k in range(40))
    for j in range(1000)
]


def recovery_payload(i: int) -> bytes:
    """Message ``i`` of the recovery backlog: its number (10 digits), then text, 100-200 B."""
    size = 100 + (i * 37) % 101
    return (b"%010d " % i + _FILLERS[i % 1000])[:size]


def build_recovery_dir(path: str, n: int, batch: int = 1000) -> dict:
    """Write ``n`` persistent :func:`recovery_payload` messages to queue ``Q`` of a new data
    directory at ``path``, sweep all but the first half into blobs, and close cleanly.

    ``sync="none"`` (no log, the table files are written at the clean close) and ``put_many``
    make the build quick; the open that is timed later is the same whatever wrote the files."""
    from sweepq.engine import OO, DurabilitySettings, Persistence, QueueManager, SweeperSettings
    from sweepq.sweeper import SweepPolicy

    t0 = time.perf_counter()
    keep = n - n // 2
    # No gets, so x = 0 and the rule keeps ``extra`` in memory (the head) and sweeps the rest.
    qm = QueueManager.open(
        path,
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=keep)),
        durability=DurabilitySettings(sync="none"),
    )
    try:
        qm.define_queue("Q", default_persistence=Persistence.PERSISTENT, max_depth=n + 1000)
        h = qm.connect().open("Q", OO.OUTPUT)
        for lo in range(0, n, batch):
            h.put_many([recovery_payload(i) for i in range(lo, min(n, lo + batch))])
        put_s = time.perf_counter() - t0
        report = qm.sweeper.run_once()
        swept = report.decision("Q").msgs_swept
        blobs = report.decision("Q").blobs
    finally:
        qm.close()
    return {"messages": n, "swept": swept, "blobs": blobs, "put_seconds": put_s, "seconds": time.perf_counter() - t0}


# Where an open spends its time: (label, file, function) whose cumulative time is reported.
_PHASES = (
    ("open the RocksDB store", "store.py", "__init__"),
    ("read the checkpoint", "ledger.py", "read"),
    ("scan and check the message records (records)", "recovery.py", "records"),
    ("  of which: check each chunk (crc, key, flags)", "recovery.py", "_proven"),
    ("load the blobs (read, marks, index)", "recovery.py", "_load_blob"),
    ("  of which: read the blobs' frames", "store.py", "read_frame"),
    ("  of which: index the swept records", "swept.py", "index_of"),
    ("write the checkpoint", "ledger.py", "write"),
)


def _profile_open(path: str, top: int = 15) -> dict:
    """cProfile of one ``QueueManager.open(path)`` with the sweeper off: the costliest functions by
    own time (``top``), and the cumulative time of the open's phases (``phases``, shares of
    the whole open; under cProfile, whose overhead inflates the per-record work)."""
    import cProfile
    import pstats

    from sweepq.engine import QueueManager, SweeperSettings

    prof = cProfile.Profile()
    prof.enable()
    qm = QueueManager.open(path, sweeping=SweeperSettings(run=False))
    prof.disable()
    qm.close()
    st = pstats.Stats(prof)
    rows = []
    cum: dict[tuple[str, str], float] = {}
    whole = 0.0
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in st.stats.items():
        where = f"{os.path.basename(file)}:{line}({func})" if line else func
        rows.append({"function": where, "calls": ncalls, "tottime": tottime, "cumtime": cumtime})
        key = (os.path.basename(file), func)
        cum[key] = cum.get(key, 0.0) + cumtime
        if func == "open" and os.path.basename(file) == "manager.py":
            whole = cumtime
    rows.sort(key=lambda r: r["tottime"], reverse=True)
    total = sum(r["tottime"] for r in rows)
    whole = whole or total
    phases = {label: cum.get((file, func), 0.0) for label, file, func in _PHASES}
    return {
        "seconds": whole,
        "top": [{**r, "share": r["tottime"] / total if total else 0.0} for r in rows[:top]],
        "phases": {k: {"seconds": v, "share": v / whole if whole else 0.0} for k, v in phases.items()},
    }


def time_recovery(path: str, n: int, profile: str = "auto", check: bool = True) -> dict:
    """Time ``QueueManager.open(path)`` with the sweeper off (run in a fresh process), with what
    ``qm.recovery`` found; ``profile`` ("1", "0", "auto": when over the goal) reruns the open
    under cProfile; ``check`` then drains the queue and checks every message came back once,
    in put order (the drain deletes them: the directory is spent)."""
    import resource

    from sweepq.engine import DurabilitySettings, MQError, QueueManager, SweeperSettings

    t0, c0 = time.perf_counter(), time.process_time()
    qm = QueueManager.open(path, sweeping=SweeperSettings(run=False))
    seconds = time.perf_counter() - t0
    rep = qm.recovery
    out: dict = {
        "open_seconds": seconds,
        "open_cpu_seconds": time.process_time() - c0,  # what the open cost, whatever the machine's load
        "recovery": {
            k: getattr(rep, k)
            for k in ("seconds", "queues", "messages", "in_memory", "swept", "blobs", "blobs_deleted", "damaged")
        },
        "peak_rss_after_open": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if profile == "1" or (profile == "auto" and seconds > GOAL_RECOVERY_SECONDS):
        qm.close()
        out["profile"] = _profile_open(path)
        qm = QueueManager.open(path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(sync="os"))
    try:
        if check:
            from sweepq.engine import OO

            h = qm.connect().open("Q", OO.INPUT_SHARED)
            expect = 0
            bad = None
            t1 = time.perf_counter()
            while True:
                try:
                    got = h.get_many(1000)
                except MQError:
                    break
                if not got:
                    break
                for m in got:
                    if bad is None and m.data != recovery_payload(expect):
                        bad = {"position": expect, "got": m.data[:10].decode(errors="replace")}
                    expect += 1
            out["check"] = {
                "drained": expect,
                "in_put_order": bad is None and expect == n,
                "first_out_of_order": bad,
                "drain_seconds": time.perf_counter() - t1,
            }
    finally:
        qm.close()
    return out


_BUILD_CHILD = r"""
import json, sys
from sweepq.bench.durable import build_recovery_dir
print(json.dumps(build_recovery_dir(sys.argv[1], int(sys.argv[2]))))
"""

_OPEN_CHILD = r"""
import json, sys
from sweepq.bench.durable import time_recovery
print(json.dumps(time_recovery(sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1")))
"""


def _child(code: str, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"the recovery child failed ({r.returncode}): {r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def recovery(
    n: int,
    base: str | None = None,
    profile: str = "auto",
    check: bool = True,
    progress=None,
    opens: int = RECOVERY_OPENS,
) -> dict:
    """Build a half-swept backlog of ``n`` persistent messages in one process, then time its
    open in ``opens`` fresh processes one after the other (nothing of the build in memory; the
    OS page cache is warm, as after a restart of the application rather than of the machine).
    Each open but the last closes at once, which leaves the same messages for the next; the
    last is the one profiled and checked (:func:`time_recovery`), and its figures are the
    top-level ones. ``opens`` lists every open's wall and CPU seconds, in order."""
    if not 1 <= opens <= 20:
        raise ValueError(f"opens is {opens}: from 1 to 20 fresh-process opens")
    d = tempfile.mkdtemp(prefix="sweepq-recovery-", dir=base)
    times = []
    try:
        path = os.path.join(d, "q")
        build = _child(_BUILD_CHILD, path, str(n))
        if progress:
            progress()
        for i in range(opens):
            last = i == opens - 1
            how = (profile, "1" if check else "0") if last else ("0", "0")
            opened = _child(_OPEN_CHILD, path, str(n), *how)
            times.append({k: opened[k] for k in ("open_seconds", "open_cpu_seconds")})
            if progress:
                progress()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return {"build": build, **opened, "opens": times, "goal_seconds": GOAL_RECOVERY_SECONDS}
