"""The session core of the engine (DESIGN.md §6, §7): one cos session, its events log, one
backend and the one active task.

`SessionCore` turns client ops (configure, user input, interrupt, approval, shutdown) into calls
on its backend, and what the backend does into numbered events: each is appended to the events
log first, then handed to every subscriber. Subscribers (`subscribe(after_seq)`) get the stored
events after their seq, then the live ones: appends and hand-outs happen in the event loop with no
await between them, so each subscriber gets every event exactly once, in seq order.

The core adds what only it knows: `session_configured` when a backend starts, `task_started`
when an input is given, the task ids of `task_complete` and `turn_aborted`, and the reason of an
abort it asked for (`replaced`, `interrupted`, `shutdown`). A backend whose events end during a
task leaves `turn_aborted` `backend_exit` and a fatal `error`; the next input starts it again,
resuming its native session. A log that ends in a `task_started` without its end (the serving
process was killed) gets the same two events when the session is next opened.

For the `python` and `exec` backends cos is the session's own record: the core writes its
transcript (§4.1) beside the events, so it lists, exports and forks like any cos-native session.
Claude and Codex sessions keep their native logs; the core links the native id to the cos id in
the index, so the index files them under the cos id.

For an agent that runs no cos hooks (`Backend.runs_hooks` false: Codex's app-server, python,
exec) the core takes the automatic checkpoints the hooks would (checkpoints/auto.py): `prompt`
before an input reaches the agent, `tool:<tool>` before it allows a writing tool, `turn-end`
when a task ends. One process serves a session: making, forking or opening one to serve takes
its lease (events.take_lease), released by `shutdown` or the process's death.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from coding_os.checkpoints.auto import writes
from coding_os.errors import (BackendError, CosError, CrossProject, InvalidInput, NotFound,
                              StateIOError)
from coding_os.runtime import events, wire
from coding_os.runtime.backend import Backend, BackendConfig, BackendEvent
from coding_os.runtime.backends import BACKENDS, backend_for
from coding_os.runtime.lines import lone_surrogate
from coding_os.runtime.settings import SessionSettings
from coding_os.sessions import transcript
from coding_os.state.caller import Caller
from coding_os.state.identity import mint_session_id, validate_session_id

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.state.tiers import Tiers

__all__ = [
    "NATIVE_TRANSCRIPT_AGENTS",
    "SessionSettings",
    "Timeouts",
    "Subscription",
    "SessionCore",
    "create_session",
    "open_session",
    "fork_session",
]

Event = dict[str, Any]

# What `repoint` leaves in a session's options for its next start only.
REWIND_OPTIONS = ("resume_at", "fork_at_resume")
# Backends whose session cos records itself (its transcript is the session's canonical log).
NATIVE_TRANSCRIPT_AGENTS = ("python", "exec")
# The events such a transcript records, and the fields of each it keeps.
_TRANSCRIBED: dict[str, tuple[str, ...]] = {wire.AGENT_MESSAGE: ("text",),
                                            wire.TOOL_CALL: ("tool", "input", "call_id"),
                                            wire.TOOL_RESULT: ("call_id", "ok", "output")}


@dataclass(frozen=True)
class Timeouts:
    """The bounded waits of the core, in seconds.

    `start`: for a backend to start; `call`: for submit, answer and close to return; `stop`:
    for a task to end after an interrupt; `reply`: for the agent to say anything during a task
    (then an `error` event and an interrupt; None waits as long as the task runs).
    """

    start: float = 60.0
    call: float = 30.0
    stop: float = 5.0
    reply: float | None = 600.0


class Subscription:
    """The events of one session for one client, in seq order: `await get()` until None."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.closed = False

    def push(self, event: Event) -> None:
        if not self.closed:
            self._queue.put_nowait(event)

    def waiting(self) -> bool:
        """Whether `get` has something to give at once (an event, or the end)."""
        return not self._queue.empty()

    def close(self) -> None:
        """End the stream: `get` gives what was pushed before, then None."""
        if not self.closed:
            self.closed = True
            self._queue.put_nowait(None)

    async def get(self) -> Event | None:
        """The next event, or None once the subscription is closed and drained."""
        return await self._queue.get()


def _say(message: str) -> None:
    """A diagnostic of the engine: stderr, never stdout (the protocol's wire)."""
    sys.stderr.write(f"cos: {message}\n")


