"""Who may do what (issue 24 item 8; docs/clients.md "Who may do what"): every request type of
the protocol, sent as raw frames, with every kind of credential — none, the connect token,
the admin token, a wrong token, a wrong admin token, a token that is not text (a lone
surrogate), and a Unix socket peer with no token.

The table below is this test's own statement of the rules, one row per request type (the
channel administration request, DQ_ADMIN, one row per action; CHL_START one with and one
without a sequence number reset). It is checked against the protocol's list of requests and
the server's own table (net/protocol.py ``AUTHORITY``, net/channels/admin.py ``ACTIONS``): a
new request type, or a new action, without a row here fails the first test. Each case checks
the reply (2035 or not) and, for what changes something, that the change happened exactly
when it was allowed; no case may put a traceback in the server's log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pytest
from net_env import short_dir

from sweepq.engine import OO, MQError, QueueManager, Reason, SweeperSettings, Usage
from sweepq.engine.constants import ChannelType
from sweepq.engine.matching import MATCH_DEFAULT
from sweepq.net import protocol as P
from sweepq.net.channels.admin import ACTIONS

IO = int(OO.OUTPUT | OO.INPUT_SHARED)
OPEN_Q = (P.OPEN, ["Q", IO, None])
PUT_ONE = (P.PUT, [1, b"x", None, 0])
START_RECEIVER = (P.CHL_START, ["IN.CH", "QMS", 0, False, {}])


@dataclass
class Row:
    """``who``: "anyone" (any admitted connection), "admin" (the admin token), or "handshake"
    (HELLO: the credential itself). ``request(tag)``: the frame's op and arguments (``tag``
    names this case's objects); ``setup``: requests sent first on the same connection, each
    answered OK; ``prepare(qm, tag)``: the state the request needs, made in process;
    ``effect(qm, tag)``: whether the request changed what it changes."""

    who: str
    request: Callable[[str], tuple[int, list]] | None = None
    setup: Sequence[tuple[int, list]] = ()
    prepare: Callable[[QueueManager, str], None] | None = None
    effect: Callable[[QueueManager, str], bool] | None = None
    undo: Callable[[QueueManager, str], None] | None = None


def _models(qm: QueueManager, tag: str) -> bool:
    try:
        with qm.connect() as c:
            c.open(f"M.{tag}", OO.INPUT_EXCLUSIVE).close()
        return True
    except MQError:
        return False


def _ensure_queue(name: str):
    def prepare(qm: QueueManager, tag: str) -> None:
        if name not in qm.queue_names():
            qm.define_queue(name)

    return prepare


def _channel(qm: QueueManager, name: str):
    return qm.distributed.channel(name)


def _sync(qm: QueueManager, name: str):
    return qm.distributed.sync(name)


def _ensure_channel(name: str, **attrs):
    def prepare(qm: QueueManager, tag: str) -> None:
        if name not in qm.distributed.channels:
            qm.define_channel(name, **attrs)

    return prepare


def _stopped(stop: bool):
    def prepare(qm: QueueManager, tag: str) -> None:
        if stop:
            qm.channels.stop("OUT.CH")
        else:
            qm.distributed.sync("OUT.CH").set_stopped(False)

    return prepare


ROWS: dict[str, Row] = {
    "HELLO": Row("handshake"),
    "OPEN": Row("anyone", lambda t: OPEN_Q),
    "CLOSE": Row("anyone", lambda t: (P.CLOSE, [1]), setup=[OPEN_Q]),
    "PUT": Row("anyone", lambda t: PUT_ONE, setup=[OPEN_Q]),
    "PUT_MANY": Row("anyone", lambda t: (P.PUT_MANY, [1, [b"a", b"b"], None, 0]), setup=[OPEN_Q]),
    "GET": Row(
        "anyone",
        lambda t: (P.GET, [1, 0, 0, None, MATCH_DEFAULT, None, None, None, None, None, None]),
        setup=[OPEN_Q, PUT_ONE],
    ),
    "GET_MANY": Row("anyone", lambda t: (P.GET_MANY, [1, 5, 0, 0]), setup=[OPEN_Q, PUT_ONE]),
    "COMMIT": Row("anyone", lambda t: (P.COMMIT, [])),
    "BACKOUT": Row("anyone", lambda t: (P.BACKOUT, [])),
    "UNCOMMITTED": Row("anyone", lambda t: (P.UNCOMMITTED, [])),
    "INQUIRE": Row("anyone", lambda t: (P.INQUIRE, ["Q"])),
    "CANCEL": Row("anyone", lambda t: (P.CANCEL, [])),
    "DEFINE": Row(
        "admin",
        lambda t: (P.DEFINE, [f"NEW.{t}", {}]),
        effect=lambda qm, t: f"NEW.{t}" in qm.queue_names(),
    ),
    "ALTER": Row(
        "admin",
        lambda t: (P.ALTER, ["ALT", {"default_priority": 3}]),
        prepare=lambda qm, t: (_ensure_queue("ALT")(qm, t), qm.alter_queue("ALT", default_priority=0)),
        effect=lambda qm, t: qm.inquire_queue("ALT").attributes.default_priority == 3,
    ),
    "DELETE": Row(
        "admin",
        lambda t: (P.DELETE, ["DEL", False]),
        prepare=_ensure_queue("DEL"),
        effect=lambda qm, t: "DEL" not in qm.queue_names(),
    ),
    "NAMES": Row("anyone", lambda t: (P.NAMES, [])),
    "DEFINE_MODEL": Row(
        "admin",
        lambda t: (P.DEFINE_MODEL, [f"M.{t}", "AMQ.*", {}]),
        effect=_models,
    ),
    "STATUS": Row("anyone", lambda t: (P.STATUS, [])),
    "BYE": Row("anyone", lambda t: (P.BYE, [])),
    "CHL_START": Row(
        "anyone",
        lambda t: START_RECEIVER,
        prepare=lambda qm, t: qm.channels.reset("IN.CH", 0),
    ),
    "CHL_START with a reset": Row(
        "admin",
        lambda t: (P.CHL_START, ["IN.CH", "QMS", 9, True, {}]),
        prepare=lambda qm, t: qm.channels.reset("IN.CH", 0),
        effect=lambda qm, t: _sync(qm, "IN.CH").seq == 9,
    ),
    "CHL_BATCH": Row(
        "anyone",
        lambda t: (P.CHL_BATCH, [b"L" * 16, 1, [], True]),
        setup=[START_RECEIVER],
        prepare=lambda qm, t: qm.channels.reset("IN.CH", 0),
    ),
    "CHL_HEARTBEAT": Row("anyone", lambda t: (P.CHL_HEARTBEAT, []), setup=[START_RECEIVER]),
    # DQ_ADMIN, one row per action
    "DQ_ADMIN define_channel": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["define_channel", f"N.{t}"[:20], {"type": "RECEIVER"}]),
        effect=lambda qm, t: f"N.{t}"[:20] in qm.distributed.channels,
    ),
    "DQ_ADMIN alter_channel": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["alter_channel", "OUT.CH", {"batch_size": 7}]),
        prepare=lambda qm, t: qm.alter_channel("OUT.CH", batch_size=50),
        effect=lambda qm, t: _channel(qm, "OUT.CH").batch_size == 7,
    ),
    "DQ_ADMIN delete_channel": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["delete_channel", "DEL.CH", {}]),
        prepare=_ensure_channel("DEL.CH", type=ChannelType.RECEIVER),
        effect=lambda qm, t: "DEL.CH" not in qm.distributed.channels,
    ),
    "DQ_ADMIN define_remote_queue": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["define_remote_queue", f"R.{t}", {"remote_queue": "X", "remote_qmgr": "QMZ"}]),
        effect=lambda qm, t: f"R.{t}" in qm.distributed.remotes,
    ),
    "DQ_ADMIN delete_remote_queue": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["delete_remote_queue", "R.DEL", {}]),
        prepare=lambda qm, t: (
            "R.DEL" in qm.distributed.remotes or qm.define_remote_queue("R.DEL", remote_queue="X", remote_qmgr="QMZ")
        ),
        effect=lambda qm, t: "R.DEL" not in qm.distributed.remotes,
    ),
    "DQ_ADMIN alter_qmgr": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["alter_qmgr", None, {"dead_letter_queue": "DLQ"}]),
        prepare=lambda qm, t: qm.alter_qmgr(dead_letter_queue=""),
        effect=lambda qm, t: qm.distributed.attrs.dead_letter_queue == "DLQ",
    ),
    "DQ_ADMIN start": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["start", "OUT.CH", {}]),
        prepare=_stopped(True),
        effect=lambda qm, t: not _sync(qm, "OUT.CH").stopped,
        undo=lambda qm, t: qm.channels.stop("OUT.CH"),
    ),
    "DQ_ADMIN enable": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["enable", "OUT.CH", {}]),
        prepare=_stopped(True),
        effect=lambda qm, t: not _sync(qm, "OUT.CH").stopped,
    ),
    "DQ_ADMIN stop": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["stop", "OUT.CH", {}]),
        prepare=_stopped(False),
        effect=lambda qm, t: _sync(qm, "OUT.CH").stopped,
    ),
    "DQ_ADMIN reset": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["reset", "OUT.CH", {"seq": 5}]),
        prepare=lambda qm, t: (_stopped(True)(qm, t), qm.channels.reset("OUT.CH", 0)),
        effect=lambda qm, t: _sync(qm, "OUT.CH").seq == 5,
    ),
    "DQ_ADMIN resolve": Row(
        "admin",
        lambda t: (P.DQ_ADMIN, ["resolve", "OUT.CH", {"action": "backout"}]),
        prepare=_stopped(True),
    ),
    "DQ_ADMIN status": Row("anyone", lambda t: (P.DQ_ADMIN, ["status", None, {}])),
    "DQ_ADMIN objects": Row("anyone", lambda t: (P.DQ_ADMIN, ["objects", None, {}])),
    "ONCE": Row("anyone", lambda t: (P.ONCE, [bytes(16), 1, False, *PUT_ONE]), setup=[OPEN_Q]),
}

# (transport, HELLO fields, what the server makes of it)
CREDENTIALS = {
    "none": ("tcp", {}, "refused"),
    "wrong token": ("tcp", {"token": "WRONG"}, "refused"),
    "token not text": ("tcp", {"token": "T\ud800"}, "refused"),  # a lone surrogate
    "wrong admin token": ("unix", {"admin_token": "WRONG"}, "refused"),
    "connect token": ("tcp", {"token": "T"}, "connected"),
    "unix socket peer": ("unix", {}, "connected"),
    "admin token": ("tcp", {"admin_token": "ADM"}, "admin"),
}


def test_every_request_type_and_every_channel_action_has_a_row_that_agrees_with_the_server():
    requests = {name for op, name in P.OP_NAMES.items() if op not in (P.OK, P.ERROR)}
    rows = {name.split()[0] for name in ROWS}
    assert rows == requests, (
        f"rows missing for {sorted(requests - rows)}; rows for no request {sorted(rows - requests)}"
    )
    assert {P.OP_NAMES[op] for op in P.AUTHORITY} == requests  # the server's table names them all too
    actions = {name.split()[1] for name in ROWS if name.startswith("DQ_ADMIN ")}
    assert actions == set(ACTIONS), f"DQ_ADMIN actions without a row: {sorted(set(ACTIONS) - actions)}"
    server_says = {P.CONNECTED: "anyone", P.ADMIN: "admin", P.HANDSHAKE: "handshake"}
    for op, who in P.AUTHORITY.items():
        if who in server_says:
            assert ROWS[P.OP_NAMES[op]].who == server_says[who], P.OP_NAMES[op]
    for action, (needs_admin, _) in ACTIONS.items():
        assert ROWS[f"DQ_ADMIN {action}"].who == ("admin" if needs_admin else "anyone"), action
    assert P.AUTHORITY[P.CHL_START] == P.ADMIN_TO_RESET and P.AUTHORITY[P.DQ_ADMIN] == P.PER_ACTION


@pytest.fixture(scope="module")
def world():
    with QueueManager("QMA", sweeping=SweeperSettings(run=False)) as qm:
        qm.define_queue("Q")
        qm.define_queue("DLQ")
        qm.define_queue("XQ", usage=Usage.TRANSMISSION)
        qm.define_channel("IN.CH", type=ChannelType.RECEIVER)
        qm.define_channel("OUT.CH", conname="tcp://127.0.0.1:1", xmit_queue="XQ", short_interval=3600)
        server = qm.serve(os.path.join(short_dir(), "s.sock"), tcp=":0", token="T", admin_token="ADM")
        yield qm, server


def _connect(server, transport: str) -> socket.socket:
    if transport == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(server.unix_path)
    else:
        s = socket.create_connection(("127.0.0.1", server.tcp[1]))
    s.settimeout(30)
    return s


def _reply(s: socket.socket) -> tuple[int, object] | None:
    """The next reply, or None when the server closed the connection."""
    try:
        head = s.recv(P.HEADER_LEN, socket.MSG_WAITALL)
    except ConnectionResetError:
        return None
    if len(head) < P.HEADER_LEN:
        return None
    n, _, op = P.HEADER.unpack(head)
    return op, P.unpack(s.recv(n, socket.MSG_WAITALL) if n else b"")


def _refused(reply) -> bool:
    return reply is not None and reply[0] == P.ERROR and reply[1][0] == Reason.NOT_AUTHORIZED


def _sessions_over(server) -> None:
    deadline = time.monotonic() + 30
    while server.status()["connections"]:
        assert time.monotonic() < deadline, "a session did not end"
        time.sleep(0.002)


@pytest.mark.parametrize("credential", list(CREDENTIALS))
@pytest.mark.parametrize("request_type", list(ROWS))
def test_a_request_with_a_credential(world, request_type, credential, caplog):
    qm, server = world
    row = ROWS[request_type]
    transport, fields, kind = CREDENTIALS[credential]
    tag = f"{abs(hash((request_type, credential))) % 10**6}"
    if row.prepare is not None:
        row.prepare(qm, tag)
    hello = P.request(P.HELLO, {"token": None, "admin_token": None, "pid": 1, "client": "table", **fields})
    op, args = row.request(tag) if row.request is not None else (None, None)
    s = _connect(server, transport)
    try:
        if kind == "refused":  # the request comes with the HELLO, and is never read
            s.sendall(hello + (P.request(op, args) if op is not None else b""))
            assert _refused(_reply(s)), "the handshake was not refused with 2035"
            assert _reply(s) is None, "the connection stayed open after a refused handshake"
            took = False
        else:
            s.sendall(hello)
            welcome = _reply(s)
            assert welcome is not None and welcome[0] == P.OK and welcome[1]["admin"] == (kind == "admin")
            took = _allowed_or_refused(s, row, op, args, kind)
    finally:
        s.close()
        _sessions_over(server)
    if row.effect is not None:
        assert row.effect(qm, tag) == took, f"the change happened: {row.effect(qm, tag)}; allowed: {took}"
    if took and row.undo is not None:
        row.undo(qm, tag)
    assert [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")] == []


def _allowed_or_refused(s: socket.socket, row: Row, op, args, kind: str) -> bool:
    """Send the row's setup and request on an admitted connection; whether it was allowed."""
    if op is None:
        return True  # HELLO: the welcome was the answer
    for setup_op, setup_args in row.setup:
        s.sendall(P.request(setup_op, setup_args))
        answer = _reply(s)
        assert answer is not None and answer[0] == P.OK, (P.OP_NAMES[setup_op], answer)
    s.sendall(P.request(op, args))
    if op == P.CANCEL:  # no reply of its own: the connection goes on
        s.sendall(P.request(P.NAMES, []))
        answer = _reply(s)
        assert answer is not None and answer[0] == P.OK
        return True
    answer = _reply(s)
    assert answer is not None, "the server closed the connection instead of answering"
    should_refuse = row.who == "admin" and kind != "admin"
    assert _refused(answer) == should_refuse, answer
    if not should_refuse:
        assert answer[0] == P.OK, answer  # allowed, and it worked
    return not should_refuse


