"""A queue manager's grouped settings (engine/settings.py): each group checks itself once,
with the reason codes the keyword arguments give, and the keyword arguments (the short form)
build the same groups."""

import pytest

from sweepq.blobstore import MemoryStore
from sweepq.engine import MQError, QueueManager, Reason
from sweepq.engine.settings import DurabilitySettings, MemorySettings, MessageSettings, SweeperSettings
from sweepq.sweeper import SweepPolicy
from sweepq.sweeper.clock import ManualClock

BAD = [
    (SweeperSettings, {"run": "yes"}, "sweeper"),
    (SweeperSettings, {"policy": None}, "sweep_policy"),
    (SweeperSettings, {"duty": 0}, "sweep_duty"),
    (SweeperSettings, {"duty": True}, "sweep_duty"),
    (SweeperSettings, {"readahead_low_water": -1}, "readahead_low_water"),
    (DurabilitySettings, {"path": 123}, "data directory"),
    (DurabilitySettings, {"store": "memory"}, "store must be"),
    (DurabilitySettings, {"path": "d", "store": MemoryStore()}, "not both"),
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

# The same wrong values as keyword arguments of QueueManager: the short form names.
SHORT = {"run": "sweeper", "policy": "sweep_policy", "duty": "sweep_duty", "budget": "memory_budget"}
SHORT_COUNTS = {"counts": "budget_counts"}


@pytest.mark.parametrize(("group", "fields", "says"), BAD)
def test_a_group_with_a_wrong_field_is_refused_when_made_and_so_is_its_short_form(group, fields, says):
    with pytest.raises(MQError) as ei:
        group(**fields)
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and says in str(ei.value), ei.value
    keywords = {SHORT.get(k, SHORT_COUNTS.get(k, k)): v for k, v in fields.items()}
    if group is MemorySettings and "budget" not in fields:
        keywords.setdefault("memory_budget", 0)
    keywords.setdefault("sweeper", False)
    if keywords.get("sweep_policy", 0) is None:
        return  # the short form's default: the seed's policy
    with pytest.raises(MQError) as short:
        QueueManager(**keywords)
    assert short.value.reason == Reason.PARM_VALUE_ERROR and str(short.value) == str(ei.value)


def test_the_grouped_form_and_the_short_form_make_the_same_queue_manager(tmp_path):
    policy = SweepPolicy(factor=3, extra=1)
    grouped = QueueManager(
        "QMG",
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=policy, duty=0.5, readahead_low_water=7),
        durability=DurabilitySettings(path=tmp_path / "g", sync="os"),
        memory=MemorySettings(budget="1MB"),
        messages=MessageSettings(max_msg_length=1000, max_uncommitted=5, backout_handling=True),
    )
    short = QueueManager(
        "QMS",
        clock=ManualClock(),
        sweeper=False,
        sweep_policy=policy,
        sweep_duty=0.5,
        readahead_low_water=7,
        path=tmp_path / "s",
        sync="os",
        memory_budget="1MB",
        max_msg_length=1000,
        max_uncommitted=5,
        backout_handling=True,
    )
    with grouped, short:
        for qm in (grouped, short):
            assert (qm.max_msg_length, qm.max_uncommitted, qm.backout_handling) == (1000, 5, True)
            assert qm.readahead_low_water == 7 and qm.sweeper.duty == 0.5
            assert qm.sweeper.policy.factor == 3 and qm.sweeper.policy.memory_budget == 1_000_000
            assert qm.budget is not None and qm.budget.budget == 1_000_000
            assert qm.journal is not None and qm.journal.policy == "os"
            qm.define_queue("Q")
            assert qm.internal.queue("Q").budget is qm.budget  # a queue defined later has the budget too


def test_a_recovered_queue_and_a_later_one_share_the_budget_started_after_recovery(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeper=False) as qm:
        qm.define_queue("OLD")
    with QueueManager.open(tmp_path / "d", sweeper=False, memory=MemorySettings(budget="1MB")) as qm:
        qm.define_queue("NEW")
        assert qm.internal.queue("OLD").budget is qm.budget is qm.internal.queue("NEW").budget


def test_a_group_and_its_own_keywords_at_once_are_refused():
    for kw in (
        {"sweeping": SweeperSettings(run=False), "sweep_duty": 0.5},
        {"durability": DurabilitySettings(), "sync": "os"},
        {"memory": MemorySettings(budget="1MB"), "memory_budget": "2MB"},
        {"messages": MessageSettings(), "max_uncommitted": 3},
    ):
        with pytest.raises(MQError) as ei:
            QueueManager(**{"sweeper": False, **kw})
        assert ei.value.reason == Reason.PARM_VALUE_ERROR and "not both" in str(ei.value), kw


@pytest.mark.parametrize("keyword", ["sweeping", "durability", "memory", "messages"])
def test_a_group_of_the_wrong_kind_is_refused(keyword):
    with pytest.raises(MQError) as ei:
        QueueManager(sweeper=False, **{keyword: {"run": False}})
    assert ei.value.reason == Reason.PARM_VALUE_ERROR and "must be a" in str(ei.value)


def test_open_puts_its_path_in_the_durability_given(tmp_path):
    with QueueManager.open(tmp_path / "d", sweeper=False, durability=DurabilitySettings(sync="none")) as qm:
        qm.define_queue("KEPT")
        assert qm.journal is not None and qm.journal.policy == "none"
    with QueueManager.open(tmp_path / "d", sweeper=False) as qm:
        assert "KEPT" in [q.name for q in qm.internal.queues()]


def test_a_budget_in_a_group_is_kept_as_bytes_and_the_group_stays_frozen():
    memory = MemorySettings(budget="64KiB")
    assert memory.budget == memory.limit == 64 * 1024
    with pytest.raises(AttributeError):
        memory.budget = 0  # type: ignore[misc]
    assert DurabilitySettings().keeps is False and DurabilitySettings(path="d").keeps is True
    assert DurabilitySettings(path="d", durable=False).keeps is False
