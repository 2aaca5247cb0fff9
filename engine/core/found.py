"""What a finder of the get path returns when one call takes several messages at once."""

from __future__ import annotations


class Found:
    """Several messages one call returns or takes as one: the segments of a logical message
    (in offset order, engine/groups/), or a run of a batch get (``run``: contiguous
    available slots of one lane's list, taken in bulk). ``refs[i]`` holds ``recs[i]``."""

    __slots__ = ("recs", "refs", "run")

    def __init__(self, refs: list, recs: list[bytes], run: bool = False):
        self.refs = refs
        self.recs = recs
        self.run = run
