"""A session run in the foreground (`cos run`, DESIGN.md §6): the session core of `runtime.core`
driven by one user at a terminal, or by a script, instead of a protocol client.

`run_foreground` creates a session, gives it the first prompt, hands every event to a `View`
(which prints it), answers approval requests by the `approvals` policy (`ask`: the view asks the
user; `allow` or `deny`: always), and, when the view can read more prompts, runs each as the next
task until the view has none. SIGINT (Ctrl-C) interrupts the running task; a second one while the
interrupt is under way, or one while the view waits for a prompt, ends the run (exit 130).

The exit status is that of the last task: 0 when it completed, 1 when it failed (an agent's
error, a command's non-zero exit) or was aborted, 130 when Ctrl-C interrupted it or ended the
run.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Mapping
from typing import Any, Protocol

from coding_os.runtime import wire
from coding_os.runtime.core import SessionCore, SessionSettings, Timeouts, create_session

__all__ = ["APPROVALS", "EXIT_INTERRUPTED", "View", "run_foreground", "task_failed"]

APPROVALS = ("ask", "allow", "deny")
EXIT_INTERRUPTED = 130

Event = dict[str, Any]


class View(Protocol):
    """What shows a foreground session to its user and reads from them."""

    def show(self, event: Event) -> None:
        """Print one event of the session."""

    def note(self, message: str) -> None:
        """Print a word of cos's own (not an event): an approval denied by policy, Ctrl-C."""

    async def approve(self, event: Event) -> bool:
        """Ask the user about the `approval_request` `event`; True when allowed (cancelled when
        the task ends first)."""

    async def next_prompt(self) -> str | None:
        """The next prompt, or None when the user has no more (or none can be read)."""


def task_failed(end: Event) -> bool:
    """Whether the task whose end event is `end` failed: aborted, or a failure in its usage
    (a python agent's exception, a command's non-zero exit code)."""
    msg = end["msg"]
    if msg["type"] != wire.TASK_COMPLETE:
        return True
    usage = msg.get("usage")
    if isinstance(usage, dict):
        if usage.get("failed") is True:
            return True
        code = usage.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            return True
    return False


class _Run:
    def __init__(self, session: SessionCore, view: View, approvals: str) -> None:
        self.session = session
        self.view = view
        self.approvals = approvals
        self.ends: dict[object, Event] = {}  # task id → its end event, as the view saw it
        self.ended = asyncio.Event()
        self.asking: set[asyncio.Task[None]] = set()
        self.interrupting: asyncio.Task[None] | None = None
        self.cancelled = False  # Ctrl-C ended the run
        self.main: asyncio.Task[int] | None = None

    async def forward(self) -> None:
        """Hand every event to the view; answer approvals; note the end of each task."""
        subscription = self.session.subscribe(0)
        while True:
            event = await subscription.get()
            if event is None:
                return
            self.view.show(event)
            msg = event["msg"]
            kind = msg["type"]
            if kind == wire.APPROVAL_REQUEST:
                self._answer(event)
            elif kind in wire.TASK_ENDS:
                for asking in list(self.asking):
                    asking.cancel()
                self.ends[msg.get("task")] = event
                self.ended.set()

    def _answer(self, event: Event) -> None:
        async def answer() -> None:
            request = event["msg"].get("request")
            if self.approvals == "ask":
                allow = await self.view.approve(event)
            else:
                allow = self.approvals == "allow"
                if not allow:
                    self.view.note(f"approval {request} denied (no terminal to ask on; "
                                   "--approve allow allows every request)")
            if isinstance(request, (str, int)) and self.session.task is not None:
                try:
                    await self.session.approval(request, allow)
                except Exception as exc:  # noqa: BLE001 - the request went away: say so
                    self.view.note(f"the answer to {request} was not taken: {exc}")

        asking = asyncio.create_task(answer())
        self.asking.add(asking)
        asking.add_done_callback(self.asking.discard)

    def view_failed(self, forwarder: asyncio.Task[None]) -> None:
        """The view could not show an event: end the run (awaiting the forwarder raises why)
        rather than wait for a task end it will never see."""
        if not forwarder.cancelled() and forwarder.exception() is not None \
                and self.main is not None:
            self.main.cancel()

    def on_sigint(self) -> None:
        """Ctrl-C: interrupt the running task; end the run when none runs or one is being
        interrupted already."""
        if self.session.task is not None and self.interrupting is None:
            self.view.note("interrupting the task (Ctrl-C again to quit)")
            self.interrupting = asyncio.create_task(self._interrupt())
            return
        self.cancelled = True
        if self.main is not None:
            self.main.cancel()

    async def _interrupt(self) -> None:
        try:
            await self.session.interrupt()
        except Exception as exc:  # noqa: BLE001 - the task ended meanwhile
            self.view.note(f"interrupt: {exc}")

    async def run_task(self, text: str) -> bool:
        """Run one task to its end; True when it failed."""
        self.interrupting = None
        task = await self.session.user_input(text)
        if task is None:
            return True  # the agent did not start: an error event says why
        while task not in self.ends:
            self.ended.clear()
            await self.ended.wait()
        return task_failed(self.ends[task])

    async def loop(self, prompt: str) -> int:
        failed = await self.run_task(prompt)
        while True:
            text = await self.view.next_prompt()
            if text is None:
                if self.interrupting is not None:
                    return EXIT_INTERRUPTED  # Ctrl-C stopped the last task
                return 1 if failed else 0
            failed = await self.run_task(text)


async def _run(settings: SessionSettings, prompt: str, view: View, approvals: str,
               env: Mapping[str, str] | None, timeouts: Timeouts) -> int:
    session = create_session(settings, env=env, timeouts=timeouts)
    run = _Run(session, view, approvals)
    forwarder = asyncio.create_task(run.forward())
    forwarder.add_done_callback(run.view_failed)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGINT, run.on_sigint)
    try:
        run.main = asyncio.create_task(run.loop(prompt))
        try:
            code = await run.main
        except asyncio.CancelledError:
            if not run.cancelled:
                raise
            code = EXIT_INTERRUPTED
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        for asking in list(run.asking):
            asking.cancel()
        await session.shutdown()
        await forwarder
    return code


def run_foreground(settings: SessionSettings, prompt: str, view: View, *,
                   approvals: str = "deny", env: Mapping[str, str] | None = None,
                   timeouts: Timeouts = Timeouts()) -> int:
    """Run `prompt` (then the view's further prompts) in a new session of `settings`; the exit
    status of the last task (0, 1, or 130 when Ctrl-C interrupted it or ended the run).

    Raises:
        InvalidInput: an unknown agent or approvals policy. Misroute, StateIOError: as the
            state dir.
    """
    from coding_os.errors import InvalidInput

    if approvals not in APPROVALS:
        raise InvalidInput(f"approvals are one of {', '.join(APPROVALS)}, not {approvals!r}")
    return asyncio.run(_run(settings, prompt, view, approvals, env, timeouts))
