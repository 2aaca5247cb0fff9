"""The console's web server: a page, a JSON API, and a stream of snapshots pushed to the page
by server-sent events (docs/console.md).

Built on aiohttp, on an asyncio event loop of its own on one thread beside the queue
manager's server (whose connections are threads: net/server.py). Engine calls block by
design (a queue's lock, a blob read while browsing), so they run on the loop's executor
threads, never on the loop itself.

Who may do what (the server's own tokens, compared in constant time: net/auth.py):

* reading (the page, ``/api/*`` GETs, the event stream) needs the server's token or its
  admin token: once as ``?token=`` or through the login form, which sets an HttpOnly,
  SameSite=Strict cookie holding an HMAC of the token (never the token), or on every
  request as ``Authorization: Bearer TOKEN``;
* every action (define, delete, clear a queue; start, stop a channel) needs the admin token
  in ``Authorization: Bearer`` on that request, whatever the cookie says: a page without it
  is read-only, and the server refuses the action (403, MQRC_NOT_AUTHORIZED 2035) even when
  a page or a script sends it anyway. A header a cross-site form cannot send, so a forged
  request from another site has no effect.

TLS: when the server has a certificate (``tls=``), the console is served over HTTPS with it.

Limits: the console's port is behind the client port's (docs/clients.md "Limits"):
:class:`Guard` admits at most ``max_connections`` at once (one more is closed at its
accept), TLS must be done within ``hello_timeout``, and every request's head must arrive
whole within ``hello_timeout`` of its first byte however slowly its bytes come (a page's
event stream, once asked for, is not a request in progress); an idle connection goes after
``idle_timeout`` when the server sets one. Time is the server's ``clock``, looked at every
:data:`TICK`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import html
import json
import threading
from importlib import resources
from typing import TYPE_CHECKING, Any

from aiohttp import web

from sweepq.engine import MQError, Reason

from .. import auth
from . import actions
from .snapshot import History, snapshot

if TYPE_CHECKING:
    from ..server import Server

COOKIE = "sweepq_console"
TICK = 0.05  # seconds between two looks at the connections' deadlines (the door's own)
HEAD_END = b"\r\n\r\n"  # the end of a request's head
DEFAULT_INTERVAL = 0.5  # seconds between snapshots pushed to the pages
KEEPALIVE = 15.0  # seconds of silence after which an event stream sends a comment
MAX_BROWSE = 200  # messages one browse returns at most
MAX_SHOWN_BYTES = 64 * 1024  # bytes of each message's data a browse returns at most
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; form-action 'self'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the first URL may hold ?token=
    "Cache-Control": "no-store",
}
STATUS_OF = {  # an MQ reason's HTTP status
    Reason.NOT_AUTHORIZED: 403,
    Reason.UNKNOWN_OBJECT_NAME: 404,
    Reason.OBJECT_IN_USE: 409,
    Reason.Q_NOT_EMPTY: 409,
    Reason.OBJECT_ALREADY_EXISTS: 409,
}
LOGIN_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>sweepq console</title>
<link rel="stylesheet" href="/static/console.css"></head><body class="login"><main>
<h1>sweepq console</h1><p>{said}</p>
<form method="post" action="/login"><label>token
<input type="password" name="token" id="token" autocomplete="current-password" autofocus></label>
<button type="submit">open</button></form>
<p class="hint">The server's token (<code>DATA_DIR/sweepq.token</code> for <code>sweepq serve</code>),
or its admin token.</p></main></body></html>"""


def _error(e: MQError) -> web.Response:
    status = STATUS_OF.get(e.reason, 400)
    body = {"error": actions.for_the_console(str(e)), "reason": int(e.reason), "reason_name": Reason(e.reason).name}
    return web.json_response(body, status=status)


def _refused(text: str) -> web.Response:
    return _error(MQError(Reason.NOT_AUTHORIZED, text))