class SessionCore:
    """One running cos session. Its methods are called from one event loop."""

    def __init__(self, tiers: Tiers, session: str, log: events.EventLog, *,
                 settings: SessionSettings | None, project: str | None,
                 env: Mapping[str, str] | None = None, timeouts: Timeouts = Timeouts(),
                 native_id: str | None = None, next_task: int = 1, fork: bool = False,
                 backends: Callable[[str], Backend] = backend_for,
                 lease: events.Lease | None = None) -> None:
        self.tiers = tiers
        self.session = session
        self.agent = transcript.session_agent(session)
        self.project = project
        self.settings = settings
        self.native_id = native_id
        self._fork = fork  # the first start forks `native_id` into a native session of its own
        self.timeouts = timeouts
        self._env = env
        self._backends = backends  # agent name → a new backend
        self._log = log
        self._lease = lease  # this process's right to serve the session, released at shutdown
        self._subscribers: list[Subscription] = []
        self._backend: Backend | None = None
        self._pump: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._task: int | None = None
        self._task_reply: str | None = None
        self._task_done = asyncio.Event()
        self._abort_reason: wire.AbortReason | None = None
        self._discarded: set[asyncio.Task[None]] = set()  # backends being closed
        # approval requests waiting for an answer → the tool each asks for and its input
        self._approvals: dict[str | int, tuple[str | None, object]] = {}
        self._runs_hooks = True  # the running backend's agent takes its own checkpoints
        self._checkpointing: asyncio.Task[None] | None = None  # the latest checkpoint taken
        self._unattended = False
        self._next_task = next_task
        self._last_heard = 0.0
        self._closing = False
        self._turn = 0
        self.closed = False
        # Why events can no longer be stored (a full disk): the session then takes no input.
        self.halted: str | None = None

    # -- events ----------------------------------------------------------------------------

    @property
    def last_seq(self) -> int:
        return self._log.last_seq

    @property
    def task(self) -> int | None:
        """The id of the running task, if any."""
        return self._task

    @property
    def events_path(self) -> str:
        return self._log.path

    def _record(self, event_type: wire.EventType, fields: Mapping[str, object],
                reply_to: str | None = None) -> Event:
        """Store one event, then hand it to every subscriber.

        Raises:
            StateIOError: it could not be stored: the session halts (`_halt`).
        """
        if self.halted is not None:
            raise StateIOError(self.halted)
        try:
            event = self._log.append(event_type, fields, reply_to=reply_to)
        except StateIOError as exc:
            self._halt(exc)
            raise
        for subscriber in self._subscribers:
            subscriber.push(event)
        if self.agent in NATIVE_TRANSCRIPT_AGENTS:
            self._transcribe(event_type, fields)
        return event

    def _halt(self, exc: StateIOError) -> None:
        """Events can no longer be stored (the disk is full): nothing more is sent that was not
        stored, so the subscribers get one last error, not stored (`seq` null), the running
        task's agent is closed, and the session takes no input until it is opened again."""
        if self.halted is not None:
            return
        self.halted = (f"the events of {self.session} can no longer be stored ({exc}): its "
                       "task was stopped; free space and resume the session")
        _say(self.halted)
        error: Event = {"v": 1, "seq": None, "ts": None, "session": self.session,
                        "id": self._task_reply,
                        "msg": {"type": wire.ERROR, "message": self.halted, "fatal": True}}
        for subscriber in self._subscribers:
            subscriber.push(error)
        backend, self._backend = self._backend, None
        self._clear_task()
        if backend is not None:
            self._close_in_background(backend)

    def _clear_task(self) -> None:
        """No task runs any more: its approvals are void, its waiters wake, its watchdog (unless
        that is what calls) is cancelled."""
        self._task = None
        self._approvals.clear()
        self._task_done.set()
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()
        self._watchdog = None

    def _close_in_background(self, backend: Backend) -> None:
        """Close `backend` in a task of its own; shutdown waits for it (`_discarded`)."""
        closing = asyncio.get_running_loop().create_task(self._close_backend(backend))
        self._discarded.add(closing)
        closing.add_done_callback(self._discarded.discard)

    def _transcribe(self, event_type: wire.EventType, fields: Mapping[str, object]) -> None:
        """Keep the cos transcript of a python or exec session in step with its events."""
        names = _TRANSCRIBED.get(event_type)
        if names is None:
            return
        # A tool_call or tool_result is the transcript's entry of the same name (§4.1).
        kind = "assistant" if event_type == wire.AGENT_MESSAGE else event_type
        entry: dict[str, object] = {"turn": self._turn}
        entry.update((name, fields[name]) for name in names)
        try:
            transcript.append(self.tiers, self.session, kind, entry)
        except CosError as exc:
            _say(f"{self.session}: the transcript was not written: {exc}")

    def subscribe(self, after_seq: int = 0) -> Subscription:
        """A stream of the stored events with seq > `after_seq`, then every live one.

        Raises:
            InvalidInput: `after_seq` is not an integer >= 0, or is beyond the log's end.
            StateIOError: the log cannot be read.
        """
        if not isinstance(after_seq, int) or isinstance(after_seq, bool) or after_seq < 0:
            raise InvalidInput(f"last_seq must be an integer >= 0, not {str(after_seq)[:40]!r}")
        if after_seq > self.last_seq:
            raise InvalidInput(f"last_seq {after_seq} is beyond the end of {self.session} "
                               f"(its last seq is {self.last_seq})")
        subscription = Subscription()
        if after_seq < self.last_seq:
            for event in events.replay(self._log.path, after_seq):
                subscription.push(event)
        self._subscribers.append(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop handing events to `subscription` and close it."""
        if subscription in self._subscribers:
            self._subscribers.remove(subscription)
        subscription.close()

    # -- the backend -----------------------------------------------------------------------

    async def configure(self, settings: SessionSettings | None = None,
                        reply_to: str | None = None) -> None:
        """Start the backend (resuming the native session when one is known).

        Raises:
            InvalidInput: the session runs already, or another agent is asked for.
        """
        async with self._lock:
            if self._backend is not None:
                raise InvalidInput(f"{self.session} is configured already")
            if settings is not None and settings.agent != self.agent:
                raise InvalidInput(f"{self.session} is a session of {self.agent}, "
                                   f"not {settings.agent}")
            if settings is not None:
                self.settings = settings
            await self._start(reply_to)

    async def _start(self, reply_to: str | None) -> bool:
        """Start the backend; on failure record a fatal error and return False."""
        settings = self.settings or SessionSettings(agent=self.agent, cwd=os.getcwd())
        self.settings = settings
        native_id = self.native_id
        if self.agent == "python":
            native_id = self.session  # a python session's native session is the cos session
        # A conversation rewound by `cos rewind` (repoint) goes on from its point: Claude Code
        # resumes at the entry (in a fork of its own unless rewound in place).
        rewound = {key: settings.options[key] for key in REWIND_OPTIONS
                   if key in settings.options}
        fork = (self._fork or bool(rewound.get("fork_at_resume"))) and native_id is not None
        planned = None
        if self.agent == "claude" and (native_id is None or fork):
            # Claude Code takes the id it is given: filed in the index before its SessionStart
            # hook asks for it, so the hooks bind this cos session instead of making another.
            planned = str(uuid.uuid4())
            self._link_native(planned)
        config = BackendConfig(cwd=settings.cwd, native_id=native_id, fork=fork,
                               new_native_id=planned, model=settings.model,
                               permission_mode=settings.permission_mode, env=self._env,
                               options=dict(settings.options),
                               history=self._history() if self.agent == "python" else (),
                               checkpoint=self._tool_checkpoint)
        try:
            backend = self._backends(self.agent)
            native = await asyncio.wait_for(backend.start(config), self.timeouts.start)
        except (CosError, OSError, ImportError, TimeoutError) as exc:
            message = (f"the {self.agent} backend did not start within {self.timeouts.start:g}s"
                       if isinstance(exc, TimeoutError) else
                       f"the {self.agent} backend did not start: {exc}")
            self._record(wire.ERROR, {"message": message, "fatal": True}, reply_to)
            return False
        self._backend = backend
        self._runs_hooks = bool(backend.runs_hooks)
        self.native_id = native if native is not None else self.native_id
        self._fork = False
        if rewound:  # done once: the next start resumes the session as it is then
            settings = replace(settings, options={key: value for key, value
                                                  in settings.options.items()
                                                  if key not in REWIND_OPTIONS})
            self.settings = settings
        fields: dict[str, object] = {"native_id": self.native_id, "agent": self.agent,
                                     "cwd": settings.cwd, "model": settings.model,
                                     "permission_mode": settings.permission_mode,
                                     "options": dict(settings.options),
                                     "project": self.project}
        self._record(wire.SESSION_CONFIGURED, fields, reply_to)
        if self.native_id != planned:  # filed already when Claude Code took the planned id
            self._link_native()
        self._pump = asyncio.create_task(self._run_pump(backend))
        return True

    def _history(self) -> tuple[dict[str, str], ...]:
        """The conversation of the session's cos transcript so far (after its rewinds): its user
        inputs and agent messages, for a python agent started on a resumed or forked session."""
        try:
            read = transcript.read(transcript.transcript_path(self.tiers, self.session))
        except CosError as exc:
            _say(f"{self.session}: the agent is given no history: {exc}")
            return ()
        return tuple({"role": entry["type"], "text": entry["text"]} for entry in read.visible()
                     if entry["type"] in ("user", "assistant") and isinstance(entry.get("text"),
                                                                               str))

    def _link_native(self, native_id: str | None = None) -> None:
        """File a Claude or Codex session's native id (`native_id`, else the one it has) under
        the cos id in the index."""
        native_id = native_id or self.native_id
        if self.agent in NATIVE_TRANSCRIPT_AGENTS or not native_id:
            return
        from coding_os.clock import utc_now
        from coding_os.sessions.database import with_index
        from coding_os.storage.base import SessionRecord, StorageError

        now = utc_now()
        record = SessionRecord(id=self.session, agent=self.agent, panel="engine",
                               native_id=native_id, project=self.project,
                               cwd=self.settings.cwd if self.settings else None,
                               source="engine", started=now, last_active=now)
        try:
            with_index(self.tiers, os.environ if self._env is None else self._env,
                       lambda storage: storage.upsert_session(record))
        except (StorageError, CosError) as exc:
            _say(f"{self.session}: not linked in the index: {exc}")

    async def _run_pump(self, backend: Backend) -> None:
        """Record what the backend does until its events end."""
        try:
            async for event in backend.events():
                if self._backend is backend:  # a discarded backend's events are dropped
                    self._on_backend_event(event)
        except StateIOError:
            return  # nothing can be stored: the session halted, its backend is being closed
        except Exception as exc:  # the backend's own failure: recorded, never a crash
            self._record(wire.ERROR, {"message": f"the {self.agent} backend failed: "
                                                 f"{type(exc).__name__}: {exc}", "fatal": True},
                         self._task_reply)
        if self._backend is not backend:
            return  # discarded or closed by the core: its end is no event
        self._backend = None
        if self._task is not None:
            self._end_task(wire.TURN_ABORTED, {"reason": wire.ABORT_BACKEND_EXIT})
            self._record(wire.ERROR, {"message": f"the {self.agent} process ended during the "
                                                 "task; the next input resumes its session",
                                      "fatal": True}, None)
        elif not self._closing:
            self._record(wire.ERROR, {"message": f"the {self.agent} process ended; the next "
                                                 "input resumes its session", "fatal": False})

    def _on_backend_event(self, event: BackendEvent) -> None:
        self._last_heard = asyncio.get_running_loop().time()
        kind = event.type
        if kind not in wire.BACKEND_EVENT_TYPES:
            self._record(wire.ERROR, {"message": f"the backend sent an event of unknown type "
                                                 f"{str(kind)[:40]!r}", "fatal": False},
                         self._task_reply)
            return
        fields = dict(event.fields)
        if kind in wire.TASK_ENDS:
            if self._task is None:
                return  # the end of a task the core closed already
            self._end_task(kind, fields)
            return
        if kind == wire.APPROVAL_REQUEST and "request" in fields:
            request = fields["request"]
            if isinstance(request, (str, int)):
                tool = fields.get("tool")
                self._approvals[request] = (tool if isinstance(tool, str) else None,
                                            fields.get("input"))
                if self._unattended:  # nobody is left to answer: denied, so the task goes on
                    asyncio.get_running_loop().create_task(self._deny(request))
        try:
            self._record(kind, fields, self._task_reply if self._task is not None else None)
        except InvalidInput as exc:
            self._record(wire.ERROR, {"message": f"the backend sent a bad {kind} event: {exc}",
                                      "fatal": False}, self._task_reply)

    async def unattended(self) -> None:
        """No client is left to answer (the end of input): every approval request, waiting or
        to come, is denied, so a running task ends instead of waiting for ever."""
        self._unattended = True
        for request in list(self._approvals):
            await self._deny(request)

    async def _deny(self, request: str | int) -> None:
        try:
            await self.approval(request, False)
        except InvalidInput:
            pass  # answered meanwhile, or its task ended

    def _end_task(self, kind: wire.EventType, fields: dict[str, object]) -> None:
        task, reply_to = self._task, self._task_reply
        if task is None:
            return
        fields["task"] = task
        if kind == wire.TURN_ABORTED:
            fields["reason"] = self._abort_reason or fields.get("reason") or wire.ABORT_INTERRUPTED
            if fields["reason"] not in wire.ABORT_REASONS:
                fields["reason"] = wire.ABORT_INTERRUPTED
        else:
            fields.setdefault("usage", None)
        self._clear_task()
        try:
            self._record(kind, fields, reply_to)
        except InvalidInput as exc:  # a bad usage: the task still ends
            self._record(wire.ERROR, {"message": f"the backend ended the task badly: {exc}",
                                      "fatal": False}, reply_to)
            self._record(wire.TASK_COMPLETE, {"task": task, "usage": None}, reply_to)
        self._checkpoint("turn-end", reply_to)

    # -- checkpoints -------------------------------------------------------------------------

    def _checkpoint(self, trigger: str, reply_to: str | None, *, tool: str | None = None,
                    tool_input: object = None, prompt: str | None = None
                    ) -> asyncio.Task[None] | None:
        """Take the automatic checkpoint `trigger` (checkpoints/auto.py) for an agent that runs
        no cos hooks, after those asked for before it; the task taking it (None for an agent
        whose hooks take them). It runs in a thread; a failure is a non-fatal `error` event,
        never the task's end (the hooks fail open the same way)."""
        if self._runs_hooks or self.settings is None:
            return None
        previous, seq = self._checkpointing, self.last_seq
        taking = asyncio.create_task(self._take_checkpoint(
            previous, trigger, reply_to, tool, tool_input, prompt, seq))
        self._checkpointing = taking
        return taking

    async def _tool_checkpoint(self, tool: str | None, tool_input: object) -> None:
        """The `tool` checkpoint a backend asks for before a write it lets happen (acp), once
        taken (an agent whose hooks take them gets none here)."""
        checkpoint = self._checkpoint("tool", self._task_reply, tool=tool, tool_input=tool_input)
        if checkpoint is not None:
            await checkpoint

    async def _take_checkpoint(self, previous: asyncio.Task[None] | None, trigger: str,
                               reply_to: str | None, tool: str | None, tool_input: object,
                               prompt: str | None, seq: int) -> None:
        if previous is not None and not previous.done():  # (a wait yields even for a done one)
            await asyncio.wait({previous})
        try:
            await asyncio.to_thread(self._checkpoint_now, trigger, tool, tool_input, prompt, seq)
        except (CosError, OSError, ValueError) as exc:
            if not self.closed:
                self._record(wire.ERROR, {"message": f"no {trigger} checkpoint was taken: "
                                                     f"{' '.join(str(exc).split())[:300]}",
                                          "fatal": False}, reply_to)

    def _checkpoint_now(self, trigger: str, tool: str | None, tool_input: object,
                        prompt: str | None, seq: int) -> None:
        from coding_os.checkpoints.auto import take_auto, written_paths
        from coding_os.config import load_config_cached
        from coding_os.state.root import resolve

        assert self.settings is not None
        env = os.environ if self._env is None else self._env
        cwd = self.settings.cwd
        resolution = resolve(cwd, env)
        config = load_config_cached(resolution.project_root, self.tiers.state_dir)
        take_auto(self.tiers, resolution, config, cwd=cwd,
                  home=env.get("HOME") or os.path.expanduser("~"), session=self.session,
                  agent=self.agent, trigger=trigger, tool=tool,
                  named=written_paths(tool, tool_input), prompt=prompt, seq=seq,
                  native=self._native_point())

    def _native_point(self) -> dict[str, object] | None:
        """What the core knows of the agent's own point for a checkpoint: the native session
        (a rewind finds the turn in the agent's log by the checkpoint's time)."""
        if self.agent in NATIVE_TRANSCRIPT_AGENTS or not self.native_id:
            return None
        return {"agent": self.agent, "native_id": self.native_id, "engine": True}

    async def _watch(self, task: int) -> None:
        """An agent that says nothing for `timeouts.reply` seconds: an error, then an interrupt."""
        limit = self.timeouts.reply
        assert limit is not None
        loop = asyncio.get_running_loop()
        while self._task == task:
            if self._approvals:  # waiting for the user is not the agent's silence
                self._last_heard = loop.time()
            remaining = self._last_heard + limit - loop.time()
            if remaining > 0:
                await asyncio.sleep(remaining)
                continue
            self._record(wire.ERROR, {"message": f"no answer from the agent in {limit:g}s; "
                                                 "interrupting the task", "fatal": False},
                         self._task_reply)
            self._watchdog = None
            async with self._lock:
                if self._task == task:
                    await self._abort(wire.ABORT_INTERRUPTED)
            return

    # -- ops -------------------------------------------------------------------------------

    async def user_input(self, text: str, reply_to: str | None = None) -> int | None:
        """Start a task with `text` (a running one ends `replaced`); its id, or None when the
        backend could not be started (an error event says why).

        Raises:
            InvalidInput: `text` is not a string, or holds a lone surrogate (no agent's
                program, file or terminal takes it).
        """
        if not isinstance(text, str):
            raise InvalidInput("user_input needs a text (a string)")
        surrogate = lone_surrogate(text)
        if surrogate is not None:
            raise InvalidInput(f"user_input: the text holds a lone surrogate ({surrogate}), "
                               "which is no text")
        if self.halted is not None:
            raise StateIOError(self.halted)
        async with self._lock:
            if self._task is not None:
                await self._abort(wire.ABORT_REPLACED)
            if self._backend is None and not await self._start(reply_to):
                return None
            backend = self._backend
            assert backend is not None
            task = self._next_task
            self._next_task += 1
            self._task, self._task_reply, self._abort_reason = task, reply_to, None
            self._task_done = asyncio.Event()
            self._turn += 1
            self._last_heard = asyncio.get_running_loop().time()
            self._record(wire.TASK_STARTED, {"task": task}, reply_to)
            if self.agent in NATIVE_TRANSCRIPT_AGENTS:
                try:
                    transcript.append(self.tiers, self.session, "user",
                                      {"turn": self._turn, "text": text})
                except CosError as exc:
                    _say(f"{self.session}: the transcript was not written: {exc}")
            checkpoint = self._checkpoint("prompt", reply_to, prompt=text)
            if checkpoint is not None:  # the tree as it is before the agent hears the prompt
                await checkpoint
                self._last_heard = asyncio.get_running_loop().time()
            if self.timeouts.reply is not None:
                self._watchdog = asyncio.create_task(self._watch(task))
            try:
                await asyncio.wait_for(backend.submit(text), self.timeouts.call)
            except (BackendError, OSError, TimeoutError) as exc:
                message = ("the agent did not take the input in time"
                           if isinstance(exc, TimeoutError) else f"the input failed: {exc}")
                self._record(wire.ERROR, {"message": message, "fatal": True}, reply_to)
                self._end_task(wire.TURN_ABORTED, {"reason": wire.ABORT_BACKEND_EXIT})
            return task

    async def interrupt(self, reply_to: str | None = None) -> None:
        """End the running task (`turn_aborted` `interrupted`).

        Raises:
            InvalidInput: no task is running.
        """
        async with self._lock:
            if self._task is None:
                raise InvalidInput("no task is running")
            await self._abort(wire.ABORT_INTERRUPTED)

    async def _abort(self, reason: wire.AbortReason) -> None:
        """Interrupt the backend and wait a bounded time for the task to end; past that the
        core ends it itself (and drops the backend's late end)."""
        task, done, backend = self._task, self._task_done, self._backend
        if task is None:
            return
        self._abort_reason = reason
        if backend is not None:
            try:
                await asyncio.wait_for(backend.interrupt(), self.timeouts.stop)
            except (BackendError, OSError, TimeoutError) as exc:
                _say(f"{self.session}: interrupt: {exc or type(exc).__name__}")
        try:
            await asyncio.wait_for(done.wait(), self.timeouts.stop)
        except TimeoutError:
            if self._task == task:
                reply_to = self._task_reply
                self._end_task(wire.TURN_ABORTED, {"reason": reason})
                self._record(wire.ERROR, {"message": f"the agent did not stop within "
                                                     f"{self.timeouts.stop:g}s; task {task} "
                                                     "recorded as ended and its process closed; "
                                                     "the next input resumes its session",
                                          "fatal": False}, reply_to)
                # Nothing it says later belongs to a task: it is closed, and the next input
                # starts the backend again.
                if backend is not None and self._backend is backend:
                    self._backend = None
                    self._close_in_background(backend)

    async def _close_backend(self, backend: Backend) -> None:
        """Close `backend` within the call timeout; a failure is said, not raised."""
        try:
            await asyncio.wait_for(backend.close(), self.timeouts.call)
        except (BackendError, OSError, TimeoutError) as exc:
            _say(f"{self.session}: close: {exc or type(exc).__name__}")

    async def approval(self, request: str | int, allow: bool,
                       reply_to: str | None = None) -> None:
        """Answer the approval request `request` of the running task.

        Raises:
            InvalidInput: no such request is waiting.
        """
        async with self._lock:
            if request not in self._approvals or self._backend is None:
                raise InvalidInput(f"no approval request {str(request)[:40]!r} is waiting")
            tool, tool_input = self._approvals.pop(request)
            if allow and writes(tool):
                checkpoint = self._checkpoint("tool", reply_to, tool=tool,
                                              tool_input=tool_input)
                if checkpoint is not None:  # the tree as it is before the tool writes
                    await checkpoint
                if self._backend is None or self._task is None:
                    return  # the task ended meanwhile: nothing waits for the answer
            try:
                await asyncio.wait_for(self._backend.answer(request, allow), self.timeouts.call)
            except (BackendError, OSError, TimeoutError) as exc:
                self._record(wire.ERROR, {"message": f"the answer was not taken: "
                                                     f"{exc or type(exc).__name__}",
                                          "fatal": False}, reply_to)

    async def wait_idle(self) -> None:
        """Return once no task runs (a task still ends by itself, an interrupt or the reply
        watchdog)."""
        while self._task is not None:
            await self._task_done.wait()

    async def repoint(self, native_id: str | None, resume_at: str | None = None,
                      fork: bool = False) -> None:
        """Point the session at a rewound conversation (`cos rewind` of a session the engine
        runs): its next start resumes `native_id` (a forked Codex thread, or the same), and a
        Claude Code session resumes at entry `resume_at` (as a fork of its own, with `fork`).
        Recorded as a `session_configured` event, so a new serving process does the same.

        Raises:
            InvalidInput: a task is running, or the session never started.
        """
        async with self._lock:
            if self._task is not None:
                raise InvalidInput("a task is running: interrupt it before rewinding")
            if self.settings is None or (native_id or self.native_id) is None:
                raise InvalidInput(f"{self.session} never started: nothing to rewind")
            if self._backend is not None:  # the next input starts it again, at the point
                backend, self._backend = self._backend, None
                await self._close_backend(backend)
            options = {key: value for key, value in self.settings.options.items()
                       if key not in REWIND_OPTIONS}
            if resume_at is not None:
                options.update(resume_at=resume_at, fork_at_resume=fork)
            self.settings = replace(self.settings, options=options)
            self.native_id = native_id or self.native_id
            self._record(wire.SESSION_CONFIGURED, {
                "native_id": self.native_id, "agent": self.agent, "cwd": self.settings.cwd,
                "model": self.settings.model, "permission_mode": self.settings.permission_mode,
                "options": options, "project": self.project})

    async def shutdown(self, reply_to: str | None = None) -> None:
        """End the running task (`shutdown`), close the backend and the log; idempotent."""
        if self.closed:
            return
        async with self._lock:
            self._closing = True
            if self._task is not None:
                await self._abort(wire.ABORT_SHUTDOWN)
            backend, pump = self._backend, self._pump
            self._backend = None
            if backend is not None:
                await self._close_backend(backend)
            if pump is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(pump), self.timeouts.stop)
                except TimeoutError:
                    pump.cancel()
            if self._watchdog is not None:
                self._watchdog.cancel()
            if self._discarded:
                await asyncio.wait(set(self._discarded), timeout=self.timeouts.call)
            if self._checkpointing is not None:  # the turn-end checkpoint of the last task
                await asyncio.wait({self._checkpointing})
            for subscriber in self._subscribers:
                subscriber.close()
            self._subscribers.clear()
            self.closed = True
            try:
                self._log.close()
            finally:
                if self._lease is not None:
                    self._lease.release()


