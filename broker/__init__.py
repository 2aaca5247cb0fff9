"""Celery and Kombu on sweepq: a Kombu transport (``broker_url="sweepq+unix:///…/sweepq.sock"``).

The package is ``sweepq.broker`` (its folder is ``broker/``, not ``kombu/``: the repository
root is the package ``sweepq``, and a root folder named ``kombu`` would hide the real Kombu
from code run at the root). ``transport.py`` holds the transport (Kombu's virtual
``Transport`` and ``Channel``), ``site.py`` where its queue manager is (a served one over a
Unix socket or TCP, or a data directory in this process), ``names.py`` how Kombu's queue names
become MQ queue names, ``bindings.py`` the exchanges' bindings kept in a queue that every
process sees, and ``alias.py`` the ``sweepq`` alias in Kombu's table. docs/celery.md is the
user's page.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Transport"]


def __getattr__(name: str) -> Any:
    # Lazy, so that importing the package (alias.py does, at start-up) does not import Kombu.
    if name == "Transport":
        from .transport import Transport

        return Transport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
