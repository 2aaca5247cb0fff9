"""Message properties (MD.properties): put with the message, stored inside its record,
returned on get — in memory and after a sweep — and refused with MQ's reasons when a
name or a value is wrong."""

from __future__ import annotations

import math

import pytest

from sweepq.engine import MD, OO, DurabilitySettings, MQError, QueueManager, Reason, SweeperSettings, record
from sweepq.engine import properties as props_mod
from sweepq.sweeper import ManualClock

from helpers import IO, drain

EVERY_TYPE = {
    "s": "text with 'quotes' and ünïcode",
    "empty": "",
    "i": 7,
    "neg": -300,
    "i32": 2**31 - 1,
    "i64max": 2**63 - 1,
    "i64min": -(2**63),
    "f": 2.5,
    "fneg": -1e-300,
    "t": True,
    "fa": False,
    "b": b"\x00\x01\xff",
    "noBytes": b"",
    "nul": None,
    "app.region": "EU",
    "Größe": 42,
}


def _same(a: dict, b: dict) -> bool:
    """Equal with every value of the same type (True is not 1, b'' is not '')."""
    return list(a) == list(b) and all(type(a[k]) is type(b[k]) and a[k] == b[k] for k in a)


@pytest.fixture(params=["memory", "swept"])
def where(request):
    return request.param


@pytest.fixture
def sqm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": 10}),
    ) as qm:
        qm.define_queue("Q")
        yield qm


def _sweep_if(qm, where: str, expect_swept: int) -> None:
    if where == "swept":
        qm.sweeper.run_once()
        assert qm.stats()["Q"].msgs_swept == expect_swept


def test_every_type_round_trips_through_put_and_get(sqm, where):
    h = sqm.connect().open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)  # kept in memory by the sweep (x + 5)
    put = h.put(b"payload", MD(properties=EVERY_TYPE, priority=0))
    assert _same(put.md.properties, EVERY_TYPE)
    for i in range(20):
        h.put(b"after%d" % i, MD(properties={"n": i}))
    _sweep_if(sqm, where, 21)
    got = [h.get() for _ in range(26)]
    assert [m.data for m in got[:5]] == [b"buffer%d" % i for i in range(5)]
    m = got[5]
    assert m.data == b"payload" and m.data_length == 7
    assert _same(m.md.properties, EVERY_TYPE)
    assert [m.md.properties for m in got[6:]] == [{"n": i} for i in range(20)]
    assert got[0].md.properties == {}  # none put: an empty dict on output


def test_selective_get_reads_properties_from_swept_blobs(sqm, where):
    conn = sqm.connect()
    h = conn.open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)
    for i in range(30):
        h.put(b"%02d" % i, MD(properties={"n": i, "tag": b"\x0a\xfc" if i == 17 else b""}))
    _sweep_if(sqm, where, 30)
    sel = conn.open("Q", OO.INPUT_SHARED, selector="tag = 0x0AFC")
    m = sel.get()
    assert m.data == b"17" and m.md.properties == {"n": 17, "tag": b"\x0a\xfc"}
    assert sqm.stats()["Q"].unsweeps == 0


def test_large_properties_keep_the_data_intact(sqm, where):
    """A header longer than 255 bytes: the record's first byte cannot hold the payload
    offset, so readers go through record.data_offset."""
    conn = sqm.connect()
    h = conn.open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)
    big = {"blob": b"x" * 1000, "text": "y" * 300, "n": 1}
    put = h.put(b"the data", MD(properties=big, correl_id=b"C", group_id=b"G", msg_seq_number=2, expiry=99999))
    assert put._rec[0] == 0 and record.data_offset(put._rec) > 255
    h.put(b"small", MD(properties={"n": 2}))
    _sweep_if(sqm, where, 2)
    sel = conn.open("Q", OO.INPUT_SHARED, selector="n = 1 AND text LIKE 'yyy%'")
    trunc = sel.get(buffer_length=3)
    assert trunc.data == b"the" and trunc.data_length == 8 and trunc.reason == Reason.TRUNCATED_MSG_FAILED
    assert [h.get().data for _ in range(5)] == [b"buffer%d" % i for i in range(5)]
    m = sel.get()
    assert m.data == b"the data" and m.data_length == 8
    assert m.md.properties == big and m.md.correl_id.rstrip(b"\0") == b"C" and m.md.msg_seq_number == 2
    assert [x.data for x in h.get_many(5)] == [b"small"]


