"""The queue manager's arrival numbers: 1, 2, 3, ... for every message put, on every queue.

A message's number (``seq`` in its record, engine/record.py) is its arrival order in its
lane, its MsgToken and, unless the application gave one, its MsgId. Numbers are drawn under
the lock of the queue put to, so that arrival order is lane order; two queues draw at once,
so drawing is one indivisible step for every thread: compiled (engine/sequence.pxd), one C
addition under the GIL with nothing between that could release it; interpreted,
``itertools.count``'s own step.
"""

from __future__ import annotations

import itertools

from cython import compiled as COMPILED


class Arrivals:
    """The numbers after ``start - 1`` (see the module docstring)."""

    __slots__ = ("_count", "value")

    def __init__(self, start: int = 1) -> None:
        self.value = start - 1  # the last number drawn (compiled form)
        self._count = itertools.count(start)  # the interpreted form's

    def next(self) -> int:
        """The next number."""
        if COMPILED:
            self.value += 1
            return self.value
        return next(self._count)


if not COMPILED:

    class _Drawn(Arrivals):
        """The interpreted form's :class:`Arrivals`: :meth:`next` is ``itertools.count``'s own
        ``__next__``, kept in a slot that hides the method, so that a put's draw is one C
        call, not a Python call around it (as engine/core/lock.py's direct lock)."""

        __slots__ = ("next",)

        def __init__(self, start: int = 1) -> None:
            super().__init__(start)
            self.next = self._count.__next__  # type: ignore[method-assign]  # the slot hides the method


def arrivals(start: int = 1) -> Arrivals:
    """The numbers after ``start - 1``, in the form that runs (see :class:`Arrivals`)."""
    if not COMPILED:
        return _Drawn(start)
    return Arrivals(start)
