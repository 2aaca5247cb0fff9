"""Services the engine offers whose work is done by a layer above it: ``QueueManager.serve``
(a listener, net/server.py) and ``QueueManager.channels`` (the channel agents, net/channels/).

The engine imports nothing above it (docs/design.md, the layers): it finds each service by
name among the package's entry points (group ``sweepq.engine`` in pyproject.toml), which
name the classes in net/. Looked up once per name, when first used.

Thread-safe (the cache may look a name up twice at once, with the same result).
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import entry_points
from typing import Any

from .constants import Reason
from .errors import MQError

GROUP = "sweepq.engine"


@cache
def service(name: str) -> Any:
    """The class an upper layer provides for ``name`` ("server", "channels").

    :raises MQError: RESOURCE_PROBLEM (2102) when the installed package declares none (an
        install without its metadata: reinstall sweepq)."""
    for entry in entry_points(group=GROUP, name=name):
        return entry.load()
    raise MQError(
        Reason.RESOURCE_PROBLEM,
        f"no {name!r} service is installed (entry point group {GROUP!r}); reinstall sweepq: pip install -e .",
    )