class ConsoleApp:
    """The routes and state of one console (see the module docstring). Runs on the loop of
    :class:`~sweepq.net.console.Console`; everything here is touched by that loop only,
    except what the executor threads compute and hand back."""

    def __init__(self, server: Server, interval: float, secure: bool):
        self.server = server
        self.interval = interval
        self.secure = secure
        self.log = server.log
        self.history = History()
        self.latest: bytes | None = None  # the newest snapshot as an event, sent to new pages first
        self.subscribers: set[asyncio.Queue] = set()
        self.closing = False
        self.static = resources.files("sweepq.net.console") / "static"
        app = web.Application(middlewares=[self._headers])
        app.router.add_get("/", self.page)
        app.router.add_post("/login", self.login)
        app.router.add_get("/static/{path:.+}", self.static_file)
        app.router.add_get("/api/snapshot", self.get_snapshot)
        app.router.add_get("/api/history", self.get_history)
        app.router.add_get("/api/events", self.events)
        app.router.add_get("/api/whoami", self.whoami)
        app.router.add_get("/api/queues/{queue}/messages", self.browse)
        app.router.add_post("/api/queues", self.define)
        app.router.add_delete("/api/queues/{queue}", self.delete)
        app.router.add_post("/api/queues/{queue}/clear", self.clear)
        app.router.add_post("/api/channels/{channel}/{action:start|stop}", self.channel)
        self.app = app

    # -- who asks ----------------------------------------------------------------------------

    def _tokens(self) -> list[str]:
        return [t for t in (self.server.token, self.server.admin_token) if t]

    def _cookie_of(self, token: str) -> str:
        return hmac.new(token.encode(), b"sweepq console session", hashlib.sha256).hexdigest()

    def _bearer(self, request: web.Request) -> str | None:
        scheme, _, value = request.headers.get("Authorization", "").partition(" ")
        return value.strip() if scheme.lower() == "bearer" and value.strip() else None

    def may_read(self, request: web.Request) -> bool:
        bearer = self._bearer(request)
        cookie = request.cookies.get(COOKIE)
        for token in self._tokens():
            if auth.matches(bearer, token) or auth.matches(cookie, self._cookie_of(token)):
                return True
        return False

    def is_admin(self, request: web.Request) -> bool:
        return auth.matches(self._bearer(request), self.server.admin_token)

    def _admin_refusal(self, request: web.Request, what: str) -> web.Response | None:
        """None when ``request`` carries the admin token; else the 403 to send, logged."""
        if self.is_admin(request):
            return None
        why = (
            "this server has no admin token: no administration"
            if self.server.admin_token is None
            else f"{what} needs the server's admin token (Authorization: Bearer ADMIN_TOKEN)"
        )
        self.log.warning("console: refused %s from %s: %s", what, request.remote, why)
        return _refused(why)

    @web.middleware
    async def _headers(self, request: web.Request, handler: Any) -> web.StreamResponse:
        path = request.path
        if path.startswith("/api/") and not self.may_read(request) and not self.is_admin(request):
            given = self._bearer(request) or request.cookies.get(COOKIE)  # a wrong token, not a missing one
            why = "that token is not this server's" if given else "the console needs the server's token"
            resp: web.StreamResponse = _refused(f"{why}: open it with ?token=TOKEN (DIR/sweepq.token)")
            resp.set_status(401)
        else:
            resp = await handler(request)
        for k, v in SECURITY_HEADERS.items():
            if k not in resp.headers and not (k == "Cache-Control" and path.startswith("/static/")):
                resp.headers[k] = v
        return resp

    # -- the page and the login -----------------------------------------------------------------

    def _enter(self, token: str) -> web.Response:
        """To the page, with the session cookie of ``token`` (the token leaves the address
        bar, and the history, at once)."""
        resp = web.Response(status=303, headers={"Location": "/"})
        resp.set_cookie(COOKIE, self._cookie_of(token), httponly=True, samesite="Strict", secure=self.secure, path="/")
        return resp

    def _login_page(self, said: str, status: int) -> web.Response:
        return web.Response(text=LOGIN_PAGE.format(said=html.escape(said)), content_type="text/html", status=status)

    async def page(self, request: web.Request) -> web.StreamResponse:
        given = request.query.get("token")
        if given is not None:
            for token in self._tokens():
                if auth.matches(given, token):
                    return self._enter(token)
            self.log.warning("console: wrong token from %s", request.remote)
            return self._login_page("That token is not this server's.", 401)
        if not self.may_read(request):
            return self._login_page("Give the server's token to open the console.", 401)
        return web.Response(body=(self.static / "index.html").read_bytes(), content_type="text/html")

    async def login(self, request: web.Request) -> web.StreamResponse:
        form = await request.post()
        given = form.get("token")
        for token in self._tokens():
            if auth.matches(given, token):
                return self._enter(token)
        self.log.warning("console: wrong token from %s", request.remote)
        return self._login_page("That token is not this server's.", 401)

    async def static_file(self, request: web.Request) -> web.StreamResponse:
        """The page's scripts, styles and the vendored chart library (public: they hold no data)."""
        parts = request.match_info["path"].split("/")
        if any(p in ("", ".", "..") for p in parts):
            raise web.HTTPNotFound()
        item = self.static.joinpath(*parts)
        if not item.is_file():
            raise web.HTTPNotFound()
        kind = {"js": "text/javascript", "css": "text/css", "html": "text/html"}.get(parts[-1].rpartition(".")[2])
        return web.Response(body=item.read_bytes(), content_type=kind or "text/plain")

    # -- reading ----------------------------------------------------------------------------

    async def get_snapshot(self, request: web.Request) -> web.Response:
        snap = await self._run(snapshot, self.server, len(self.subscribers))
        return web.json_response(snap)

    async def get_history(self, request: web.Request) -> web.Response:
        return web.json_response(self.history.as_list())

    async def whoami(self, request: web.Request) -> web.Response:
        return web.json_response({"admin": self.is_admin(request), "administered": self.server.admin_token is not None})

    async def browse(self, request: web.Request) -> web.Response:
        try:
            count = min(MAX_BROWSE, max(1, int(request.query.get("count", "20"))))
            shown = min(MAX_SHOWN_BYTES, max(0, int(request.query.get("max_bytes", "4096"))))
        except ValueError:
            return _error(MQError(Reason.PARM_VALUE_ERROR, "count and max_bytes are integers"))
        queue = request.match_info["queue"]
        try:
            messages = await self._run(actions.browse, self.server.qm, queue, count, shown)
        except MQError as e:
            return _error(e)
        return web.json_response({"queue": queue, "messages": messages})

    async def events(self, request: web.Request) -> web.StreamResponse:
        """The event stream: the history once, then every snapshot as it is taken."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await resp.prepare(request)
        inbox: asyncio.Queue = asyncio.Queue(maxsize=1)
        self.subscribers.add(inbox)
        try:
            await resp.write(b"event: history\ndata: " + json.dumps(self.history.as_list()).encode() + b"\n\n")
            if self.latest is not None:
                await resp.write(self.latest)
            while not self.closing:
                try:
                    event = await asyncio.wait_for(inbox.get(), KEEPALIVE)
                except TimeoutError:
                    event = b": keepalive\n\n"
                if event is None:  # the console is closing
                    break
                await resp.write(event)
        except (ConnectionError, asyncio.CancelledError):
            pass  # the page went away
        finally:
            self.subscribers.discard(inbox)
        return resp

    def publish(self, snap: dict) -> None:
        """Send one snapshot to every page; a page still busy with the previous one skips it
        (its inbox holds one: the newest), so a slow page never grows the server's memory."""
        self.history.add(snap)
        self.latest = b"event: snapshot\ndata: " + json.dumps(snap).encode() + b"\n\n"
        for inbox in list(self.subscribers):
            if inbox.full():
                with contextlib.suppress(asyncio.QueueEmpty):
                    inbox.get_nowait()
            inbox.put_nowait(self.latest)

    async def ticker(self) -> None:
        """Take a snapshot every ``interval`` seconds and publish it."""
        while not self.closing:
            try:
                snap = await self._run(snapshot, self.server, len(self.subscribers))
            except Exception:  # the queue manager closing under it, or a bug: say it, go on
                if self.closing or self.server.qm.closed:
                    return
                self.log.exception("console: a snapshot failed")
            else:
                self.publish(snap)
            await asyncio.sleep(self.interval)

    def end_streams(self) -> None:
        self.closing = True
        for inbox in list(self.subscribers):
            if inbox.full():
                inbox.get_nowait()
            inbox.put_nowait(None)

    # -- acting -----------------------------------------------------------------------------

    async def _run(self, fn: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    async def _act(self, request: web.Request, what: str, fn: Any, *args: Any) -> web.Response:
        refusal = self._admin_refusal(request, what)
        if refusal is not None:
            return refusal
        try:
            result = await self._run(fn, *args)
        except MQError as e:
            return _error(e)
        self.log.info("console: %s from %s", what, request.remote)
        return web.json_response({"done": what, "result": result})

    async def define(self, request: web.Request) -> web.Response:
        refusal = self._admin_refusal(request, "define")
        if refusal is not None:
            return refusal  # before the body is even read
        try:
            body = await request.json()
            name, attributes = body["name"], dict(body.get("attributes") or {})
        except (ValueError, KeyError, TypeError):
            return _error(MQError(Reason.PARM_VALUE_ERROR, 'send JSON {"name": ..., "attributes": {...}}'))
        if "memory_policy" in attributes:
            from sweepq.engine.constants import MemoryPolicy

            try:
                attributes["memory_policy"] = MemoryPolicy[str(attributes["memory_policy"]).upper()]
            except KeyError:
                return _error(MQError(Reason.PARM_VALUE_ERROR, "memory_policy: PAGE, BLOCK or FAIL"))

        def run() -> dict:
            return _plain(self.server.qm.define_queue(name, **attributes).as_dict())

        return await self._act(request, f"define {name}", run)

    async def delete(self, request: web.Request) -> web.Response:
        queue = request.match_info["queue"]
        purge = request.query.get("purge", "") in ("1", "true", "yes")
        return await self._act(request, f"delete {queue}", self.server.qm.delete_queue, queue, purge)

    async def clear(self, request: web.Request) -> web.Response:
        queue = request.match_info["queue"]
        return await self._act(request, f"clear {queue}", actions.clear, self.server.qm, queue)

    async def channel(self, request: web.Request) -> web.Response:
        from ..channels import dq_admin

        name, action = request.match_info["channel"], request.match_info["action"]
        return await self._act(request, f"{action} channel {name}", dq_admin, self.server.qm, True, action, name, {})


def _plain(value: Any) -> Any:
    """Enums (the queue attributes) as their names, for JSON."""
    import enum

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, enum.Enum):
        return value.name
    return value


