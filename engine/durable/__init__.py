"""Durability: persistent messages and queue definitions that survive a crash and a restart.

What this subpackage owns (docs/design.md "Units of work and durability"):

* ``layout.py`` — the keys a queue's records live under in the store, and the encoding of
  a durable record (its own crc, so a damaged one is named, not trusted);
* ``journal.py`` — what is written when: every change to a persistent message is one
  atomic store write made under the queue's lock *before* the change in memory, so the
  store and memory can never disagree, and :class:`~.journal.GroupSync` (one fsync for
  every committer waiting at that moment) for ``sync="commit"``;
* ``recovery.py`` — rebuilding every queue and lane in order at open, damage named;
* ``ledger.py`` — the checkpoint of live messages, which recognises a consumed message that
  damage brought back, and names a live one that damage took;
* ``since.py`` — what the store's change log says changed since that checkpoint, which does
  the same for what happened after it;
* ``rewrite.py`` — writing again from memory what the store lost to damage while open.

A persistent message has exactly one durable home at any moment: its own record (while it
is in memory), or the blob it was swept into. Moving between them is one write
(``Store.link`` deletes the records a blob takes; ``Store.unlink`` writes back those that
leave it). Uncommitted work is never written, so a crash backs it out and nothing is ever
in doubt: there is no prepare phase and no second participant.
"""

from . import ledger
from .journal import SYNC_POLICIES, GroupSync, Journal

__all__ = ["SYNC_POLICIES", "GroupSync", "Journal", "ledger"]  # recovery.recover: imported by the manager
