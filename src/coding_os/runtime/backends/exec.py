"""The `exec` backend (DESIGN.md §6): a shell command as a session without a model.

Each user input is one task that runs one command with `/bin/sh -c` in the session's cwd, in a
process group of its own that dies with the process running the session (runtime/children.py):
the input's text is the command, unless the session was configured
with `options["command"]`, which then runs for every input with the input's text on its stdin.
Each line the command prints is an `agent_message` (`stream`: `stdout` or `stderr`); its exit
ends the task with `task_complete` (`usage`: `{"exit_code": N}`, negative for a signal). An
interrupt sends SIGTERM to its process group, then SIGKILL after a grace period; the task ends
`turn_aborted`. It never asks for approval. A submit given up while its input is still being
written (a command that never reads a large stdin, past the engine's bounded wait) kills that
command's process group and reaps it.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import AsyncIterator

from coding_os.errors import BackendError
from coding_os.runtime import children, wire
from coding_os.runtime.backend import BackendConfig, BackendEvent, queued_events

__all__ = ["ExecBackend", "LINE_MAX", "GRACE_SECONDS"]

LINE_MAX = 64 * 1024  # a longer line is given in pieces of this many characters
GRACE_SECONDS = 2.0  # from SIGTERM to SIGKILL
_CHUNK = 64 * 1024


class ExecBackend:
    """Runs one shell command per user input; its output lines are the events."""

    agent = "exec"
    runs_hooks = False

    def __init__(self) -> None:
        self._queue: asyncio.Queue[BackendEvent | None] = asyncio.Queue()
        self._cwd = "."
        self._env: dict[str, str] | None = None
        self._command: str | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._run: asyncio.Task[None] | None = None
        self._reaping: set[asyncio.Task[None]] = set()  # commands whose submit was given up
        self._interrupted = False
        self._closed = False

    async def start(self, config: BackendConfig) -> str | None:
        """Note where and what to run; there is no native session.

        Raises:
            BackendError: the cwd is not a directory, or `options["command"]` is not a string.
        """
        if not os.path.isdir(config.cwd):
            raise BackendError(f"no directory {config.cwd}")
        command = config.options.get("command")
        if command is not None and not isinstance(command, str):
            raise BackendError("options.command must be a string")
        self._cwd = config.cwd
        self._env = dict(config.env) if config.env is not None else None
        self._command = command or None
        return None

    async def submit(self, text: str) -> None:
        """Run the command of this input.

        Raises:
            BackendError: the backend is closed, or the shell cannot be started.
        """
        if self._closed:
            raise BackendError("the exec backend is closed")
        command = self._command if self._command is not None else text
        self._interrupted = False
        if not command.strip():
            self._queue.put_nowait(BackendEvent(wire.ERROR, {"message": "nothing to run: the "
                                                             "input is empty", "fatal": False}))
            self._queue.put_nowait(BackendEvent(wire.TASK_COMPLETE, {"usage": {"exit_code": None}}))
            return
        try:
            process = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", command, cwd=self._cwd, env=self._env,
                stdin=asyncio.subprocess.PIPE if self._command is not None
                else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                **children.options())  # a group of its own, that dies with this process
        except OSError as exc:
            raise BackendError(f"cannot run /bin/sh: {exc.strerror or exc}") from None
        self._process = process
        if process.stdin is not None:
            try:
                process.stdin.write(text.encode("utf-8", "surrogateescape"))
                await process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the command does not read its input
            except BaseException:  # given up (cancelled): the command never took its input
                self._abandon(process)
                raise
            process.stdin.close()
        self._run = asyncio.create_task(self._follow(process))

    def _abandon(self, process: asyncio.subprocess.Process) -> None:
        """Kill a command whose submit was given up, close its pipes and reap it (in a task
        `close` waits for): nothing of it outlives the task it was for."""
        if self._process is process:
            self._process = None
        self._signal(process, signal.SIGKILL)
        if process.stdin is not None:
            process.stdin.close()
        reaping = asyncio.get_running_loop().create_task(self._reap(process))
        self._reaping.add(reaping)
        reaping.add_done_callback(self._reaping.discard)

    @staticmethod
    async def _reap(process: asyncio.subprocess.Process) -> None:
        streams = [stream.read() for stream in (process.stdout, process.stderr)
                   if stream is not None]
        try:
            await asyncio.wait_for(asyncio.gather(*streams, process.wait()), GRACE_SECONDS * 2)
        except TimeoutError:
            pass  # a child that left the group holds its output: it is not ours to wait for

    async def _follow(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None and process.stderr is not None
        await asyncio.gather(self._lines(process.stdout, "stdout"),
                             self._lines(process.stderr, "stderr"))
        code = await process.wait()
        if self._process is process:
            self._process = None
        if self._interrupted:
            self._queue.put_nowait(BackendEvent(wire.TURN_ABORTED,
                                                {"reason": wire.ABORT_INTERRUPTED}))
        else:
            self._queue.put_nowait(BackendEvent(wire.TASK_COMPLETE, {"usage": {"exit_code": code}}))

    async def _lines(self, stream: asyncio.StreamReader, name: str) -> None:
        pending = b""
        while True:
            chunk = await stream.read(_CHUNK)
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                self._message(line, name)
            while len(pending) > LINE_MAX:
                self._message(pending[:LINE_MAX], name)
                pending = pending[LINE_MAX:]
        if pending:
            self._message(pending, name)

    def _message(self, line: bytes, stream: str) -> None:
        text = line.decode("utf-8", "replace").removesuffix("\r")
        self._queue.put_nowait(BackendEvent(wire.AGENT_MESSAGE, {"text": text, "stream": stream}))

    async def interrupt(self) -> None:
        """SIGTERM to the command's process group; SIGKILL if it is still there after a grace
        period. The task ends `turn_aborted` once its output is closed: the shell may have
        exited already, leaving children (`cmd &`) that hold it open, so the group is signalled
        until nothing holds it."""
        process, follow = self._process, self._run
        if process is None or follow is None or follow.done():
            return
        self._interrupted = True
        self._signal(process, signal.SIGTERM)
        await asyncio.wait({follow}, timeout=GRACE_SECONDS)
        if not follow.done():
            self._signal(process, signal.SIGKILL)

    @staticmethod
    def _signal(process: asyncio.subprocess.Process, number: int) -> None:
        try:
            os.killpg(process.pid, number)
        except (ProcessLookupError, PermissionError):
            pass

    async def answer(self, request: str | int, allow: bool) -> None:
        """A command asks for no approval: there is nothing to answer.

        Raises:
            BackendError: always.
        """
        raise BackendError("the exec backend asks for no approval")

    def events(self) -> AsyncIterator[BackendEvent]:
        """The output lines and task ends, until `close`."""
        return queued_events(self._queue)

    async def close(self) -> None:
        """Kill a command still running (its whole process group) and end `events`."""
        if self._closed:
            return
        self._closed = True
        process = self._process
        if process is not None:  # its output still open: the shell or its children are there
            self._interrupted = True
            self._signal(process, signal.SIGKILL)
        if self._run is not None:
            try:
                await asyncio.wait_for(self._run, GRACE_SECONDS * 2)
            except TimeoutError:
                self._run.cancel()
        if self._reaping:
            await asyncio.wait(set(self._reaping))
        self._queue.put_nowait(None)
