"""Helpers for the console's tests: a served queue manager with a console on a free loopback
port, a ManualClock so that the tests drive the sweeper (``qm.sweeper.run_once()``), and
HTTP requests through the standard library."""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request

from net_env import short_dir

from sweepq.engine import QueueManager, SweeperSettings
from sweepq.sweeper import ManualClock

TOKEN = "read-token"
ADMIN = "admin-token"


@contextlib.contextmanager
def console(queues=("ORDERS",), **serve):
    """(queue manager, its server with a console); ``serve`` options go to qm.serve()."""
    options = {"console": "127.0.0.1:0", "token": TOKEN, "admin_token": ADMIN, "console_interval": 0.1, **serve}
    qm = QueueManager(sweeping=SweeperSettings(run=False), clock=ManualClock())
    try:
        for q in queues:
            qm.define_queue(q)
        server = qm.serve(os.path.join(short_dir(), "s.sock"), **options)
        yield qm, server
    finally:
        qm.close()


class Reply:
    def __init__(self, status: int, headers, body: bytes):
        self.status, self.headers, self.body = status, headers, body

    def json(self):
        return json.loads(self.body)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None  # the tests look at the 303 itself


def request(
    url: str,
    method: str = "GET",
    bearer: str | None = None,
    cookie: str | None = None,
    body=None,
    context: ssl.SSLContext | None = None,
    form: dict | None = None,
) -> Reply:
    """One HTTP request; any status comes back as a Reply (no exception, no redirect followed)."""
    headers = {}
    data = None
    if bearer is not None:
        headers["Authorization"] = f"Bearer {bearer}"
    if cookie is not None:
        headers["Cookie"] = cookie
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if form is not None:
        data = urllib.parse.urlencode(form).encode()
        headers["Content-Type"] = "application/x-www-form-urlencoded"
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    handlers = [_NoRedirect()] + ([urllib.request.HTTPSHandler(context=context)] if context else [])
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(req, timeout=10) as r:
            return Reply(r.status, r.headers, r.read())
    except urllib.error.HTTPError as e:
        return Reply(e.code, e.headers, e.read())


def login_cookie(base: str, token: str = TOKEN) -> str:
    """The session cookie the console sets for ``token`` (as 'name=value')."""
    r = request(base + "?token=" + token)
    assert r.status == 303, r.status
    return r.headers["Set-Cookie"].split(";", 1)[0]
