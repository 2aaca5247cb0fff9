"""Opening a data directory: mistakes are refused at open with a reason that says what to do,
not later from the sweeper thread; the directory is private to its user."""

from __future__ import annotations

import os
import stat

import pytest

from sweepq.engine import OO, DurabilitySettings, MQError, Persistence, QueueManager, Reason, SweeperSettings


def refused(path, **durability) -> str:
    with pytest.raises(MQError) as ei:
        QueueManager.open(path, sweeping=SweeperSettings(run=False), durability=DurabilitySettings(**durability))
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
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)):
        assert "another queue manager" in refused(tmp_path / "d")


def test_bad_store_options_are_refused_at_open(tmp_path):
    assert "unknown store option" in refused(tmp_path / "d", store_options={"levle": 3})
    assert "level" in refused(tmp_path / "d", store_options={"level": "fast"})


def _modes(d) -> dict[str, int]:
    return {f: stat.S_IMODE(os.stat(d / f).st_mode) for f in os.listdir(d)}


def _acls_here(path) -> bool:
    """Whether this filesystem keeps POSIX default ACLs (what makes new files private)."""
    from sweepq.blobstore.files import private_by_default

    probe = path / "acl-probe"
    probe.mkdir()
    try:
        return private_by_default(str(probe))
    finally:
        probe.rmdir()


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_every_file_a_queue_manager_creates_is_private_whatever_the_umask(tmp_path, umask):
    """0700 for the directory and 0600 for every file, also for the table files and logs
    RocksDB creates while the queue manager runs (before the fix: 0644, and 0666 for the
    statistics file under umask 000, until the next open), and without touching the
    process's umask, which other threads share."""
    d = tmp_path / "d"
    old = os.umask(umask)
    try:
        qm = QueueManager.open(
            d,
            sweeping=SweeperSettings(run=False),
            durability=DurabilitySettings(sync="os", store_options={"write_buffer_bytes": 1 << 20}),
        )
        try:
            assert os.umask(umask) == umask  # never changed behind the process's back
            qm.define_queue("Q", default_persistence=Persistence.PERSISTENT)
            h = qm.connect().open("Q", OO.OUTPUT)
            for _ in range(8000):
                h.put(os.urandom(300))  # several memtables: new table files and a new log
            qm.blob_store().flush()
            while_open = _modes(d)
        finally:
            qm.close()
        after_close = _modes(d)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    assert any(f.endswith(".sst") for f in while_open) and "sweepq-stats.json" in after_close
    assert all(m == 0o600 for m in after_close.values()), after_close
    if _acls_here(tmp_path):  # where the filesystem has ACLs: private from the start
        assert all(m == 0o600 for m in while_open.values()), while_open


def test_a_dangling_symlink_is_refused_with_what_it_points_to(tmp_path):
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    text = refused(tmp_path / "link")
    assert "symbolic link" in text and "gone" in text and "File exists" not in text


def test_bench_refuses_a_durable_dir_that_does_not_exist_unless_told(tmp_path, capsys):
    from sweepq.cli import main

    missing = tmp_path / "no" / "such"
    assert main(["bench", "durable", "--durable-dir", str(missing)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--create-durable-dir" in err and str(missing) in err
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("bad", [123, 1.5, b"/tmp/d", ["d"], object()])
def test_a_path_of_the_wrong_type_is_an_mqerror(bad):
    with pytest.raises(MQError) as ei:
        QueueManager.open(bad, sweeping=SweeperSettings(run=False))
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and "path" in str(ei.value)


@pytest.mark.parametrize("bad", ["/tmp/x", 42, object()])
def test_a_store_that_is_not_a_store_is_refused(bad):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeping=SweeperSettings(run=False), store=bad)
    assert "must be a sweepq.blobstore.Store" in str(ei.value)


def test_a_manager_in_another_process_is_refused_by_the_lock(tmp_path):
    """RocksDB's lock file keeps a second process out: refused at open, with the reason."""
    import subprocess
    import sys

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from sweepq.engine import QueueManager, SweeperSettings; "
            f"qm = QueueManager.open({str(tmp_path / 'd')!r}, sweeping=SweeperSettings(run=False)); "
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
    with QueueManager.open(tmp_path / "d", sweeping=SweeperSettings(run=False)):  # free again once it closed
        pass
