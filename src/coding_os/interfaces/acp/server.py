"""The ACP agent `cos acp` serves on stdio (DESIGN.md §12.1).

JSON-RPC 2.0 runs on the ACP SDK's `Connection` (requests, notifications, the agent's own
requests to the client) over `StdioTransport`, which bounds a line and answers what is not a
JSON-RPC message (-32700, -32600) itself. A session is a background job (§6) served by its
runner, not by this process: `session/new` starts one, and this process relays its events (the
runner's socket, §7) as `session/update` notifications, each with its seq in `_meta`; the
session outlives the editor, and `session/resume` with `_meta {"cos/since": N}` picks its
events up after N. stdout carries JSON-RPC only; diagnostics go to stderr.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from acp import RequestError
from acp.connection import Connection
from pydantic import BaseModel, ValidationError

from coding_os import __version__
from coding_os.errors import CosError, NotFound
from coding_os.interfaces.acp import mapping
from coding_os.runtime import wire
from coding_os.runtime.lines import read_line

__all__ = ["LINE_MAX", "StdioTransport", "AcpAgent", "serve_stdio", "APPROVAL_MODES",
           "SESSION_NOT_FOUND"]

LINE_MAX = 1 << 20  # a longer request line is refused whole
EVENT_LINE_MAX = 64 << 20  # what a runner sends (a tool's output may be large)
RUNNER_END_S = 30.0  # for an exec job's runner to end after its task
SESSION_NOT_FOUND = -32002  # ACP's "resource not found"
# The approval option's values → the permission mode the job's agent starts with.
APPROVAL_MODES = {"ask": None, "accept-edits": "acceptEdits", "allow-all": "bypassPermissions"}
_APPROVAL_NAMES = {"ask": "Ask", "accept-edits": "Accept edits", "allow-all": "Allow all"}
_AGENTS = ("claude", "codex", "exec")
_EDIT_KINDS = ("edit", "delete", "move")


def _error(code: int, message: str, data: Any = None) -> RequestError:
    return RequestError(code, message, data)


def _invalid(field_name: str, problem: str) -> RequestError:
    return _error(-32602, f"Invalid params: {field_name}: {problem}", {"field": field_name})


class StdioTransport:
    """ACP messages on a byte stream, one JSON object a line: a line over `LINE_MAX` is
    refused whole (-32600), a line that is not JSON gets -32700, a JSON value that is no
    JSON-RPC message -32600; none of them reaches the connection."""

    def __init__(self, reader: asyncio.StreamReader, write: Callable[[bytes], None]) -> None:
        self._reader = reader
        self._write = write

    async def send(self, message: dict[str, Any]) -> None:
        """Write `message` as one line at once (no await before the write: a response is on
        the wire before any notification a handler scheduled)."""
        self._write(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode(
            "utf-8", "surrogatepass") + b"\n")

    def _refuse(self, code: int, message: str, request_id: object = None) -> None:
        self._write(json.dumps({"jsonrpc": "2.0", "id": request_id,
                                "error": {"code": code, "message": message}}).encode() + b"\n")

    async def receive(self) -> dict[str, Any] | None:
        """The next JSON-RPC message; None at the end of input."""
        while True:
            line, too_long = await read_line(self._reader)
            if too_long:
                self._refuse(-32600, f"Invalid request: the line is longer than {LINE_MAX} "
                                     "bytes; it was refused whole")
                continue
            if line is None:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except (ValueError, UnicodeDecodeError) as exc:
                self._refuse(-32700, f"Parse error: {exc}")
                continue
            problem = _message_problem(message)
            if problem is not None:
                request_id = message.get("id") if isinstance(message, dict) else None
                self._refuse(-32600, f"Invalid request: {problem}",
                             request_id if isinstance(request_id, (str, int)) else None)
                continue
            return message  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Nothing to release: stdout stays the process's."""


