"""A queue manager's grouped settings (engine/settings.py): each group checks itself once,
with MQ's reason code naming the wrong field, and the groups are the only way to give a
setting: the constructor takes no loose keywords."""

import inspect

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.engine import (
    DurabilitySettings,
    MemorySettings,
    MessageSettings,
    MQError,
    QueueManager,
    Reason,
    SweeperSettings,
)
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.clock import ManualClock

OFF = SweeperSettings(run=False)

BAD = [
    (SweeperSettings, {"run": "yes"}, "SweeperSettings.run"),
    (SweeperSettings, {"policy": None}, "SweeperSettings.policy"),
    (SweeperSettings, {"duty": 0}, "SweeperSettings.duty"),
    (SweeperSettings, {"duty": True}, "SweeperSettings.duty"),
    (SweeperSettings, {"readahead_low_water": -1}, "readahead_low_water"),
    (SweeperSettings, {"trace_path": 3}, "SweeperSettings.trace_path"),
    (DurabilitySettings, {"sync": "always"}, "commit"),
    (DurabilitySettings, {"durable": "yes"}, "durable"),
    (DurabilitySettings, {"repair": None}, "repair"),
    (DurabilitySettings, {"store_options": ["level"]}, "store_options"),
    (DurabilitySettings, {"store_options": {"colour": 1}}, "unknown store option"),
    (MemorySettings, {"budget": 100}, "too small"),
    (MemorySettings, {"budget": "1 parsec"}, "not a size"),
    (MemorySettings, {"counts": "all"}, "budget_counts"),
    (MemorySettings, {"counts": "resident"}, "needs a memory_budget"),
    (MessageSettings, {"max_msg_length": 100 * 1024 * 1024 + 1}, "max_msg_length"),
    (MessageSettings, {"max_uncommitted": 0}, "max_uncommitted"),
    (MessageSettings, {"backout_handling": 1}, "backout_handling"),
]


@pytest.mark.parametrize(("group", "fields", "says"), BAD)
def test_a_group_with_a_wrong_field_is_refused_when_made(group, fields, says):
    with pytest.raises(MQError) as ei:
        group(**fields)
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and says in str(ei.value), ei.value


@pytest.mark.parametrize(
    ("place", "says"),
    [
        ({"path": 123}, "data directory"),
        ({"store": "memory"}, "store must be"),
        ({"path": "d", "store": MemoryStore()}, "not both"),
    ],
)
def test_where_the_blobs_go_is_checked_by_the_queue_manager(place, says):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeping=OFF, **place)
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and says in str(ei.value), ei.value


# Every keyword the constructor took beside the groups before they were the one way (issue 34).
LOOSE = {
    "sweeper": False,
    "sweep_policy": SweepPolicy(),
    "sweep_duty": 0.5,
    "readahead_low_water": 7,
    "trace_path": "t.parquet",
    "durable": True,
    "sync": "os",
    "repair": True,
    "store_options": {},
    "memory_budget": "1MB",
    "budget_counts": "held",
    "max_msg_length": 1000,
    "max_uncommitted": 5,
    "backout_handling": True,
}


def test_the_constructor_takes_the_groups_and_at_most_eight_parameters():
    params = list(inspect.signature(QueueManager.__init__).parameters)[1:]  # after self
    assert len(params) <= 8, params
    assert params == ["name", "path", "clock", "store", "sweeping", "durability", "memory", "messages"]
    assert not set(params) & set(LOOSE)


@pytest.mark.parametrize("keyword", sorted(LOOSE))
def test_a_loose_keyword_is_a_type_error_that_names_it(keyword):
    with pytest.raises(TypeError, match=keyword):
        QueueManager(sweeping=OFF, **{keyword: LOOSE[keyword]})
    with pytest.raises(TypeError, match=keyword):
        QueueManager.open("unused", sweeping=OFF, **{keyword: LOOSE[keyword]})


def test_the_groups_make_the_queue_manager(tmp_path):
    policy = SweepPolicy(factor=3, extra=1)
    with QueueManager(
        "QMG",
        path=tmp_path / "g",
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=policy, duty=0.5, readahead_low_water=7),
        durability=DurabilitySettings(sync="os"),
        memory=MemorySettings(budget="1MB"),
        messages=MessageSettings(max_msg_length=1000, max_uncommitted=5, backout_handling=True),
    ) as qm:
        assert (qm.max_msg_length, qm.max_uncommitted, qm.backout_handling) == (1000, 5, True)
        assert qm.readahead_low_water == 7 and qm.sweeper.duty == 0.5
        assert qm.sweeper.policy.factor == 3 and qm.sweeper.policy.memory_budget == 1_000_000
        assert qm.budget is not None and qm.budget.budget == 1_000_000
        assert qm.journal is not None and qm.journal.policy == "os"
        qm.define_queue("Q")
        assert qm.internal.queue("Q").budget is qm.budget  # a queue defined later has the budget too


def test_no_group_means_each_groups_defaults():
    with QueueManager(sweeping=OFF) as qm:
        defaults = MessageSettings()
        assert (qm.max_msg_length, qm.max_uncommitted, qm.backout_handling) == (
            defaults.max_msg_length,
            defaults.max_uncommitted,
            defaults.backout_handling,
        )
        assert qm.budget is None and qm.journal is None  # no data directory: not durable
        assert qm.readahead_low_water == SweeperSettings().readahead_low_water


def test_a_recovered_queue_and_a_later_one_share_the_budget_started_after_recovery(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeping=OFF) as qm:
        qm.define_queue("OLD")
    with QueueManager.open(tmp_path / "d", sweeping=OFF, memory=MemorySettings(budget="1MB")) as qm:
        qm.define_queue("NEW")
        assert qm.internal.queue("OLD").budget is qm.budget is qm.internal.queue("NEW").budget


@pytest.mark.parametrize("keyword", ["sweeping", "durability", "memory", "messages"])
def test_a_group_of_the_wrong_kind_is_refused(keyword):
    with pytest.raises(MQError) as ei:
        QueueManager(**{keyword: {"run": False}})
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and "must be a" in str(ei.value)


def test_open_takes_the_groups_as_the_constructor_does(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeping=OFF, durability=DurabilitySettings(sync="none")) as qm:
        qm.define_queue("KEPT")
        assert qm.journal is not None and qm.journal.policy == "none"
    with QueueManager.open(tmp_path / "d", sweeping=OFF) as qm:
        assert "KEPT" in [q.name for q in qm.internal.queues()]


def test_a_budget_in_a_group_is_kept_as_bytes_and_the_group_stays_frozen():
    memory = MemorySettings(budget="64KiB")
    assert memory.budget == memory.limit == 64 * 1024
    with pytest.raises(AttributeError):
        memory.budget = 0  # type: ignore[misc]
    assert DurabilitySettings().keeps(on_disk=False) is False and DurabilitySettings().keeps(on_disk=True) is True
    assert DurabilitySettings(durable=False).keeps(on_disk=True) is False
    assert DurabilitySettings(durable=True).keeps(on_disk=False) is True