class Guard:
    """The console's connections and their deadlines (the module docstring's Limits); touched
    by the console's loop only."""

    def __init__(self, server: Server):
        self.server = server
        self.open: set[Guarded] = set()
        self.refused = 0  # closed at their accept: the console held max_connections
        self.cut = 0  # closed for a slow request head or for being idle

    def admit(self, conn: Guarded) -> bool:
        if len(self.open) >= self.server.max_connections:
            self.refused += 1
            return False
        self.open.add(conn)
        return True

    def check(self) -> None:
        """Close the connections past a deadline."""
        now = self.server.clock.now()
        idle = self.server.idle_timeout
        for conn in list(self.open):
            since = conn.head_since
            late = since is not None and now - since > self.server.hello_timeout
            if late or (idle is not None and since is None and now - conn.active_at > idle and not conn.streaming):
                self.cut += 1
                conn.cut()

    async def ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self.check()


class Guarded(asyncio.Protocol):
    """One console connection: aiohttp's protocol inside, with the bytes it is given watched
    for the end of each request's head (the module docstring's Limits)."""

    def __init__(self, inner: asyncio.Protocol, guard: Guard):
        self.inner = inner
        self.guard = guard
        self.transport: asyncio.BaseTransport | None = None
        self.admitted = False
        self.head_since: float | None = guard.server.clock.now()  # the first request is due from the accept
        self.active_at = self.head_since
        self.streaming = False  # an event stream: long-lived by design, never idle
        self._tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        if not self.guard.admit(self):
            transport.close()
            return
        self.admitted = True
        self.inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        now = self.guard.server.clock.now()
        if self.head_since is None:
            self.head_since = now
        seen = self._tail + data
        if HEAD_END in seen:
            self.head_since = None
            self.active_at = now
            self.streaming = b"/api/events" in seen
            seen = seen[seen.rindex(HEAD_END) + len(HEAD_END) :]
        self._tail = seen[-(len(HEAD_END) - 1) :] if seen else b""
        self.inner.data_received(data)  # type: ignore[attr-defined]

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()  # type: ignore[attr-defined]

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.open.discard(self)
        if self.admitted:
            self.inner.connection_lost(exc)

    def cut(self) -> None:
        self.guard.open.discard(self)
        if self.transport is not None:
            self.transport.close()


