"""Selection strings (docs/semantics.md §10): the dialect, three-valued logic, and selective
gets through Connection.open(selector=...), in memory and on a swept queue.

The table ``CASES`` holds valid selectors with their value over the property set ``P``
(True, False or ``U`` for Unknown) and invalid ones with the reason code MQ gives (2459
with the 1-based position of the error, or 2504 for a selector that is never TRUE).
"""

from __future__ import annotations

import itertools
import threading
from types import SimpleNamespace

import pytest

from sweepq.engine import GMO, MD, MO, OO, DurabilitySettings, MQError, QueueManager, Reason, SweeperSettings
from sweepq.engine.selector import Selector, compile_selector
from sweepq.sweeper import ManualClock, SweepPolicy

from helpers import IO, drain

U = None  # SQL's Unknown


class Err:
    """An expected failure: the reason, and for 2459 the 1-based position in the text."""

    def __init__(self, reason: int, pos: int | None = None):
        self.reason = reason
        self.pos = pos

    def __repr__(self) -> str:
        return f"Err({self.reason}, {self.pos})"


P = {
    "Color": "red",
    "Weight": 2.5,
    "Count": 7,
    "Neg": -4,
    "Flag": True,
    "Off": False,
    "Name": "O'Brien",
    "Bytes": b"\x0a\xfc\x23",
    "Str2": "2",
    "Path": "50%_off",
    "Empty": "",
    "Nul": None,
    "Größe": 3,
    "$x_1": 1,
    "app.region": "EU",
    "Big": 2**63 - 1,
}

