"""The `codex` backend (DESIGN.md §6): the real Codex CLI driven through `codex app-server`.

This is the asynchronous transport of the one app-server client (adapters/codex/app_server.py:
its messages, its handshake and the matching of answers to requests). The backend runs the
client's `open_thread` dialogue (the handshake, then `thread/start`, `thread/resume` or
`thread/fork` for the session); the thread id is the native id. A user input is `turn/start`, an
interrupt `turn/interrupt`. The server tells what happens by notifications (`item/started`,
`item/completed`, `turn/completed`, …) and asks for approvals by requests of its own, which
`answer` responds to. A permission mode sets both the approval policy and the sandbox
(PERMISSION_MODES). A new thread also asks for the raw response items, the only trace of a
command the sandbox refused: the backend reports such a command as a tool call and its result.

One reader task reads stdout: answers go to the request awaiting them, everything else becomes
a `BackendEvent` on a queue that `events()` gives out, ending when stdout closes. A line that is
not JSON becomes a `native` event; one longer than MAX_LINE is skipped with an `error` event.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeVar

from coding_os import jsonwire
from coding_os.adapters.codex.app_server import (Answer, Client, Dialogue, Notification, Other,
                                                 ServerRequest, ended, open_thread)
from coding_os.errors import BackendError, InvalidInput
from coding_os.runtime import wire
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.stdio import MAX_LINE, AgentProcess

__all__ = ["MAX_LINE", "PERMISSION_MODES", "CodexBackend"]

# A permission mode (cos's, Claude Code's names, or Codex's own approval policies) → Codex's
# (`approvalPolicy`, `sandbox`); a None sandbox leaves Codex's default, and options["sandbox"]
# overrides it. The default asks before any command not known to be safe, so every approval
# reaches the user, and a command the user allowed may write in the workspace (Codex's own
# default sandbox, read-only, refuses the write and Codex does not always retry it outside).
# Bypassing permissions lets commands write in the workspace without asking, never outside it
# (that would be `danger-full-access`, which takes the option).
PERMISSION_MODES: dict[str, tuple[str, str | None]] = {
    "default": ("untrusted", "workspace-write"),
    "untrusted": ("untrusted", "workspace-write"),
    "acceptEdits": ("on-request", "workspace-write"),
    "on-request": ("on-request", "workspace-write"),
    "bypassPermissions": ("never", "workspace-write"),
    "never": ("never", "workspace-write"),
}

REQUEST_TIMEOUT = 60.0  # seconds for the app-server to answer a request of ours
OUTPUT_LIMIT = 64 * 1024  # characters of a command's output kept for its tool_result

_TOOL_ITEMS = frozenset({"commandExecution", "fileChange", "mcpToolCall", "dynamicToolCall",
                         "collabAgentToolCall", "webSearch", "imageView", "imageGeneration"})
# Server requests that are approvals → the decisions (allow, deny) their response names.
_APPROVALS = {
    "item/commandExecution/requestApproval": ("commandExecution", "accept", "decline"),
    "item/fileChange/requestApproval": ("fileChange", "accept", "decline"),
    "execCommandApproval": ("commandExecution", "approved", "denied"),
    "applyPatchApproval": ("fileChange", "approved", "denied"),
}
# Model tools that run a command: a call of theirs that Codex reports no item for (its sandbox
# refused the command) is reported from the raw response items.
_SHELL_TOOLS = frozenset({"exec_command", "shell", "shell_command"})
_T = TypeVar("_T")
_EXIT_CODE = re.compile(r"^(?:Process exited with code|Exit code:) (-?\d+)$", re.MULTILINE)


class CodexBackend:
    """A Codex thread in a `codex app-server` process of its own."""

    agent = "codex"
    runs_hooks = False

    def __init__(self) -> None:
        self._agent = AgentProcess("codex")
        self._thread_id: str | None = None
        self._turn_id: str | None = None
        self._client = Client()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._approvals: dict[str, tuple[str | int, str, str]] = {}  # str(id) → id, allow, deny
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None
        self._items: dict[str, dict[str, Any]] = {}  # tool items started, by id
        self._announced: set[str] = set()  # ids of the turn's tool calls given as tool_call
        self._shell_calls: dict[str, dict[str, Any]] = {}  # the turn's raw shell calls, by call id
        self._cwd = ""
        self._outputs: dict[str, list[str]] = {}  # output deltas of commands running, by item id
        self._usage: dict[str, Any] = {}  # the running turn's token usage
        self._responses: set[asyncio.Task[None]] = set()  # answers being sent to the server

    # -- the Backend calls -----------------------------------------------------------------------

    async def start(self, config: BackendConfig) -> str | None:
        """Spawn `codex app-server`, initialize it, and start, resume or fork the thread.

        Raises:
            BackendError: the program is missing, ended at once, or refused the thread.
            InvalidInput: a permission mode Codex has no approval policy for.
        """
        policy, default_sandbox = _permission_mode(config.permission_mode)
        self._cwd = config.cwd
        env = dict(config.env) if config.env is not None else dict(os.environ)
        program = str(config.options.get("program") or "codex")
        await self._agent.start([program, "app-server"], config.cwd, env,
                                config.options.get("stderr_path"))
        self._reader = asyncio.create_task(self._read_stdout())
        params: dict[str, Any] = {"cwd": config.cwd, "approvalPolicy": policy}
        if config.model:
            params["model"] = config.model
        sandbox = config.options.get("sandbox") or default_sandbox
        if sandbox:
            params["sandbox"] = sandbox
        try:
            thread_id = await self._run(open_thread(params, thread_id=config.native_id,
                                                    fork=config.fork))
        except BaseException:
            await self.close()
            raise
        self._thread_id = thread_id
        return thread_id

    async def submit(self, text: str) -> None:
        """Start a turn with `text` as the user's input.

        Raises:
            BackendError: the app-server refused the turn or is gone.
        """
        self._usage = {}
        result = await self._request("turn/start", {
            "threadId": self._thread_id, "input": [{"type": "text", "text": text}]})
        turn = result.get("turn") if isinstance(result, dict) else None
        if isinstance(turn, dict) and isinstance(turn.get("id"), str):
            self._turn_id = turn["id"]

    async def interrupt(self) -> None:
        """Ask the app-server to stop the running turn; it completes as interrupted.

        Raises:
            BackendError: the app-server is gone.
        """
        if self._turn_id is None:
            return
        try:
            await self._request("turn/interrupt",
                                {"threadId": self._thread_id, "turnId": self._turn_id})
        except _Refused:
            pass  # the turn ended meanwhile: there is nothing left to stop

    async def answer(self, request: str | int, allow: bool) -> None:
        """Respond to the approval request `request` with the schema's accept or decline.

        An unknown or already answered request gets an `error` event, not an exception.

        Raises:
            BackendError: the app-server is gone.
        """
        pending = self._approvals.pop(str(request), None)
        if pending is None:
            self._queue.put_nowait(BackendEvent(wire.ERROR, {
                "message": f"codex: no approval request {request!r} is waiting", "fatal": False}))
            return
        native_id, accept, decline = pending
        await self._send(Client.respond(native_id, {"decision": accept if allow else decline}))

    async def events(self) -> AsyncIterator[BackendEvent]:
        """The events of the thread, in order, until the app-server's stdout closes."""
        while True:
            event = await self._queue.get()
            if event is None:
                self._queue.put_nowait(None)  # for any later reader too
                return
            yield event

    async def close(self) -> None:
        """Close the app-server's stdin, wait a while for it to end, then end its process group
        (runtime/backends/stdio.py)."""
        await self._agent.close(self._reader)

    # -- JSON-RPC --------------------------------------------------------------------------------

    async def _run(self, dialogue: Dialogue[_T]) -> _T:
        """Send `dialogue`'s steps in turn, each request's result sent back into it; what it
        gives."""
        result: Any = None
        while True:
            try:
                step = dialogue.send(result)
            except StopIteration as end:
                value: _T = end.value
                return value
            if step.notification:
                await self._send(Client.notify(step.method))
                result = None
            else:
                result = await self._request(step.method, step.params)

    async def _send(self, line: bytes) -> None:
        if not await self._agent.write(line):
            raise await self._ended()

    async def _request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        """The result of the answer to the request `method`.

        Raises:
            _Refused: the app-server answered with an error. BackendError: it is gone, or
                gave no answer within REQUEST_TIMEOUT.
        """
        request_id, line = self._client.request(method, params)
        answer: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = answer
        try:
            await self._send(line)
            return await asyncio.wait_for(answer, REQUEST_TIMEOUT)
        except asyncio.TimeoutError:
            raise BackendError(f"codex: no answer to {method} in {REQUEST_TIMEOUT:.0f}s") from None
        finally:
            self._pending.pop(request_id, None)
            self._client.forget(request_id)

    async def _read_stdout(self) -> None:
        try:
            while True:
                line, too_long = await self._agent.read()
                if too_long:
                    self._queue.put_nowait(BackendEvent(wire.ERROR, {
                        "message": f"codex: a line over {MAX_LINE} bytes skipped", "fatal": False}))
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
            self._queue.put_nowait(None)

    async def _ended(self) -> BackendError:
        """The error saying that the app-server has ended: its exit code and last stderr line."""
        code, _ = await self._agent.ended()
        return ended(code, self._agent.stderr_tail)

    def _take(self, line: bytes) -> None:
        """Route one line (Client.read): an answer to its request, anything else to the
        events."""
        message = self._client.read(line)
        if isinstance(message, Answer):
            self._resolve(message)
        elif isinstance(message, ServerRequest):
            self._server_request(message)
        elif isinstance(message, Notification):
            self._notification(message.method, message.params, message.message)
        elif isinstance(message, Other):
            self._emit(wire.NATIVE, raw=message.raw)

    def _resolve(self, message: Answer) -> None:
        answer = self._pending.get(message.id)
        if answer is None or answer.done():
            self._emit(wire.NATIVE, raw=message.message)
        elif message.error is not None:
            answer.set_exception(_Refused(f"codex: {message.method} refused: {message.error}"))
        else:
            answer.set_result(message.result)

    def _server_request(self, request: ServerRequest) -> None:
        approval = _APPROVALS.get(request.method)
        if approval is None:
            # Nothing cos can answer (user input forms, auth refresh…): refuse rather than let
            # the turn wait forever, and let UIs see it.
            self._emit(wire.NATIVE, raw=request.message)
            self._respond_later(Client.refuse(request))
            return
        tool, accept, decline = approval
        self._approvals[str(request.id)] = (request.id, accept, decline)
        call_id = request.params.get("itemId") or request.params.get("callId")
        self._emit(wire.APPROVAL_REQUEST, request=request.id, tool=tool,
                   input=_approval_input(request.params, self._items.get(str(call_id))),
                   call_id=call_id)

    def _respond_later(self, line: bytes) -> None:
        async def respond() -> None:
            try:
                await self._send(line)
            except BackendError:
                pass  # the app-server is gone; events() is ending anyway
        task = asyncio.get_running_loop().create_task(respond())
        self._responses.add(task)
        task.add_done_callback(self._responses.discard)

    def _notification(self, method: str, params: object, message: dict[str, Any]) -> None:
        if not isinstance(params, dict) or params.get("threadId") not in (None, self._thread_id):
            self._emit(wire.NATIVE, raw=message)  # another thread's (a subagent's) doing
            return
        if method == "item/agentMessage/delta" and isinstance(params.get("delta"), str):
            self._emit(wire.AGENT_MESSAGE_DELTA, text=params["delta"])
        elif method == "item/commandExecution/outputDelta" and isinstance(params.get("delta"), str):
            self._keep_output(str(params.get("itemId")), params["delta"])
            self._emit(wire.NATIVE, raw=message)
        elif method == "item/started" and _item_type(params) in _TOOL_ITEMS:
            item = params["item"]
            self._items[str(item.get("id"))] = item
            self._announce(item)
        elif method == "item/completed" and _item_type(params) == "agentMessage":
            self._emit(wire.AGENT_MESSAGE, text=str(params["item"].get("text") or ""))
        elif method == "item/completed" and _item_type(params) in _TOOL_ITEMS:
            item = params["item"]
            item_id = str(item.get("id"))
            if self._items.pop(item_id, None) is None and item_id not in self._announced:
                self._announce(item)  # completed without having started
            output = "".join(self._outputs.pop(item_id, []))
            ok, result, extra = _tool_result(item, output)
            self._emit(wire.TOOL_RESULT, call_id=item.get("id"), ok=ok, output=result, **extra)
        elif method == "rawResponseItem/completed":
            self._raw_item(params.get("item"))  # the items say it all already, and at length
        elif method == "rawResponse/completed":
            pass  # asked for with the raw items; the token usage updates say the same
        elif method == "thread/tokenUsage/updated":
            self._add_usage(params.get("tokenUsage"))
            self._emit(wire.NATIVE, raw=message)
        elif method == "turn/started" and isinstance(params.get("turn"), dict):
            self._turn_id = params["turn"].get("id") or self._turn_id
            self._emit(wire.NATIVE, raw=message)
        elif method == "turn/completed":
            self._turn_completed(params.get("turn"), message)
        elif method == "error" and not params.get("willRetry"):
            error = params.get("error")
            text = error.get("message") if isinstance(error, dict) else error
            self._emit(wire.ERROR, message=f"codex: {text}", fatal=False)
        else:
            self._emit(wire.NATIVE, raw=message)

    def _turn_completed(self, turn: object, message: dict[str, Any]) -> None:
        if not isinstance(turn, dict):
            self._emit(wire.NATIVE, raw=message)
            return
        if turn.get("id") == self._turn_id:
            self._turn_id = None
        self._announced.clear()
        self._shell_calls.clear()
        status = turn.get("status")
        if status == "interrupted":
            self._emit(wire.TURN_ABORTED, reason=wire.ABORT_INTERRUPTED)
            return
        if status == "failed":
            error = turn.get("error")
            text = error.get("message") if isinstance(error, dict) else None
            self._emit(wire.ERROR, message=f"codex: the turn failed: {text or 'no reason given'}",
                       fatal=False)
        self._emit(wire.TASK_COMPLETE, usage=self._usage, status=status)
        self._usage = {}

    def _announce(self, item: dict[str, Any]) -> None:
        self._announced.add(str(item.get("id")))
        self._emit(wire.TOOL_CALL, call_id=item.get("id"), tool=_tool_name(item),
                   input=_tool_input(item))

    def _raw_item(self, item: object) -> None:
        """Report a shell call that got its output without any item of Codex's.

        Codex 0.169 sends no `item/started` or `item/completed` for a command its sandbox
        refused (a write under a read-only sandbox, with no approval to ask for): the model's
        `function_call` and its `function_call_output` are all there is of it.
        """
        if not isinstance(item, dict) or not isinstance(item.get("call_id"), str):
            return
        call_id = item["call_id"]
        if item.get("type") == "function_call" and item.get("name") in _SHELL_TOOLS:
            self._shell_calls[call_id] = item
            return
        call = self._shell_calls.pop(call_id, None)
        if item.get("type") != "function_call_output" or call is None \
                or call_id in self._announced:
            return
        self._announced.add(call_id)
        self._emit(wire.TOOL_CALL, call_id=call_id, tool="commandExecution",
                   input=_shell_input(call, self._cwd))
        output = item.get("output")
        text = output if isinstance(output, str) else json.dumps(output)
        found = _EXIT_CODE.search(text)
        code = int(found.group(1)) if found else None
        _, marker, rest = text.partition("\nOutput:\n")
        self._emit(wire.TOOL_RESULT, call_id=call_id, ok=code == 0,
                   output=rest if marker else text, exit_code=code,
                   status="completed" if code == 0 else "failed")

    def _add_usage(self, usage: object) -> None:
        """Sum the turn's model calls (`last` of each update) in cos's usage names."""
        if not isinstance(usage, dict) or not isinstance(usage.get("last"), dict):
            return
        last = usage["last"]
        for ours, theirs in (("input", "inputTokens"), ("output", "outputTokens"),
                             ("cached_input", "cachedInputTokens"),
                             ("reasoning_output", "reasoningOutputTokens")):
            if isinstance(last.get(theirs), int):
                self._usage[ours] = self._usage.get(ours, 0) + last[theirs]

    def _keep_output(self, item_id: str, delta: str) -> None:
        parts = self._outputs.setdefault(item_id, [])
        if sum(len(part) for part in parts) < OUTPUT_LIMIT:
            parts.append(delta)

    def _emit(self, event_type: wire.BackendEventType, **fields: object) -> None:
        self._queue.put_nowait(BackendEvent(event_type, fields))


