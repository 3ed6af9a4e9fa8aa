"""The `claude` backend (DESIGN.md §6): the real Claude Code, one long-lived process per session,
driven over stream-json on its stdin and stdout.

The command line is `claude -p --input-format stream-json --output-format stream-json --verbose
--permission-prompt-tool stdio` and `--session-id <uuid>` (a new session), `--resume <id>` (a
resumed one) or `--resume <id> --fork-session --session-id <uuid>` (a fork), so the native id is
known before the agent says anything. The host speaks first with an `initialize` control
request; then each user input is a `user` line, `interrupt` is a control request, and each tool
permission comes back as a `can_use_tool` control request that `answer` replies to. What the
agent prints is turned into the events of §7 (`events()`); docs/runtime.md has the mapping.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import signal
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import IO, Any

from coding_os.errors import BackendError, InvalidInput
from coding_os.runtime import children, wire
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.lines import read_line

__all__ = ["ClaudeBackend", "LINE_LIMIT"]

LINE_LIMIT = 16 * 1024 * 1024
"""The longest stdout line read (bytes); a longer one is skipped and reported as an `error`."""

START_TIMEOUT = 30.0  # seconds for the answer to `initialize` (options["start_timeout"])
CLOSE_TIMEOUT = 5.0  # seconds for the process to end once its stdin is closed
KILL_TIMEOUT = 3.0  # seconds after SIGTERM before SIGKILL
STDERR_LINES = 20  # last stderr lines kept for error messages

DENY_MESSAGE = "The user denied this tool use."


class ClaudeBackend:
    """Claude Code in stream-json mode (the Backend protocol of runtime/backend.py).

    Options read from `BackendConfig.options`: `program` (default `claude` on the PATH of the
    agent's environment), `stderr_path` (append the agent's stderr there; by default it is
    drained and its last lines kept for error messages), `start_timeout` (seconds) and
    `engine_checkpoints` (true where cos's hooks are not installed: then it runs no cos hooks, and
    the engine takes the checkpoints, as for Codex).
    """

    agent = "claude"
    runs_hooks = True

    def __init__(self) -> None:
        self.native_id: str | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._early: list[bytes] = []  # lines read by start() before the initialize answer
        self._approvals: dict[str, Mapping[str, Any]] = {}  # open can_use_tool requests
        self._turn_running = False
        self._interrupting = False
        self._closing = False
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._stderr_task: asyncio.Task[None] | None = None
        self._stderr_file: IO[bytes] | None = None

    # -- the Backend protocol -----------------------------------------------------------------

    async def start(self, config: BackendConfig) -> str | None:
        """Start (or resume, or fork) the Claude Code session; its native id.

        Raises:
            BackendError: the program is missing, ended at once, or did not answer `initialize`.
        """
        if self._process is not None:
            raise BackendError("the claude backend is already started")
        env = dict(config.env) if config.env is not None else dict(os.environ)
        program = str(config.options.get("program") or "claude")
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise BackendError(f"claude: program {program!r} not found on PATH "
                               "(install Claude Code, or name it with the 'program' option)")
        native_id = config.new_native_id or str(uuid.uuid4())
        argv = [found, "-p", "--input-format", "stream-json", "--output-format", "stream-json",
                "--verbose", "--permission-prompt-tool", "stdio"]
        if config.native_id is None:
            argv += ["--session-id", native_id]
        elif config.fork:
            argv += ["--resume", config.native_id, "--fork-session", "--session-id", native_id]
        else:
            native_id = config.native_id
            argv += ["--resume", native_id]
        resume_at = config.options.get("resume_at")
        if config.native_id is not None and isinstance(resume_at, str) and resume_at:
            argv += ["--resume-session-at", resume_at]  # a rewound conversation goes on there
        if config.model:
            argv += ["--model", config.model]
        if config.permission_mode:
            argv += ["--permission-mode", config.permission_mode]
        settings = config.options.get("settings")
        if isinstance(settings, str) and settings:
            argv += ["--settings", settings]  # more settings: a job's worktree gets cos's hooks
        self.native_id = native_id
        self.runs_hooks = config.options.get("engine_checkpoints") is not True
        try:
            await self._spawn(argv, config, env)
            await self._initialize(_timeout_option(config.options, "start_timeout",
                                                   START_TIMEOUT))
        except BaseException:  # also a caller's timeout (cancellation): no process is left
            await self._abort()
            raise
        return native_id

    async def submit(self, text: str) -> None:
        """Write `text` as the next user message; Claude Code starts a turn.

        Raises:
            BackendError: the process has ended.
        """
        self._turn_running = True
        self._interrupting = False
        await self._send({"type": "user", "message": {"role": "user", "content": text}})

    async def interrupt(self) -> None:
        """Ask Claude Code to stop the running turn (it then ends with `turn_aborted`).

        Raises:
            BackendError: the process has ended.
        """
        if self._turn_running:
            self._interrupting = True
        await self._send(_control_request({"subtype": "interrupt"}))

    async def answer(self, request: str | int, allow: bool) -> None:
        """Answer the `can_use_tool` request `request`: allow (with its input) or deny.

        Raises:
            InvalidInput: no open approval request of that name.
            BackendError: the process has ended.
        """
        tool_input = self._approvals.pop(str(request), None)
        if tool_input is None:
            raise InvalidInput(f"no open approval request {request!r}")
        decision: dict[str, Any] = (
            {"behavior": "allow", "updatedInput": dict(tool_input)} if allow
            else {"behavior": "deny", "message": DENY_MESSAGE})
        await self._send({"type": "control_response",
                          "response": {"subtype": "success", "request_id": str(request),
                                       "response": decision}})

    async def events(self) -> AsyncIterator[BackendEvent]:
        """What Claude Code does, as §7 events, until its stdout closes."""
        process = self._require_process()
        assert process.stdout is not None
        while self._early:
            for event in self._events_of_line(self._early.pop(0)):
                yield event
        while True:
            line, skipped = await read_line(process.stdout)
            if skipped:
                yield BackendEvent(wire.ERROR, {
                    "message": f"claude wrote a line of over {LINE_LIMIT} bytes; it was skipped",
                    "fatal": False})
                continue
            if line is None:
                break
            for event in self._events_of_line(line):
                yield event
        if not self._closing:
            code = await _wait(process, CLOSE_TIMEOUT)
            yield BackendEvent(wire.ERROR, {"message": self._ended_message(code), "fatal": True})

    async def close(self) -> None:
        """Close Claude Code's stdin, wait (bounded) for it to end, then end its process group."""
        process = self._process
        self._closing = True
        if process is not None:
            await self._end(process)
        if self._stderr_file is not None:
            self._stderr_file.close()
            self._stderr_file = None

    async def _end(self, process: asyncio.subprocess.Process) -> None:
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        if await _wait(process, CLOSE_TIMEOUT) is None:
            _signal_group(process, signal.SIGTERM)
            if await _wait(process, KILL_TIMEOUT) is None:
                _signal_group(process, signal.SIGKILL)
                await process.wait()
        _signal_group(process, signal.SIGTERM)  # a tool's process the agent left behind
        if self._stderr_task is not None:
            try:  # wait_for cancels the drain when a grandchild still holds the pipe
                await asyncio.wait_for(self._stderr_task, KILL_TIMEOUT)
            except asyncio.TimeoutError:
                pass

    # -- starting ------------------------------------------------------------------------------

    async def _spawn(self, argv: list[str], config: BackendConfig, env: dict[str, str]) -> None:
        stderr_path = config.options.get("stderr_path")
        stderr: IO[bytes] | int = asyncio.subprocess.PIPE
        if stderr_path:
            self._stderr_file = open(str(stderr_path), "ab")  # noqa: SIM115 - closed in close()
            stderr = self._stderr_file
        try:
            self._process = await asyncio.create_subprocess_exec(
                *argv, cwd=config.cwd, env=env, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, limit=LINE_LIMIT,
                **children.options())  # the npm shim starts the native client in its group
        except OSError as error:
            raise BackendError(f"claude: cannot start {argv[0]}: {error.strerror or error}") \
                from error
        if self._process.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain_stderr(self._process.stderr))

    async def _initialize(self, timeout: float) -> None:
        """Send `initialize` and read stdout until its answer, keeping other lines for events()."""
        process = self._require_process()
        assert process.stdout is not None
        request = _control_request({"subtype": "initialize"})
        try:
            try:
                await self._send(request)
            except BackendError:  # it ended before it read anything: say how
                raise BackendError(await self._ended_at_once(process)) from None
            async with asyncio.timeout(timeout):
                while True:
                    line, skipped = await read_line(process.stdout)
                    if skipped:
                        continue
                    if line is None:
                        raise BackendError(await self._ended_at_once(process))
                    message = _json_object(line)
                    response = (message or {}).get("response")
                    if (message is not None and message.get("type") == "control_response"
                            and isinstance(response, dict)
                            and response.get("request_id") == request["request_id"]):
                        if response.get("subtype") != "success":
                            raise BackendError(f"claude refused to initialize: "
                                               f"{response.get('error') or response}")
                        return
                    self._early.append(line)
        except TimeoutError:
            raise BackendError(f"claude did not answer initialize within {timeout:g}s") from None

    async def _ended_at_once(self, process: asyncio.subprocess.Process) -> str:
        """How a process that ended during its start ended: its exit code and its last words
        (stderr read to its end first)."""
        code = await _wait(process, CLOSE_TIMEOUT)
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=CLOSE_TIMEOUT)
        return self._ended_message(code, at_once=True)

    async def _abort(self) -> None:
        """End a start that failed or was cancelled: kill the process group, release the rest."""
        self._closing = True
        process = self._process
        if process is not None and process.returncode is None:
            _signal_group(process, signal.SIGKILL)
        await asyncio.shield(self.close())

    async def _drain_stderr(self, stderr: asyncio.StreamReader) -> None:
        while True:
            line, skipped = await read_line(stderr)
            if skipped:
                continue
            if line is None:
                return
            text = line.decode("utf-8", "replace").strip()
            if text:
                self._stderr_tail.append(text)

    # -- the wire ------------------------------------------------------------------------------

    def _require_process(self) -> asyncio.subprocess.Process:
        if self._process is None:
            raise BackendError("the claude backend is not started")
        return self._process

    async def _send(self, message: Mapping[str, Any]) -> None:
        process = self._require_process()
        assert process.stdin is not None
        if process.stdin.is_closing():
            raise BackendError("claude's input is closed")
        process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
        try:
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError) as error:
            raise BackendError(f"claude has ended: {error}") from error

    def _ended_message(self, code: int | None, at_once: bool = False) -> str:
        how = "exited at once" if at_once else "ended"
        status = f" (exit code {code})" if code is not None else ""
        last = f": {self._stderr_tail[-1]}" if self._stderr_tail else ""
        return f"claude {how}{status}{last}"

    # -- normalising what Claude Code prints --------------------------------------------------

    def _events_of_line(self, line: bytes) -> list[BackendEvent]:
        message = _json_object(line)
        if message is None:
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            return [BackendEvent(wire.NATIVE, {"raw": text})] if text.strip() else []
        kind = message.get("type")
        if kind == "system" and message.get("subtype") == "init":
            session_id = message.get("session_id")
            if isinstance(session_id, str) and session_id:
                self.native_id = session_id
        elif kind == "assistant":
            events = _assistant_events(message)
            if events:
                return events
        elif kind == "user":
            events = _tool_results(message)
            if events:
                return events
        elif kind == "result":
            return self._turn_end(message)
        elif kind == "control_request":
            approval = self._approval_request(message)
            if approval is not None:
                return [approval]
        return [BackendEvent(wire.NATIVE, {"raw": message})]

    def _approval_request(self, message: Mapping[str, Any]) -> BackendEvent | None:
        request = message.get("request")
        request_id = message.get("request_id")
        if not (isinstance(request, dict) and request.get("subtype") == "can_use_tool"
                and isinstance(request_id, str)):
            return None
        tool_input = request.get("input")
        tool_input = tool_input if isinstance(tool_input, dict) else {}
        self._approvals[request_id] = tool_input
        return BackendEvent(wire.APPROVAL_REQUEST, {"request": request_id,
                                                    "tool": str(request.get("tool_name", "")),
                                                    "input": tool_input})

    def _turn_end(self, result: Mapping[str, Any]) -> list[BackendEvent]:
        interrupted = self._interrupting and result.get("subtype") != "success"
        self._turn_running = False
        self._interrupting = False
        self._approvals.clear()  # a request left open belongs to the turn that ended
        if interrupted:
            return [BackendEvent(wire.TURN_ABORTED, {"reason": wire.ABORT_INTERRUPTED})]
        events: list[BackendEvent] = []
        if result.get("is_error") or result.get("subtype") != "success":
            detail = result.get("result") or result.get("errors") or result.get("subtype")
            events.append(BackendEvent(wire.ERROR, {"message": f"claude: {detail}",
                                                    "fatal": False}))
        events.append(BackendEvent(wire.TASK_COMPLETE, {"usage": _usage(result)}))
        return events