def _message_problem(message: object) -> str | None:
    if not isinstance(message, dict):
        return "a message is a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "id" in message and not (message["id"] is None or isinstance(message["id"], (str, int))
                                ) or isinstance(message.get("id"), bool):
        return "id must be a string, a number or null"
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            return "method must be a non-empty string"
        if "params" in message and not isinstance(message["params"], (dict, list)):
            return "params must be an object or an array"
        return None
    if "id" not in message or not ("result" in message or "error" in message):
        return "no method, and no response (id with result or error)"
    return None


def _params(model: type[BaseModel], params: object) -> Any:
    """`params` checked against the ACP schema's `model`.

    Raises:
        RequestError: -32602 naming the first field at fault.
    """
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _invalid("params", "must be an object")
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first.get("loc", ())) or "params"
        raise _invalid(where, str(first.get("msg"))) from None


def _plain_prompt(params: object) -> tuple[str, list[dict[str, Any]]] | None:
    """The session id and the blocks of a `session/prompt` of text blocks only (the common
    one), which the schema takes as they are: they skip its pass, the most of the prompt's own
    time in this process on its way to the session's runner. None for any other."""
    if not isinstance(params, dict) or params.keys() != {"sessionId", "prompt"}:
        return None
    session_id, blocks = params["sessionId"], params["prompt"]
    if not isinstance(session_id, str) or not isinstance(blocks, list) or not blocks:
        return None
    for block in blocks:
        if not (isinstance(block, dict) and block.keys() == {"type", "text"}
                and block["type"] == "text" and isinstance(block["text"], str)):
            return None
    return session_id, blocks


def _config_options(agent: str, approval: str) -> list[dict[str, Any]]:
    return [
        {"id": "agent", "name": "Agent", "type": "select", "currentValue": agent,
         "options": [{"value": name, "name": name} for name in
                     (_AGENTS if agent in _AGENTS else (*_AGENTS, agent))]},
        {"id": "approval", "name": "Approval", "type": "select", "currentValue": approval,
         "options": [{"value": value, "name": _APPROVAL_NAMES[value]}
                     for value in APPROVAL_MODES]},
    ]


@dataclass
class Attached:
    """A session this process relays: its job, the runner's connection, what it relayed."""

    session_id: str
    job_id: str
    cwd: str
    agent: str
    approval: str
    relayed: int = 0  # the last seq sent as an update (or skipped as sent before)
    replay_end: int = 0  # the stored seq a resume's replay reaches
    open_requests: set[str] = field(default_factory=set)  # asked when replayed
    prompted: bool = False
    ending: bool = False  # its runner ends after the task that just ended (exec)
    updates: mapping.Updates = field(default_factory=mapping.Updates)
    writer: asyncio.StreamWriter | None = None
    relay: asyncio.Task[None] | None = None
    caught_up: asyncio.Event = field(default_factory=asyncio.Event)
    prompts: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    tasks: dict[str, str] = field(default_factory=dict)  # task id → submission
    always: set[str] = field(default_factory=set)  # tools allowed always
    asked: set[str] = field(default_factory=set)  # approval requests sent to the client


