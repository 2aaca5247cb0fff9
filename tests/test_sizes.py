"""Sizes as a person writes them (engine/sizes.py), in the API and for the memory budget."""

import pytest

from sweepq.engine import MemorySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.engine.sizes import format_size, parse_size


@pytest.mark.parametrize(
    ("text", "n"),
    [
        (0, 0),
        (4096, 4096),
        ("4096", 4096),
        ("100MB", 100_000_000),
        ("100 mb", 100_000_000),
        ("512MiB", 512 * 2**20),
        ("64KiB", 65536),
        ("64kB", 64_000),
        ("1.5GB", 1_500_000_000),
        ("512M", 512 * 2**20),
        ("2G", 2 * 2**30),
        ("7B", 7),
        (" 3 KiB ", 3072),
    ],
)
def test_a_size_is_read_as_written(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["", "MB", "1.2.3MB", "10 parsecs", "-5MB", -1, 1.5, None, True, b"1MB", "1e3"])
def test_a_bad_size_is_one_line_with_its_reason(bad):
    with pytest.raises(MQError) as e:
        parse_size(bad, "memory_budget")
    assert e.value.reason == Reason.PARM_VALUE_ERROR
    assert "memory_budget" in str(e.value) and "\n" not in str(e.value)


def test_a_budget_too_small_to_mean_anything_suggests_the_unit():
    with pytest.raises(MQError) as e:
        QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget=100))
    assert e.value.reason == Reason.PARM_VALUE_ERROR
    assert "100MB" in str(e.value) and "100MiB" in str(e.value)


def test_the_queue_manager_takes_a_budget_as_a_size():
    with QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget="8MiB")) as qm:
        assert qm.budget is not None and qm.budget.budget == 8 * 2**20
    with QueueManager(sweeping=SweeperSettings(run=False), memory=MemorySettings(budget=0)) as qm:
        assert qm.budget is None


@pytest.mark.parametrize("n", [1, 999, 1000, 65536, 100_000_000, 3 * 2**30, 1234567])
def test_format_size_reads_back(n):
    assert parse_size(format_size(n)) == n