# -- making and opening sessions -----------------------------------------------------------


def _caller(cwd: str, env: Mapping[str, str] | None) -> Caller:
    return Caller(env, cwd)


def create_session(settings: SessionSettings, *, env: Mapping[str, str] | None = None,
                   timeouts: Timeouts = Timeouts(),
                   durability: str = events.DEFAULT_DURABILITY,
                   native_id: str | None = None) -> SessionCore:
    """A new cos session for `settings.agent` in the project of `settings.cwd` (not started);
    with `native_id`, its first start resumes that session of the agent's own (Claude Code's
    `--resume`, Codex's `thread/resume`: one made outside cos).

    Raises:
        InvalidInput: no backend of that agent. Misroute, StateIOError: as the state dir.
    """
    if settings.agent not in BACKENDS:
        raise InvalidInput(f"no backend {settings.agent!r}: expected one of "
                           f"{', '.join(BACKENDS)}")
    caller = _caller(settings.cwd, env)
    project = caller.resolution.project_root
    if settings.agent in NATIVE_TRANSCRIPT_AGENTS:
        from coding_os.git.repo import branch

        worktree = caller.resolution.worktree or project
        session = transcript.create(caller.tiers, settings.agent, project=project,
                                    worktree=worktree, branch=branch(worktree))
    else:
        session = mint_session_id(settings.agent)
    lease, log = _serve(caller.tiers, session, durability)
    return SessionCore(caller.tiers, session, log, settings=settings, project=project,
                       env=env, timeouts=timeouts, lease=lease, native_id=native_id)


