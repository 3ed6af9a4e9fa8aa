"""One request at a time to `codex app-server`: a thread forked through one of its turns
(`thread/fork` with `lastTurnId`) or reverted in place before one (`thread/revert` with
`beforeTurnId`), the conversation half of a rewind (DESIGN.md §5).

The app-server speaks JSON-RPC on stdio, one message a line, without the `jsonrpc` field
(runtime/backends/codex.py drives it for a whole session). Here a process is started, sent
`initialize` and `initialized`, asked one thing, and closed: Codex itself writes the new
rollout, or rewrites the thread's history, so what it resumes is its own. Codex's messages
(warnings about bubblewrap, notifications) are read past; only the answer to our request counts.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from typing import Any

from coding_os import jsonwire
from coding_os.errors import BackendError, NotFound

__all__ = ["AppServerRefused", "fork_thread", "revert_thread", "REQUEST_TIMEOUT"]

REQUEST_TIMEOUT = 60.0  # seconds for the whole exchange
_STDERR_TAIL = 4000  # bytes of stderr kept for an error message


class AppServerRefused(NotFound):
    """The app-server answered with an error: the thread or the turn cannot be loaded."""


def fork_thread(thread_id: str, last_turn_id: str, *, cwd: str,
                env: Mapping[str, str] | None = None, program: str = "codex",
                timeout: float = REQUEST_TIMEOUT) -> str:
    """Fork `thread_id` through its turn `last_turn_id` (inclusive) into a new thread of
    Codex's own; the new thread's id. The original is left as it is.

    Raises:
        NotFound: `program` is not on PATH. AppServerRefused: the app-server cannot load the
            thread or the turn. BackendError: it ended, or did not answer within `timeout`.
    """
    result = _exchange("thread/fork", {"threadId": thread_id, "lastTurnId": last_turn_id,
                                       "cwd": cwd, "excludeTurns": True},
                       cwd=cwd, env=env, program=program, timeout=timeout)
    thread = result.get("thread") if isinstance(result, dict) else None
    new_id = thread.get("id") if isinstance(thread, dict) else None
    if not isinstance(new_id, str) or not new_id:
        raise BackendError(f"codex app-server gave no thread id for the fork: {result!r:.200}")
    return new_id


def revert_thread(thread_id: str, before_turn_id: str, *, cwd: str,
                  env: Mapping[str, str] | None = None, program: str = "codex",
                  timeout: float = REQUEST_TIMEOUT) -> None:
    """Drop turn `before_turn_id` of `thread_id` and every later one from its history, in
    place (Codex keeps the thread id; files are not touched).

    Raises:
        As `fork_thread`.
    """
    _exchange("thread/resume", {"threadId": thread_id, "cwd": cwd, "excludeTurns": True},
              cwd=cwd, env=env, program=program, timeout=timeout,
              then=("thread/revert", {"threadId": thread_id, "beforeTurnId": before_turn_id}))


def _exchange(method: str, params: Mapping[str, Any], *, cwd: str,
              env: Mapping[str, str] | None, program: str, timeout: float,
              then: tuple[str, Mapping[str, Any]] | None = None) -> Any:
    """Start the app-server, initialize it, send `method` (then `then`, when given) and return
    the last answer's result."""
    environ = dict(os.environ if env is None else env)
    found = shutil.which(program, path=environ.get("PATH"))
    if found is None:
        raise NotFound(f"{program} is not on PATH: the Codex thread cannot be rewound")
    try:
        process = subprocess.Popen([found, "app-server"], cwd=cwd, env=environ,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except OSError as exc:
        raise BackendError(f"cannot run {found} app-server: {exc.strerror or exc}") from None
    talk = _Talk(process, time.monotonic() + timeout)
    try:
        from coding_os import __version__

        talk.request("initialize", {"clientInfo": {"name": "coding-os", "title": "coding-os",
                                                   "version": __version__},
                                    "capabilities": {"experimentalApi": True}})
        talk.send({"method": "initialized"})
        result = talk.request(method, params)
        if then is not None:
            result = talk.request(*then)
        return result
    finally:
        talk.close()


class _Talk:
    """The JSON-RPC exchange with one app-server process, bounded by a deadline."""

    def __init__(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        self.process = process
        self.deadline = deadline
        self.next_id = 1
        self.buffer = b""
        self.stderr = b""
        self.selector = selectors.DefaultSelector()
        assert process.stdout is not None and process.stderr is not None
        for stream in (process.stdout, process.stderr):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ)

    def send(self, message: Mapping[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            stdin.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise self._ended() from None

    def request(self, method: str, params: Mapping[str, Any]) -> Any:
        request_id = self.next_id
        self.next_id += 1
        self.send({"id": request_id, "method": method, "params": params})
        while True:
            message = self._next_message(method)
            if message.get("id") != request_id or "method" in message:
                if "method" in message and "id" in message:  # a request of the server's
                    self.send({"id": message["id"], "error": {
                        "code": -32601, "message": "coding-os does not handle it"}})
                continue
            if "error" in message:
                error = message["error"]
                text = error.get("message") if isinstance(error, dict) else error
                raise AppServerRefused(f"codex app-server refused {method}: "
                                       f"{' '.join(str(text).split())[:300]}")
            return message.get("result")

    def _next_message(self, method: str) -> dict[str, Any]:
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                message = jsonwire.loads_object(line)
                if message is not None:
                    return message
                continue
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                raise BackendError(f"codex app-server did not answer {method} in time")
            for key, _ in self.selector.select(remaining):
                chunk = os.read(key.fd, 65536)
                if key.fileobj is self.process.stderr:
                    self.stderr = (self.stderr + chunk)[-_STDERR_TAIL:]
                    if not chunk:
                        self.selector.unregister(key.fileobj)
                    continue
                if not chunk:
                    raise self._ended()
                self.buffer += chunk

    def _ended(self) -> BackendError:
        try:
            code: object = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            code = "unknown"
        lines = [line for line in self.stderr.decode("utf-8", "replace").splitlines()
                 if line.strip() and "bubblewrap" not in line and "PATH aliases" not in line]
        hint = f": {lines[-1].strip()[:300]}" if lines else ""
        return BackendError(f"codex app-server ended (exit code {code}){hint}")

    def close(self) -> None:
        """Close stdin, give the server a moment to end, then end its process group."""
        self.selector.close()
        process = self.process
        try:
            if process.stdin is not None:
                process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the npm shim's native child, if left
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()