class _Refused(BackendError):
    """The app-server answered a request of ours with a JSON-RPC error."""


def _permission_mode(permission_mode: str | None) -> tuple[str, str | None]:
    """Codex's approval policy and sandbox (None: its default) for a permission mode."""
    if permission_mode is None:
        return PERMISSION_MODES["default"]
    mode = PERMISSION_MODES.get(permission_mode)
    if mode is None:
        raise InvalidInput(f"codex: no approval policy for permission mode {permission_mode!r}: "
                           f"expected one of {', '.join(PERMISSION_MODES)}")
    return mode


def _shell_input(call: dict[str, Any], cwd: str) -> dict[str, object]:
    """A raw shell call's command and working directory, as a command item gives them."""
    try:
        arguments = jsonwire.loads(str(call.get("arguments") or "{}"))
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return {"command": call.get("arguments"), "cwd": cwd}
    command = arguments.get("cmd", arguments.get("command"))
    return {"command": command, "cwd": arguments.get("workdir") or cwd}


def _item_type(params: dict[str, Any]) -> object:
    item = params.get("item")
    return item.get("type") if isinstance(item, dict) else None


def _tool_name(item: dict[str, Any]) -> str:
    """The item's tool: its own name where it has one (MCP, dynamic, subagent), else its type."""
    tool = item.get("tool")
    if item.get("type") == "mcpToolCall" and item.get("server"):
        return f"mcp:{item['server']}/{tool}"
    return str(tool) if isinstance(tool, str) and tool else str(item.get("type"))


