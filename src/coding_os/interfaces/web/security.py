"""Who may talk to `cos web` (DESIGN.md §10, §11): the server listens on 127.0.0.1 only, and
every request must name it by its loopback Host (a foreign one is DNS rebinding: 421), carry
the random token of this run (in `?token=` once, then in an HttpOnly SameSite=Strict cookie: 403
without), and, when it changes something (POST), the CSRF token of the pages (a form field or
the `X-CSRF-Token` header htmx sends: 403 without). Pages go out with a Content-Security-Policy
that lets only the server's own scripts run.
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
    security headers on every response."""

    def __init__(self, app: App, token: str, port: int) -> None:
        self.app = app
        self.token = token
        self.port = port
        self.cookie = f"cos_web_{port}"  # cookies are not kept apart by port: the name is
        self.csrf = hmac.new(token.encode("ascii"), b"csrf", hashlib.sha256).hexdigest()
        self.hosts = {f"{LOOPBACK}:{port}".encode(), f"localhost:{port}".encode()}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":
            await _plain(send, 403, "cos web serves HTTP only")
            return
        headers = _headers(scope)
        if headers.get(b"host") not in self.hosts:
            await _plain(send, 421, f"cos web answers to {LOOPBACK}:{self.port} only")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None:
            if not _same(given, self.token):
                await _plain(send, 403, "wrong token: open the URL cos web printed")
                return
            await self._admit(scope, send, query)
            return
        if not _same(_cookie(headers.get(b"cookie", b""), self.cookie), self.token):
            await _plain(send, 403, "cos web needs its token: open the URL it printed "
                         "(http://127.0.0.1:PORT/?token=…)")
            return
        if scope["method"] not in ("GET", "HEAD"):
            checked = await self._check_csrf(headers, receive, send)
            if checked is None:
                return
            receive = checked
        scope.setdefault("state", {})["csrf"] = self.csrf
        await self.app(scope, receive, _with_headers(send))

    async def _admit(self, scope: Scope, send: Send, query: dict[str, str]) -> None:
        """The token in the URL: set the cookie and go to the same URL without it."""
        rest = {key: value for key, value in query.items() if key != "token"}
        location = scope.get("path", "/") + (f"?{urlencode(rest)}" if rest else "")
        cookie = (f"{self.cookie}={self.token}; HttpOnly; SameSite=Strict; Path=/")
        await send({"type": "http.response.start", "status": 303,
                    "headers": [(b"location", location.encode("latin-1", "replace")),
                                (b"set-cookie", cookie.encode("ascii")),
                                (b"content-length", b"0"), *SECURITY_HEADERS]})
        await send({"type": "http.response.body", "body": b""})

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


def _cookie(header: bytes, name: str) -> str | None:
    for part in header.decode("latin-1").split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


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
