"""How `cos web` is served (DESIGN.md §10, §11; docs/web.md): the listener on 127.0.0.1, the
connections uvicorn may keep, and the browser `--open` starts.

- **Its owner's connections only.** Each connection accepted is looked up (peer.py): one whose
  peer socket another user holds is reset before a byte of it is read, so another local user
  can neither hold connections open nor make the server write a line per attempt (the first
  refusal of each uid is said once on stderr). Where the owner cannot be told (no sock_diag,
  no /proc/net/tcp), the token alone keeps others out, as start-up says.
- **Bounded connections.** A connection must send a whole request head within `HEAD_S` of
  being accepted or of its last answer, else it is closed (uvicorn itself keeps an idle
  connection that never sent a byte forever); a kept-alive one is closed after `KEEP_ALIVE_S`
  without a request; beyond `connection_limit()` open connections, a new one is reset at once,
  so the server never runs out of file descriptors for its owner's browser; should it still
  run out, the accept error is one line, once, never a traceback a second.
- **No WebSocket.** uvicorn runs with no WebSocket protocol, and the line it would log for each
  upgrade asked is not written: such a request is an HTTP request (403 without the token).
- **`--open` puts no token on a command line.** The browser is started on a `file://` page in
  the user's hub (0600 in a 0700 folder) that sends it on to the token URL, so `ps` shows a
  path no other user can read (Jupyter's redirect file); the page is removed when the server
  ends.
"""

from __future__ import annotations

import asyncio
import errno
import html
import os
import resource
import socket
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from coding_os import durable
from coding_os.errors import CosError
from coding_os.interfaces.web import peer
from coding_os.interfaces.web.app import create_app
from coding_os.interfaces.web.security import LOOPBACK, new_token

__all__ = ["serve", "Policy", "OwnerOnly", "connection_limit", "open_page", "HEAD_S",
           "KEEP_ALIVE_S"]

HEAD_S = 10.0  # a connection's whole request head arrives within this, or it is closed
KEEP_ALIVE_S = 5  # an idle kept-alive connection is closed after this
BACKLOG = 128  # connections waiting to be accepted; asyncio accepts up to this many at once
RESERVED_FDS = 2 * BACKLOG  # kept for one burst of accepts and the server's own files
OPEN_FOLDER = "web"  # in the user's hub: the `--open` pages
_ACCEPT_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def connection_limit() -> int:
    """How many connections `cos web` keeps open at once: its file descriptors but a reserve."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return max(16, min(4096, soft - RESERVED_FDS))


@dataclass
class Policy:
    """What one server accepts: connections of `owner` only (when `check_peers`), at most
    `limit` at once, each sending its request head within `head_s`. `said` keeps what was
    already written to stderr, so each kind of refusal is one line."""

    owner: int
    check_peers: bool
    limit: int
    head_s: float = HEAD_S
    said: set[str] = field(default_factory=set)

    def say_once(self, key: str, line: str) -> None:
        if key not in self.said:
            self.said.add(key)
            sys.stderr.write(f"cos web: {line}\n")
            sys.stderr.flush()


class OwnerOnly(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with the connection rules of this module (its `policy` set
    by `serve` on a subclass of its own)."""

    policy: ClassVar[Policy]
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)  # type: ignore[arg-type]
        policy = self.policy
        if policy.check_peers:
            local, remote = transport.get_extra_info("sockname"), transport.get_extra_info(
                "peername")
            uid = peer.loopback_peer_uid(local, remote) if local and remote else None
            if uid != policy.owner:
                if uid is not None and uid != peer.UNKNOWABLE:
                    policy.say_once(f"uid {uid}", f"connections from uid {uid} are refused "
                                    f"(only its owner, uid {policy.owner}, is served)")
                self.transport.abort()
                return
        if len(self.connections) > policy.limit:
            policy.say_once("limit", f"{len(self.connections) - 1} connections are open, the "
                            "most it keeps: new ones are refused until some close")
            self.transport.abort()
            return
        self._arm_head_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _unsupported_upgrade_warning(self) -> None:
        """A WebSocket upgrade asked of a server that has none: answered as plain HTTP, with no
        line logged for it."""

    def _arm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.policy.head_s, self._head_late)

    def _head_late(self) -> None:
        """No request began since the timer was armed: the connection is closed (a request
        being answered, such as a live stream, is left alone)."""
        self._head_timer = None
        cycle: Any = getattr(self, "cycle", None)
        if (cycle is None or cycle.response_complete) and not self.transport.is_closing():
            self.transport.close()


