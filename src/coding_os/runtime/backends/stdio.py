"""An agent's process speaking JSON lines on its stdin and stdout (the codex app-server, an ACP
agent), as the backends that drive one share it.

It is started in a process group of its own that dies with the process that started it
(runtime/children.py); its stderr is drained as it comes, its last lines kept to say why it ended
(and the whole of it appended to a file when asked); its stdout is read a bounded line at a time;
a line is written whole to its stdin; and it is closed in one order: stdin closed, a while to
end, then SIGTERM to its group, and last SIGKILL to whatever of the group is left (an npm shim's
native child, a command the agent started).
"""

from __future__ import annotations

import asyncio
import collections
import os
import shutil
import signal
from collections.abc import Mapping, Sequence

from coding_os.errors import BackendError
from coding_os.runtime import children
from coding_os.runtime.lines import read_line

__all__ = ["MAX_LINE", "STDERR_TAIL", "AgentProcess"]

MAX_LINE = 16 * 1024 * 1024  # a resumed session's history may come in one line
STDERR_TAIL = 20  # lines of stderr kept to say why the process ended
STDERR_LINE = 500  # characters of each kept line
CLOSE_TIMEOUT = 5.0  # seconds for the process to end once its stdin is closed, then once signalled
ENDED_TIMEOUT = 1.0  # seconds to wait for its exit code and last words once its stdout ended


class AgentProcess:
    """One agent process on stdio; `label` begins what its errors say (`codex`, `acp`)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.process: asyncio.subprocess.Process | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self._stderr_reader: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
                    stderr_path: object = None) -> None:
        """Run `argv` (its program looked up on env's PATH) in `cwd`.

        Raises:
            BackendError: the program is not found or cannot be run.
        """
        found = shutil.which(argv[0], path=env.get("PATH"))
        if found is None:
            raise BackendError(f"{self.label}: program {argv[0]!r} not found on PATH")
        try:
            self.process = await asyncio.create_subprocess_exec(
                found, *argv[1:], cwd=cwd, env=dict(env), limit=MAX_LINE,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, **children.options())
        except OSError as error:
            raise BackendError(f"{self.label}: cannot run {found}: {error.strerror or error}"
                               ) from None
        self._stderr_reader = asyncio.create_task(self._drain_stderr(stderr_path))

    async def read(self) -> tuple[bytes | None, bool]:
        """The next line of its stdout as runtime/lines.py `read_line` gives it."""
        process = self._started()
        assert process.stdout is not None
        return await read_line(process.stdout)

    async def write(self, line: bytes) -> bool:
        """Write `line` to its stdin; False when its stdin is gone (the process has ended).

        Raises:
            BackendError: it was never started.
        """
        process = self._started()
        assert process.stdin is not None
        try:
            if process.stdin.is_closing():
                return False
            process.stdin.write(line)
            await process.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            return False
        return True

    async def ended(self) -> tuple[int | str, str | None]:
        """How it ended: its exit code ("unknown: still running" when it has not within a
        second) and the last line of its stderr, read to its end first (None: it said nothing)."""
        process = self._started()
        if self._stderr_reader is not None:  # its last lines say why the process ended
            await asyncio.wait({self._stderr_reader}, timeout=ENDED_TIMEOUT)
        try:
            code: int | str = await asyncio.wait_for(process.wait(), ENDED_TIMEOUT)
        except asyncio.TimeoutError:
            code = "unknown: still running"
        return code, (self.stderr_tail[-1].strip() if self.stderr_tail else None)

    async def close(self, *readers: asyncio.Task[None] | None) -> None:
        """Close its stdin, wait a while for it to end, then end its process group; then wait a
        while for `readers` (the tasks reading its stdout) and its stderr's drain. Once."""
        process = self.process
        if process is None or self._closed:
            return
        self._closed = True
        if process.stdin is not None and not process.stdin.is_closing():
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), CLOSE_TIMEOUT)
        except asyncio.TimeoutError:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), CLOSE_TIMEOUT)
            except asyncio.TimeoutError:
                pass
        _signal_group(process.pid, signal.SIGKILL)  # what the agent started and left behind
        await process.wait()
        for task in (*readers, self._stderr_reader):
            if task is not None:
                try:
                    await asyncio.wait_for(task, CLOSE_TIMEOUT)
                except asyncio.TimeoutError:
                    pass

    def _started(self) -> asyncio.subprocess.Process:
        if self.process is None:
            raise BackendError(f"{self.label}: the agent is not started")
        return self.process

    async def _drain_stderr(self, path: object) -> None:
        process = self._started()
        assert process.stderr is not None
        sink = open(str(path), "ab") if path else None  # noqa: SIM115 - closed below
        try:
            while True:
                chunk = await process.stderr.read(65536)
                if not chunk:
                    return
                if sink is not None:
                    sink.write(chunk)
                    sink.flush()
                for text in chunk.decode("utf-8", errors="replace").splitlines():
                    if text.strip():
                        self.stderr_tail.append(text[:STDERR_LINE])
        finally:
            if sink is not None:
                sink.close()


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass
