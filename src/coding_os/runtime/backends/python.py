"""The `python` backend (DESIGN.md §6): a cos-native agent written in Python.

The agent is named `module:attr` (`options["target"]`): an importable module, or a path to a
`.py` file (relative to the session's cwd), and the name of an object in it — or of a class,
instantiated with no arguments; or by a plain name, an entry point of the group
`coding_os.agents` that an installed package declares. The object has

    async def run_turn(self, session: AgentSession, user_input: str) -> AsyncIterator[event]

yielding the events of the turn: dicts `{"type": "agent_message", "text": "…"}` (or
`BackendEvent`s) of the §7 types `agent_message`, `agent_message_delta`, `tool_call`,
`tool_result`, `error` and `native`. The turn ends `task_complete` when the generator returns
(a `task_complete` it yields itself carries its `usage` and ends the turn there); an interrupt
cancels it (`turn_aborted` `interrupted`); an exception it raises is an `error` event and the
turn ends with `task_complete` (`usage`: `{"failed": true}`). The agent asks before a tool runs
with `await session.approve(tool, input)`, which emits `approval_request` and returns the
answer. `session.history` is the conversation before this input — on a resumed or forked session
too, from its cos transcript: `{"role": "user" | "assistant", "text": …}` in order. The target
is imported only because the user named it: it is the user's own code.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping

from coding_os.errors import BackendError
from coding_os.runtime import wire
from coding_os.runtime.backend import BackendConfig, BackendEvent, queued_events

__all__ = ["AgentSession", "ENTRY_POINT_GROUP", "PythonBackend", "load_target", "STOP_SECONDS"]

ENTRY_POINT_GROUP = "coding_os.agents"  # an installed package's agents, by name
STOP_SECONDS = 5.0  # an interrupted turn that does not end in this time is left to the engine
# What an agent yields (an approval request is `session.approve`'s, an abort the backend's).
_AGENT_TYPES = (wire.AGENT_MESSAGE, wire.AGENT_MESSAGE_DELTA, wire.TOOL_CALL, wire.TOOL_RESULT,
                wire.ERROR, wire.NATIVE, wire.TASK_COMPLETE)


def load_target(target: str, cwd: str) -> object:
    """The agent `target` names (`module:attr`, `path/to/file.py:attr`, or the name of an entry
    point of the group `coding_os.agents`), instantiated when it is a class.

    Raises:
        BackendError: a malformed target, a module that cannot be imported, no such attribute,
            or an object without `run_turn`.
    """
    if ":" not in target and target:
        agent = _entry_point(target)
        return _instantiated(agent, target)
    module_name, _, attr = target.rpartition(":")
    if not module_name or not attr:
        raise BackendError(f"a python agent is named module:attr or by an entry point of "
                           f"{ENTRY_POINT_GROUP}, not {target[:80]!r}")
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = os.path.join(cwd, module_name)
            name = "cos_agent_" + os.path.splitext(os.path.basename(path))[0].replace("-", "_")
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise BackendError(f"cannot load {path}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
    except BackendError:
        raise
    except Exception as exc:  # the user's module failed to import: say how, in one line
        raise BackendError(f"cannot import {module_name}: {type(exc).__name__}: {exc}") \
            from None
    agent = getattr(module, attr, None)
    if agent is None:
        raise BackendError(f"{module_name} has no {attr}")
    return _instantiated(agent, target)


def _entry_point(name: str) -> object:
    """The object the entry point `name` of the group `coding_os.agents` names.

    Raises:
        BackendError: no such entry point, or it cannot be loaded.
    """
    from importlib.metadata import entry_points

    found = entry_points(group=ENTRY_POINT_GROUP, name=name)
    if not found:
        raise BackendError(f"no python agent {name!r}: not module:attr, and no entry point "
                           f"of that name in the group {ENTRY_POINT_GROUP}")
    point = sorted(found, key=lambda each: each.value)[0]
    try:
        return point.load()
    except Exception as exc:  # the user's package failed to import: say how, in one line
        raise BackendError(f"cannot load the entry point {name} ({point.value}): "
                           f"{type(exc).__name__}: {exc}") from None


def _instantiated(agent: object, target: str) -> object:
    """`agent`, instantiated when it is a class, checked to have `run_turn`.

    Raises:
        BackendError: its constructor fails, or it has no `run_turn`.
    """
    if inspect.isclass(agent):
        try:
            agent = agent()
        except Exception as exc:  # the user's constructor
            raise BackendError(f"{target}() failed: {type(exc).__name__}: {exc}") from None
    if not callable(getattr(agent, "run_turn", None)):
        raise BackendError(f"{target} has no run_turn(session, user_input)")
    return agent


class AgentSession:
    """What a Python agent is given with each turn: where it runs and how to ask the user."""

    def __init__(self, session_id: str | None, cwd: str, model: str | None,
                 options: Mapping[str, object], emit: asyncio.Queue[BackendEvent | None],
                 history: list[dict[str, str]] | None = None) -> None:
        self.id = session_id  # the cos session id
        self.cwd = cwd
        self.model = model
        self.options = options
        # The conversation before the current input: the user inputs and the agent's messages
        # of the earlier turns (of this process, and before it from the transcript), in order.
        self.history: list[dict[str, str]] = history if history is not None else []
        self._emit = emit
        self._waiting: dict[str, asyncio.Future[bool]] = {}
        self._next = 1

    async def approve(self, tool: str, input: object) -> bool:
        """Ask the user whether `tool` may run with `input` (an `approval_request` event);
        True when allowed. Cancelled with the turn when it is interrupted."""
        request = f"r{self._next}"
        self._next += 1
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiting[request] = future
        self._emit.put_nowait(BackendEvent(wire.APPROVAL_REQUEST,
                                           {"request": request, "tool": tool, "input": input}))
        try:
            return await future
        finally:
            self._waiting.pop(request, None)

    def answer(self, request: str | int, allow: bool) -> bool:
        """Give the answer to a waiting `approve`; False when none waits under that name."""
        future = self._waiting.get(str(request))
        if future is None or future.done():
            return False
        future.set_result(allow)
        return True


def _event(item: object) -> BackendEvent:
    if isinstance(item, BackendEvent):
        return item
    if isinstance(item, Mapping) and isinstance(item.get("type"), str):
        kind = item["type"]
        if not wire.is_backend_event_type(kind):
            raise TypeError(f"an agent does not yield {kind!r} events")
        return BackendEvent(kind, {k: v for k, v in item.items() if k != "type"})
    raise TypeError(f"an agent yields event dicts with a type, not {type(item).__name__}")


class PythonBackend:
    """Runs the turns of a Python agent as coroutines in the engine's event loop."""

    agent = "python"
    runs_hooks = False

    def __init__(self) -> None:
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self._agent: object = None
        self._session: AgentSession | None = None
        self._turn: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self, config: BackendConfig) -> str | None:
        """Load the agent named by `options["target"]`; the native id is the cos session's.

        Raises:
            BackendError: no target, or it cannot be loaded (see `load_target`).
        """
        target = config.options.get("target")
        if not isinstance(target, str) or not target:
            raise BackendError("a python session needs options.target (module:attr)")
        self._agent = load_target(target, config.cwd)
        self._session = AgentSession(config.native_id, config.cwd, config.model,
                                     dict(config.options), self._queue,
                                     [dict(message) for message in config.history])
        return config.native_id

    async def submit(self, text: str) -> None:
        """Run one turn of the agent on `text`.

        Raises:
            BackendError: not started, or closed.
        """
        if self._session is None or self._closed:
            raise BackendError("the python backend is not running")
        self._turn = asyncio.create_task(self._run(self._session, text))

    async def _run(self, session: AgentSession, text: str) -> None:
        said: list[dict[str, str]] = [{"role": "user", "text": text}]

        def put(event: BackendEvent) -> None:
            if event.type == wire.AGENT_MESSAGE and isinstance(event.fields.get("text"), str):
                said.append({"role": "assistant", "text": str(event.fields["text"])})
            self._queue.put_nowait(event)

        try:
            await self._turn_of(session, text, put)
        finally:
            session.history.extend(said)  # what the next turn is given as said before it

    async def _turn_of(self, session: AgentSession, text: str,
                       put: Callable[[BackendEvent], None]) -> None:
        try:
            turn = getattr(self._agent, "run_turn")(session, text)
            async for item in turn:
                event = _event(item)
                if event.type not in _AGENT_TYPES:
                    raise TypeError(f"an agent does not yield {event.type!r} events")
                if event.type == wire.TASK_COMPLETE:
                    put(BackendEvent(wire.TASK_COMPLETE, {"usage": event.fields.get("usage")}))
                    return
                put(event)
        except asyncio.CancelledError:
            put(BackendEvent(wire.TURN_ABORTED, {"reason": wire.ABORT_INTERRUPTED}))
            return
        except Exception as exc:  # the agent's own failure ends its turn, not the session
            put(BackendEvent(wire.ERROR, {"message": f"the agent failed: {type(exc).__name__}: "
                                                     f"{exc}", "fatal": False}))
            put(BackendEvent(wire.TASK_COMPLETE, {"usage": {"failed": True}}))
            return
        put(BackendEvent(wire.TASK_COMPLETE, {"usage": None}))

    async def interrupt(self) -> None:
        """Cancel the running turn; it ends `turn_aborted` `interrupted`."""
        turn = self._turn
        if turn is None or turn.done():
            return
        turn.cancel()
        await asyncio.wait({turn}, timeout=STOP_SECONDS)

    async def answer(self, request: str | int, allow: bool) -> None:
        """Answer the `approve` waiting under `request`.

        Raises:
            BackendError: none waits under that name.
        """
        if self._session is None or not self._session.answer(request, allow):
            raise BackendError(f"no approval {str(request)[:40]!r} is waiting")

    def events(self) -> AsyncIterator[BackendEvent]:
        """The events of the agent's turns, until `close`."""
        return queued_events(self._queue)

    async def close(self) -> None:
        """Cancel a running turn and end `events`."""
        if self._closed:
            return
        self._closed = True
        await self.interrupt()
        self._queue.put_nowait(None)
