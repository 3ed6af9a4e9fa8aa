"""`cos mcp`: the MCP server through which agents ask coding-os about sessions, checkpoints,
tasks, the work log and search (the tools are listed in docs/mcp.md).

A thin interface over `coding_os.api`, on the official `mcp` SDK (its own long-lived process;
the SDK is never imported by the hook or by other commands). stdout is the wire: the SDK writes
only protocol messages there; diagnostics go to stderr and every tool call gets a hooks-log line.

Every write is filed under the calling session (brain.attribution): the PreToolUse hook adds it
to the tool's input as `agent_session`; the schema declares that argument so that the SDK lets it
through, and its description tells the model to leave it alone.

The default transport is stdio (one server per agent process). `--http` serves the streamable
HTTP transport on 127.0.0.1, one server for several panels at once, which is where the hook's
`agent_session` is the only way to tell the callers apart. Any local user can reach a loopback
port, so over HTTP every request must carry `Authorization: Bearer <token>` (checked before the
SDK sees the request, 401 otherwise), as well as the loopback Host the SDK checks; the token is
kept 0600 in the user's hub and printed to stderr at start (DESIGN.md §11).
"""

import errno
import hmac
import os
import re
import stat
import sys
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from coding_os import clock, durable
from coding_os.state import hookslog
from coding_os import api
from coding_os.adapters.mcp import MCP_SERVER_NAME as SERVER_NAME
from coding_os.adapters.mcp import MCP_TOOLS as TOOL_NAMES
from coding_os.errors import CosError
from coding_os.state.caller import Caller
from coding_os.state.root import hub_dir

__all__ = ["build_server", "serve", "http_token", "BearerGate", "TOOL_NAMES", "SERVER_NAME",
           "TOKEN_FILE"]

MAX_PAGE = 50
PREVIEW_FILES = 50  # files listed per group of a rewind preview
BODY_PREVIEW_CHARS = 300
INSTRUCTIONS = (
    "coding-os: the session layer shared by every agent on this project. Search sessions, "
    "transcripts and the work log; list checkpoints and preview a rewind; create, claim "
    "(move to doing) and move tasks; log what you did. Results come in pages: pass "
    "next_cursor back as cursor for the next one."
)
# The tools' shared arguments. This module has no `from __future__ import annotations`: the SDK
# reads the annotations at run time to build each tool's JSON schema.
Limit = Annotated[int, Field(ge=1, le=MAX_PAGE, description="Results per page.")]
Cursor = Annotated[str | int | None, Field(description=(
    "next_cursor of the previous page, as it came; leave out for the first page."))]
AgentSession = Annotated[str | None, Field(max_length=200, description=(
    "Set by coding-os's hook to the calling session; leave it out."))]
Status = Literal["todo", "doing", "blocked", "done"]
HTTP_HOST = "127.0.0.1"
HTTP_PATH = "/mcp"
TOKEN_FILE = "mcp-token"  # in the user's hub: the bearer token of `cos mcp --http`
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{32,200}")