def _serve(tiers: Tiers, session: str, durability: str) -> tuple[events.Lease, events.EventLog]:
    """The lease of `session` for this process, then its events log open for appending.

    Raises:
        Conflict: another process serves it. StateIOError: as `events.take_lease`, `EventLog`.
    """
    lease = events.take_lease(tiers, session)
    try:
        return lease, events.EventLog.open(tiers, session, durability=durability)
    except BaseException:
        lease.release()
        raise


def open_session(session: str, cwd: str, *, env: Mapping[str, str] | None = None,
                 timeouts: Timeouts = Timeouts(),
                 durability: str = events.DEFAULT_DURABILITY,
                 repair: bool = True) -> SessionCore:
    """An existing session of the project of `cwd`, ready to resume (its backend not started).

    With `repair` (the default) it is opened to be served: this process takes its lease
    (`events.take_lease`, held until `shutdown`), and a log ending in a task without its end
    (the process that served it was killed) gets `turn_aborted` `backend_exit` and an `error`
    now. Without it the session is only read (the source of a fork, a check of its last seq):
    no lease, nothing written; it may be running elsewhere.

    Raises:
        InvalidId: not a session id. NotFound: no such session in this project.
        CrossProject: it is a session of another project.
        Conflict: with `repair`, another process serves it (nothing is written).
    """
    validate_session_id(session)
    caller = _caller(cwd, env)
    tiers = caller.tiers
    project = caller.resolution.project_root
    path = events.events_path(tiers, session)
    if not os.path.exists(path):
        meta = None
        try:
            meta = transcript.read_meta(transcript.transcript_path(tiers, session))
        except CosError:
            pass
        if meta is not None and meta.get("project") not in (None, project):
            raise CrossProject(f"{session} is a session of {meta.get('project')}: "
                               f"cd {meta.get('project')} and resume it there")
        raise NotFound(f"no session {session} run by cos in this project")
    # Served: the lease first, so what is read below is not written meanwhile by another.
    lease = events.take_lease(tiers, session) if repair else None
    try:
        settings, native_id, open_task, last_task = _read_state(path, project, session)
        log = events.EventLog.open(tiers, session, durability=durability)
    except BaseException:
        if lease is not None:
            lease.release()
        raise
    core = SessionCore(tiers, session, log, settings=settings, project=project, env=env,
                       timeouts=timeouts, native_id=native_id, next_task=last_task + 1,
                       lease=lease)
    if open_task is not None and repair:
        task, reply_to = open_task
        log.append(wire.TURN_ABORTED, {"task": task, "reason": wire.ABORT_BACKEND_EXIT},
                   reply_to=reply_to)
        log.append(wire.ERROR, {"message": f"the process serving {session} ended during task "
                                          f"{task}; the next input resumes its session",
                                "fatal": True}, reply_to=reply_to)
    return core


