"""MQGET's signature is written once for type checkers (engine/api.py ``GetCall``) and once
as the implementation (engine/handle.py ``Handle._get``); everything else reads it from them.

Here the two are held to the same parameters and defaults, and the client, which binds its
arguments by the implementation's signature (net/calls.py ``bind_get``), to what Python's own
binding gives, TypeErrors included.
"""

from __future__ import annotations

import inspect
import typing

import pytest

from sweepq.engine import GMO, MO, Handle
from sweepq.engine.api import GetCall, QueueHandle
from sweepq.net import calls
from sweepq.net.client import ClientHandle


def parameters(function) -> list[tuple[str, object]]:
    return [(p.name, p.default) for p in inspect.signature(function).parameters.values()][1:]  # after self


def test_the_type_and_the_implementation_take_the_same_parameters_with_the_same_defaults():
    unlock, message = typing.get_overloads(GetCall.__call__)
    assert parameters(message) == parameters(Handle._get)
    assert [name for name, _ in parameters(unlock)] == ["options"]  # get(GMO.UNLOCK): a Status
    assert Handle.get is Handle._get  # the name users call is the implementation itself


def test_every_handle_offers_get_with_the_engines_signature():
    assert inspect.signature(ClientHandle.get) == inspect.signature(Handle._get)  # help() shows it
    assert "get" in dir(QueueHandle)


CALLS = [
    ((), {}),
    ((GMO.WAIT,), {"wait_interval": 100}),
    ((GMO.WAIT, 5), {}),
    ((), {"msg_token": b"t" * 16, "match": MO.MATCH_MSG_TOKEN}),
    ((0, -1, None, 3, b"m"), {"msg_seq_number": 2, "offset": 0}),
    ((1, 2, 3, 4, 5, 6, 7, 8, 9, 10), {}),
]


@pytest.mark.parametrize(("args", "named"), CALLS)
def test_the_client_binds_a_gets_arguments_as_python_binds_the_implementations(args, named):
    bound = inspect.signature(Handle._get).bind(None, *args, **named)
    bound.apply_defaults()
    assert calls.bind_get(args, named) == list(bound.args[1:])


@pytest.mark.parametrize(
    ("args", "named", "says"),
    [
        ((), {"wait": True}, "unexpected keyword argument 'wait'"),
        ((GMO.WAIT,), {"options": 0}, "multiple values for argument 'options'"),
        (tuple(range(11)), {}, "at most 10 arguments (11 given)"),
    ],
)
def test_a_client_get_called_wrongly_raises_what_python_would(args, named, says):
    with pytest.raises(TypeError) as raised:
        inspect.signature(Handle._get).bind(None, *args, **named)
    with pytest.raises(TypeError, match=says.replace("(", r"\(").replace(")", r"\)")):
        calls.bind_get(args, named)
    assert raised.value  # Python refuses the same call