def open_page(url: str, port: int, env: Mapping[str, str] | None = None) -> str:
    """Write the page that sends a browser on to `url` (0600, in the hub's `web/` folder,
    0700) and return its path.

    Raises:
        StateIOError: the page cannot be written.
    """
    from coding_os.state.root import hub_dir

    folder = os.path.join(hub_dir(env), OPEN_FOLDER)
    durable.private_dir(folder)
    _remove_stale_pages(folder)
    path = os.path.join(folder, f"open-{port}-{os.getpid()}.html")
    target = html.escape(url, quote=True)
    page = ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
            f"<meta http-equiv=\"refresh\" content=\"0;url={target}\">\n"
            "<title>cos web</title></head>\n"
            f"<body><p><a href=\"{target}\">Open cos web</a></p></body></html>\n")
    durable.atomic_write(path, page.encode("utf-8"), sync=False)
    return path


def _remove_stale_pages(folder: str) -> None:
    """Remove the pages of servers that ended without removing theirs (killed)."""
    for name in os.listdir(folder):
        parts = name.removesuffix(".html").split("-")
        if len(parts) == 3 and parts[0] == "open" and parts[2].isdigit() \
                and not os.path.exists(f"/proc/{parts[2]}"):
            durable.unlink_quietly(os.path.join(folder, name))


def _start_browser(page: str) -> None:
    """Open `page` in the browser, in a thread: a `$BROWSER` command is waited for, and some
    browsers return only when their window closes."""
    import webbrowser

    def start() -> None:
        try:
            webbrowser.open("file://" + page)
        except Exception as exc:  # noqa: BLE001 - a browser that cannot start is said, not raised
            sys.stderr.write(f"cos web: the browser did not start: {exc}\n")

    threading.Thread(target=start, name="cos-web-browser", daemon=True).start()


def _quiet_accept_errors(policy: Policy) -> Any:
    """The event loop's exception handler: an accept() out of file descriptors (asyncio tries
    again a second later) is one line, once; anything else as asyncio says it."""
    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if isinstance(exc, OSError) and exc.errno in _ACCEPT_ERRNOS \
                and "accept" in str(context.get("message", "")):
            policy.say_once("accept", f"cannot accept connections for now: {exc.strerror}")
            return
        loop.default_exception_handler(context)

    return handle


def _listen(port: int) -> socket.socket:
    """A listener on 127.0.0.1:`port`, listening before the URL is printed (a client may
    connect at once).

    Raises:
        CosError: the port cannot be listened on.
    """
    # IPPROTO_TCP: asyncio sets TCP_NODELAY on what such a listener accepts (protocol 0 keeps
    # Nagle, and a second request on a kept-alive connection waits for a delayed ACK).
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, port))
        listener.listen(BACKLOG)
    except OSError as exc:
        listener.close()
        raise CosError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from None
    return listener


def serve(port: int = 0, *, open_browser: bool = False, as_json: bool = False,
          cwd: str | None = None, env: Mapping[str, str] | None = None) -> None:
    """Serve the web view on 127.0.0.1:`port` (0: any free port) until stopped, after printing
    its URL with the token (`as_json`: url, port, token, pid as one line); `open_browser`
    opens it through a page only this user can read.

    Raises:
        CosError: the port cannot be listened on.
        StateIOError: the page `open_browser` needs cannot be written.
    """
    import json

    listener = _listen(port)
    port = listener.getsockname()[1]
    token = new_token()
    url = f"http://{LOOPBACK}:{port}/?token={token}"
    policy = Policy(os.geteuid(), peer.peers_knowable(), connection_limit())
    if as_json:
        print(json.dumps({"url": url, "port": port, "token": token, "pid": os.getpid()}),
              flush=True)
    else:
        print(f"cos web: serving {url}", flush=True)
    if not policy.check_peers:
        policy.say_once("peers", "cannot tell which user a connection comes from here (no "
                        "sock_diag, no /proc/net/tcp): the token alone keeps others out")
    page = None
    try:
        if open_browser:
            page = open_page(url, port, env)
            _start_browser(page)
        protocol = type("OwnerOnlyHere", (OwnerOnly,), {"policy": policy})
        config = uvicorn.Config(create_app(token, port, cwd, env), http=protocol, ws="none",
                                log_level="warning", access_log=False,
                                timeout_keep_alive=KEEP_ALIVE_S, timeout_graceful_shutdown=1,
                                backlog=BACKLOG)
        server = _Server(config)
        server.leftovers = [page] if page is not None else []
        asyncio.run(_serve(server, listener, policy))
    finally:
        if page is not None:
            durable.unlink_quietly(page)
        listener.close()


class _Server(uvicorn.Server):
    """uvicorn's server, removing `leftovers` as it shuts down (uvicorn ends the process with
    the signal that stopped it once it has shut down: nothing after `serve` runs then)."""

    leftovers: list[str]

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            for path in self.leftovers:
                durable.unlink_quietly(path)


async def _serve(server: uvicorn.Server, listener: socket.socket, policy: Policy) -> None:
    asyncio.get_running_loop().set_exception_handler(_quiet_accept_errors(policy))
    await server.serve(sockets=[listener])
