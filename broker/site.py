"""Where the transport's queue manager is, from a broker URL, and how to reach it.

The forms (the part after ``sweepq+`` in Celery's ``broker_url``):

* ``unix:///path/to/sweepq.sock``: a served queue manager (``sweepq serve``) over its Unix
  socket. The admin token, to define a queue Kombu declares, is read from beside the socket
  (``sweepq.admin-token``) when no other is given.
* ``tcp://host:port`` or ``tls://host:port``: over TCP; the token in the URL's password
  (``tcp://:TOKEN@host:port``), the transport option ``token`` or ``$SWEEPQ_TOKEN``; TLS
  checks the server's certificate as the client does (``cafile`` / ``tls`` options).
* ``dir:///path/to/data``: the data directory's queue manager, opened in this process (one per
  process, shared by every connection of it, closed at exit); ``?memory_budget=100MB``.
* ``memory://NAME``: a queue manager in memory in this process (tests, one process).

Query parameters ``token``, ``admin_token`` and ``cafile`` are read too. Transport options
win over the URL, and the URL over the environment (``SWEEPQ_TOKEN``, ``SWEEPQ_ADMIN_TOKEN``).
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sweepq.engine import MemorySettings, MQError, QueueInfo, QueueManager, Reason, SweeperSettings
from sweepq.engine.api import QueueConnection
from sweepq.net import client
from sweepq.net.auth import ADMIN_TOKEN_FILE, read_token

FORMS = "sweepq+unix:///path/sweepq.sock, sweepq+tcp://[:TOKEN@]host:port, sweepq+tls://…, sweepq+dir:///path or sweepq+memory://NAME"

_local: dict[tuple[str, str], QueueManager] = {}
_local_lock = threading.Lock()


@dataclass
class Site:
    """A queue manager the transport reaches: ``connect()`` for message calls, and the
    administration Kombu's declarations need (define, delete, inquire)."""

    url: str
    kind: str  # "client" or "local"
    token: str | None = None
    admin_token: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    qm: QueueManager | None = None
    _admin: client.RemoteQueueManager | None = None

    def connect(self) -> QueueConnection:
        """A new connection: its own unit of work (each unacknowledged message holds one)."""
        if self.qm is not None:
            return self.qm.connect()
        return client.connect(self.url, self.token, admin_token=self.admin_token, client="kombu", **self.options)

    @property
    def admin(self) -> Any:
        """The queue manager's administration: the queue manager itself, or a remote one."""
        if self.qm is not None:
            return self.qm
        if self._admin is None:
            self._admin = client.RemoteQueueManager(self.url, self.token, self.admin_token, **self.options)
        return self._admin

    def inquire(self, name: str) -> QueueInfo:
        return self.admin.inquire_queue(name)

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def site_of(target: str, transport_options: dict[str, Any]) -> Site:
    """The Site a broker URL names (its ``sweepq+`` prefix taken off by Kombu).

    :raises MQError: PARM_VALUE_ERROR (3229) for another form, naming the forms that work."""
    if not isinstance(target, str) or "://" not in target:
        raise MQError(Reason.PARM_VALUE_ERROR, f"broker URL {target!r}: use {FORMS}")
    parts = urlsplit(target)
    query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
    opts = transport_options

    def given(name: str, url_value: str | None, env: str | None) -> str | None:
        value = opts.get(name)
        if value is None:
            value = url_value
        if value is None and env:
            value = os.environ.get(env)
        return value or None

    if parts.scheme in ("dir", "memory"):
        return _local_site(parts.scheme, unquote(parts.netloc + parts.path), query, opts)
    if parts.scheme == "unix":
        path = unquote(parts.netloc + parts.path)
        url = f"unix://{path}"
        beside = read_token(os.path.join(os.path.dirname(path), ADMIN_TOKEN_FILE))
        admin = given("admin_token", query.get("admin_token"), "SWEEPQ_ADMIN_TOKEN") or beside
        return Site(url, "client", given("token", query.get("token"), None), admin)
    if parts.scheme in ("tcp", "tls"):
        try:
            port = parts.port
        except ValueError:
            port = None
        if not parts.hostname or port is None:
            raise MQError(Reason.PARM_VALUE_ERROR, f"broker URL {target!r}: use {FORMS}")
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        url = f"{parts.scheme}://{host}:{port}"
        password = unquote(parts.password) if parts.password else None
        token = given("token", password or query.get("token"), "SWEEPQ_TOKEN")
        admin = given("admin_token", query.get("admin_token"), "SWEEPQ_ADMIN_TOKEN")
        options: dict[str, Any] = {}
        if opts.get("tls") is not None:
            options["tls"] = opts["tls"]
        cafile = given("cafile", query.get("cafile"), None)
        if cafile:
            options["cafile"] = cafile
        return Site(url, "client", token, admin, options)
    raise MQError(Reason.PARM_VALUE_ERROR, f"broker URL {target!r}: use {FORMS}")


def _local_site(scheme: str, where: str, query: dict[str, str], opts: dict[str, Any]) -> Site:
    """This process's queue manager of a data directory (or of a name, in memory): one each."""
    if not where:
        raise MQError(Reason.PARM_VALUE_ERROR, f"broker URL {scheme}://: name a data directory or a name; use {FORMS}")
    key = (scheme, os.path.realpath(where) if scheme == "dir" else where)
    budget = opts.get("memory_budget", query.get("memory_budget", 0))
    with _local_lock:
        qm = _local.get(key)
        if qm is None or qm.closed:
            if scheme == "dir":
                qm = QueueManager(path=where, memory=MemorySettings(budget=budget))
            else:
                qm = QueueManager(where, sweeping=SweeperSettings(run=False), memory=MemorySettings(budget=budget))
            if not _local:
                atexit.register(close_local)
            _local[key] = qm
    return Site(f"{scheme}://{where}", "local", qm=qm)


def close_local() -> None:
    """Close this process's queue managers (at exit; a test may call it)."""
    with _local_lock:
        for qm in _local.values():
            if not qm.closed:
                qm.close()
        _local.clear()