class Console:
    """The console of one server, on its own thread and event loop: ``start()`` listens on
    ``address`` ("HOST:PORT", 127.0.0.1 unless a host is named; port 0 picks one) and returns
    self; ``url`` is where it is; ``close()`` ends the event streams and stops it."""

    def __init__(self, server: Server, address: str | int | tuple, interval: float = DEFAULT_INTERVAL):
        from ..server import parse_tcp

        if not isinstance(interval, int | float) or isinstance(interval, bool) or not 0 < interval <= 3600:
            raise MQError(Reason.PARM_VALUE_ERROR, f"console_interval={interval!r}: give seconds in (0, 3600]")
        self.host, self.port = parse_tcp(address)
        self.server = server
        self.state = ConsoleApp(server, float(interval), secure=server.tls is not None)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.AbstractServer | None = None
        self.guard = Guard(server)
        self._ticker: asyncio.Task | None = None
        self._guarding: asyncio.Task | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self) -> Console:
        """Listen; :raises MQError: RESOURCE_PROBLEM (2102) when the address is taken."""
        self._thread = threading.Thread(target=self._main, name="sweepq-console", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            e = self._error
            raise MQError(Reason.RESOURCE_PROBLEM, f"the console cannot listen on {self.host}:{self.port}: {e}") from e
        return self

    def _main(self) -> None:
        loop = self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._listen())
        except BaseException as e:  # an address taken, or not allowed: start() raises it
            self._error = e
            self._ready.set()
            loop.run_until_complete(self._stop())
            loop.close()
            return
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()

    async def _listen(self) -> None:
        runner = self._runner = web.AppRunner(self.state.app, access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        handler = runner.server
        assert handler is not None
        loop = asyncio.get_running_loop()
        tls = self.server.tls
        self._listener = await loop.create_server(
            lambda: Guarded(handler(), self.guard),
            self.host,
            self.port,
            ssl=tls,
            ssl_handshake_timeout=self.server.hello_timeout if tls is not None else None,
            backlog=1024,
        )
        host, port = self._listener.sockets[0].getsockname()[:2]
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"{'https' if self.server.tls else 'http'}://{shown}:{port}/"
        self._ticker = loop.create_task(self.state.ticker())
        self._guarding = loop.create_task(self.guard.ticker())

    async def _stop(self) -> None:
        self.state.end_streams()
        for task in (self._ticker, self._guarding):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._listener is not None:
            self._listener.close()
            for conn in list(self.guard.open):
                conn.cut()
        if self._runner is not None:
            await self._runner.cleanup()

    def close(self, timeout: float = 5.0) -> None:
        """End every page's stream and stop listening. Idempotent."""
        loop, thread = self.loop, self._thread
        if loop is None or thread is None or not thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            asyncio.run_coroutine_threadsafe(self._stop(), loop).result(timeout)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout)

    @property
    def pages(self) -> int:
        """Pages with an event stream open now."""
        return len(self.state.subscribers)
