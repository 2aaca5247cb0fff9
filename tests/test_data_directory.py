"""Opening a data directory: mistakes are refused at open with a reason that says what to do,
not later from the sweeper thread; the directory is private to its user."""

from __future__ import annotations

import os
import stat

import pytest

from sweepq.engine import MQError, QueueManager


def refused(path, **kw) -> str:
    with pytest.raises(MQError) as ei:
        QueueManager.open(path, sweeper=False, **kw)
    return str(ei.value)


def test_a_plain_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("mine")
    assert "not a directory" in refused(tmp_path / "f")


def test_a_missing_parent_is_refused_as_a_likely_typo(tmp_path):
    text = refused(tmp_path / "no" / "such" / "dir")
    assert "does not exist" in text and "create it first" in text
    assert not (tmp_path / "no").exists()


def test_a_directory_of_other_files_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    assert "not a sweepq store" in refused(tmp_path)


def test_a_second_manager_on_the_same_directory_is_refused(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeper=False):
        assert "another queue manager" in refused(tmp_path / "d")


def test_bad_store_options_are_refused_at_open(tmp_path):
    assert "unknown store option" in refused(tmp_path / "d", store_options={"levle": 3})
    assert "level" in refused(tmp_path / "d", store_options={"level": "fast"})


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_directory_and_its_files_are_private_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        with QueueManager.open(tmp_path / "d", sweeper=False):
            pass
        with QueueManager.open(tmp_path / "d", sweeper=False):
            mode = stat.S_IMODE(os.stat(tmp_path / "d").st_mode)
            files = [stat.S_IMODE(os.stat(tmp_path / "d" / f).st_mode) for f in os.listdir(tmp_path / "d")]
    finally:
        os.umask(old)
    assert mode == 0o700
    assert files and all(m & 0o077 == 0 for m in files)


@pytest.mark.parametrize("bad", ["/tmp/x", 42, object()])
def test_a_store_that_is_not_a_store_is_refused(bad):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeper=False, store=bad)
    assert "must be a sweepq.blobstore.Store" in str(ei.value)


def test_a_manager_in_another_process_is_refused_by_the_lock(tmp_path):
    """RocksDB's lock file keeps a second process out: refused at open, with the reason."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from sweepq.engine import QueueManager; "
            f"qm = QueueManager.open({str(tmp_path / 'd')!r}, sweeper=False); "
            "print('open', flush=True); sys.stdin.readline(); qm.close()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        text = refused(tmp_path / "d")
        assert "another queue manager" in text
    finally:
        holder.communicate("\n", timeout=60)
    with QueueManager.open(tmp_path / "d", sweeper=False):  # free again once it closed
        pass