# -- helpers ---------------------------------------------------------------------------------


def _control_request(request: dict[str, Any]) -> dict[str, Any]:
    return {"type": "control_request", "request_id": f"cos-{uuid.uuid4().hex[:16]}",
            "request": request}


def _timeout_option(options: Mapping[str, object], name: str, default: float) -> float:
    value = options.get(name)
    return float(value) if isinstance(value, (int, float)) and value > 0 else default


def _json_object(line: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


async def _wait(process: asyncio.subprocess.Process, timeout: float) -> int | None:
    """The exit code, or None when the process is still running after `timeout` seconds."""
    try:
        return await asyncio.wait_for(process.wait(), timeout)
    except asyncio.TimeoutError:
        return None


def _signal_group(process: asyncio.subprocess.Process, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _assistant_events(message: Mapping[str, Any]) -> list[BackendEvent]:
    """`agent_message` per text block and `tool_call` per tool_use block, in order."""
    events = []
    for block in _content_blocks(message):
        if block.get("type") == "text" and block.get("text"):
            events.append(BackendEvent(wire.AGENT_MESSAGE, {"text": str(block["text"])}))
        elif block.get("type") == "tool_use":
            events.append(BackendEvent(wire.TOOL_CALL, {"call_id": str(block.get("id", "")),
                                                        "tool": str(block.get("name", "")),
                                                        "input": block.get("input", {})}))
    return events


def _tool_results(message: Mapping[str, Any]) -> list[BackendEvent]:
    return [BackendEvent(wire.TOOL_RESULT, {"call_id": str(block.get("tool_use_id", "")),
                                            "ok": not block.get("is_error", False),
                                            "output": _output(block.get("content"))})
            for block in _content_blocks(message) if block.get("type") == "tool_result"]


def _content_blocks(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    inner = message.get("message")
    content = inner.get("content") if isinstance(inner, dict) else None
    if not isinstance(content, list):
        return []
    return [block for block in content if isinstance(block, dict)]


def _output(content: Any) -> Any:
    """A tool's output: its text when it is text blocks only, else as Claude Code gave it."""
    if isinstance(content, list) and content and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content):
        return "\n".join(str(part.get("text", "")) for part in content)
    return content if content is not None else ""


def _usage(result: Mapping[str, Any]) -> dict[str, Any]:
    """The turn's token counts and cost from a `result` message, named as the codex backend
    names its own (`input` counts what was not read from the cache, as Claude reports it)."""
    usage = result.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    names = {"input_tokens": "input", "output_tokens": "output",
             "cache_read_input_tokens": "cached_input",
             "cache_creation_input_tokens": "cache_creation_input"}
    picked: dict[str, Any] = {name: usage[key] for key, name in names.items()
                              if isinstance(usage.get(key), int)}
    cost = result.get("total_cost_usd")
    if isinstance(cost, (int, float)):
        picked["cost_usd"] = cost
    return picked
