"""Model queues and the temporary dynamic queues made from them (MQ's MQOPEN of a model queue).

A model queue is a template. Opening one, ``conn.open("SYSTEM.DEFAULT.MODEL.QUEUE",
OO.INPUT_EXCLUSIVE)``, creates a new local queue with the model's attributes and a generated
name (the model's ``dynamic_q_name`` with its ``*`` replaced by 16 unique hex digits; MQ's
default ``AMQ.*``) and returns a handle on it: ``h.name`` is what a request names in
``MD.reply_to_q``. A temporary dynamic queue

* is deleted, with whatever it holds, when the last handle on it closes: the creator's close,
  normally (a responder opens it, puts its reply and closes), and so when the creator's
  connection ends or breaks. (MQ deletes it at the creator's close even while a responder
  holds it open; here the responder's handle keeps it until that handle closes too.)
* is never durable: its definition is not stored, and a persistent put to it is refused
  with MQRC_PERSISTENT_NOT_ALLOWED (2048), as in MQ (engine/putpath.py).
* is never swept: nothing of it outlives it in the store.

Model definitions last for the queue manager's run (they are not stored);
``SYSTEM.DEFAULT.MODEL.QUEUE`` is always there, as in MQ.

Thread safety: every method may be called from any thread; one lock guards the registry.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import TYPE_CHECKING

from .constants import Reason
from .errors import MQError
from .queue import MAX_NAME, QueueAttributes, check_name

if TYPE_CHECKING:
    from .internals import Manager
    from .queue import LocalQueue

DEFAULT_MODEL = "SYSTEM.DEFAULT.MODEL.QUEUE"
DEFAULT_DYNAMIC_NAME = "AMQ.*"
_SUFFIX = 16  # hex digits that replace the "*"


class DynamicQueues:
    """The model queues of one queue manager and the temporary dynamic queues opened from them."""

    def __init__(self, qm: Manager):
        self._qm = qm
        self._lock = threading.Lock()
        self._counter = itertools.count(1)
        self.models: dict[str, tuple[QueueAttributes, str]] = {DEFAULT_MODEL: (QueueAttributes(), DEFAULT_DYNAMIC_NAME)}
        self.temporary: set[str] = set()

    def define_model(self, name: str, dynamic_q_name: str, attrs: QueueAttributes) -> None:
        """DEFINE QMODEL(name) DEFTYPE(TEMPDYN).

        :raises MQError: 2100 when a queue or model of that name exists; PARM_VALUE_ERROR
            (3229) for a ``dynamic_q_name`` that is not a name prefix ending in ``*``."""
        check_name(name)
        if not isinstance(dynamic_q_name, str) or not dynamic_q_name.endswith("*"):
            raise MQError(Reason.PARM_VALUE_ERROR, "dynamic_q_name must end in '*', e.g. 'AMQ.*' or 'REPLY.*'")
        prefix = dynamic_q_name[:-1]
        if prefix:
            check_name(prefix)
        if len(prefix) + _SUFFIX > MAX_NAME:
            raise MQError(
                Reason.PARM_VALUE_ERROR, f"dynamic_q_name {dynamic_q_name!r}: keep the prefix to {MAX_NAME - _SUFFIX}"
            )
        with self._lock:
            if name in self.models or name in self._qm.queue_names():
                raise MQError(Reason.OBJECT_ALREADY_EXISTS, f"a queue or model queue named {name!r} exists")
            self.models[name] = (attrs, dynamic_q_name)

    def is_model(self, name: str) -> bool:
        return name in self.models

    def create(self, model: str) -> LocalQueue:
        """A new temporary dynamic queue from ``model`` (the manager's definitions lock held)."""
        attrs, pattern = self.models[model]
        while True:
            suffix = self._qm.ident.run_id[8:].hex().upper() + f"{next(self._counter):08X}"  # the run's random part
            name = pattern[:-1] + suffix
            if name not in self._qm.queue_names():
                break
        q = self._qm.internal.new_queue(name, replace(attrs), durable=False)
        q.temporary = True
        with self._lock:
            self.temporary.add(name)
        return q

    def handle_closed(self, q: LocalQueue) -> None:
        """Handle.close's hook: delete a temporary dynamic queue whose last handle closed."""
        if q.name not in self.temporary:
            return
        if not q.retire_if_unused():
            return
        with self._lock:
            self.temporary.discard(q.name)
        self._qm.internal.forget_queue(q)
