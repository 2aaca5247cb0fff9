"""The queue core: how a queue's messages are kept, and the one boundary to them.

* :mod:`~sweepq.engine.core.lanes` — :class:`~sweepq.engine.core.lanes.LaneSet`, the one
  type that owns a queue's lanes, its in-memory messages, its index and its chains of swept
  blobs, and offers every traversal the engine uses (first available, browse next, take,
  restore, splice, the sweeper's walk);
* :mod:`~sweepq.engine.core.lane` — :class:`~sweepq.engine.core.lane.Lane`, one priority
  level (its counters and chain), and :class:`~sweepq.engine.core.lane.Need`;
* :mod:`~sweepq.engine.core.arena` — the records of in-memory messages, in shared byte blocks;
* :mod:`~sweepq.engine.core.ref` — :class:`~sweepq.engine.core.ref.Ref`, the one name of a
  message (in memory or inside a swept blob) that code outside the core holds;
* :mod:`~sweepq.engine.core.swept` — a swept blob's in-memory index;
* :mod:`~sweepq.engine.core.index` — the index of in-memory messages by one field (INDXTYPE);
* :mod:`~sweepq.engine.core.lock` — the check that the lock rule is kept;
* :mod:`~sweepq.engine.core.found` — several messages one call takes at once.

Its modules are compiled with Cython where a C compiler was there at install time, each from
its own source (forms.py says which, and which form runs).
"""