class AcpAgent:
    """The methods of §12.1 over background jobs; one per `cos acp` process."""

    def __init__(self, agent: str, cwd: str | None, env: Mapping[str, str]) -> None:
        self.agent = agent
        self.cwd = cwd
        self.env = dict(env)
        self.sessions: dict[str, Attached] = {}
        self.connection: Connection | None = None
        self._ids = itertools.count(1)
        self._background: set[asyncio.Task[Any]] = set()
        self._methods: dict[str, Callable[[Any], Awaitable[Any]]] = {
            "initialize": self.initialize, "session/new": self.new_session,
            "session/prompt": self.prompt, "session/resume": self.resume,
            "session/close": self.close_session, "session/list": self.list_sessions,
            "session/load": self.load_session,
            "session/set_config_option": self.set_config_option,
            "_cos/rewind": self.rewind,
        }

    # -- JSON-RPC --------------------------------------------------------------------------

    async def handle(self, method: str, params: Any, is_notification: bool) -> Any:
        """The connection's handler: one method call (a notification's result is dropped).

        Raises:
            RequestError: what the client gets as the error.
        """
        try:
            if method == "session/cancel":
                await self.cancel(params)
                return None
            handler = self._methods.get(method)
            if handler is None:
                if is_notification:
                    return None
                raise RequestError.method_not_found(method)
            return await handler(params)
        except RequestError:
            raise
        except NotFound as exc:
            raise _error(SESSION_NOT_FOUND, str(exc)) from None
        except CosError as exc:
            raise _error(-32603, str(exc)) from None
        except Exception as exc:  # never a traceback on the wire: one line on stderr
            sys.stderr.write(f"cos acp: {method}: {type(exc).__name__}: {exc}\n")
            raise RequestError.internal_error({"details": str(exc)}) from None

    def _spawn(self, coroutine: Awaitable[Any]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        assert self.connection is not None
        try:
            await self.connection.send_notification(
                "session/update", {"sessionId": session_id, "update": update})
        except ConnectionError:
            pass

    # -- the methods -----------------------------------------------------------------------

    async def initialize(self, params: Any) -> dict[str, Any]:
        """`initialize`: protocol 1, the capabilities of §12.1."""
        from acp.schema import InitializeRequest

        _params(InitializeRequest, params)
        return {"protocolVersion": 1,
                "agentInfo": {"name": "coding-os", "title": "coding-os", "version": __version__},
                "authMethods": [],
                "agentCapabilities": {
                    "loadSession": True,
                    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
                    "promptCapabilities": {"embeddedContext": True, "image": False,
                                           "audio": False}}}

    def _cwd(self, given: str, name: str = "cwd") -> str:
        if not os.path.isabs(given):
            raise _invalid(name, "must be an absolute path")
        if not os.path.isdir(given):
            raise _invalid(name, f"no directory {given}")
        return os.path.realpath(given)

    async def new_session(self, params: Any) -> dict[str, Any]:
        """`session/new`: a background job of the agent in `cwd`, waiting for its first
        prompt; the cos session id."""
        from acp.schema import NewSessionRequest

        request = _params(NewSessionRequest, params)
        cwd = self._cwd(request.cwd)
        meta = request.field_meta or {}
        agent = meta.get("cos/agent", self.agent)
        approval = meta.get("cos/approval", "ask")
        if not isinstance(agent, str) or not agent:
            raise _invalid("_meta.cos/agent", "must be an agent's name")
        if approval not in APPROVAL_MODES:
            raise _invalid("_meta.cos/approval", f"must be one of {', '.join(APPROVAL_MODES)}")
        attached = await self._start(agent, approval, cwd)
        self.sessions[attached.session_id] = attached
        self._spawn(self._commands_update(attached.session_id))
        return {"sessionId": attached.session_id,
                "configOptions": _config_options(agent, approval)}

    async def _start(self, agent: str, approval: str, cwd: str,
                     session_id: str | None = None, resume: str | None = None) -> Attached:
        from coding_os.jobs import control
        from coding_os.runtime.agents import settings_for

        try:
            settings = settings_for(agent, cwd)
        except CosError as exc:
            raise _invalid("agent", str(exc)) from None
        settings = replace(settings, permission_mode=APPROVAL_MODES[approval])
        if settings.agent == "claude" and not await asyncio.to_thread(_claude_hooks, cwd):
            # No `cos init` here: Claude Code runs no cos hook, so the engine takes the
            # checkpoints (before the prompt, and before each writing tool it allows).
            settings = replace(settings, options={**settings.options,
                                                  "engine_checkpoints": True})
        job = await asyncio.to_thread(control.start_job, settings, None, name="acp",
                                      isolation="none", waiting=True, resume_native=resume,
                                      env=self.env)
        attached = Attached(session_id="", job_id=job.id, cwd=cwd, agent=agent,
                            approval=approval)
        found = await self._connect(attached, 0)
        attached.session_id = session_id or str(found.get("cos_session") or "")
        if not found.get("cos_session"):
            raise _error(-32603, f"job {job.id} did not start: "
                                 f"{found.get('error') or found.get('state')}")
        return attached

    async def _connect(self, attached: Attached, since: int) -> dict[str, Any]:
        """Attach to the job's runner from seq `since` (it replays the events after it, then
        the live ones) and start relaying; the job's state. A runner that does not run: the
        stored events after `since` are relayed, and no live ones."""
        from coding_os.jobs import control

        job, connection, stored = await asyncio.to_thread(control.attach, attached.job_id,
                                                          since, self.env)
        attached.caught_up.clear()
        if connection is None:
            for event in stored:
                await self._relay_event(attached, event)
            attached.caught_up.set()
            return dict(job.state)
        reader, writer = await asyncio.open_unix_connection(sock=connection.sock,
                                                            limit=EVENT_LINE_MAX)
        attached.writer = writer
        if attached.relayed >= attached.replay_end:
            attached.caught_up.set()
        attached.relay = asyncio.ensure_future(self._relay(attached, reader))
        return dict(job.state)

    async def _relay(self, attached: Attached, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                line, too_long = await read_line(reader)
                if too_long:
                    sys.stderr.write(f"cos acp: an event of {attached.session_id} over "
                                     f"{EVENT_LINE_MAX} bytes was skipped\n")
                    continue
                if line is None:
                    break
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    await self._relay_event(attached, event)
        except (ConnectionError, OSError):
            pass
        finally:
            attached.writer = None
            attached.caught_up.set()
            for future in attached.prompts.values():
                if not future.done():
                    future.set_exception(_error(-32603, "the session's runner ended before "
                                                        "the task did"))

    async def _relay_event(self, attached: Attached, event: dict[str, Any]) -> None:
        msg = event.get("msg") if isinstance(event.get("msg"), dict) else {}
        assert isinstance(msg, dict)
        seq = event.get("seq")
        kind = msg.get("type")
        if not isinstance(seq, int):  # for this client only: a refused op of ours
            future = attached.prompts.get(str(event.get("id")))
            if kind == wire.ERROR and future is not None and not future.done():
                future.set_exception(_error(-32603, str(msg.get("message"))))
            return
        if seq <= attached.relayed:
            return  # sent before: never twice
        attached.relayed = seq
        for update in attached.updates.update(event):
            await self._notify(attached.session_id, update)
        if kind == wire.TASK_STARTED and isinstance(event.get("id"), str):
            attached.tasks[str(msg.get("task"))] = event["id"]
        elif kind == wire.APPROVAL_REQUEST:
            request = str(msg.get("request"))
            if seq > attached.replay_end or request in attached.open_requests:
                self._spawn(self._ask(attached, event))
        elif kind in wire.TASK_ENDS:
            # An exec job's runner ends with its task: the next prompt starts it again.
            attached.ending = attached.agent == "exec"
            submission = attached.tasks.pop(str(msg.get("task")), None)
            future = attached.prompts.get(submission) if submission else None
            if future is not None and not future.done():
                meta: dict[str, Any] = {mapping.SEQ: seq, "cos/task": msg.get("task")}
                if kind == wire.TASK_COMPLETE:
                    meta["cos/usage"] = msg.get("usage")
                else:
                    meta["cos/aborted"] = msg.get("reason")
                future.set_result({"stopReason": mapping.stop_reason(msg), "_meta": meta})
        if seq >= attached.replay_end:
            attached.caught_up.set()

    async def _send_op(self, attached: Attached, op: dict[str, Any],
                       submission: str | None = None) -> None:
        if attached.writer is None:
            raise _error(-32603, f"session {attached.session_id}: its runner does not run")
        attached.writer.write(json.dumps({"id": submission, "op": op}).encode() + b"\n")
        await attached.writer.drain()

    async def _ask(self, attached: Attached, event: dict[str, Any]) -> None:
        """Send the approval request to the client (unless the approval mode or an earlier
        allow always answers it) and its answer to the engine; the first answer wins."""
        msg = event["msg"]
        request = msg.get("request")
        if str(request) in attached.asked:
            return
        attached.asked.add(str(request))
        tool = str(msg.get("tool"))
        kind = mapping.tool_kind(tool)
        auto = attached.approval == "allow-all" or tool in attached.always or (
            attached.approval == "accept-edits" and kind in _EDIT_KINDS)
        decision: str | None = wire.ALLOW if auto else None
        if decision is None:
            assert self.connection is not None
            params = attached.updates.permission(attached.session_id, event)
            try:
                answer = await self.connection.send_request("session/request_permission",
                                                            params)
            except (RequestError, ConnectionError):
                return
            outcome = answer.get("outcome") if isinstance(answer, dict) else None
            decision = mapping.decision(outcome)
            if isinstance(outcome, dict) and outcome.get("optionId") == mapping.ALLOW_ALWAYS:
                attached.always.add(tool)
        if decision is None or attached.writer is None:
            return
        try:
            await self._send_op(attached, {"type": wire.APPROVAL, "request": request,
                                           "decision": decision})
        except (RequestError, ConnectionError, OSError):
            pass

    def _attached(self, session_id: str) -> Attached:
        attached = self.sessions.get(session_id)
        if attached is None:
            raise _error(SESSION_NOT_FOUND, f"session {session_id} not found",
                         {"sessionId": session_id})
        return attached

    async def prompt(self, params: Any) -> dict[str, Any]:
        """`session/prompt`: the prompt as the job's next input (a slash command as its
        answer); `{stopReason}` when the task ends, its usage in `_meta`."""
        plain = _plain_prompt(params)
        if plain is None:
            from acp.schema import PromptRequest

            request = _params(PromptRequest, params)
            session_id = request.session_id
            blocks = [block.model_dump(by_alias=True, exclude_none=True)
                      for block in request.prompt]
        else:
            session_id, blocks = plain
        attached = self._attached(session_id)
        text = mapping.prompt_text(blocks)
        if not text.strip():
            raise _invalid("prompt", "has no text")
        answer = await self._command(attached, text)
        if answer is not None:
            await self._notify(attached.session_id, {
                "sessionUpdate": "agent_message_chunk",
                "content": {"type": "text", "text": answer}})
            return {"stopReason": "end_turn"}
        if attached.ending and attached.relay is not None:
            await asyncio.wait({attached.relay}, timeout=RUNNER_END_S)
        if attached.writer is None:  # its runner ended (an exec job ends with its task)
            await self._respawn(attached)
        submission = f"acp-{os.getpid()}-{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        attached.prompts[submission] = future
        attached.prompted = True
        try:
            await self._send_op(attached, {"type": wire.USER_INPUT, "text": text}, submission)
            return await future
        finally:
            attached.prompts.pop(submission, None)

    async def _respawn(self, attached: Attached) -> None:
        from coding_os.jobs import control, jobs

        job = await asyncio.to_thread(jobs.resolve, attached.job_id, self.env)
        if not (job.state.get("pid") is not None and jobs.runner_alive(job)):
            await asyncio.to_thread(_until_runner_ended, job)
            await asyncio.to_thread(control.respawn, attached.job_id, env=self.env)
        attached.replay_end = attached.relayed
        attached.ending = False
        await self._connect(attached, attached.relayed)

    async def _command(self, attached: Attached, text: str) -> str | None:
        if not text.startswith("/"):
            return None
        try:
            commands = _helper("commands")
        except ImportError:
            return None
        result = await asyncio.to_thread(commands.run, attached.session_id, attached.cwd,
                                         text)
        return result if isinstance(result, str) else None

    async def _commands_update(self, session_id: str) -> None:
        try:
            commands = _helper("commands")
        except ImportError:
            return
        await self._notify(session_id, {"sessionUpdate": "available_commands_update",
                                        "availableCommands": commands.available()})

    async def cancel(self, params: Any) -> None:
        """`session/cancel`: interrupt the running task (its prompt ends `cancelled`)."""
        from acp.schema import CancelNotification

        try:
            request = _params(CancelNotification, params)
        except RequestError:
            return
        attached = self.sessions.get(request.session_id)
        if attached is not None and attached.writer is not None:
            try:
                await self._send_op(attached, {"type": wire.INTERRUPT},
                                    f"acp-{os.getpid()}-cancel")
            except (RequestError, OSError):
                pass

    async def resume(self, params: Any) -> dict[str, Any]:
        """`session/resume`: attach to the session's job; with `_meta {"cos/since": N}`, its
        updates after N first; the result (after that replay) says `cos/last_seq` and
        `cos/turn`, and a permission request still open is sent again."""
        from acp.schema import ResumeSessionRequest

        from coding_os.runtime.events import read_since

        request = _params(ResumeSessionRequest, params)
        cwd = self._cwd(request.cwd)
        meta = request.field_meta or {}
        row = await asyncio.to_thread(self._serving_job, request.session_id, cwd)
        if row is None:
            raise _error(SESSION_NOT_FOUND, f"session {request.session_id} not found (no job "
                                            "serves it)", {"sessionId": request.session_id})
        old = self.sessions.pop(request.session_id, None)
        if old is not None:
            await self._detach(old)
        from coding_os.jobs import jobs

        job = await asyncio.to_thread(jobs.resolve, str(row["id"]), self.env)
        path = job.state.get("events")
        stored = (await asyncio.to_thread(read_since, path, 0)).events \
            if isinstance(path, str) and os.path.exists(path) else []
        last = stored[-1]["seq"] if stored else 0
        since = meta.get("cos/since", last)
        if not isinstance(since, int) or isinstance(since, bool) or since < 0:
            raise _invalid("_meta.cos/since", "must be a seq, an integer of 0 or more")
        if since > last:
            raise _invalid("_meta.cos/since", f"{since} is beyond the session's last seq "
                                              f"{last}")
        attached = Attached(session_id=request.session_id, job_id=str(row["id"]), cwd=cwd,
                            agent=str(row.get("agent") or self.agent), approval="ask",
                            relayed=since, replay_end=last)
        for event in stored:  # what the updates before `since` left open (calls, a stream)
            if event["seq"] > since:
                break
            attached.updates.update(event)
        still_open = mapping.open_approvals(stored)
        attached.open_requests = {str(asked["msg"].get("request")) for asked in still_open}
        self.sessions[request.session_id] = attached
        state = await self._connect(attached, since)
        await attached.caught_up.wait()
        for asked in still_open:
            if asked["seq"] <= since:  # seen before, still unanswered: asked again
                self._spawn(self._ask(attached, dict(asked)))
        turn = "awaiting_permission" if still_open else (
            "running" if state.get("state") in ("working", "blocked") else "idle")
        self._spawn(self._commands_update(request.session_id))
        return {"configOptions": _config_options(attached.agent, attached.approval),
                "_meta": {"cos/last_seq": attached.relayed, "cos/turn": turn}}

    async def _detach(self, attached: Attached) -> None:
        if attached.relay is not None:
            attached.relay.cancel()
        if attached.writer is not None:
            attached.writer.close()
            attached.writer = None
        for future in attached.prompts.values():
            if not future.done():
                future.set_result({"stopReason": "cancelled"})

    async def close_session(self, params: Any) -> dict[str, Any]:
        """`session/close`: this client detaches; the session and its job go on."""
        from acp.schema import CloseSessionRequest

        request = _params(CloseSessionRequest, params)
        attached = self._attached(request.session_id)
        del self.sessions[request.session_id]
        await self._detach(attached)
        return {}

    async def set_config_option(self, params: Any) -> dict[str, Any]:
        """`session/set_config_option`: `approval` (ask, accept-edits, allow-all) at any time;
        `agent` before the session's first prompt (its job starts again with that agent)."""
        if not isinstance(params, dict):
            raise _invalid("params", "must be an object")
        session_id = params.get("sessionId")
        if not isinstance(session_id, str):
            raise _invalid("sessionId", "must be a string")
        attached = self._attached(session_id)
        config_id, value = params.get("configId"), params.get("value")
        if config_id not in ("agent", "approval"):
            raise _invalid("configId", "must be agent or approval")
        if not isinstance(value, str):
            raise _invalid("value", "must be a string")
        if config_id == "approval":
            if value not in APPROVAL_MODES:
                raise _invalid("value", f"approval is one of {', '.join(APPROVAL_MODES)}")
            attached.approval = value
        elif value != attached.agent:
            if attached.prompted:
                raise _invalid("value", "the agent is chosen before the session's first "
                                        "prompt")
            fresh = await self._start(value, attached.approval, attached.cwd)
            await self._detach(attached)
            await asyncio.to_thread(_stop_job, attached.job_id, self.env)
            del self.sessions[session_id]
            fresh.session_id = fresh.session_id or session_id
            self.sessions[fresh.session_id] = fresh
            attached = fresh
        return {"configOptions": _config_options(attached.agent, attached.approval),
                "_meta": {"cos/sessionId": attached.session_id}}

    async def list_sessions(self, params: Any) -> dict[str, Any]:
        """`session/list`: every session of the project, of every agent (history.py)."""
        try:
            history = _helper("history")
        except ImportError:
            raise RequestError.method_not_found("session/list") from None
        if params is not None and not isinstance(params, dict):
            raise _invalid("params", "must be an object")
        given = params or {}
        cwd = given.get("cwd") or self.cwd or os.getcwd()
        cursor = given.get("cursor")
        if not isinstance(cwd, str):
            raise _invalid("cwd", "must be a string")
        if cursor is not None and not isinstance(cursor, str):
            raise _invalid("cursor", "must be a string")
        page: dict[str, Any] = await asyncio.to_thread(history.list_page, cwd, cursor)
        return page

    async def load_session(self, params: Any) -> dict[str, Any]:
        """`session/load`: the whole conversation as updates, then the session attached when
        a job serves it, or, for a Claude Code or Codex session made outside cos, a job started
        that goes on in it (history.py)."""
        from acp.schema import LoadSessionRequest

        try:
            history = _helper("history")
        except ImportError:
            raise RequestError.method_not_found("session/load") from None
        request = _params(LoadSessionRequest, params)
        cwd = self._cwd(request.cwd)
        updates = await asyncio.to_thread(lambda: list(history.load_updates(
            request.session_id, cwd)))
        for update in updates:
            await self._notify(request.session_id, update)

        row = await asyncio.to_thread(self._serving_job, request.session_id, cwd)
        if row is not None:
            seqs = [update.get("_meta", {}).get(mapping.SEQ) for update in updates]
            last = max([seq for seq in seqs if isinstance(seq, int)], default=0)
            if not any(isinstance(seq, int) for seq in seqs):
                # Replayed from the agent's own log (a Claude Code or Codex session a job goes
                # on in): the turns the job ran were in it, so only what comes next is relayed.
                last = await asyncio.to_thread(_job_last_seq, str(row["id"]), self.env)
            attached = Attached(session_id=request.session_id, job_id=str(row["id"]),
                                cwd=cwd, agent=str(row.get("agent") or self.agent),
                                approval="ask", relayed=last, replay_end=last)
            self.sessions[request.session_id] = attached
            await self._connect(attached, last)
        else:
            native = await asyncio.to_thread(history.native_session, request.session_id, cwd)
            if native is not None:  # made outside cos: a job goes on in it, under the engine
                agent, native_id = native
                self.sessions[request.session_id] = await self._start(
                    agent, "ask", cwd, session_id=request.session_id, resume=native_id)
        self._spawn(self._commands_update(request.session_id))
        return {}

    def _serving_job(self, session_id: str, cwd: str) -> dict[str, Any] | None:
        """The row of the job that serves `session_id`: its cos session, or, for a Claude Code
        or Codex session made outside cos, the job that went on in it."""
        from coding_os.jobs import control

        row = control.session_job(session_id, self.env)
        if row is not None:
            return row
        try:
            native = _helper("history").native_session(session_id, cwd)
        except (ImportError, CosError):
            return None
        return control.session_job(session_id, self.env, native[1]) if native else None

    async def rewind(self, params: Any) -> dict[str, Any]:
        """`_cos/rewind` (commands.py)."""
        try:
            commands = _helper("commands")
        except ImportError:
            raise RequestError.method_not_found("_cos/rewind") from None
        if not isinstance(params, dict):
            raise _invalid("params", "must be an object")
        result: dict[str, Any] = await asyncio.to_thread(commands.rewind, params)
        return result

    async def shutdown(self) -> None:
        """Detach from every session (their jobs go on)."""
        for attached in list(self.sessions.values()):
            await self._detach(attached)
        for task in list(self._background):
            task.cancel()


def _helper(name: str) -> Any:
    """history.py or commands.py of this package, imported when first asked for.

    Raises:
        ImportError: not there (their methods answer -32601).
    """
    import importlib

    return importlib.import_module(f"coding_os.interfaces.acp.{name}")


def _claude_hooks(cwd: str) -> bool:
    """Whether cos's Claude Code hooks are installed in the checkout of `cwd`."""
    from coding_os.git.repo import checkout_root
    from coding_os.install import cos_hooks_settings

    return cos_hooks_settings("claude", checkout_root(cwd) or cwd) is not None


def _job_last_seq(job_id: str, env: Mapping[str, str]) -> int:
    """The last seq stored in the job's events log (0 for none)."""
    from coding_os.jobs import jobs
    from coding_os.runtime.events import last_seq

    path = jobs.resolve(job_id, env).state.get("events")
    return last_seq(path) if isinstance(path, str) and os.path.exists(path) else 0


def _until_runner_ended(job: Any) -> None:
    """Wait (RUNNER_END_S at most) for a runner that wrote its last state to let go of the
    job's lock: it closed its clients' connections a moment before (one runner per job)."""
    import time

    from coding_os.jobs import jobs

    deadline = time.monotonic() + RUNNER_END_S
    while jobs.runner_alive(job) and time.monotonic() < deadline:
        time.sleep(0.01)


def _stop_job(job_id: str, env: Mapping[str, str]) -> None:
    from coding_os.jobs import control

    try:
        control.stop(job_id, env)
    except CosError:
        pass


def serve_stdio(agent: str = "claude", cwd: str | None = None,
                env: Mapping[str, str] | None = None) -> int:
    """`cos acp`: serve ACP on stdin and stdout until the end of stdin or SIGTERM; the
    sessions' jobs go on."""
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # nothing but JSON-RPC reaches the client's stdout
    sys.stdout = sys.stderr
    server = AcpAgent(agent, cwd, os.environ if env is None else env)

    def write(data: bytes) -> None:
        out.write(data)

    async def main() -> int:
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_MAX)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        loop.add_signal_handler(signal.SIGTERM, reader.feed_eof)
        connection = Connection(server.handle, StdioTransport(reader, write), listening=False)
        server.connection = connection
        try:
            await connection.main_loop()
        finally:
            await server.shutdown()
            await connection.close()
        return 0

    try:
        return asyncio.run(main())
    finally:
        out.close()
