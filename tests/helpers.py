"""Helpers shared by the test modules."""

from __future__ import annotations

from sweepq.engine import OO, MQError, Reason

IO = OO.OUTPUT | OO.INPUT_SHARED


def drain(handle) -> list[bytes]:
    """Get every available message (no syncpoint) and return the data in order."""
    out = []
    while True:
        try:
            out.append(handle.get().data)
        except MQError as e:
            assert e.reason == Reason.NO_MSG_AVAILABLE
            return out