def build_server(env: Mapping[str, str] | None = None, cwd: str | None = None) -> Any:
    """The MCP server with cos's tools, for the project around `cwd`."""
    environ = dict(os.environ if env is None else env)
    here = cwd or os.getcwd()
    server = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    writes = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    def run(tool: str, call: Callable[[Any], dict[str, Any]],
            agent_session: str | None = None) -> dict[str, Any]:
        """Attribute the call, make it, log it (hooks log), and turn a cos error into the
        tool's error result."""
        from coding_os.brain.attribution import attribute

        started = time.monotonic()
        log: dict[str, object] = {"ts": clock.utc_now(), "event": "mcp", "tool": tool}
        caller = None
        try:
            caller = Caller(environ, here)
            who = attribute(caller, agent_session, environ)
            log.update(agent=caller.agent, **who.to_dict())
            return call(who)
        except CosError as exc:
            log["error"] = " ".join(str(exc).split())[:300]
            raise ToolError(str(exc)) from None
        except Exception as exc:  # a bug: the SDK reports it; the log says which call it was
            log["error"] = f"internal {type(exc).__name__}"
            raise
        finally:
            log["ms"] = round((time.monotonic() - started) * 1000, 1)
            if caller is not None:
                _log(caller, log)

    @server.tool(annotations=read_only)
    def cos_sessions_search(
        query: Annotated[str | None, Field(max_length=500, description=(
            "Words to find in a session's id, title, name, project or directory; leave out "
            "for the most recent sessions."))] = None,
        agent: Annotated[Literal["claude", "codex", "cos"] | None, Field(
            description="Only this agent's sessions.")] = None,
        limit: Limit = 10, cursor: Cursor = None, agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Sessions of this project (Claude Code, Codex and coding-os), most recent first."""
        def call(who: Any) -> dict[str, Any]:
            offset = _offset(cursor)
            rows = api.list_sessions(scope="repo", agent=agent, search=query or None,
                                     limit=offset + limit + 1, env=environ, cwd=here)
            return _offset_page(rows, offset, limit, "sessions", _compact_session)
        return run("cos_sessions_search", call, agent_session)

    @server.tool(annotations=read_only)
    def cos_session_show(
        session: Annotated[str, Field(min_length=1, max_length=300, description=(
            "A session id (cos, Claude Code or Codex) or a session's name."))],
        agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Everything coding-os knows about one session: where it ran, its counts, its first
        and last prompt, how to resume it."""
        return run("cos_session_show",
                   lambda who: api.show_session(session, env=environ, cwd=here), agent_session)

    @server.tool(annotations=read_only)
    def cos_checkpoints_list(
        session: Annotated[str | None, Field(max_length=300, description=(
            "Only this session's checkpoints; leave out for all of the project's."))] = None,
        limit: Limit = 20, cursor: Cursor = None, agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Checkpoints of the working tree, newest first, with what changed at each."""
        def call(who: Any) -> dict[str, Any]:
            offset = _offset(cursor)
            points = api.checkpoint_list(session, env=environ, cwd=here)
            return _offset_page(points, offset, limit, "checkpoints", _compact_checkpoint)
        return run("cos_checkpoints_list", call, agent_session)

    @server.tool(annotations=read_only)
    def cos_rewind_preview(
        checkpoint: Annotated[str, Field(min_length=1, max_length=200, description=(
            "A checkpoint id from cos_checkpoints_list."))],
        agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """What rewinding the code to a checkpoint would restore, create and delete. Changes
        nothing: the rewind itself is the user's `cos rewind` command."""
        return run("cos_rewind_preview", lambda who: _compact_preview(api.rewind(
            checkpoint, part="code", dry_run=True, env=environ, cwd=here)), agent_session)

    @server.tool(annotations=writes)
    def cos_task_create(
        title: Annotated[str, Field(min_length=1, max_length=200)],
        body: Annotated[str | None, Field(max_length=16_000)] = None,
        status: Status = "todo",
        agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Add a task to the project's shared board (created as doing, it is yours)."""
        return run("cos_task_create", lambda who: api.task_create(
            title, body, status, who=who, env=environ, cwd=here),
            agent_session)

    @server.tool(annotations=writes)
    def cos_task_move(
        task: Annotated[str, Field(min_length=1, max_length=30, description="TASK-<n>")],
        status: Status,
        note: Annotated[str | None, Field(max_length=2000)] = None,
        force: Annotated[bool, Field(description=(
            "Take over a task another session is doing."))] = False,
        agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Move a task; moving it to doing claims it and makes it your current task."""
        return run("cos_task_move", lambda who: api.task_move(
            task, status, note, force, who=who, env=environ, cwd=here),
            agent_session)

    @server.tool(annotations=read_only)
    def cos_task_list(
        status: Status | None = None,
        owner: Annotated[str | None, Field(max_length=200, description=(
            "Only tasks this session owns."))] = None,
        limit: Limit = 20, cursor: Cursor = None, agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Tasks of the project's shared board, by number."""
        def call(who: Any) -> dict[str, Any]:
            page = api.task_list(status, owner, cursor, limit, env=environ, cwd=here)
            for task in page["tasks"]:  # type: ignore[attr-defined]
                body = task.get("body") or ""
                if len(body) > BODY_PREVIEW_CHARS:
                    task["body"] = body[:BODY_PREVIEW_CHARS] + "…"
            return page
        return run("cos_task_list", call, agent_session)

    @server.tool(annotations=writes)
    def cos_work_log_append(
        text: Annotated[str, Field(min_length=1, max_length=8000)],
        task: Annotated[str | None, Field(max_length=30, description="TASK-<n>")] = None,
        agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Log what you did (optionally for a task) in the project's shared work log."""
        return run("cos_work_log_append", lambda who: api.work_log_append(
            text, task, who=who, env=environ, cwd=here), agent_session)

    @server.tool(annotations=read_only)
    def cos_search(
        query: Annotated[str, Field(min_length=1, max_length=1000, description=(
            "Words that must all occur (any case)."))],
        kinds: Annotated[list[Literal["observation", "work_log", "task", "transcript"]] | None,
                         Field(max_length=4, description="Only these kinds of text.")] = None,
        session: Annotated[str | None, Field(max_length=300)] = None,
        limit: Limit = 10, cursor: Cursor = None, agent_session: AgentSession = None,
    ) -> dict[str, Any]:
        """Full-text search over what the agents did: tool calls and prompts the hooks saw,
        the work log, tasks and transcripts; newest first."""
        return run("cos_search", lambda who: api.search(
            query, list(kinds) if kinds else None, session, cursor, limit, env=environ,
            cwd=here), agent_session)

    return server


def serve(transport: str = "stdio", port: int = 0, env: Mapping[str, str] | None = None,
          cwd: str | None = None) -> None:
    """Run the server until its client goes away (stdio) or it is stopped (http).

    Raises:
        StateIOError: (http) the token cannot be kept in the hub.
        CosError: (http) the port cannot be listened on.
    """
    server = build_server(env, cwd)
    if transport == "stdio":
        server.run("stdio")
        return
    import anyio

    hub = hub_dir(os.environ if env is None else env)
    token = http_token(hub)
    listener = _listen(port)
    url = f"http://{HTTP_HOST}:{listener.getsockname()[1]}{HTTP_PATH}"
    sys.stderr.write(f"cos mcp: serving {url}; clients send the header \"Authorization: Bearer "
                     f"{token}\" (kept in {os.path.join(hub, TOKEN_FILE)})\n")
    sys.stderr.flush()
    anyio.run(_serve_http, server, token, listener)


def http_token(hub: str) -> str:
    """The bearer token of `cos mcp --http`: the one kept in the hub's `mcp-token` while only
    this user could read it, else a new random one written there (0600, the hub 0700), so that
    a token another user may have read never opens the server.

    Raises:
        StateIOError: the hub or the token file cannot be made private or written.
    """
    durable.ensure_dir(hub)
    try:
        st = os.lstat(hub)
        if st.st_mode & 0o077 and stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid():
            os.chmod(hub, durable.DIR_MODE)
    except OSError as exc:
        raise durable.io_error(hub, exc) from None
    path = os.path.join(hub, TOKEN_FILE)
    kept = _kept_token(path)
    if kept is not None:
        return kept
    import secrets

    token = secrets.token_urlsafe(32)
    durable.atomic_write(path, token.encode("ascii") + b"\n")
    return token


def _kept_token(path: str) -> str | None:
    """The token in `path` when it is a regular file of this user's that no one else could
    read or write, and well formed; None otherwise (a new one is made)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None  # a symlink: atomic_write refuses to replace it, in one line
        raise durable.io_error(path, exc) from None
    try:
        st = os.fstat(fd)
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                or st.st_mode & 0o077):
            return None
        text = os.read(fd, 256).decode("ascii", "replace").strip()
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    finally:
        os.close(fd)
    return text if TOKEN_SHAPE.fullmatch(text) else None


def _listen(port: int) -> Any:
    """A socket bound to the loopback `port` (0: any free one), so the URL printed is right.

    Raises:
        CosError: the port is taken or cannot be used.
    """
    import socket

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((HTTP_HOST, port))
    except OSError as exc:
        listener.close()
        raise CosError(f"cannot listen on {HTTP_HOST}:{port}: {exc.strerror or exc}") from None
    return listener


async def _serve_http(server: Any, token: str, listener: Any) -> None:
    """The SDK's streamable HTTP app (its loopback Host check included) behind the token
    check, on uvicorn, until it is stopped."""
    import uvicorn

    app = BearerGate(server.streamable_http_app(streamable_http_path=HTTP_PATH, host=HTTP_HOST),
                     token)
    config = uvicorn.Config(app, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[listener])


class BearerGate:
    """ASGI middleware: an HTTP or websocket request without `Authorization: Bearer <token>`
    gets 401 (or a closed socket) before the app sees any of it; lifespan events pass."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = token.encode("ascii")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan" or self.authorized(scope.get("headers") or ()):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            body = (b'{"error": "invalid_token", "error_description": "cos mcp needs the header '
                    b'Authorization: Bearer <the token in ~/.coding-os/mcp-token>"}')
            await send({"type": "http.response.start", "status": 401, "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode("ascii")),
                (b"www-authenticate", b'Bearer realm="cos mcp"')]})
            await send({"type": "http.response.body", "body": body})

    def authorized(self, headers: Any) -> bool:
        """Whether exactly one Authorization header carries the Bearer token (compared in
        constant time)."""
        values = [value for name, value in headers if name.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = bytes(values[0]).partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(),
                                                                   self.expected)


def _offset(cursor: str | int | None) -> int:
    from coding_os.errors import InvalidInput

    if cursor is None:
        return 0
    text = str(cursor)
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise InvalidInput("cursor must be the next_cursor of a previous page")
    return int(text)


def _offset_page(rows: list[dict[str, Any]], offset: int, limit: int, key: str,
                 compact: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """One page of `rows` from `offset`, under `key`, with the cursor of the next."""
    return {key: [compact(row) for row in rows[offset:offset + limit]],
            "next_cursor": str(offset + limit) if len(rows) > offset + limit else None}


def _compact_session(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: row.get(k) for k in ("id", "native_id", "agent", "title", "name", "branch",
                                    "cwd", "last_active", "messages")}


def _compact_checkpoint(point: Mapping[str, Any]) -> dict[str, Any]:
    changed = point.get("changed")
    out = {k: point.get(k) for k in ("id", "session", "turn", "prompt", "time", "mode",
                                     "trigger")}
    if isinstance(changed, list):
        out["changed"] = changed[:PREVIEW_FILES]
        if len(changed) > PREVIEW_FILES:
            out["changed_more"] = len(changed) - PREVIEW_FILES
    else:
        out["changed"] = changed
    return out


def _compact_preview(preview: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in preview.items():
        if isinstance(value, list) and len(value) > PREVIEW_FILES:
            out[key] = value[:PREVIEW_FILES]
            out[f"{key}_more"] = len(value) - PREVIEW_FILES
        else:
            out[key] = value
    return out


def _log(caller: Caller, log: dict[str, object]) -> None:
    """The call's hooks-log line (best effort: a full disk never fails the call)."""
    if not os.path.isdir(caller.tiers.state_dir):
        return
    try:
        hookslog.append(caller.tiers.hooks_log, log)
    except (CosError, OSError) as exc:
        sys.stderr.write(f"cos mcp: cannot write the hooks log: {exc}\n")