def test_get_many_and_put_many_carry_properties(sqm):
    h = sqm.connect().open("Q", IO)
    results = h.put_many([b"a", b"b", b"c"], MD(properties={"batch": "B1", "big": b"z" * 400}))
    assert all(r.md.properties["batch"] == "B1" for r in results)
    got = h.get_many(3)
    assert [m.data for m in got] == [b"a", b"b", b"c"]
    assert all(m.md.properties == {"batch": "B1", "big": b"z" * 400} for m in got)


def test_records_without_properties_are_unchanged(qm, h):
    """No properties (None or empty): the record is byte for byte what it was before."""
    r0 = h.put(b"data")._rec
    assert r0[0] == record.HEAD_LEN and len(r0) == record.HEAD_LEN + 4
    for md in (MD(priority=3, correl_id=b"C"), MD(priority=3, correl_id=b"C", properties={})):
        rec = h.put(b"data", md)._rec
        seq, put_us = record.seq_of(rec), record.HEAD.unpack_from(rec)[5]
        # The layout as it was before properties: head, CorrelId section, payload.
        head = record.HEAD.pack(record.HEAD_LEN + 24, 3, record.HAS_CORREL_ID, 0, seq, put_us)
        assert rec == head + b"C".ljust(24, b"\0") + b"data"
        assert not rec[record.OFF_FLAGS] & record.HAS_PROPS
    assert [m.md.properties for m in (h.get(), h.get(), h.get())] == [{}, {}, {}]


@pytest.mark.parametrize("size", [10, 400], ids=["short-header", "long-header"])
def test_rehome_keeps_properties_and_data(size):
    """rehome (the poison-message move) writes out a generated MsgId before the properties."""
    ident = record.Identity(b"R" * 12)
    section = props_mod.encode({"k": "v" * size})
    rec = record.encode(5, 1_000_000, 4, True, b"payload", props=section)
    moved = record.rehome(rec, 9, ident)
    assert record.seq_of(moved) == 9 and ident.msg_id(moved) == ident.msg_id(rec)
    assert record.data_of(moved) == b"payload"
    assert record.properties_of(moved) == {"k": "v" * size}
    back = record.with_backout(moved, 3)
    assert record.backout_of(back) == 3 and record.data_of(back) == b"payload"


def test_encoding_round_trip_and_compactness():
    assert props_mod.decode(props_mod.encode({})) == {}
    enc = props_mod.encode(EVERY_TYPE)
    assert _same(props_mod.decode(enc), EVERY_TYPE)
    assert len(props_mod.encode({"n": 1})) == 1 + 1 + 1 + 1  # type, name length, name, one byte
    assert len(props_mod.encode({"t": True})) == 3
    special = props_mod.decode(props_mod.encode({"inf": math.inf, "nan": math.nan}))
    assert special["inf"] == math.inf and math.isnan(special["nan"])
    ba = props_mod.decode(props_mod.encode({"ba": bytearray(b"ab"), "mv": memoryview(b"cd")}))
    assert ba == {"ba": b"ab", "mv": b"cd"} and type(ba["ba"]) is bytes


def test_lookup_decodes_only_the_names_asked_for():
    enc = props_mod.encode({"a": "x" * 200, "b": 5, "c": b"yy", "d": 1.5, "e": None})
    assert props_mod.lookup(enc, 0, len(enc), props_mod.wanted({"b", "d", "zz"})) == {"b": 5, "d": 1.5}
    long_name = "n" * 300  # a name length that needs a two-byte varint
    enc = props_mod.encode({long_name: 1, "after": "x"})
    assert props_mod.lookup(enc, 0, len(enc), props_mod.wanted({"after"})) == {"after": "x"}
    assert props_mod.decode(enc) == {long_name: 1, "after": "x"}