def test_a_refused_channel_reset_leaves_the_receiver_as_it_was_and_says_so_in_the_log(world, caplog):
    qm, server = world
    qm.channels.reset("IN.CH", 4)
    with contextlib.closing(_connect(server, "tcp")) as s:
        s.sendall(P.request(P.HELLO, {"token": "T", "pid": 1, "client": "x"}))
        assert _reply(s)[0] == P.OK
        s.sendall(P.request(P.CHL_START, ["IN.CH", "QMS", 0, True, {}]))
        assert _refused(_reply(s))
        s.sendall(P.request(P.CHL_START, ["IN.CH", "QMS", 4, True, {}]))  # to what it is: no change, allowed
        assert _reply(s)[0] == P.OK
    _sessions_over(server)
    assert _sync(qm, "IN.CH").seq == 4
    assert "refused" in caplog.text and "sequence number" in caplog.text


def test_a_new_token_is_safe_as_a_command_line_argument():
    """URL-safe base64 began with "-" one time in 64, and `--token "$(cat FILE)"` then took
    the token for an option (docs/cli.md's example failed in CI that way)."""
    import re

    from sweepq.net import auth

    tokens = {auth.new_token() for _ in range(2000)}
    assert len(tokens) == 2000
    assert all(re.fullmatch(r"[0-9a-f]{64}", t) for t in tokens)