CASES = [
    # -- comparisons of strings, numbers, booleans ----------------------------------------
    ("str-eq", "Color = 'red'", True),
    ("str-eq-case-sensitive-value", "Color = 'RED'", False),
    ("str-ne", "Color <> 'blue'", True),
    ("ident-case-sensitive", "color = 'red'", U),
    ("int-eq", "Count = 7", True),
    ("int-eq-float", "Count = 7.0", True),
    ("float-gt-int", "Weight > 2", True),
    ("float-ge", "Weight >= 2.5", True),
    ("float-lt", "Weight < 2.5", False),
    ("int-le", "Count <= 6", False),
    ("quote-escape", "Name = 'O''Brien'", True),
    ("bool-eq-true", "Flag = TRUE", True),
    ("bool-keyword-any-case", "Off = false", True),
    ("bool-not-a-number", "Flag = 1", False),
    ("unicode-identifier", "Größe = 3", True),
    ("dollar-identifier", "$x_1 = 1", True),
    ("dotted-identifier", "app.region = 'EU'", True),
    ("keywords-any-case", "count = 7 oR Color iN ('red') aNd NoT Off", True),
    # -- no conversion between types ---------------------------------------------------------
    ("string-vs-number-gt", "Str2 > 1", False),
    ("string-vs-number-eq", "Str2 = 2", False),
    ("string-vs-number-ne", "Str2 <> 2", False),
    ("not-of-mismatch", "NOT (Str2 = 2)", True),
    ("bytes-vs-string", "Bytes = 'x'", False),
    # -- arithmetic ----------------------------------------------------------------------------
    ("add", "Count + 3 = 10", True),
    ("sub-negative", "Count - 10 = -3", True),
    ("mul", "Count * 2 = 14", True),
    ("div-truncates", "Count / 2 = 3", True),
    ("div-toward-zero", "Neg / 3 = -1", True),
    ("div-float", "Weight / 2 = 1.25", True),
    ("div-by-zero-unknown", "Count / 0 = 1", U),
    ("unary-minus", "-Count = -7", True),
    ("unary-plus-hex", "Count = +0x7", True),
    ("null-in-arithmetic", "Count + Missing = 7", U),
    ("precedence", "2 + 3 * 4 = 14 AND Color = 'red'", True),
    ("parentheses", "(2 + 3) * 4 = 20 AND Flag", True),
    ("hex-beside-number", "0xA = 10 AND Flag", True),
    ("octal", "Count = 07", True),
    ("octal-arith", "Count = 010 - 1", True),
    ("long-suffix", "Count = 7L", True),
    ("hex-long-suffix", "Count = 0x7L", True),
    ("exponent", "Weight = 25E-1", True),
    ("leading-dot", "Weight = .25e1", True),
    ("double-suffix", "Weight = 2.5D", True),
    ("int64-max", "Count < 9223372036854775807", True),
    ("int64-min", "Count > -9223372036854775808", True),
    ("long-wraps-like-java", "Big + 1 < 0 AND Big * 2 = -2", True),
    ("long-times-float-is-float", "Big * 2.0 > Big", True),
    # -- conditions, NULL, three-valued logic -----------------------------------------------
    ("bool-property", "Flag", True),
    ("bool-property-false", "Off", False),
    ("non-bool-as-condition", "Color", U),
    ("not-bool", "NOT Flag", False),
    ("not-unknown", "NOT Missing", U),
    ("unknown-or-true", "Missing = 1 OR Flag", True),
    ("unknown-or-false", "Missing = 1 OR Off", U),
    ("unknown-and-false", "Missing = 1 AND Off", False),
    ("unknown-and-true", "Missing = 1 AND Flag", U),
    ("or-short-circuit-unknown", "Color = 'red' OR Count / 0 = 1", True),
    ("null-property-eq", "Nul = 1", U),
    ("is-null-missing", "Missing IS NULL", True),
    ("is-null-present", "Color IS NULL", False),
    ("is-not-null", "Color IS NOT NULL", True),
    ("is-null-put-as-none", "Nul IS NULL", True),
    ("constant-true-selects-all", "TRUE OR Missing = 1", True),
    # -- BETWEEN --------------------------------------------------------------------------------
    ("between", "Count BETWEEN 5 AND 10", True),
    ("not-between", "Count NOT BETWEEN 5 AND 10", False),
    ("between-outside", "Count BETWEEN 8 AND 10", False),
    ("between-inclusive", "Weight BETWEEN 2.5 AND 2.5", True),
    ("between-null", "Missing BETWEEN 1 AND 2", U),
    ("not-between-null", "Missing NOT BETWEEN 1 AND 2", U),
    ("between-string", "Color BETWEEN 1 AND 2", False),
    # -- IN ---------------------------------------------------------------------------------------
    ("in", "Color IN ('red', 'green')", True),
    ("not-in", "Color NOT IN ('red', 'green')", False),
    ("in-miss", "Color IN ('blue')", False),
    ("in-null", "Missing IN ('a')", U),
    ("not-in-null", "Missing NOT IN ('a')", U),
    ("in-number-no-conversion", "Count IN ('7')", False),
    # -- LIKE ------------------------------------------------------------------------------------
    ("like-percent", "Color LIKE 'r%'", True),
    ("like-underscore", "Color LIKE 'r_d'", True),
    ("like-underscore-one-char", "Color LIKE 'r_'", False),
    ("not-like", "Color NOT LIKE '%e%'", False),
    ("like-escape", "Path LIKE '50!%!_off' ESCAPE '!'", True),
    ("like-escape-then-wildcard", "Path LIKE '50!%_off' ESCAPE '!'", True),
    ("like-escaped-percent-is-literal", "Color LIKE '50!%%' ESCAPE '!'", False),
    ("like-escape-itself", "Name LIKE 'O''B%'", True),
    ("like-null", "Missing LIKE '%'", U),
    ("like-empty", "Empty LIKE '%'", True),
    ("like-regex-chars-literal", "Color LIKE 'r.d'", False),
    ("like-non-string", "Count LIKE '7'", False),
    # -- byte strings -----------------------------------------------------------------------------
    ("bytes-eq", "Bytes = 0x0AFC23", True),
    ("bytes-longer", "Bytes = 0x0AFC2300", False),
    ("bytes-lower-hex", "Bytes = 0x0afc23", True),
    ("bytes-ne", "Bytes <> 0x0AFC23", False),
    ("bytes-shorter", "Bytes = 0x0AFC", False),
    # -- syntax errors: 2459 at the 1-based position -----------------------------------------------
    ("err-missing-operand", "Color = ", Err(2459, 9)),
    ("err-unterminated-string", "Color = 'red", Err(2459, 9)),
    ("err-double-quotes", 'Color = "red"', Err(2459, 9)),
    ("err-octal-9", "Count = 09", Err(2459, 10)),
    ("err-hex-odd-beside-identifier", "Count = 0x7", Err(2459, 9)),
    ("err-bytes-odd", "Bytes = 0xAFC23", Err(2459, 9)),
    ("err-double-equals", "Count == 7", Err(2459, 8)),
    ("err-bang-equals", "Count != 7", Err(2459, 7)),
    ("err-escape-two-chars", "Color LIKE 'a' ESCAPE 'ab'", Err(2459, 23)),
    ("err-escape-before-letter", "Color LIKE 'a!b' ESCAPE '!'", Err(2459, 12)),
    ("err-escape-missing-literal", "Color LIKE 'a' ESCAPE", Err(2459, 22)),
    ("err-like-number", "Color LIKE 5", Err(2459, 12)),
    ("err-like-on-number", "5 LIKE 'a'", Err(2459, 1)),
    ("err-in-empty", "Color IN ()", Err(2459, 11)),
    ("err-in-number", "Color IN ('a', 1)", Err(2459, 16)),
    ("err-in-no-parens", "Color IN 'a'", Err(2459, 10)),
    ("err-not-number", "NOT 5", Err(2459, 5)),
    ("err-number-as-selector", "5", Err(2459, 1)),
    ("err-string-plus", "'a' + 1 = 2", Err(2459, 1)),
    ("err-order-string", "Count < 'a'", Err(2459, 9)),
    ("err-order-strings", "'a' < 'b'", Err(2459, 1)),
    ("err-order-boolean", "Flag > TRUE", Err(2459, 8)),
    ("err-literal-types", "1 = 'a'", Err(2459, 5)),
    ("err-reserved-word", "AND = 1", Err(2459, 1)),
    ("err-between-no-and", "Count BETWEEN 1", Err(2459, 16)),
    ("err-between-string", "Count BETWEEN 'a' AND 2", Err(2459, 15)),
    ("err-is-number", "Count IS 5", Err(2459, 10)),
    ("err-not-equals", "Color NOT = 'a'", Err(2459, 11)),
    ("err-unclosed-paren", "(Count = 7", Err(2459, 11)),
    ("err-extra-paren", "Count = 7)", Err(2459, 10)),
    ("err-juxtaposed", "Count = 7 Color", Err(2459, 11)),
    ("err-unknown-jms-field", "JMSFoo = 1", Err(2459, 1)),
    ("err-unknown-mqmd-field", "Count = 1 OR Root.MQMD.Prio = 1", Err(2459, 14)),
    ("err-int-too-big", "Count = 99999999999999999999", Err(2459, 9)),
    ("err-exponent-no-digits", "Count = 1e", Err(2459, 10)),
    ("err-number-then-letters", "Count = 12abc", Err(2459, 11)),
    ("err-bad-character", "Color = @", Err(2459, 9)),
    ("err-null-as-value", "Count = NULL", Err(2459, 9)),
    ("err-hex-no-digits", "0x = Count", Err(2459, 1)),
    ("err-trailing-and", "Count BETWEEN 1 AND 2 AND", Err(2459, 26)),
    # -- never TRUE: 2504 -----------------------------------------------------------------------------
    ("false-comparison", "1 = 2", Err(2504)),
    ("false-literal", "FALSE", Err(2504)),
    ("false-and", "Count = 1 AND FALSE", Err(2504)),
    ("not-true", "NOT TRUE", Err(2504)),
    ("unknown-constant", "1 / 0 = 1", Err(2504)),
    ("false-in", "'a' IN ('b')", Err(2504)),
    ("false-is-null", "'a' IS NULL", Err(2504)),
    ("false-folded", "2 > 1 AND 1 > 2 OR 0 = 1", Err(2504)),
]


