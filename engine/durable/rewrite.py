"""Writing again, from memory, the durable records a store lost to damage while open.

While a queue manager runs, its memory is the truth and the store its durable image. When
the store finds damage and rebuilds a family of records without what it cannot prove
(``DamageLog``, blobstore/kv.py), the queue manager writes again what it holds of that
family: every persistent message in memory (its own record), every removal mark of a
swept blob, every queue definition. Each queue's records are written under its lock
(LocalQueue.durable_image with a writer, one of the store writes the lock rule names in
engine/queue.py), as the journal's rule wants (engine/durable/journal.py), so no get can
delete a record between its being read from memory and written again.

What memory does not hold cannot be written again: a raised backout count of a message
inside a blob (kept only in the store's mark) goes back to its value in the blob.
"""

from __future__ import annotations

from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING

from sweepq.blobstore import Store, StoreError

from ..core.swept import REMOVED
from ..errors import MQError
from .journal import Journal
from .layout import MARK_REMOVED, encode_definition

if TYPE_CHECKING:
    from ..internals import Manager


def rewrite(qm: Manager, families: list[str], log: list[str]) -> None:
    """Write again what ``qm`` holds in memory of ``families`` ("messages", "marks",
    "objects"); what fails is appended to ``log``. Never raises (it runs on the store's
    thread, after the store healed)."""
    try:
        store = qm.internal.store()
    except MQError as e:  # the queue manager closed meanwhile: its next open recovers from the store
        log.append(f"writing records again after damage failed: the store cannot be had ({e})")
        return
    if "objects" in families:
        with qm.internal.definitions:  # no definition changes meanwhile
            for q in qm.internal.queues():
                try:
                    store.put_object(q.name.encode(), encode_definition(asdict(q.attrs)))
                except StoreError as e:
                    log.append(f"queue {q.name!r}: writing its definition again after damage failed ({e})")
    for q in qm.internal.queues():
        try:
            q.durable_image(partial(_write, store, q.key_prefix, families))
        except StoreError as e:
            log.append(f"queue {q.name!r}: writing its records again after damage failed ({e})")


def _write(store: Store, prefix: bytes, families: list[str], image: list) -> None:
    """Write a queue's image (LocalQueue.durable_image) again, under its lock."""
    if "messages" in families:
        for priority, recs, _chain in image:
            store.write_messages(Journal.homes(prefix, priority, recs))
    if "marks" in families:
        marks = [
            (blob_id, int(pos), MARK_REMOVED)
            for _priority, _recs, chain in image
            for blob_id, _lo, _hi, _n, flags in chain
            for pos in (flags == REMOVED).nonzero()[0]
        ]
        store.write_messages(marks=marks)