def _tool_input(item: dict[str, Any]) -> object:
    kind = item.get("type")
    if kind == "commandExecution":
        return {"command": item.get("command"), "cwd": item.get("cwd")}
    if kind == "fileChange":
        return {"changes": item.get("changes")}
    if kind in ("mcpToolCall", "dynamicToolCall"):
        return item.get("arguments")
    if kind == "collabAgentToolCall":
        return {"prompt": item.get("prompt"), "receiverThreadIds": item.get("receiverThreadIds")}
    if kind == "webSearch":
        return {"query": item.get("query")}
    return {key: value for key, value in item.items() if key not in ("id", "type", "status")}


def _tool_result(item: dict[str, Any], output: str) -> tuple[bool, object, dict[str, object]]:
    """Whether the tool succeeded, its output, and extra fields (a command's exit code)."""
    kind = item.get("type")
    status = item.get("status")
    if kind == "commandExecution":
        code = item.get("exitCode")
        text = item.get("aggregatedOutput")
        ok = status == "completed" and code in (None, 0)
        return ok, text if isinstance(text, str) else output, {"exit_code": code, "status": status}
    if kind == "mcpToolCall":
        return status == "completed" and not item.get("error"), \
            item.get("result") if item.get("result") is not None else item.get("error"), {}
    if kind == "dynamicToolCall":
        return bool(item.get("success")), item.get("contentItems"), {}
    ok = status in (None, "completed")
    return ok, {key: value for key, value in item.items() if key not in ("id", "type")}, \
        {"status": status}


def _approval_input(params: dict[str, Any], item: dict[str, Any] | None) -> dict[str, object]:
    """What the approval is about: the command and where it runs, or the changes to files."""
    shown: dict[str, object] = {}
    for key in ("command", "cwd", "reason", "grantRoot"):
        if params.get(key) is not None:
            shown[key] = params[key]
    if params.get("fileChanges") is not None:
        shown["changes"] = params["fileChanges"]
    elif item is not None and item.get("type") == "fileChange":
        shown["changes"] = item.get("changes")
    return shown