def test_the_table_is_large_enough_and_its_ids_unique():
    assert len(CASES) >= 60
    assert len({c[0] for c in CASES}) == len(CASES)
    assert sum(isinstance(c[2], Err) for c in CASES) >= 30


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_selector_table(text, expected):
    if isinstance(expected, Err):
        with pytest.raises(MQError) as e:
            compile_selector(text)
        assert e.value.reason == expected.reason, e.value
        if expected.pos is not None:
            assert f"at character {expected.pos}:" in e.value.text, e.value.text
            assert ": expected " in e.value.text, e.value.text
        return
    sel = compile_selector(text)
    assert isinstance(sel, Selector)
    assert sel.evaluate(P) is expected


def test_syntax_error_says_what_was_expected():
    with pytest.raises(MQError) as e:
        compile_selector("Count BETWEEN 1")
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR
    assert "expected AND between the two BETWEEN bounds, found the end of the selector" in e.value.text


@pytest.mark.parametrize("text", [None, "", "   ", "\t\n"])
def test_no_selection(text):
    assert compile_selector(text) is None


@pytest.mark.parametrize("bad", [5, b"Color = 'red'", ["a"], 1.5])
def test_a_selector_of_the_wrong_type_is_an_mqerror(bad):
    with pytest.raises(MQError) as e:
        compile_selector(bad)
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR


