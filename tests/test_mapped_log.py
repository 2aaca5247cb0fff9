"""Side logs written through a map of their end (blobstore/sidelog.py, ``mapped``): the logs of
a store under sync="os" (issue 31). What a mapped log holds is what a log written by ``pwrite``
holds, byte for byte; a file cut under the map fails the append (the compiled copy's bus-error
guard) and the process goes on, while a bus error elsewhere still ends it; a process killed
during a copy leaves a cut tail, never damage and never a record that was not whole."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from sweepq import forms
from sweepq.blobstore.sidelog import CHUNK, SideLog, _frame

MAPPED = "sweepq.blobstore.sidelog" in forms.built()  # interpreted, a mapped log is written by pwrite


def _records(n: int) -> list[bytes]:
    """Records of many sizes, some past a page, a few past half a chunk (a window's end)."""
    sizes = [1, 7, 90, 1040, 4095, 4096, 9000, CHUNK // 2 + 3]
    return [bytes([i % 251 + 1]) * sizes[i % len(sizes)] for i in range(n)]


def test_a_mapped_log_holds_what_a_log_written_in_place_holds_byte_for_byte(tmp_path):
    """The same records appended to a mapped log and to one written in place by pwrite: the
    files are equal, over several chunks and window moves, and read back every record."""
    records = _records(40)
    paths = []
    for name, mapped in (("m", True), ("p", False)):
        log = SideLog(str(tmp_path), name, in_place=True, mapped=mapped)
        log.start(b"start")
        for r in records:
            log.append(r)
        assert log.failed is None
        log.close()
        paths.append(tmp_path / f"sweepq-{name}")
    mapped_bytes, written_bytes = (p.read_bytes() for p in paths)
    assert len(mapped_bytes) >= 3 * CHUNK and len(mapped_bytes) % CHUNK == 0
    assert mapped_bytes == written_bytes
    assert SideLog(str(tmp_path), "m").read() == ([b"start", *records], None)


def test_a_mapped_log_is_continued_after_a_reopen_and_started_afresh(tmp_path):
    log = SideLog(str(tmp_path), "t", mapped=True)
    log.start(b"start")
    log.append(b"one")
    log.close()
    again = SideLog(str(tmp_path), "t", mapped=True)
    assert again.read() == ([b"start", b"one"], None)
    again.append(b"two")
    assert SideLog(str(tmp_path), "t").read() == ([b"start", b"one", b"two"], None)
    again.start(b"new")  # a new file under the map: the old map is dropped, the new one made
    again.append(b"three")
    again.sync()
    assert SideLog(str(tmp_path), "t").read() == ([b"new", b"three"], None)
    assert (tmp_path / "sweepq-t").stat().st_size == CHUNK


def test_mapped_appends_from_threads_land_whole(tmp_path):
    import threading

    log = SideLog(str(tmp_path), "t", mapped=True)
    log.start(b"start")
    records = {t: [b"%d-%d-" % (t, i) + bytes([t + 1]) * (i * 37 % 3000) for i in range(300)] for t in range(4)}
    threads = [threading.Thread(target=lambda t=t: [log.append(r) for r in records[t]]) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got, why = SideLog(str(tmp_path), "t").read()
    assert why is None and got[0] == b"start" and len(got) == 1 + 4 * 300
    for t in range(4):
        assert [r for r in got[1:] if r.startswith(b"%d-" % t)] == records[t]


_CUT_UNDER_THE_MAP = r"""
import faulthandler, mmap, os, sys
from sweepq.blobstore.sidelog import SideLog
d, how = sys.argv[1], sys.argv[2]
if how == "faulthandler":
    faulthandler.enable()
log = SideLog(d, "t", mapped=True)
log.start(b"start")
for i in range(2000):
    log.append(b"r%04d" % i + b"x" * 100)
if how == "faulthandler after":  # installed over the guard: it reports the fault, then raises it again
    faulthandler.enable()
os.truncate(log.path, 100)
log.append(b"after the cut")
log.append(b"and again")  # taken by nothing
print(log.failed, flush=True)
if how == "sent":  # a SIGBUS sent by kill() still ends the process
    import signal
    os.kill(os.getpid(), signal.SIGBUS)
    signal.pthread_sigmask(signal.SIG_BLOCK, [])  # (a call for the signal to arrive before)
    print("not reached", flush=True)
if how in ("unguarded", "faulthandler"):  # a bus error of someone else's map still ends the process
    with open(os.path.join(d, "other"), "w+b") as f:
        f.write(b"\0" * 8192)
        f.flush()
        m = mmap.mmap(f.fileno(), 8192)
        f.truncate(0)
        m[4096] = 1
    print("not reached", flush=True)
"""


@pytest.mark.parametrize("how", ["alone", "unguarded", "faulthandler", "faulthandler after", "sent"])
def test_a_file_cut_under_the_map_fails_the_append_and_the_process_goes_on(tmp_path, how):
    """A mapped log cut while open (the damage fuzz's 'open' state): compiled, the copy into a
    page past the new end is a bus error that the guard turns into a failed append, and the
    process goes on; a bus error of another map after it still ends the process with SIGBUS,
    with Python's faulthandler on or not (the guard hands it on), and so does a SIGBUS sent by
    kill(). faulthandler enabled after the guard reports the copy's fault and raises it again:
    the guard still takes it back to the copy."""
    run = subprocess.run(
        [sys.executable, "-c", _CUT_UNDER_THE_MAP, str(tmp_path), how], capture_output=True, text=True, timeout=120
    )
    lines = run.stdout.splitlines()
    if MAPPED:
        assert "bus error" in lines[0] and "cut under it" in lines[0], run.stdout
    else:  # a pwrite past the end grows the file again
        assert lines[0] == "None", run.stdout
    if how in ("alone", "faulthandler after"):
        assert run.returncode == 0, run.stderr
    else:
        assert run.returncode == -signal.SIGBUS, (run.returncode, run.stderr)
        assert "not reached" not in run.stdout
        assert ("Bus error" in run.stderr) == (how == "faulthandler")


def test_a_copy_cut_before_its_checksum_reads_as_a_cut_tail_and_is_written_over(tmp_path):
    """What a kill during a copy leaves (the frame's length written, the record in part, the
    crc field still zero): a cut tail, not damage; the next append zeroes it and goes there.
    A last record whose crc field is wrong but not zero is damage."""
    log = SideLog(str(tmp_path), "t", mapped=True)
    log.start(b"start")
    log.append(b"whole")
    log.close()
    path = tmp_path / "sweepq-t"
    data = bytearray(path.read_bytes())
    at = 4 + len(_frame(b"start")) + len(_frame(b"whole"))
    data[at : at + 4] = (1000).to_bytes(4, "little")
    data[at + 8 : at + 8 + 300] = b"y" * 300  # a part of its record, no crc
    path.write_bytes(bytes(data))
    again = SideLog(str(tmp_path), "t", mapped=True)
    assert again.read() == ([b"start", b"whole"], None)
    again.append(b"next")
    again.close()
    assert SideLog(str(tmp_path), "t").read() == ([b"start", b"whole", b"next"], None)
    data = bytearray(path.read_bytes())
    end = at + len(_frame(b"next"))
    data[end : end + 4] = (300).to_bytes(4, "little")
    data[end + 4 : end + 8] = b"\x01\x02\x03\x04"
    data[end + 8 : end + 8 + 300] = b"z" * 300
    path.write_bytes(bytes(data))
    got, why = SideLog(str(tmp_path), "t").read()
    assert got == [b"start", b"whole", b"next"] and why is not None and "checksum" in why


_APPEND_FOR_EVER = r"""
import sys
from sweepq.blobstore.sidelog import SideLog
log = SideLog(sys.argv[1], "t", mapped=True)
log.read()
i = int(sys.argv[2])
while True:
    log.append(b"%08d" % i + b"k" * (i * 131 % 5000))
    i += 1
    if i % 500 == 0:
        print(i, flush=True)
"""


def test_appends_through_the_map_killed_at_any_moment_leave_a_prefix_and_no_damage(tmp_path):
    """kill -9 of a process appending through the map, 12 times at whatever moment it reached:
    each time the log reads as the records in order, whole, without damage (a copy the kill
    cut is a cut tail), and the next process goes on after them."""
    log = SideLog(str(tmp_path), "t", mapped=True)
    log.start(b"start")
    log.close()
    expected = 0
    for _ in range(12):
        child = subprocess.Popen(
            [sys.executable, "-c", _APPEND_FOR_EVER, str(tmp_path), str(expected)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        child.stdout.readline()  # it has appended some: kill it wherever it is now
        child.kill()
        child.wait(timeout=60)
        child.stdout.close()
        got, why = SideLog(str(tmp_path), "t").read()
        assert why is None
        assert got[0] == b"start" and len(got) - 1 >= expected + 1
        assert [int(r[:8]) for r in got[1:]] == list(range(len(got) - 1))
        assert all(r[8:] == b"k" * (int(r[:8]) * 131 % 5000) for r in got[1:])
        expected = len(got) - 1
    assert os.path.getsize(tmp_path / "sweepq-t") % CHUNK == 0


def test_a_mapped_log_whose_map_cannot_be_made_says_why_and_takes_nothing_more(tmp_path):
    """The map of the next window failing (its descriptor gone under it): the log says why,
    takes no more records, and what it held reads back whole."""
    log = SideLog(str(tmp_path), "t", mapped=True)
    log.start(b"start")
    log.append(b"one")
    os.close(log._fd)
    log.append(b"x" * (300 << 10))  # past the window: a new map, of a descriptor that is gone
    assert log.failed is not None and "Bad file descriptor" in log.failed
    log.append(b"three")
    log._fd = None  # already closed
    assert SideLog(str(tmp_path), "t").read() == ([b"start", b"one"], None)


_FILE_SIZE_LIMIT = r"""
import os, resource, signal, sys
from sweepq.blobstore.sidelog import CHUNK, SideLog
log = SideLog(sys.argv[1], "t", mapped=True)
log.start(b"start")
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # growing past the limit then fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (CHUNK + 4096, resource.RLIM_INFINITY))
for i in range(2000):
    log.append(b"%04d" % i + b"r" * 1020)
    if log.failed:
        break
print(i, log.failed)
"""


def test_a_mapped_log_that_cannot_grow_says_why_and_keeps_what_it_took(tmp_path):
    """Its zeros ahead cannot be allocated (the file size limit; a full disk alike): the
    append that needed them fails and says why, the log takes nothing more, and every record
    before it reads back."""
    out = subprocess.run(
        [sys.executable, "-c", _FILE_SIZE_LIMIT, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    failed_at, why = out.stdout.split(" ", 1)
    assert "File too large" in why
    got, problem = SideLog(str(tmp_path), "t").read()
    assert problem is None and got == [b"start", *(b"%04d" % i + b"r" * 1020 for i in range(int(failed_at)))]
    assert 1000 < int(failed_at) < 1020  # the chunk it started with full: it needed the next
