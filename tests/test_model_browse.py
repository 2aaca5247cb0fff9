"""The reference model with browse cursors and locks (issue 9 §5).

tests/test_model.py's machine (puts, gets, units of work, reconnects, the sweeper, the
clock), with every handle opened for BROWSE too and rules that browse (FIRST / NEXT, with or
without LOCK, by CorrelId), browse or get under the cursor, and UNLOCK. The model's cursor
is a position (lane, arrival number) per handle, and "next" is the first visible entry after
it in (lane descending, arrival) order: docs/semantics.md §5.3's definition, written naively. A
lock is an entry's owner (a handle): other handles do not see it, its owner does. The
sweeper runs between any two steps, so cursors and locks meet swept and unswept messages.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule, run_state_machine_as_test
from test_model import CORRELS, GROUPS, NCONN, QUEUES, EngineVsModel

from sweepq.engine import GMO, OO, MQError, Reason
from sweepq.engine.browse import resolve_lock_locked
from sweepq.engine.core.swept import LIVE, LOCKED

I = st.integers(0, NCONN - 1)  # noqa: E741 - the connection index, as in test_model
Q = st.sampled_from(QUEUES)


def serial(e) -> int:
    # b"m<n>", or an item ("item", n): the global put counter, so arrival order in a queue
    return int(e.data[1:]) if type(e.data) is bytes else e.data[1]


class BrowseModel(EngineVsModel):
    seen: Counter = Counter()  # outcomes over every example, for test_browse_rules_ran

    def __init__(self):
        self.cursors: dict = {}  # (i, q) -> (lane, serial) of the last browsed entry
        self.on: dict = {}  # (i, q) -> the entry under the cursor
        self.locks: dict = {}  # (i, q) -> the entry that handle locks
        self._asking = None  # the connection whose get the base rules are checking
        super().__init__()

    def _connect(self, i):
        c = self.qm.connect()
        self.conns[i] = c
        self.handles[i] = {q: c.open(q, OO.OUTPUT | OO.INPUT_SHARED | OO.BROWSE) for q in QUEUES}
        for q in QUEUES:
            self.cursors.pop((i, q), None)
            self.on.pop((i, q), None)

    # -- model helpers -------------------------------------------------------------------

    def _order(self, q):
        """Get order as the asking connection sees it: other handles' locks hide entries."""
        mine = (self._asking, q)
        return [e for e in super()._order(q) if getattr(e, "locked_by", None) in (None, mine)]

    def _visible(self, e, key) -> bool:
        return e.committed and not e.gotten and getattr(e, "locked_by", None) in (None, key)

    def _present(self, e, q) -> bool:
        return any(x is e for x in self.model[q])

    def _swept(self, q) -> bool:
        """Does the queue hold swept messages now (a browse then walks a chain)?"""
        return any(lane.chain for lane in self.qm._queue(q).lanes)

    def _release(self, key):
        e = self.locks.pop(key, None)
        if e is not None:
            e.locked_by = None

    def _lock(self, key, e):
        if self.locks.get(key) is not e:
            self._release(key)
            self.locks[key] = e
            e.locked_by = key

    def _settle_locks(self):
        """A lock ends when its owner removes the message (or gets it under syncpoint)."""
        for key, e in list(self.locks.items()):
            if e.gotten or not self._present(e, key[1]):
                self._release(key)

    # -- the base rules, seen by one connection ----------------------------------------------

    def _as_asker(self, i, base_rule, *args):
        """Run a base get rule as connection i sees the queue (other handles' locks hide
        entries from it), then end the locks its gets removed. Every base rule that asks
        _order comes through here: one that does not checks the engine against a model
        that hides the asker's own locks."""
        self._asking = i
        try:
            base_rule(i, *args)
        finally:
            self._asking = None
        self._settle_locks()

    @rule(i=I, q=Q, sync=st.booleans(), correl=st.sampled_from(CORRELS), mark=st.booleans())
    def get(self, i, q, sync, correl, mark):
        self._as_asker(i, super().get, q, sync, correl, mark)

    @rule(i=I, q=Q, n=st.integers(1, 12), sync=st.booleans())
    def get_many(self, i, q, n, sync):
        self._as_asker(i, super().get_many, q, n, sync)

    @rule(
        i=I,
        q=Q,
        group=st.sampled_from(GROUPS),
        seq=st.one_of(st.none(), st.integers(1, 3)),
        sync=st.booleans(),
    )
    def get_by_group(self, i, q, group, seq, sync):
        self._as_asker(i, super().get_by_group, q, group, seq, sync)

    @rule(i=I)
    def reconnect(self, i):
        for key in [k for k in self.locks if k[0] == i]:
            self._release(key)  # MQCLOSE (here, by the disconnect) releases the lock
        super().reconnect(i)

    @initialize(prios=st.lists(st.integers(0, 9), min_size=10, max_size=30))
    def fill(self, prios):
        """Start with messages on both queues, so that browses have something to find."""
        for q in QUEUES:
            self.put_burst(0, q, prios)

    @rule()
    def sweep_all(self):
        """Sweep until the rule keeps only its x + 1: cursors and locks then meet blobs."""
        for _ in range(3):
            self.qm.sweeper.run_once()

    # -- browse rules -------------------------------------------------------------------------

    @rule(i=I, q=Q, first=st.booleans(), lock=st.booleans(), correl=st.sampled_from(CORRELS))
    def browse(self, i, q, first, lock, correl):
        key = (i, q)
        pos = None if first else self.cursors.get(key)
        cands = [
            e
            for e in EngineVsModel._order(self, q)
            if self._visible(e, key)
            and (correl is None or e.correl == correl)
            and (pos is None or e.lane < pos[0] or (e.lane == pos[0] and serial(e) > pos[1]))
        ]
        opts = (GMO.BROWSE_FIRST if first else GMO.BROWSE_NEXT) | (GMO.LOCK if lock else 0)
        try:
            m = self.handles[i][q].get(opts, correl_id=correl)
        except MQError as err:
            assert err.reason == Reason.NO_MSG_AVAILABLE, err
            assert not cands, f"engine browsed nothing, model expected {cands[0].data}"
            BrowseModel.seen["browse 2033"] += 1
            self._release(key)  # 2033 releases the lock; BROWSE_NEXT's cursor stays
            if first:  # BROWSE_FIRST reset it: before the first message, on none
                self.cursors.pop(key, None)
                self.on.pop(key, None)
            return
        assert cands, f"engine browsed {m.data}, model expected nothing"
        e = cands[0]
        assert self._same(m, e) and m.backout_count == e.backout, (m.data, e.data)
        BrowseModel.seen["browse"] += 1
        BrowseModel.seen["browse, chain"] += self._swept(q)
        BrowseModel.seen["lock"] += bool(lock)
        if lock:
            self._lock(key, e)
        else:
            self._release(key)
        self.cursors[key] = (e.lane, serial(e))
        self.on[key] = e

    @rule(i=I, q=Q, lock_at=st.integers(-1, 6), correl=st.sampled_from(CORRELS))
    def browse_pass(self, i, q, lock_at, correl):
        """BROWSE_FIRST, then BROWSE_NEXT to the end (2033), locking the lock_at-th."""
        for k in range(10_000):
            n = sum(1 for _ in self.model[q])
            before = BrowseModel.seen["browse 2033"]
            self.browse(i, q, k == 0, k == lock_at, correl)
            if BrowseModel.seen["browse 2033"] > before or k > n:
                return

    def _under(self, i, q):
        key = (i, q)
        e = self.on.get(key)
        ok = e is not None and self._present(e, q) and self._visible(e, key)
        return key, (e if ok else None)

    @rule(i=I, q=Q, lock=st.booleans())
    def browse_under_cursor(self, i, q, lock):
        key, e = self._under(i, q)
        try:
            m = self.handles[i][q].get(GMO.BROWSE_MSG_UNDER_CURSOR | (GMO.LOCK if lock else 0))
        except MQError as err:
            assert err.reason == Reason.NO_MSG_UNDER_CURSOR, err
            assert e is None, f"engine: 2034, model expected {e.data}"
            return
        assert e is not None and self._same(m, e), m.data
        if lock:
            self._lock(key, e)
        else:
            self._release(key)

    @rule(i=I, q=Q, sync=st.booleans())
    def get_under_cursor(self, i, q, sync):
        key, e = self._under(i, q)
        try:
            m = self.handles[i][q].get(GMO.MSG_UNDER_CURSOR | (GMO.SYNCPOINT if sync else GMO.NO_SYNCPOINT))
        except MQError as err:
            assert err.reason == Reason.NO_MSG_UNDER_CURSOR, err
            assert e is None, f"engine: 2034, model expected {e.data}"
            BrowseModel.seen["2034"] += 1
            return
        assert e is not None and self._same(m, e) and m.backout_count == e.backout, (m.data, e.data)
        BrowseModel.seen["got under cursor"] += 1
        if self.locks.get(key) is e:
            self._release(key)
        if sync:
            e.gotten = True
            self.uow[i].append(("get", q, e))
        else:
            self.model[q].remove(e)

    @rule(i=I, q=Q, sync=st.booleans(), lock=st.booleans())
    def browse_and_remove(self, i, q, sync, lock):
        """The browse-then-remove loop's step: BROWSE_NEXT, then MSG_UNDER_CURSOR."""
        self.browse(i, q, False, lock, None)
        self.get_under_cursor(i, q, sync)

    @rule(i=I, q=Q)
    def unlock(self, i, q):
        key = (i, q)
        s = self.handles[i][q].get(GMO.UNLOCK)
        assert s.reason == (Reason.NONE if key in self.locks else Reason.NO_MSG_LOCKED)
        self._release(key)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def counters_match(self):
        """As in the base machine; a locked message in a blob is still committed and ready."""
        for q in QUEUES:
            info = self.qm.inquire_queue(q)
            assert info.current_depth == len(self.model[q])
            lanes = self.qm._queue(q).lanes
            swept_ready = sum(
                int(((b.flags == LIVE) | (b.flags == LOCKED)).sum()) for lane in lanes for b in lane.chain
            )
            assert info.ready + swept_ready == sum(e.committed and not e.gotten for e in self.model[q])

    @invariant()
    def locks_match(self):
        """Every model lock is the engine's, and no other message is locked."""
        for i in range(NCONN):
            for q in QUEUES:
                cur = self.handles[i][q]._s.cursor
                e = self.locks.get((i, q))
                queue = self.qm._queue(q)
                with queue.mutex:  # a lock its holder's get ended is forgotten on the next look
                    held = cur is not None and resolve_lock_locked(queue, cur) is not None
                assert held == (e is not None), (i, q, e and e.data)