def test_a_selector_folding_to_true_selects_everything():
    sel = compile_selector("1 = 1 OR Color = 'x'")
    assert sel.always_true and sel.evaluate({}) is True


# -- three-valued logic --------------------------------------------------------------------------

T3 = (True, False, U)


def _and(a, b):
    if a is False or b is False:
        return False
    return U if a is U or b is U else True


def _or(a, b):
    if a is True or b is True:
        return True
    return U if a is U or b is U else False


def _props(**values):
    """Boolean properties; Unknown is a property that is missing."""
    return {k: v for k, v in values.items() if v is not U}


@pytest.mark.parametrize(("a", "b"), list(itertools.product(T3, T3)), ids=lambda v: {True: "T", False: "F", U: "U"}[v])
def test_and_or_truth_tables(a, b):
    env = _props(A=a, B=b)
    assert compile_selector("A AND B").evaluate(env) is _and(a, b)
    assert compile_selector("A OR B").evaluate(env) is _or(a, b)
    # De Morgan holds in three-valued logic too.
    assert compile_selector("NOT (A AND B)").evaluate(env) is compile_selector("NOT A OR NOT B").evaluate(env)


@pytest.mark.parametrize(("a", "expected"), [(True, False), (False, True), (U, U)], ids=["T", "F", "U"])
def test_not_truth_table(a, expected):
    assert compile_selector("NOT A").evaluate(_props(A=a)) is expected


def test_precedence_not_binds_looser_than_comparison_and_and_tighter_than_or():
    sel = compile_selector("A OR B AND C")
    assert sel.evaluate({"A": True, "B": False, "C": False}) is True  # A OR (B AND C)
    assert compile_selector("NOT Count = 1").evaluate({"Count": 2}) is True  # NOT (Count = 1)