@pytest.mark.parametrize(
    "name",
    [
        "",
        "1abc",
        "a..b",
        "a.",
        ".a",
        "a b",
        "a-b",
        "AND",
        "null",
        "Escape",
        "JMSPriority",
        "JMS_IBM_Format",
        "Root.MQMD.Priority",
        "Root",
        "Body.x",
        "x" * 4096,
        5,
        b"name",
        None,
    ],
)
def test_bad_property_names_are_2442(h, name):
    with pytest.raises(MQError) as e:
        h.put(b"x", MD(properties={name: 1}))
    assert e.value.reason == Reason.PROPERTY_NAME_ERROR
    assert h.queue.depth == 0


@pytest.mark.parametrize(
    "value",
    [[1], {"a": 1}, {1}, (1,), object(), 2**63, -(2**63) - 1, "\ud800", 1j],
    ids=["list", "dict", "set", "tuple", "object", "int-too-big", "int-too-small", "surrogate", "complex"],
)
def test_bad_property_values_are_2473(h, value):
    with pytest.raises(MQError) as e:
        h.put(b"x", MD(properties={"p": value}))
    assert e.value.reason == Reason.PROPERTY_TYPE_ERROR
    assert h.queue.depth == 0


@pytest.mark.parametrize("props", [[("a", 1)], "abc", 5, 0, []], ids=["pairs", "str", "int", "zero", "empty-list"])
def test_properties_that_are_not_a_mapping_are_2473(h, props):
    with pytest.raises(MQError) as e:
        h.put(b"x", MD(properties=props))
    assert e.value.reason == Reason.PROPERTY_TYPE_ERROR


def test_unchecked_types_never_leak_as_python_errors(h):
    for bad in ({"ok": 1, "bad name": 2}, {"ok": 1, "v": [1]}):
        with pytest.raises(MQError):
            h.put(b"x", MD(properties=bad))
    assert drain(h) == []


def test_persistent_properties_survive_a_crash_in_memory_and_swept():
    """Durable records carry their properties (a generated MsgId is pinned in front of them,
    short and long headers alike); a selective get works on the recovered queue."""
    from sweepq.blobstore import MemoryStore
    from sweepq.blobstore.kv import MemoryKV

    def manager(kv):
        store = MemoryStore(kv=kv, max_blob_records=4)
        return QueueManager(
            store=store,
            sweeping=SweeperSettings(run=False, readahead_low_water=0),
            durability=DurabilitySettings(durable=True),
            clock=ManualClock(),
        )

    kv = MemoryKV()
    qm = manager(kv)
    qm.define_queue("Q", default_persistence=1)
    h = qm.connect().open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)
    for i in range(12):
        h.put(b"%02d" % i, MD(properties={"n": i, "pad": "p" * (300 if i % 3 == 0 else 1)}))
    qm.sweeper.run_once()
    assert qm.stats()["Q"].msgs_swept == 12
    copy = MemoryKV()
    copy._cfs = {cf: dict(d) for cf, d in kv._cfs.items()}  # what a killed process leaves
    with manager(copy) as qm2:
        conn = qm2.connect()
        sel = conn.open("Q", OO.INPUT_SHARED, selector="n >= 9 OR pad LIKE 'ppp%'")
        got = [(m.data, m.md.properties["n"]) for m in (sel.get() for _ in range(6))]
        assert got == [(b"00", 0), (b"03", 3), (b"06", 6), (b"09", 9), (b"10", 10), (b"11", 11)]
        rest = drain(conn.open("Q", OO.INPUT_SHARED))
        assert rest == [b"buffer%d" % i for i in range(5)] + [b"%02d" % i for i in (1, 2, 4, 5, 7, 8)]