def _read_state(path: str, project: str | None, session: str
                ) -> tuple[SessionSettings | None, str | None,
                           tuple[int | str, str | None] | None, int]:
    """From the events log at `path`: the settings and native id of the latest
    `session_configured`, the task left open (its id and submission) if any, the last task id.

    Raises:
        CrossProject: it was configured in another project.
    """
    settings: SessionSettings | None = None
    native_id: str | None = None
    open_task: tuple[int | str, str | None] | None = None
    last_task = 0
    for event in events.replay(path, 0):
        msg = event["msg"]
        kind = msg["type"]
        if kind == wire.SESSION_CONFIGURED:
            if msg.get("project") not in (None, project):
                raise CrossProject(f"{session} is a session of another project")
            options = msg.get("options")
            settings = SessionSettings(
                agent=msg["agent"], cwd=msg["cwd"], model=msg.get("model"),
                permission_mode=msg.get("permission_mode"),
                options=options if isinstance(options, dict) else {})
            native_id = msg.get("native_id") or native_id
        elif kind == wire.TASK_STARTED:
            open_task = (msg["task"], event.get("id"))
            if isinstance(msg["task"], int):
                last_task = max(last_task, msg["task"])
        elif kind in wire.TASK_ENDS:
            open_task = None
    return settings, native_id, open_task, last_task