# -- LIKE in more detail ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "value", "expected"),
    [
        ("'%'", "", True),
        ("'_'", "", False),
        ("'_'", "x", True),
        ("'a%b'", "ab", True),
        ("'a%b'", "a-long-b", True),
        ("'a%b'", "a\nb", True),  # % spans line breaks
        ("'a_c'", "abbc", False),
        ("'a\\%' ESCAPE '\\'", "a%", True),
        ("'a\\%' ESCAPE '\\'", "ab", False),
        ("'a\\\\' ESCAPE '\\'", "a\\", True),
        ("'100#%' ESCAPE '#'", "100%", True),
        ("'[ab]*'", "[ab]*", True),  # regex characters are literal
        ("'[ab]*'", "a", False),
    ],
)
def test_like_patterns(pattern, value, expected):
    assert compile_selector(f"S LIKE {pattern}").evaluate({"S": value}) is expected
    assert compile_selector(f"S NOT LIKE {pattern}").evaluate({"S": value}) is (not expected)


# -- byte strings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "expected"),
    [
        ("B = 0x0AFC23", b"\x0a\xfc\x23", True),
        ("B = 0x0AFC2300", b"\x0a\xfc\x23", False),  # length-exact
        ("B = 0xFC0A23", b"\x0a\xfc\x23", False),  # order-exact
        ("0x0AFC23 = B", b"\x0a\xfc\x23", True),
        ("B <> 0x00", b"\x00", False),
        ("B = 0x0AFC23", "\n\xfc#", False),  # a str is not a byte string
        ("B IS NULL", b"", False),
    ],
)
def test_byte_strings(text, value, expected):
    assert compile_selector(text).evaluate({"B": value}) is expected


def test_byte_strings_cannot_be_ordered():
    with pytest.raises(MQError) as e:
        compile_selector("0x0A < B")
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR and "at character 1:" in e.value.text


# -- through the engine ---------------------------------------------------------------------------------


def test_open_compiles_the_selector_and_reports_errors_at_open(qm, conn):
    with pytest.raises(MQError) as e:
        conn.open("Q", IO, selector="Color = ")
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR and "at character 9" in e.value.text
    with pytest.raises(MQError) as e:
        conn.open("Q", IO, selector="1 = 2")
    assert e.value.reason == Reason.SELECTOR_ALWAYS_FALSE
    with pytest.raises(MQError) as e:
        conn.open("Q", IO, selector=42)
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR
    assert qm.inquire_queue("Q").open_input_count == 0


def _put_colors(h, colors):
    for i, c in enumerate(colors):
        h.put(b"%d" % i, MD(properties={"Color": c, "N": i}))


@pytest.fixture(params=["memory", "swept"])
def tier(request):
    """A queue and a handle on it; ``settle()`` sweeps everything sweepable in the "swept"
    runs (the policy keeps no buffer in memory) and does nothing in the "memory" runs, so
    each test below asserts the same behaviour over both."""
    swept = request.param == "swept"
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False, policy=SweepPolicy(extra=0)),
        durability=DurabilitySettings(store_options={"max_blob_records": 3}),
    ) as qm:
        qm.define_queue("Q")
        conn = qm.connect()

        def settle():
            if swept:
                qm.sweeper.run_once()
                info = qm.inquire_queue("Q")
                assert info.in_memory == 0 and info.swept == info.current_depth > 0

        def unswept():
            """The messages brought back from blobs so far: none, for a selective get."""
            return qm.stats()["Q"].msgs_unswept

        yield SimpleNamespace(qm=qm, conn=conn, h=conn.open("Q", IO), settle=settle, unswept=unswept)


