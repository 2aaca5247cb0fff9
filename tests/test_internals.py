"""A queue manager's private state is read by manager.py alone; the engine's own modules and
the services attached to it go through ``qm.internal`` (engine/internals.py)."""

from __future__ import annotations

import re
from pathlib import Path

from sweepq.engine import QueueManager, SweeperSettings
from sweepq.engine.internals import ManagerInternals

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("engine", "net", "cli", "queues", "sweeper", "bench", "blobstore", "pipeline")
# A queue manager named as the code names it, then one of its underscored attributes.
PRIVATE = re.compile(r"\b(?:qm|manager|queue_manager|self\.qm|self\._qm)\._[a-z]\w*")


def test_no_module_but_the_manager_reads_its_private_state():
    found = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "engine" / "manager.py":
                continue
            for n, line in enumerate(path.read_text().splitlines(), 1):
                found += [f"{path.relative_to(ROOT)}:{n}: {m}" for m in PRIVATE.findall(line)]
    assert not found, "use qm.internal (engine/internals.py) instead:\n" + "\n".join(found)


def test_the_internal_interface_is_the_protocol_and_attaches_services():
    closed = []

    class Service:
        def close(self) -> None:
            closed.append(self)

    qm = QueueManager(sweeping=SweeperSettings(run=False))
    internal: ManagerInternals = qm.internal
    qm.define_queue("Q")
    assert [q.name for q in internal.queues()] == ["Q"] and internal.queue("Q").name == "Q"
    kept, gone = Service(), Service()
    internal.attach(kept)
    internal.attach(gone)
    internal.detach(gone)
    internal.detach(gone)  # twice: a no-op
    qm.close()
    assert closed == [kept]
