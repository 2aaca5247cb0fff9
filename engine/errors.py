"""The one exception the application sees: ``MQError`` with an MQ reason code."""

from __future__ import annotations

from .constants import CC, Reason


class MQError(Exception):
    """A failed MQ call.

    ``reason`` is a :class:`Reason` (MQ's own number, e.g. 2033) and ``completion_code``
    a :class:`CC`. The text names the reason and says what to change, so that a log line
    is enough to fix the call. ``msg_ids`` lists every message an OBJECT_DAMAGED (2101)
    error is about (the text names the first few); it is empty otherwise.
    """

    def __init__(
        self,
        reason: Reason | int,
        text: str = "",
        completion_code: CC = CC.FAILED,
        msg_ids: list[bytes] | None = None,
    ):
        self.reason = Reason(reason)
        self.completion_code = CC(completion_code)
        self.text = text
        self.msg_ids: list[bytes] = list(msg_ids or ())
        super().__init__(f"MQRC_{self.reason.name} ({int(self.reason)}): {text}")


def options_error(text: str) -> MQError:
    return MQError(Reason.OPTIONS_ERROR, text)