def test_get_returns_only_selected_messages_in_order(tier):
    conn, h = tier.conn, tier.h
    _put_colors(h, ["red", "blue", "red", "green", "blue"])
    h.put(b"plain")  # no properties: Color IS NULL
    tier.settle()
    blue = conn.open("Q", OO.INPUT_SHARED, selector="Color = 'blue'")
    got = []
    while True:
        try:
            got.append(blue.get().data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            break
    assert got == [b"1", b"4"]
    nulls = conn.open("Q", OO.INPUT_SHARED, selector="Color IS NULL")
    assert nulls.get().data == b"plain"
    assert tier.unswept() == 0
    assert drain(h) == [b"0", b"2", b"3"]


def test_selector_combines_with_match_options(tier):
    conn, h = tier.conn, tier.h
    for i in range(6):
        h.put(b"%d" % i, MD(correl_id=b"C%d" % (i % 2), properties={"N": i}))
    other = h.put(b"x", MD(properties={"N": 0}))
    tier.settle()
    sel = conn.open("Q", OO.INPUT_SHARED, selector="N >= 2")
    assert sel.get(correl_id=b"C1").data == b"3"
    assert sel.get(correl_id=b"C0").data == b"2"
    with pytest.raises(MQError) as e:
        sel.get(msg_id=other.msg_id)  # matches the MsgId, not the selector
    assert e.value.reason == Reason.NO_MSG_AVAILABLE
    assert tier.unswept() == 0


def test_descriptor_fields_can_be_selected(tier):
    conn, h = tier.conn, tier.h
    h.put(b"p1", MD(priority=1))
    h.put(b"p7", MD(priority=7, correl_id=b"ORDER-1"))
    h.put(b"p4", MD(priority=4, msg_seq_number=3, group_id=b"G"))
    h.put(b"kept", MD(priority=4, persistence=1))
    tier.settle()
    by_prio = conn.open("Q", OO.INPUT_SHARED | OO.BROWSE, selector="Root.MQMD.Priority < 5 AND JMSPriority > 1")
    assert by_prio.get().data == b"p4"
    durable = conn.open("Q", OO.INPUT_SHARED, selector="JMSDeliveryMode = 'PERSISTENT' AND Root.MQMD.Persistence = 1")
    assert durable.get().data == b"kept"
    cid = "ID:" + b"ORDER-1".ljust(24, b"\0").hex()
    by_jms = conn.open("Q", OO.INPUT_SHARED, selector=f"JMSCorrelationID = '{cid}'")
    assert by_jms.get().data == b"p7"
    light = conn.open("Q", OO.INPUT_SHARED, selector="JMSDeliveryMode = 'NON_PERSISTENT'")
    assert light.get().data == b"p1"
    assert tier.unswept() == 0
    assert drain(h) == []


def test_descriptor_byte_string_and_group_fields(tier):
    conn, h = tier.conn, tier.h
    put = h.put(b"g", MD(group_id=b"\x01\x02", msg_seq_number=2, correl_id=b"\xab"))
    h.put(b"other")
    tier.settle()
    gid = (b"\x01\x02" + bytes(22)).hex()
    cid = (b"\xab" + bytes(23)).hex()
    sel = conn.open(
        "Q",
        OO.INPUT_SHARED,
        selector=f"Root.MQMD.GroupId = 0x{gid} AND Root.MQMD.MsgSeqNumber = 2 AND JMSXGroupSeq = 2 "
        f"AND Root.MQMD.CorrelId = 0x{cid} AND Root.MQMD.MsgId = 0x{put.msg_id.hex()}",
    )
    assert sel.get().data == b"g"
    assert tier.unswept() == 0


def test_get_many_honours_the_selector(tier):
    conn, h = tier.conn, tier.h
    _put_colors(h, ["red", "blue"] * 5)
    tier.settle()
    red = conn.open("Q", OO.INPUT_SHARED, selector="Color = 'red'")
    assert [m.data for m in red.get_many(10)] == [b"0", b"2", b"4", b"6", b"8"]
    assert tier.unswept() == 0
    assert len(drain(h)) == 5


def test_syncpoint_get_with_selector_backs_out_in_place(tier):
    conn, h = tier.conn, tier.h
    _put_colors(h, ["red", "blue", "red"])
    tier.settle()
    red = conn.open("Q", OO.INPUT_SHARED, selector="Color = 'red'")
    assert red.get(GMO.SYNCPOINT).data == b"0"
    conn.backout()
    retried = conn.open("Q", OO.INPUT_SHARED, selector="Root.MQMD.BackoutCount > 0 AND JMSXDeliveryCount = 2")
    m = retried.get()
    assert m.data == b"0" and m.backout_count == 1
    with pytest.raises(MQError):
        retried.get()
    assert red.get().data == b"2"
    assert tier.unswept() == 0
    assert drain(h) == [b"1"]


def test_a_waiting_selective_get_times_out_when_nothing_matches(tier):
    conn, h = tier.conn, tier.h
    _put_colors(h, ["blue"])
    tier.settle()
    red = conn.open("Q", OO.INPUT_SHARED, selector="Color = 'red'")
    with pytest.raises(MQError) as e:
        red.get(GMO.WAIT, wait_interval=0)
    assert e.value.reason == Reason.NO_MSG_AVAILABLE


def test_match_options_without_selector_are_unchanged(tier):
    h = tier.h
    h.put(b"a", MD(correl_id=b"X"))
    tier.settle()
    assert h._s.match is None
    assert h.get(match=MO.MATCH_CORREL_ID, correl_id=b"X").data == b"a"


def test_a_selector_that_is_always_true_keeps_the_plain_get(tier):
    h = tier.conn.open("Q", IO, selector="1 = 1 OR x = 2")
    assert h._s.match is None  # no Match: the get hot path, and a swept queue unsweeps as usual
    h.put(b"a")
    tier.settle()
    assert h.get().data == b"a"


def _in_thread(fn):
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, box


def test_a_selective_waiter_is_woken_by_a_matching_put_only(qm, clock, h):
    red = qm.connect().open("Q", OO.INPUT_SHARED, selector="Color = 'red'")
    t, box = _in_thread(lambda: red.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1)
    h.put(b"blue", MD(properties={"Color": "blue"}))
    assert clock.wait_for_waiters(1) and t.is_alive()  # not for this waiter
    h.put(b"red", MD(properties={"Color": "red"}))
    t.join(10)
    assert box["value"].data == b"red"
    assert drain(h) == [b"blue"]


# -- a swept queue: selective gets search blobs in place -------------------------------------------

BLOB = 10


@pytest.fixture
def sqm():
    with QueueManager(
        clock=ManualClock(),
        sweeping=SweeperSettings(run=False),
        durability=DurabilitySettings(store_options={"max_blob_records": BLOB}),
    ) as qm:
        qm.define_queue("Q")
        yield qm


def test_selective_get_on_a_swept_queue_does_not_unsweep(sqm):
    conn = sqm.connect()
    h = conn.open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)  # the x + 5 = 5 kept in memory
    for i in range(60):
        h.put(b"%02d" % i, MD(properties={"n": i, "kind": "odd" if i % 2 else "even"}))
    sqm.sweeper.run_once()
    before = sqm.stats()["Q"]
    assert before.msgs_swept == 60 and before.blobs == 6 and before.unsweeps == 0
    one = conn.open("Q", OO.INPUT_SHARED, selector="n = 42")
    assert one.get().data == b"42"
    tail = conn.open("Q", OO.INPUT_SHARED, selector="kind = 'odd' AND n > 50")
    assert [tail.get().data for _ in range(5)] == [b"51", b"53", b"55", b"57", b"59"]
    with pytest.raises(MQError) as e:
        tail.get()
    assert e.value.reason == Reason.NO_MSG_AVAILABLE
    after = sqm.stats()["Q"]
    assert after.unsweeps == 0 and after.msgs_unswept == 0
    assert after.msgs_swept == 54 and after.blobs == 6  # the non-matching messages stay in their blobs
    assert sqm.inquire_queue("Q").current_depth == 59
    rest = drain(h)
    assert rest[:5] == [b"buffer%d" % i for i in range(5)]
    assert rest[5:] == [b"%02d" % i for i in range(60) if i != 42 and not (i > 50 and i % 2)]


