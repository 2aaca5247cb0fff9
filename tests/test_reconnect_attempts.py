"""net/calls.Attempts: the schedule both clients follow when they reconnect after a break,
driven by a hand-moved clock (the reconnect tests in tests/test_reconnect.py run it against
a real server that stops and starts)."""

from __future__ import annotations

import pytest

from sweepq.engine import MQError, Reason
from sweepq.net import calls as C

ADDRESS = C.Address("unix", path="/tmp/nowhere.sock")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refused() -> MQError:
    return MQError(Reason.HOST_NOT_AVAILABLE, "refused")


def test_waits_double_up_to_the_cap_and_stop_at_the_bound() -> None:
    clock = Clock()
    attempts = C.Attempts(ADDRESS, "reset", 5.0, clock)
    waits = []
    with pytest.raises(MQError) as info:
        while True:
            delay = attempts.wait_after(refused())
            waits.append(delay)
            clock.now += delay
    assert waits[:7] == [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0]
    assert set(waits[7:]) == {1.0}
    assert sum(waits) <= 5.0 < sum(waits) + 1.0  # no wait ends past the bound; one more would have
    assert info.value.reason == Reason.CONNECTION_BROKEN
    assert "reconnect=5 s" in str(info.value) and "reset" in str(info.value)
    assert info.value.__suppress_context__


def test_a_reason_not_worth_retrying_ends_at_once() -> None:
    attempts = C.Attempts(ADDRESS, "reset", 30.0, Clock())
    with pytest.raises(MQError) as info:
        attempts.wait_after(MQError(Reason.NOT_AUTHORIZED, "no"))
    assert info.value.reason == Reason.CONNECTION_BROKEN


@pytest.mark.parametrize("bound", [0, 0.0])
def test_no_reconnect_is_2009_before_any_attempt(bound: float) -> None:
    with pytest.raises(MQError) as info:
        C.Attempts(ADDRESS, "reset", bound, Clock())
    assert info.value.reason == Reason.CONNECTION_BROKEN
    assert "reconnect=True" in str(info.value)


@pytest.mark.parametrize(
    ("reason", "closes"),
    [(Reason.UNKNOWN_OBJECT_NAME, True), (Reason.CONNECTION_BROKEN, False), (Reason.HOST_NOT_AVAILABLE, False)],
)
def test_a_handle_closes_only_when_its_reopen_failed_for_good(reason: Reason, closes: bool) -> None:
    assert C.closes_on_reopen(MQError(reason, "x")) is closes
