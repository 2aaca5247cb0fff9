"""Random calls of the Python API: only MQError ever comes out, and what MQ would refuse is
refused.

Every argument of open, put, get, get_many, define_queue and alter_queue is drawn either
from its valid values or from anything at all (None, bools, huge ints, floats with NaN
and infinity, strings, bytes, lists, dicts, enum members of the wrong kind). A plain
predicate beside each call says whether MQ would refuse it; then the call must raise
MQError. A call the predicate accepts may still fail for a reason of state (queue full,
nothing to get), but only with MQError.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sweepq.engine import GMO, MD, MO, OO, PMO, DeliverySequence, MQError, QueueManager, SweeperSettings, Usage
from sweepq.sweeper import ManualClock

ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=30),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.sampled_from([GMO.SYNCPOINT, PMO.SYNCPOINT, OO.OUTPUT, MO.MATCH_CORREL_ID, Usage.TRANSMISSION]),
)


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _flags(v) -> bool:
    return _int(v) and 0 <= v < 2**32


def _ident(v, n=24) -> bool:
    return isinstance(v, bytes | bytearray | memoryview) and len(v) <= n


def _either(valid, weird=ANYTHING):
    return st.one_of(valid, weird)


@pytest.fixture(scope="module")
def qm():
    with QueueManager(clock=ManualClock(), sweeping=SweeperSettings(run=False)) as m:
        m.define_queue("Q")
        yield m


def _call(fn, refused_by_mq: bool):
    try:
        fn()
    except MQError:
        return
    except Exception as e:  # the point: nothing but MQError may escape
        raise AssertionError(f"{type(e).__name__} escaped: {e}") from e
    assert not refused_by_mq, "MQ would refuse this call, sweepq accepted it"


FUZZ = settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(name=_either(st.just("Q")), options=_either(st.sampled_from([OO.OUTPUT, OO.INPUT_SHARED | OO.OUTPUT, 0])))
def test_open(qm, name, options):
    c = qm.connect()
    refused = not isinstance(name, str) or not _flags(options)
    _call(lambda: c.open(name, options), refused)
    c.disconnect()


MD_FIELDS = {
    "priority": _either(st.integers(-1, 12)),
    "persistence": _either(st.integers(0, 2)),
    "expiry": _either(st.one_of(st.just(-1), st.integers(1, 1000))),
    "msg_flags": _either(st.sampled_from([0, 1, 2, 8])),
    "msg_seq_number": _either(st.integers(1, 5)),
    "offset": _either(st.integers(0, 5)),
    "msg_id": _either(st.binary(min_size=24, max_size=24)),
    "correl_id": _either(st.binary(max_size=24)),
    "group_id": _either(st.binary(min_size=24, max_size=24)),
}


def _md_refused(md) -> bool:
    if md is None:
        return False
    if not isinstance(md, MD):
        return True
    return not (
        _int(md.priority)
        and md.priority >= -1
        and _int(md.persistence)
        and 0 <= md.persistence <= 2
        and _int(md.expiry)
        and (md.expiry == -1 or 1 <= md.expiry <= 999_999_999)
        and _flags(md.msg_flags)
        and not md.msg_flags & ~0x1F
        and _int(md.msg_seq_number)
        and 1 <= md.msg_seq_number <= 999_999_999
        and _int(md.offset)
        and 0 <= md.offset <= 999_999_999
        and all(_ident(getattr(md, f)) for f in ("msg_id", "correl_id", "group_id"))
    )


@FUZZ
@given(
    data=_either(st.binary(max_size=50)),
    md=st.one_of(st.none(), st.builds(MD, **MD_FIELDS), ANYTHING),
    options=_either(st.sampled_from([0, PMO.SYNCPOINT, PMO.NO_SYNCPOINT, PMO.NEW_MSG_ID])),
)
def test_put(qm, data, md, options):
    c = qm.connect()
    h = c.open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    refused = not isinstance(data, bytes | bytearray | memoryview) or _md_refused(md) or not _flags(options)
    _call(lambda: h.put(data, md, options), refused)
    _call(lambda: h.put_many([data, data], md, options), refused)
    c.disconnect()


GET_OPTIONS = [0, GMO.WAIT, GMO.SYNCPOINT, GMO.ACCEPT_TRUNCATED_MSG, GMO.NO_SYNCPOINT | GMO.WAIT]


@FUZZ
@given(
    options=_either(st.sampled_from(GET_OPTIONS)),
    wait_interval=_either(st.integers(-1, 10)),
    buffer_length=_either(st.one_of(st.none(), st.integers(0, 10))),
    match=_either(st.sampled_from([MO.NONE, MO.MATCH_CORREL_ID, MO.MATCH_MSG_ID | MO.MATCH_CORREL_ID])),
    correl_id=_either(st.one_of(st.none(), st.binary(max_size=24))),
    msg_token=_either(st.none()),
    count=_either(st.integers(1, 3)),
)
def test_get(qm, options, wait_interval, buffer_length, match, correl_id, msg_token, count):
    c = qm.connect()
    h = c.open("Q", OO.OUTPUT | OO.INPUT_SHARED)
    h.put(b"fuzz")
    waits = _flags(options) and options & GMO.WAIT
    if waits and _int(wait_interval) and wait_interval >= -1:
        wait_interval = 0  # a valid wait: on the manual clock 0 ms returns at once
    selects = match != (MO.MATCH_MSG_ID | MO.MATCH_CORREL_ID) or correl_id is not None or msg_token is not None
    refused = (
        not _flags(options)
        or (waits and not (_int(wait_interval) and wait_interval >= -1))
        or (buffer_length is not None and not (_int(buffer_length) and 0 <= buffer_length < 2**31))
        or (selects and not _flags(match))
        or (correl_id is not None and _flags(match) and match & MO.MATCH_CORREL_ID and not _ident(correl_id))
    )
    _call(
        lambda: h.get(options, wait_interval, buffer_length, match, None, correl_id, None, None, None, msg_token),
        refused,
    )
    many_refused = not _flags(options) or (waits and not _int(wait_interval)) or not (_int(count) and count >= 1)
    _call(lambda: h.get_many(count, options, wait_interval), many_refused)
    c.backout()
    c.disconnect()


ATTRS = {
    "default_priority": _either(st.integers(0, 9)),
    "max_depth": _either(st.integers(0, 10**6)),
    "inhibit_get": _either(st.booleans()),
    "inhibit_put": _either(st.booleans()),
    "delivery_sequence": _either(st.sampled_from(list(DeliverySequence))),
    "usage": _either(st.sampled_from(list(Usage))),
    "backout_requeue_q": _either(st.just("")),
}


def _attrs_refused(attrs: dict) -> bool:
    for k, v in attrs.items():
        if k in ("inhibit_get", "inhibit_put") and not isinstance(v, bool):
            return True
        if k == "default_priority" and not (_int(v) and 0 <= v <= 9):
            return True
        if k == "max_depth" and not (_int(v) and 0 <= v <= 999_999_999):
            return True
        if k == "delivery_sequence" and v not in list(DeliverySequence):
            return True
        if k == "usage" and v not in list(Usage):
            return True
        if k == "backout_requeue_q" and not isinstance(v, str):
            return True
    return False


counter = iter(range(10**9))


@FUZZ
@given(attrs=st.fixed_dictionaries({}, optional=ATTRS), name=_either(st.just("D")))
def test_define_and_alter(qm, attrs, name):
    qname = f"D{next(counter)}" if name == "D" else name
    refused = _attrs_refused(attrs) or not isinstance(qname, str)
    _call(lambda: qm.define_queue(qname, **attrs), refused)
    if isinstance(qname, str) and qname in qm.queue_names():
        _call(lambda: qm.alter_queue(qname, **attrs), _attrs_refused(attrs))
        if attrs.get("inhibit_get") is False:
            assert not qm.inquire_queue(qname).attributes.inhibit_get


def test_a_nan_wait_is_refused_at_once(qm):
    c = qm.connect()
    h = c.open("Q", OO.INPUT_SHARED)
    for bad in (math.nan, math.inf, None, 10**13, 2.5):
        with pytest.raises(MQError):
            h.get(GMO.WAIT, wait_interval=bad)


def test_a_closed_manager_refuses_administration():
    m = QueueManager(sweeping=SweeperSettings(run=False))
    m.define_queue("X")
    m.close()
    for call in (lambda: m.define_queue("Y"), lambda: m.inquire_queue("X"), m.connect, lambda: m.delete_queue("X")):
        with pytest.raises(MQError) as ei:
            call()
        assert ei.value.reason == 2009
    assert "X" in m.stats()  # the final figures stay readable