def test_selective_get_of_descriptor_fields_on_a_swept_queue(sqm):
    conn = sqm.connect()
    h = conn.open("Q", IO)
    for i in range(40):
        h.put(b"%02d" % i, MD(priority=5 if i == 33 else 0))
    sqm.sweeper.run_once()
    sel = conn.open("Q", OO.INPUT_SHARED, selector="Root.MQMD.Priority = 5")
    assert sel.get().data == b"33"
    assert sqm.stats()["Q"].unsweeps == 0


# -- size limits: no Python recursion error ever escapes ---------------------------------------------


def test_long_and_or_chains_compile_and_evaluate_flat():
    any_of = compile_selector(" OR ".join(f"x = {i}" for i in range(5000)))
    assert (any_of.evaluate({"x": 4999}), any_of.evaluate({"x": -1}), any_of.evaluate({})) == (True, False, U)
    none_of = compile_selector(" AND ".join(f"x <> {i}" for i in range(5000)))
    assert (none_of.evaluate({"x": 4999}), none_of.evaluate({"x": -1}), none_of.evaluate({})) == (False, True, U)


@pytest.mark.parametrize(
    ("text", "pos"),
    [
        ("(" * 500 + "x" + ")" * 500, 41),
        ("NOT " * 1000 + "x", 161),
        ("-" * 1000 + "x = 1", 41),
        (" + ".join(["x"] * 300) + " = 1", 805),
    ],
    ids=["parentheses", "nots", "signs", "arithmetic-chain"],
)
def test_too_deep_nesting_is_a_syntax_error_at_its_position(text, pos):
    with pytest.raises(MQError) as e:
        compile_selector(text)
    assert e.value.reason == Reason.SELECTOR_SYNTAX_ERROR
    assert f"at character {pos}: expected at most" in e.value.text