BrowseModel.TestCase.settings = settings(max_examples=40, stateful_step_count=50, deadline=None)
TestBrowseModel = BrowseModel.TestCase


def test_browse_rules_ran():
    """The machine is only worth its time if browses found messages, in memory and in blobs,
    took locks, and met gone cursors. Counted on a derandomized run of its own (the same
    examples every time: the random run above explores, and its counts vary with the seed)."""
    BrowseModel.seen.clear()
    run_state_machine_as_test(
        BrowseModel, settings=settings(max_examples=40, stateful_step_count=50, deadline=None, derandomize=True)
    )
    seen = BrowseModel.seen
    assert seen["browse"] >= 50 and seen["browse, chain"] >= 15, dict(seen)
    assert seen["lock"] >= 8 and seen["browse 2033"] >= 10, dict(seen)
    assert seen["got under cursor"] >= 3 and seen["2034"] >= 5, dict(seen)


def test_every_base_get_rule_runs_as_its_asker():
    """A base rule that reads _order must run through _as_asker, or the model hides the
    asking handle's own locks from it (a get_by_group added later once did not)."""
    import inspect

    reads_order = {
        name
        for name, f in vars(EngineVsModel).items()
        if callable(f) and not name.startswith("_") and "self._order(" in inspect.getsource(f)
    }
    assert reads_order >= {"get", "get_many", "get_by_group"}
    missing = {n for n in reads_order if "_as_asker" not in inspect.getsource(getattr(BrowseModel, n))}
    assert not missing, f"BrowseModel runs these base rules without the asker: {sorted(missing)}"
