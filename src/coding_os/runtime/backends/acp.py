"""The `acp` backend (DESIGN.md §12.2): any agent that speaks the Agent Client Protocol, with cos
as its client.

ACP v1 is JSON-RPC 2.0 on the agent's stdio, one message a line. The backend sends `initialize`
(client capabilities `fs` read and write, and `terminal`), then `session/new` (or, for a native id,
`session/resume` or `session/load`, whichever the agent offers); the agent's session id is the
native id. A user input is a `session/prompt` request whose answer ends the turn (`stopReason`,
token use in `usage` or `_meta.usage`); an interrupt is the `session/cancel` notification.
`session/update` notifications become §7 events: message chunks `agent_message_delta` (and the
whole `agent_message` when the message ends), `tool_call` a tool call, a `tool_call_update` that
completes or fails a `tool_result`; the rest (thoughts, plans, commands, modes) `native` events.

The agent's own requests are served here: `fs/read_text_file` and `fs/write_text_file` inside the
session's cwd only, `terminal/*` as child processes, and `session/request_permission`. No write
goes unguarded: the engine's checkpoint (`BackendConfig.checkpoint`) is taken before every file
written, every terminal created, and before an allow is answered. The session's permission mode
decides who answers a request (PERMISSION_MODES): the user (an `approval_request`, answered
through `answer`), or cos itself for edits (`acceptEdits`) or everything (`bypassPermissions`).
The agent is kept in its mode that asks before writing (`default`), so each write is asked for;
a writing tool the agent runs without asking gets its checkpoint when its `tool_call` arrives,
which may be after it started.

The wire is written here rather than through the ACP Python SDK: the SDK's connection starts the
agent in a process of its own making (cos runs every agent in its own process group, and ends that
group), and the backend shares the codex backend's shape (one stdout reader, a queue of events).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
from collections.abc import AsyncIterator, Mapping
from typing import Any

from coding_os import jsonwire
from coding_os.adapters.acp_agents import acp_command
from coding_os.errors import BackendError, InvalidInput
from coding_os.runtime import children, wire
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.stdio import MAX_LINE, AgentProcess

__all__ = ["MAX_LINE", "PERMISSION_MODES", "AcpBackend", "GeminiBackend"]

PROTOCOL_VERSION = 1
# A permission mode (cos's words or Claude Code's) → the tool kinds cos allows itself (None: all);
# every other request goes to the user.
PERMISSION_MODES: dict[str, frozenset[str] | None] = {
    "default": frozenset(),
    "ask": frozenset(),
    "acceptEdits": frozenset({"edit", "delete", "move"}),
    "accept-edits": frozenset({"edit", "delete", "move"}),
    "bypassPermissions": None,
    "allow-all": None,
}
ASKING_MODE = "default"  # the mode of Gemini CLI and Claude Code that asks before writing tools
WRITING_KINDS = frozenset({"edit", "delete", "move", "execute"})
REQUEST_TIMEOUT = 60.0  # seconds for the agent to answer a request of ours (not a prompt)
CLOSE_TIMEOUT = 5.0
OUTPUT_LIMIT = 1024 * 1024  # bytes of a terminal's output kept unless the agent says less

_METHOD_NOT_FOUND = -32601
_INVALID_PARAMS = -32602
_INTERNAL_ERROR = -32603
# ACP's own names for what the agent sends (its `sessionUpdate` kinds).
_MESSAGE_CHUNK = "agent_message_chunk"
_TOOL_CALL = "tool_call"
_TOOL_CALL_UPDATE = "tool_call_update"


class AcpBackend:
    """An ACP agent's session in a process of its own: `options["command"]` (an argv list or an
    `acp:` command line), default the table's entry for `default_agent`."""

    agent = "acp"
    runs_hooks = False
    default_agent: str | None = None

    def __init__(self) -> None:
        self._agent = AgentProcess("acp")
        self._session_id: str | None = None
        self._cwd = ""
        self._env: dict[str, str] = {}
        self._config: BackendConfig | None = None
        self._auto_allow: frozenset[str] | None = frozenset()
        self._capabilities: dict[str, Any] = {}
        self._next_id = 1
        self._pending: dict[int, asyncio.Future[Any]] = {}
        # permission requests the user answers: str(id) → id, options, kind, the tool call
        self._permissions: dict[str, tuple[str | int, list[Any], str, Any]] = {}
        self._tools: dict[str, dict[str, Any]] = {}  # the tool calls seen, by toolCallId
        self._text: list[str] = []  # the agent message being streamed
        self._prompt: asyncio.Task[None] | None = None
        self._replaying = False  # session/load replays the conversation: not new events
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._terminals: dict[str, _Terminal] = {}
        self._closed = False

    # -- the Backend calls -----------------------------------------------------------------------

    async def start(self, config: BackendConfig) -> str | None:
        """Spawn the agent, initialize it, and start (or resume) its session.

        Raises:
            BackendError: no command, the program is missing, ended at once, or refused the
                session or its resume.
            InvalidInput: a permission mode cos has no policy for.
        """
        mode = config.permission_mode or "default"
        if mode not in PERMISSION_MODES:
            raise InvalidInput(f"acp: no approval policy for permission mode {mode!r}: "
                               f"expected one of {', '.join(PERMISSION_MODES)}")
        self._auto_allow = PERMISSION_MODES[mode]
        self._config = config
        self._cwd = os.path.realpath(config.cwd)
        self._env = dict(config.env) if config.env is not None else dict(os.environ)
        argv = self._argv(config.options)
        await self._agent.start(argv, config.cwd, self._env, config.options.get("stderr_path"))
        self._reader = asyncio.create_task(self._read_stdout())
        try:
            from coding_os import __version__

            result = await self._request("initialize", {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True},
                                       "terminal": True},
                "clientInfo": {"name": "coding-os", "title": "coding-os",
                               "version": __version__}})
            capabilities = result.get("agentCapabilities") if isinstance(result, dict) else None
            self._capabilities = capabilities if isinstance(capabilities, dict) else {}
            session_id = await self._open_session(config)
        except BaseException:
            await self.close()
            raise
        self._session_id = session_id
        return session_id

    async def submit(self, text: str) -> None:
        """Send `text` as a `session/prompt`; its answer, later, ends the turn.

        Raises:
            BackendError: the agent is gone.
        """
        self._text = []
        request_id, answer = await self._send_request("session/prompt", {
            "sessionId": self._session_id, "prompt": [{"type": "text", "text": text}]})
        self._prompt = self._spawn(self._await_prompt(request_id, answer))

    async def interrupt(self) -> None:
        """Send `session/cancel`; permission requests still open are answered cancelled.

        Raises:
            BackendError: the agent is gone.
        """
        for key in list(self._permissions):
            native_id, _, _, _ = self._permissions.pop(key)
            await self._send({"jsonrpc": "2.0", "id": native_id,
                              "result": {"outcome": {"outcome": "cancelled"}}})
        await self._send({"jsonrpc": "2.0", "method": "session/cancel",
                          "params": {"sessionId": self._session_id}})

    async def answer(self, request: str | int, allow: bool) -> None:
        """Answer the permission request `request`, a checkpoint first when allowed.

        Raises:
            BackendError: the agent is gone.
        """
        pending = self._permissions.pop(str(request), None)
        if pending is None:
            self._emit(wire.ERROR, message=f"acp: no permission request {request!r} is waiting",
                       fatal=False)
            return
        native_id, options, tool, call = pending
        if allow:
            await self._checkpoint(tool, call)
        await self._send({"jsonrpc": "2.0", "id": native_id,
                          "result": {"outcome": _outcome(options, allow)}})

    async def events(self) -> AsyncIterator[BackendEvent]:
        """The session's events, in order, until the agent's stdout closes."""
        while True:
            event = await self._queue.get()
            if event is None:
                self._queue.put_nowait(None)
                return
            yield event

    async def close(self) -> None:
        """Close the agent's stdin, wait a while, then end its process group and its terminals."""
        if self._agent.process is None or self._closed:
            return
        self._closed = True
        for terminal in list(self._terminals.values()):
            terminal.kill()
        await self._agent.close(self._reader)

    # -- the session -----------------------------------------------------------------------------

    def _argv(self, options: Mapping[str, object]) -> list[str]:
        command = options.get("command")
        if isinstance(command, (list, tuple)) and command \
                and all(isinstance(part, str) for part in command):
            return [str(part) for part in command]
        line = command if isinstance(command, str) else self.default_agent
        if not line:
            raise BackendError("acp: no agent command (acp:<command line>)")
        try:
            return acp_command(line)
        except ValueError as error:
            raise BackendError(f"acp: {error}") from None

    async def _open_session(self, config: BackendConfig) -> str:
        params: dict[str, Any] = {"cwd": config.cwd, "mcpServers": []}
        if config.native_id is None:
            result = await self._request("session/new", params)
            session_id = result.get("sessionId") if isinstance(result, dict) else None
            if not isinstance(session_id, str):
                raise BackendError(f"acp: the agent gave no session id: {result!r:.200}")
        else:
            if config.fork:
                raise BackendError("acp: the agent's sessions are not forked by cos")
            session_id = config.native_id
            params["sessionId"] = session_id
            offered = self._capabilities.get("sessionCapabilities")
            if isinstance(offered, dict) and offered.get("resume") is not None:
                result = await self._request("session/resume", params)
            elif self._capabilities.get("loadSession"):
                self._replaying = True  # the history it replays is in the log already
                try:
                    result = await self._request("session/load", params)
                finally:
                    self._replaying = False
            else:
                raise BackendError(f"acp: the agent can neither resume nor load session "
                                   f"{session_id}")
        await self._keep_asking(session_id, result)
        return session_id

    async def _keep_asking(self, session_id: str, result: object) -> None:
        """Put the session in the agent's mode that asks before writing, if it is elsewhere."""
        modes = result.get("modes") if isinstance(result, dict) else None
        if not isinstance(modes, dict) or modes.get("currentModeId") in (None, ASKING_MODE):
            return
        available = modes.get("availableModes")
        if isinstance(available, list) and any(isinstance(mode, dict)
                                               and mode.get("id") == ASKING_MODE
                                               for mode in available):
            await self._request("session/set_mode", {"sessionId": session_id,
                                                     "modeId": ASKING_MODE})

    async def _await_prompt(self, request_id: int, answer: asyncio.Future[Any]) -> None:
        try:
            result = await answer
        except BackendError as error:
            self._flush_message()
            if not self._closed and not isinstance(error, _Ended):
                self._emit(wire.ERROR, message=str(error), fatal=False)
                self._emit(wire.TASK_COMPLETE, usage=None, stop_reason="error")
            return
        finally:
            self._pending.pop(request_id, None)
        self._flush_message()
        result = result if isinstance(result, dict) else {}
        self._emit(wire.NATIVE, raw={"result": result})
        stop = result.get("stopReason")
        if stop == "cancelled":
            self._emit(wire.TURN_ABORTED, reason=wire.ABORT_INTERRUPTED)
        else:
            self._emit(wire.TASK_COMPLETE, usage=_usage(result), stop_reason=stop)

    # -- JSON-RPC --------------------------------------------------------------------------------

    async def _send(self, message: Mapping[str, Any]) -> None:
        if not await self._agent.write(json.dumps(message).encode("utf-8") + b"\n"):
            raise await self._ended()

    async def _send_request(self, method: str, params: Mapping[str, Any]
                            ) -> tuple[int, asyncio.Future[Any]]:
        request_id = self._next_id
        self._next_id += 1
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            await self._send({"jsonrpc": "2.0", "id": request_id, "method": method,
                              "params": params})
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return request_id, answer

    async def _request(self, method: str, params: Mapping[str, Any]) -> Any:
        request_id, answer = await self._send_request(method, params)
        try:
            return await asyncio.wait_for(answer, REQUEST_TIMEOUT)
        except asyncio.TimeoutError:
            raise BackendError(f"acp: no answer to {method} in {REQUEST_TIMEOUT:.0f}s") from None
        except _Refused as refused:
            raise BackendError(f"acp: {method} refused: {refused}") from None
        finally:
            self._pending.pop(request_id, None)

    async def _read_stdout(self) -> None:
        try:
            while True:
                line, too_long = await self._agent.read()
                if too_long:
                    self._emit(wire.ERROR, message=f"acp: a line over {MAX_LINE} bytes skipped",
                               fatal=False)
                    continue
                if line is None:
                    break
                if line.strip():
                    self._take(line)
        finally:
            ended = await self._ended()
            for answer in self._pending.values():
                if not answer.done():
                    answer.set_exception(ended)
            if self._prompt is not None:
                await asyncio.wait({self._prompt}, timeout=CLOSE_TIMEOUT)
            self._queue.put_nowait(None)

    async def _ended(self) -> BackendError:
        code, last = await self._agent.ended()
        return _Ended(f"acp: the agent ended (exit code {code}){f': {last}' if last else ''}")

    def _take(self, line: bytes) -> None:
        """Route one line: a response to its request, a request of the agent's to its handler,
        a notification to the events."""
        try:
            message = jsonwire.loads(line)
        except ValueError:
            self._emit(wire.NATIVE, raw=line.decode("utf-8", errors="replace").rstrip("\n"))
            return
        if not isinstance(message, dict):
            self._emit(wire.NATIVE, raw=message)
            return
        method = message.get("method")
        if method is None and "id" in message:
            answer = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
            if answer is None or answer.done():
                self._emit(wire.NATIVE, raw=message)
            elif "error" in message:
                error = message["error"]
                text = error.get("message") if isinstance(error, dict) else None
                answer.set_exception(_Refused(str(text or error)))
            else:
                answer.set_result(message.get("result"))
        elif isinstance(method, str) and "id" in message:
            self._spawn(self._serve(method, message))
        elif method == "session/update":
            params = message.get("params")
            update = params.get("update") if isinstance(params, dict) else None
            if isinstance(update, dict) and not self._replaying:
                self._update(update, message)
        elif not self._replaying:
            self._emit(wire.NATIVE, raw=message)

    async def _serve(self, method: str, message: dict[str, Any]) -> None:
        """Answer one request of the agent's: a result, or a JSON-RPC error."""
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        try:
            if method == "session/request_permission":
                result = await self._permission(message["id"], params)
                if result is None:
                    return  # the user answers, through `answer`
            elif method == "fs/read_text_file":
                result = self._read_file(params)
            elif method == "fs/write_text_file":
                await self._write_file(params)
                result = None
            elif method.startswith("terminal/"):
                result = await self._terminal(method, params)
            else:
                self._emit(wire.NATIVE, raw=message)
                await self._reply_error(message["id"], _METHOD_NOT_FOUND,
                                        f"coding-os does not handle {method}")
                return
        except _Invalid as invalid:
            await self._reply_error(message["id"], _INVALID_PARAMS, str(invalid))
            return
        except OSError as error:
            await self._reply_error(message["id"], _INTERNAL_ERROR,
                                    f"{method}: {error.strerror or error}")
            return
        await self._send({"jsonrpc": "2.0", "id": message["id"], "result": result})

    async def _reply_error(self, request_id: object, code: int, text: str) -> None:
        await self._send({"jsonrpc": "2.0", "id": request_id,
                          "error": {"code": code, "message": text}})

    # -- what the agent asks of its client -------------------------------------------------------

    async def _permission(self, request_id: str | int, params: dict[str, Any]
                          ) -> dict[str, Any] | None:
        """Answer a permission request by the session's policy (a checkpoint before an allow),
        or hand it to the user as an `approval_request` (None)."""
        call = params.get("toolCall")
        call = call if isinstance(call, dict) else {}
        call_id = str(call.get("toolCallId") or "")
        if call_id not in self._tools:  # Gemini CLI asks before it tells of the call
            self._announce(call_id, call)
        known = self._tools.setdefault(call_id, {})
        known.update({key: value for key, value in call.items() if value is not None})
        tool = str(known.get("kind") or "other")
        tool_input = _shown_input(known)
        options = params.get("options")
        options = options if isinstance(options, list) else []
        if self._auto_allow is None or tool in self._auto_allow:
            await self._checkpoint(tool, known)
            return {"outcome": _outcome(options, True)}
        self._flush_message()
        self._permissions[str(request_id)] = (request_id, options, tool, dict(known))
        self._emit(wire.APPROVAL_REQUEST, request=str(request_id), tool=tool,
                   input=tool_input, call_id=call_id or None, title=known.get("title"))
        return None

    def _inside(self, path: object) -> str:
        """`path`, absolute and inside the session's cwd once links are resolved.

        Raises:
            _Invalid: not an absolute path, or outside the project.
        """
        if not isinstance(path, str) or not os.path.isabs(path):
            raise _Invalid("path must be an absolute path")
        real = os.path.realpath(path)
        if os.path.commonpath([real, self._cwd]) != self._cwd:
            raise _Invalid(f"path {path!r} is outside the session's directory {self._cwd}")
        return real

    def _read_file(self, params: dict[str, Any]) -> dict[str, Any]:
        path = self._inside(params.get("path"))
        with open(path, encoding="utf-8", errors="replace") as file:
            text = file.read()
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max(0, line - 1) if isinstance(line, int) else 0
            end = start + limit if isinstance(limit, int) and limit >= 0 else None
            text = "".join(lines[start:end])
        return {"content": text}

    async def _write_file(self, params: dict[str, Any]) -> None:
        path = self._inside(params.get("path"))
        content = params.get("content")
        if not isinstance(content, str):
            raise _Invalid("content must be a string")
        await self._write_checkpoint("Write", {"file_path": path})
        with open(path, "w", encoding="utf-8") as file:
            file.write(content)

    async def _terminal(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        if method == "terminal/create":
            command = params.get("command")
            if not isinstance(command, str) or not command:
                raise _Invalid("command must be a non-empty string")
            args = params.get("args") or []
            if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
                raise _Invalid("args must be a list of strings")
            cwd = self._inside(params["cwd"]) if params.get("cwd") else self._cwd
            env = dict(self._env)
            for variable in params.get("env") or []:
                if isinstance(variable, dict) and isinstance(variable.get("name"), str):
                    env[variable["name"]] = str(variable.get("value", ""))
            limit = params.get("outputByteLimit")
            await self._write_checkpoint("Bash", {"command": shlex.join([command, *args])})
            terminal = await _Terminal.start([command, *args], cwd, env,
                                             limit if isinstance(limit, int) else OUTPUT_LIMIT)
            terminal_id = f"term-{len(self._terminals) + 1}-{os.urandom(3).hex()}"
            self._terminals[terminal_id] = terminal
            return {"terminalId": terminal_id}
        found = self._terminals.get(str(params.get("terminalId")))
        if found is None:
            raise _Invalid(f"no terminal {params.get('terminalId')!r}")
        terminal = found
        if method == "terminal/output":
            return terminal.output()
        if method == "terminal/wait_for_exit":
            await terminal.wait()
            return terminal.exit_status()
        if method == "terminal/kill":
            terminal.kill()
            return None
        if method == "terminal/release":
            terminal.kill()
            del self._terminals[str(params.get("terminalId"))]
            return None
        raise _Invalid(f"no method {method}")

    async def _checkpoint(self, kind: str, call: Mapping[str, Any]) -> None:
        """The engine's checkpoint before the tool call `call` (of ACP kind `kind`) writes."""
        tool, tool_input = _checkpoint_tool(kind, call)
        await self._write_checkpoint(tool, tool_input)

    async def _write_checkpoint(self, tool: str, tool_input: object) -> None:
        config = self._config
        if config is not None and config.checkpoint is not None:
            await config.checkpoint(tool, tool_input)

    # -- session updates -------------------------------------------------------------------------

    def _update(self, update: dict[str, Any], message: dict[str, Any]) -> None:
        kind = update.get("sessionUpdate")
        if kind == _MESSAGE_CHUNK:
            content = update.get("content")
            text = content.get("text") if isinstance(content, dict) else None
            if isinstance(text, str):
                self._text.append(text)
                self._emit(wire.AGENT_MESSAGE_DELTA, text=text)
            return
        if kind == _TOOL_CALL:
            call_id = str(update.get("toolCallId") or "")
            self._announce(call_id, update)
            self._maybe_result(call_id, update)
            return
        if kind == _TOOL_CALL_UPDATE:
            call_id = str(update.get("toolCallId") or "")
            if call_id not in self._tools:
                self._announce(call_id, update)
            else:
                self._tools[call_id].update(
                    {key: value for key, value in update.items() if value is not None})
            if not self._maybe_result(call_id, update):
                self._emit(wire.NATIVE, raw=message)
            return
        self._emit(wire.NATIVE, raw=message)

    def _announce(self, call_id: str, call: Mapping[str, Any]) -> None:
        """A tool call seen for the first time: its `tool_call` event, and, for a writing one,
        its checkpoint (a tool that asks first gets one before the allow as well; one that does
        not ask gets this one, taken while it may already run)."""
        self._flush_message()
        self._tools[call_id] = {key: value for key, value in call.items() if value is not None}
        kind = str(call.get("kind") or "other")
        self._emit(wire.TOOL_CALL, call_id=call_id, tool=kind, input=_shown_input(call),
                   title=call.get("title"), locations=call.get("locations"))
        if kind in WRITING_KINDS and call.get("status") in (None, "pending", "in_progress"):
            self._spawn(self._checkpoint(kind, dict(call)))

    def _maybe_result(self, call_id: str, update: dict[str, Any]) -> bool:
        status = update.get("status")
        if status not in ("completed", "failed"):
            return False
        seen = self._tools.get(call_id, {})
        output: object = update.get("rawOutput")
        if output is None:
            output = _content_text(update.get("content") or seen.get("content"))
        self._emit(wire.TOOL_RESULT, call_id=call_id, ok=status == "completed", output=output,
                   status=status)
        return True

    def _flush_message(self) -> None:
        if self._text:
            text, self._text = "".join(self._text), []
            self._emit(wire.AGENT_MESSAGE, text=text)

    def _spawn(self, work: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(self._guarded(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _guarded(self, work: Any) -> None:
        try:
            await work
        except BackendError:
            pass  # the agent is gone: events() is ending anyway

    def _emit(self, event_type: wire.BackendEventType, **fields: object) -> None:
        self._queue.put_nowait(BackendEvent(event_type, fields))


class GeminiBackend(AcpBackend):
    """Gemini CLI as the engine drives it: `gemini --acp` (`--agent gemini`)."""

    agent = "gemini"
    default_agent = "gemini"


class _Refused(BackendError):
    """The agent answered a request of ours with a JSON-RPC error."""


class _Ended(BackendError):
    """The agent's process ended."""


class _Invalid(ValueError):
    """A request of the agent's with bad params (answered with -32602)."""


class _Terminal:
    """A command the agent runs through `terminal/create`, its output kept up to a limit."""

    def __init__(self, process: asyncio.subprocess.Process, limit: int) -> None:
        self.process = process
        self.limit = limit
        self.buffer = bytearray()
        self.truncated = False
        self.reader = asyncio.get_running_loop().create_task(self._read())

    @classmethod
    async def start(cls, argv: list[str], cwd: str, env: dict[str, str],
                    limit: int) -> _Terminal:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            **children.options())
        return cls(process, limit)

    async def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := await self.process.stdout.read(65536):
            self.buffer += chunk
            if len(self.buffer) > self.limit:
                del self.buffer[:len(self.buffer) - self.limit]  # ACP keeps the end
                self.truncated = True

    def output(self) -> dict[str, Any]:
        result: dict[str, Any] = {"output": self.buffer.decode("utf-8", errors="replace"),
                                  "truncated": self.truncated}
        if self.process.returncode is not None:
            result["exitStatus"] = self.exit_status()
        return result

    async def wait(self) -> None:
        await self.process.wait()
        await self.reader

    def exit_status(self) -> dict[str, Any]:
        code = self.process.returncode
        return {"exitCode": code if code is not None and code >= 0 else None,
                "signal": signal.Signals(-code).name if code is not None and code < 0 else None}

    def kill(self) -> None:
        if self.process.returncode is None:
            _signal_group(self.process.pid, signal.SIGKILL)


def _outcome(options: list[Any], allow: bool) -> dict[str, Any]:
    """The answer to a permission request: the option of the kind asked for (once before
    always, so the next write asks again), or cancelled when the agent offered none."""
    wanted = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
    for kind in wanted:
        for option in options:
            if isinstance(option, dict) and option.get("kind") == kind \
                    and isinstance(option.get("optionId"), str):
                return {"outcome": "selected", "optionId": option["optionId"]}
    return {"outcome": "cancelled"}


def _shown_input(call: Mapping[str, Any]) -> object:
    """What a tool call is given, for a UI: its raw input, else its title and locations (Gemini
    CLI's permission requests carry no raw input)."""
    if call.get("rawInput") is not None:
        return call["rawInput"]
    return {key: call[key] for key in ("title", "locations") if call.get(key) is not None}


def _checkpoint_tool(kind: str, call: Mapping[str, Any]) -> tuple[str, dict[str, object]]:
    """The tool the engine's checkpoint is taken for (checkpoints/auto.py takes one for a tool
    that writes): a file edit names its file, anything else is taken as a command (a whole
    checkpoint), whatever the ACP kind says, since an allowed tool may write."""
    raw = call.get("rawInput")
    raw = raw if isinstance(raw, dict) else {}
    locations = call.get("locations")
    paths = [location.get("path") for location in locations if isinstance(location, dict)] \
        if isinstance(locations, list) else []
    path = raw.get("file_path") or raw.get("path") or (paths[0] if paths else None)
    if kind == "edit" and isinstance(path, str) and len(paths) <= 1:
        return "Write", {"file_path": path}
    command = raw.get("command")
    return "Bash", {"command": command if isinstance(command, str) else call.get("title")}


def _content_text(content: object) -> object:
    """A tool call's content as text where it is text (ACP `content` blocks), else as it is."""
    if not isinstance(content, list):
        return content
    texts: list[str] = []
    for item in content:
        inner = item.get("content") if isinstance(item, dict) else None
        if isinstance(inner, dict) and isinstance(inner.get("text"), str):
            texts.append(inner["text"])
        else:
            return content
    return "\n".join(texts)


# ACP's usage names, and Gemini CLI's in `_meta.quota.token_count` → cos's usage names.
_USAGE_NAMES = {"inputTokens": "input", "outputTokens": "output",
                "cachedReadTokens": "cached_input", "cachedWriteTokens": "cache_creation_input",
                "thoughtTokens": "reasoning_output", "totalTokens": "total",
                "input_tokens": "input", "output_tokens": "output"}


def _usage(result: dict[str, Any]) -> dict[str, Any] | None:
    """The turn's token use, from the prompt's answer: ACP's `usage`, else `_meta.usage`, else
    Gemini CLI's `_meta.quota.token_count`."""
    meta = result.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    quota = meta.get("quota")
    usage = result.get("usage")
    if not isinstance(usage, dict):
        usage = meta.get("usage")
    if not isinstance(usage, dict) and isinstance(quota, dict):
        usage = quota.get("token_count")
    if not isinstance(usage, dict):
        return None
    named: dict[str, Any] = {_USAGE_NAMES.get(str(key), str(key)): value
                             for key, value in usage.items()
                             if isinstance(value, int) and not isinstance(value, bool)}
    return named or None


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