def test_nesting_within_the_limits_works():
    assert compile_selector("(" * 40 + "x = 1" + ")" * 40).evaluate({"x": 1}) is True
    assert compile_selector(" + ".join(["x"] * 90) + " = 90").evaluate({"x": 1}) is True


def test_a_waiting_selective_get_sees_a_swept_message_backed_out_into_its_blob(sqm):
    """The waiter searched the blob while the message was held; the backout wakes it and it
    searches that blob again (its memo of searched blobs is cleared on every wake)."""
    clock = sqm.clock
    conn_a, conn_b = sqm.connect(), sqm.connect()
    h = conn_a.open("Q", IO)
    for i in range(5):
        h.put(b"buffer%d" % i)
    for i in range(30):
        h.put(b"%02d" % i, MD(properties={"n": i}))
    sqm.sweeper.run_once()
    a = conn_a.open("Q", OO.INPUT_SHARED, selector="n = 17")
    assert a.get(GMO.SYNCPOINT).data == b"17"  # hidden in its blob
    b = conn_b.open("Q", OO.INPUT_SHARED, selector="n = 17")
    t, box = _in_thread(lambda: b.get(GMO.WAIT, wait_interval=-1))
    assert clock.wait_for_waiters(1) and t.is_alive()
    conn_a.backout()
    t.join(10)
    m = box["value"]
    assert m.data == b"17" and m.backout_count == 1
    assert sqm.stats()["Q"].unsweeps == 0


def test_selector_applies_on_an_indexed_get_too(sqm):
    """A get by CorrelId on a queue indexed by CorrelId takes its candidates from the index
    and the blob summaries; the selector still decides among them."""
    from sweepq.engine import IndexType

    sqm.define_queue("I", index_type=IndexType.CORREL_ID)
    conn = sqm.connect()
    h = conn.open("I", IO)
    for i in range(30):
        h.put(b"%02d" % i, MD(correl_id=b"C%d" % (i % 3), properties={"n": i}))
    sqm.sweeper.run_once()
    sel = conn.open("I", OO.INPUT_SHARED, selector="n > 20")
    assert [sel.get(correl_id=b"C1").data for _ in range(3)] == [b"22", b"25", b"28"]
    with pytest.raises(MQError) as e:
        sel.get(correl_id=b"C1")
    assert e.value.reason == Reason.NO_MSG_AVAILABLE
    assert sqm.stats()["I"].unsweeps == 0