def fork_session(source: str, cwd: str, at: int | None = None, *,
                 env: Mapping[str, str] | None = None, timeouts: Timeouts = Timeouts(),
                 durability: str = events.DEFAULT_DURABILITY) -> SessionCore:
    """A new session forked from `source`, with the source's settings (not started).

    A python session forks its transcript up to `at`. A Claude or Codex session forks its
    whole native session: the new session's first start asks the backend for a fork of the
    source's native id (BackendConfig.fork), which gives the new session a native id of its own.

    Raises:
        InvalidInput: `source` is an exec session, a Claude or Codex session that never started
            (no native id) or is given `at`, or a bad `at`. NotFound, CrossProject: as
            `open_session`.
    """
    validate_session_id(source)
    agent = transcript.session_agent(source)
    if agent not in BACKENDS or agent in NATIVE_TRANSCRIPT_AGENTS and agent != "python":
        raise InvalidInput(f"fork of a {agent} session is not supported by the engine; "
                           "python, claude and codex sessions fork")
    if agent != "python" and at is not None:
        raise InvalidInput(f"a {agent} session forks whole: 'at' is for python sessions")
    parent = open_session(source, cwd, env=env, timeouts=timeouts, durability="none",
                          repair=False)
    settings = parent.settings
    parent._log.close()
    if agent != "python":
        if parent.native_id is None or settings is None:
            raise InvalidInput(f"{source} has no {agent} session to fork yet: it never started")
        session = mint_session_id(agent)
        lease, log = _serve(parent.tiers, session, durability)
        return SessionCore(parent.tiers, session, log, settings=replace(settings),
                           project=parent.project, env=env, timeouts=timeouts,
                           native_id=parent.native_id, fork=True, lease=lease)
    forked = transcript.fork(parent.tiers, source, at)
    lease, log = _serve(parent.tiers, forked.session, durability)
    if settings is None:
        settings = SessionSettings(agent=agent, cwd=cwd)
    return SessionCore(parent.tiers, forked.session, log, settings=replace(settings),
                       project=parent.project, env=env, timeouts=timeouts, lease=lease)
