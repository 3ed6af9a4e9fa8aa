"""Who may talk to `cos web` (DESIGN.md §10, §11): the server listens on 127.0.0.1 only (and
serves its owner's connections only: server.py), and every request must name it by its
loopback Host (a foreign one is DNS rebinding: 421), carry the random token of this run, and,
when it changes something (POST), the CSRF token of the pages (a form field or the
`X-CSRF-Token` header htmx sends: 403 without). Pages go out with a Content-Security-Policy
that lets only the server's own scripts run.

The token is in the path, never in a cookie: every page lives under `/<token>/`, and the URL
printed (`/?token=<token>`) redirects there. A browser sends a host's cookies to every port of
that host (cookies ignore ports, and SameSite holds every 127.0.0.1 port for one site), so any
cookie this server set would reach whatever another local user serves on 127.0.0.1; a path
reaches only the server it names. The Referrer-Policy keeps it out of every request to
elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

__all__ = ["Guard", "LOOPBACK", "CSRF_FIELD", "CSRF_HEADER", "SECURITY_HEADERS", "new_token"]

LOOPBACK = "127.0.0.1"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
FORM_MAX = 2 << 20  # bytes of a form body read for its CSRF field
SECURITY_HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A random token for one run of the server (as Jupyter's)."""
    return secrets.token_urlsafe(32)


class Guard:
    """ASGI middleware in front of the web app: the Host, token and CSRF checks, and the
    security headers on every response. A request that passes reaches the app with the
    token's prefix as its `root_path`."""

    def __init__(self, app: App, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.root = f"/{token}"  # every page lives under it
        self.port = port
        self.csrf = hmac.new(token.encode("ascii"), b"csrf", hashlib.sha256).hexdigest()
        self.hosts = {f"{LOOPBACK}:{port}".encode(), f"localhost:{port}".encode()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await _refuse_websocket(receive, send)
            return
        if scope["type"] != "http":
            return  # no other kind of connection is served
        headers = _headers(scope)
        if headers.get(b"host") not in self.hosts:
            await _plain(send, 421, f"cos web answers to {LOOPBACK}:{self.port} only")
            return
        path = scope.get("path", "/")
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None:
            if not _same(given, self.token):
                await _plain(send, 403, "wrong token: open the URL cos web printed")
                return
            rest = {key: value for key, value in query.items() if key != "token"}
            inside = path[len(self.root):] if self._inside(path) else path
            await _redirect(send, self.root + (inside or "/") + _query(rest))
            return
        if not self._inside(path):
            await _plain(send, 403, "cos web needs its token: open the URL it printed "
                         "(http://127.0.0.1:PORT/?token=…)")
            return
        if path == self.root:
            await _redirect(send, self.root + "/" + _query(query))
            return
        if scope["method"] not in ("GET", "HEAD"):
            checked = await self._check_csrf(headers, receive, send)
            if checked is None:
                return
            receive = checked
        scope = dict(scope, root_path=scope.get("root_path", "") + self.root)
        scope.setdefault("state", {})["csrf"] = self.csrf
        await self.app(scope, receive, _with_headers(send))

    def _inside(self, path: str) -> bool:
        """Whether `path` is the token's prefix or under it (compared in constant time)."""
        head, slash = path[1:1 + len(self.token)], path[1 + len(self.token):2 + len(self.token)]
        return path.startswith("/") and _same(head, self.token) and slash in ("", "/")

    async def _check_csrf(self, headers: dict[bytes, bytes], receive: Receive,
                          send: Send) -> Receive | None:
        """The request's receive (replaying the body read for the form field) when it carries
        the CSRF token; None after answering 403."""
        header = headers.get(CSRF_HEADER.encode())
        if header is not None and _same(header.decode("latin-1"), self.csrf):
            return receive
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
            if len(body) > FORM_MAX:
                await _plain(send, 413, "the form is too large")
                return None
        kind = headers.get(b"content-type", b"").split(b";")[0].strip()
        field = None
        if kind == b"application/x-www-form-urlencoded":
            field = dict(parse_qsl(body.decode("utf-8", "replace"))).get(CSRF_FIELD)
        if field is None or not _same(field, self.csrf):
            await _plain(send, 403, "this request lacks the page's CSRF token: reload the page")
            return None
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return replay


def _query(values: dict[str, str]) -> str:
    return f"?{urlencode(values)}" if values else ""


async def _redirect(send: Send, location: str) -> None:
    await send({"type": "http.response.start", "status": 303,
                "headers": [(b"location", location.encode("latin-1", "replace")),
                            (b"content-length", b"0"), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse_websocket(receive: Receive, send: Send) -> None:
    """A WebSocket is never accepted: closed before its handshake (the server answers 403)."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008})


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"),
                                                     expected.encode("utf-8"))


def _headers(scope: Scope) -> dict[bytes, bytes]:
    """The request's headers by lower-case name; a header sent twice is refused by giving it
    a value no check accepts."""
    found: dict[bytes, bytes] = {}
    for name, value in scope.get("headers", []):
        key = bytes(name).lower()
        found[key] = b"\0twice" if key in found else bytes(value)
    return found


def _with_headers(send: Send) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {bytes(name).lower() for name, _ in message.get("headers", [])}
            message["headers"] = [*message.get("headers", []),
                                  *[(n, v) for n, v in SECURITY_HEADERS if n not in names]]
        await send(message)

    return sending


async def _plain(send: Send, status: int, text: str) -> None:
    body = f"cos web: {text}\n".encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *SECURITY_HEADERS]})
    await send({"type": "http.response.body", "body": body})
