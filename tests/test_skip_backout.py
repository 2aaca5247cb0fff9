"""Skip backout, exactly as seed 004 describes it, steps 1 to 10."""

from __future__ import annotations

import pytest

from sweepq.engine import GMO, OO, PMO, MQError, Reason

from helpers import IO, drain


@pytest.fixture
def setup(qm):
    qm.define_queue("ERRORS")
    qm.define_queue("OTHER")
    app = qm.connect()
    # Step 1: open with an INPUT option.
    q = app.open("Q", OO.INPUT_SHARED | OO.OUTPUT)
    other = app.open("OTHER", IO)
    errors = app.open("ERRORS", IO)
    q.put(b"poison")
    q.put(b"second")
    return app, q, other, errors


def _uow1(app, q, other):
    # Step 2: MQGET with SYNCPOINT and MARK_SKIP_BACKOUT (UOW1).
    m = q.get(GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT)
    assert m.data == b"poison"
    # Step 3: other updates in UOW1, including a get without the mark.
    assert q.get(GMO.SYNCPOINT).data == b"second"
    other.put(b"side-effect", options=PMO.SYNCPOINT)
    return m


def test_step_4_commit_removes_the_marked_message(setup):
    app, q, other, _ = setup
    _uow1(app, q, other)
    app.commit()  # Step 4
    assert q.queue.depth == 0
    assert drain(other) == [b"side-effect"]


def test_steps_5_to_9_backout_then_commit_uow2(setup):
    app, q, other, errors = setup
    _uow1(app, q, other)
    app.backout()  # Step 5: the application asks for a backout
    # Step 6: the updates of step 3 are backed out.
    assert drain(other) == []
    got = q.get()
    assert (got.data, got.backout_count) == (b"second", 1)
    # Step 7: the marked get skipped backout: still off the queue, now in UOW2.
    assert app.uncommitted == 1
    assert q.queue.depth == 1 and q.queue.ready == 0
    # Step 8: exception handling in UOW2.
    errors.put(b"poison was discarded", options=PMO.SYNCPOINT)
    # Step 9: commit UOW2: the marked message is removed for good.
    app.commit()
    assert q.queue.depth == 0
    assert drain(errors) == [b"poison was discarded"]


def test_step_10_backout_of_uow2_reinstates_the_message(setup):
    app, q, other, errors = setup
    _uow1(app, q, other)
    app.backout()
    errors.put(b"note", options=PMO.SYNCPOINT)
    app.backout()  # Step 10
    assert drain(errors) == []
    msgs = []
    while True:
        try:
            msgs.append(q.get())
        except MQError:
            break
    assert [m.data for m in msgs] == [b"poison", b"second"]  # back in its place
    # It was not backed out by step 5 (sweepq decision), but it was by step 10.
    assert msgs[0].backout_count == 1


def test_marked_message_stays_off_queue_for_other_getters_after_backout(qm, setup):
    app, q, other, _ = setup
    _uow1(app, q, other)
    app.backout()
    rival = qm.connect().open("Q", IO)
    assert rival.get().data == b"second"
    with pytest.raises(MQError) as ei:
        rival.get()
    assert ei.value.reason == Reason.NO_MSG_AVAILABLE


def test_second_mark_in_a_unit_of_work_is_2062(setup):
    _app, q, _other, _ = setup
    q.get(GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT)
    with pytest.raises(MQError) as ei:
        q.get(GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT)
    assert ei.value.reason == Reason.SECOND_MARK_NOT_ALLOWED == 2062
    assert q.get(GMO.SYNCPOINT).data == b"second"  # unmarked gets are still fine


def test_a_new_mark_is_allowed_in_uow2(setup):
    app, q, other, _ = setup
    _uow1(app, q, other)
    app.backout()
    # The carried-over get is an ordinary member of UOW2, so UOW2 may mark one get itself.
    assert q.get(GMO.SYNCPOINT | GMO.MARK_SKIP_BACKOUT).data == b"second"


def test_backout_not_requested_by_the_application_restores_the_marked_message(qm, setup):
    app, q, other, _ = setup
    _uow1(app, q, other)
    app.disconnect()  # implicit backout: the mark does not apply
    g = qm.connect().open("Q", IO)
    assert drain(g) == [b"poison", b"second"]
