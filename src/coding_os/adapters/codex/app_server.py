"""The `codex app-server` client, written once: its messages, its handshake and the matching of
answers to requests (`Client` and the dialogues, which do no I/O), and the one-request use of it
that a rewind makes (`fork_thread`, `revert_thread`: DESIGN.md §5).

The app-server speaks JSON-RPC on stdio, one message a line, without the `jsonrpc` field. A
transport starts the process, writes the lines `Client` gives and hands it each line read back;
`Client.read` says what the line is (the answer to a request of ours, a request of the server's,
a notification, or anything else). A dialogue (`open_thread`, `fork_through`, `revert_before`) is the sequence
of a conversation: the handshake (`initialize`, then the `initialized` notification), then the
thread's requests, each `Step` sent by the transport with the answer's result sent back into it.
Two transports run them: the synchronous one here, which starts a process, runs one dialogue and
closes it (Codex itself writes the forked rollout, or rewrites the thread's history, so what it
resumes is its own), and the asynchronous one of runtime/backends/codex.py, which keeps the
process for a whole session. Message shapes are those of the schema Codex 0.169 writes with
`codex app-server generate-json-schema`.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import subprocess
import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from coding_os import jsonwire
from coding_os.errors import BackendError, NotFound

__all__ = [
    "METHOD_NOT_FOUND", "REQUEST_TIMEOUT", "Answer", "AppServerRefused", "Client", "Dialogue",
    "Notification", "Other", "ServerRequest", "Step", "ended", "fork_through", "fork_thread",
    "open_thread", "revert_before", "revert_thread",
]

REQUEST_TIMEOUT = 60.0  # seconds for the whole exchange of fork_thread and revert_thread
METHOD_NOT_FOUND = -32601  # JSON-RPC's error code for a request the client does not handle
_STDERR_TAIL = 4000  # bytes of stderr kept for an error message
_ERROR_CHARS = 300  # characters of the server's error message kept


class AppServerRefused(NotFound):
    """The app-server answered with an error: the thread or the turn cannot be loaded."""


# -- what is read: each line is one of these --------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """The answer to the request of ours `id` (its `method`): its `result`, or, when refused,
    the server's error message on one line (`error`)."""

    id: int
    method: str
    result: Any
    error: str | None
    message: dict[str, Any]


@dataclass(frozen=True)
class ServerRequest:
    """A request of the server's (an approval, a form), which the client answers by `id`."""

    id: str | int
    method: str
    params: dict[str, Any]
    message: dict[str, Any]


@dataclass(frozen=True)
class Notification:
    """What the server tells: `params` as sent (a dict when well formed)."""

    method: str
    params: object
    message: dict[str, Any]


@dataclass(frozen=True)
class Other:
    """Anything else: a line that is not JSON (its text), JSON that is no message, or the
    answer to no request waiting (the value or the message, as `raw`)."""

    raw: object


Message = Answer | ServerRequest | Notification | Other


class Client:
    """One connection's client side, without I/O: the lines to write, and what each line read
    is. Request ids are numbered from 1; an answer is matched to the request still waiting for
    it, once."""

    def __init__(self) -> None:
        self._next_id = 1
        self._waiting: dict[int, str] = {}  # id → method of each request not yet answered

    def request(self, method: str, params: Mapping[str, Any] | None) -> tuple[int, bytes]:
        """The id and the line of a new request; its answer is waited for until `read` gives
        it or `forget` drops it."""
        request_id = self._next_id
        self._next_id += 1
        self._waiting[request_id] = method
        return request_id, _line({"id": request_id, "method": method, "params": params})

    def forget(self, request_id: int) -> None:
        """Stop waiting for the answer to `request_id` (given up): read later, it is `Other`."""
        self._waiting.pop(request_id, None)

    @staticmethod
    def notify(method: str) -> bytes:
        """The line of a notification of ours."""
        return _line({"method": method})

    @staticmethod
    def respond(request_id: str | int, result: Mapping[str, Any]) -> bytes:
        """The line answering the server's request `request_id` with `result`."""
        return _line({"id": request_id, "result": result})

    @staticmethod
    def refuse(request: ServerRequest) -> bytes:
        """The line refusing a request of the server's that cos does not handle (rather than
        letting the turn wait for an answer forever)."""
        return _line({"id": request.id, "error": {
            "code": METHOD_NOT_FOUND, "message": f"coding-os does not handle {request.method}"}})

    def read(self, line: bytes) -> Message:
        """What `line` (one line the server wrote) is."""
        try:
            message = jsonwire.loads(line)
        except ValueError:
            return Other(line.decode("utf-8", errors="replace").rstrip("\n"))
        if not isinstance(message, dict):
            return Other(message)
        method = message.get("method")
        if method is None and "id" in message:
            return self._answer(message)
        if isinstance(method, str) and "id" in message:
            params = message.get("params")
            return ServerRequest(message["id"], method, params if isinstance(params, dict)
                                 else {}, message)
        if isinstance(method, str):
            return Notification(method, message.get("params"), message)
        return Other(message)

    def _answer(self, message: dict[str, Any]) -> Message:
        request_id = message["id"]
        method = (self._waiting.pop(request_id, None) if isinstance(request_id, int)
                  and not isinstance(request_id, bool) else None)
        if method is None:
            return Other(message)
        if "error" not in message:
            return Answer(request_id, method, message.get("result"), None, message)
        error = message["error"]
        text = error.get("message") if isinstance(error, dict) else None
        return Answer(request_id, method, None,
                      " ".join(str(text or error).split())[:_ERROR_CHARS], message)


def _line(message: Mapping[str, Any]) -> bytes:
    return json.dumps(message).encode("utf-8") + b"\n"


def ended(code: object, stderr_lines: Iterable[str]) -> BackendError:
    """The error saying that the app-server has ended: its exit code and the last line of its
    stderr that says anything of a failure (the bubblewrap and model-metadata warnings come
    first and say nothing of one)."""
    lines = [line.strip() for line in stderr_lines if line.strip() and "bubblewrap" not in line
             and "PATH aliases" not in line]
    hint = f": {lines[-1][:500]}" if lines else ""
    return BackendError(f"codex: the app-server ended (exit code {code}){hint}")


# -- the dialogues: what is sent, in order ------------------------------------------------------


@dataclass(frozen=True)
class Step:
    """One message of ours in a dialogue: a request, whose answer's result the transport sends
    back into the dialogue, or a `notification` (None is sent back)."""

    method: str
    params: Mapping[str, Any] | None = None
    notification: bool = False


_T = TypeVar("_T")
Dialogue = Generator[Step, Any, _T]


def _handshake() -> Generator[Step, Any, None]:
    """`initialize` and the `initialized` notification. The experimental API gives the raw
    response items, the only trace of a command the sandbox refused (runtime/backends/codex.py)
    and the thread requests that rewind (`thread/fork` through a turn, `thread/revert`)."""
    from coding_os import __version__

    yield Step("initialize", {"clientInfo": {"name": "coding-os", "title": "coding-os",
                                             "version": __version__},
                              "capabilities": {"experimentalApi": True}})
    yield Step("initialized", notification=True)


def _thread_id(result: object, method: str) -> str:
    """The id of the thread a `thread/…` request answered with.

    Raises:
        BackendError: the answer names none.
    """
    thread = result.get("thread") if isinstance(result, dict) else None
    thread_id = thread.get("id") if isinstance(thread, dict) else None
    if not isinstance(thread_id, str) or not thread_id:
        raise BackendError(f"codex: the app-server gave no thread id for {method}: "
                           f"{result!r:.200}")
    return thread_id


def open_thread(params: Mapping[str, Any], *, thread_id: str | None = None,
                fork: bool = False) -> Dialogue[str]:
    """The handshake, then a new thread (`thread/start`, asking for the raw response items
    too), or `thread_id` resumed (`thread/resume`) or forked whole (`thread/fork`), with
    `params` (cwd, approval policy, sandbox, model); gives the thread's id.

    Raises:
        BackendError: the answer names no thread.
    """
    yield from _handshake()
    if thread_id is None:
        method, sent = "thread/start", {**params, "experimentalRawEvents": True}
    else:
        method = "thread/fork" if fork else "thread/resume"
        sent = {**params, "threadId": thread_id, "excludeTurns": True}
    return _thread_id((yield Step(method, sent)), method)


def fork_through(thread_id: str, last_turn_id: str, cwd: str) -> Dialogue[str]:
    """The handshake, then `thread_id` forked through its turn `last_turn_id` (inclusive)
    into a new thread; gives the new thread's id."""
    yield from _handshake()
    result = yield Step("thread/fork", {"threadId": thread_id, "lastTurnId": last_turn_id,
                                        "cwd": cwd, "excludeTurns": True})
    return _thread_id(result, "thread/fork")


def revert_before(thread_id: str, before_turn_id: str, cwd: str) -> Dialogue[None]:
    """The handshake, then `thread_id` loaded (`thread/resume`) and its turn `before_turn_id`
    and every later one dropped from its history (`thread/revert`)."""
    yield from _handshake()
    yield Step("thread/resume", {"threadId": thread_id, "cwd": cwd, "excludeTurns": True})
    yield Step("thread/revert", {"threadId": thread_id, "beforeTurnId": before_turn_id})


# -- one dialogue over a process of its own (the rewind's) --------------------------------------


def fork_thread(thread_id: str, last_turn_id: str, *, cwd: str,
                env: Mapping[str, str] | None = None, program: str = "codex",
                timeout: float = REQUEST_TIMEOUT) -> str:
    """Fork `thread_id` through its turn `last_turn_id` (inclusive) into a new thread of
    Codex's own; the new thread's id. The original is left as it is.

    Raises:
        NotFound: `program` is not on PATH. AppServerRefused: the app-server cannot load the
            thread or the turn. BackendError: it ended, or did not answer within `timeout`.
    """
    return _exchange(fork_through(thread_id, last_turn_id, cwd), cwd=cwd, env=env, program=program,
                     timeout=timeout)


def revert_thread(thread_id: str, before_turn_id: str, *, cwd: str,
                  env: Mapping[str, str] | None = None, program: str = "codex",
                  timeout: float = REQUEST_TIMEOUT) -> None:
    """Drop turn `before_turn_id` of `thread_id` and every later one from its history, in
    place (Codex keeps the thread id; files are not touched).

    Raises:
        As `fork_thread`.
    """
    _exchange(revert_before(thread_id, before_turn_id, cwd), cwd=cwd, env=env, program=program,
              timeout=timeout)


def _exchange(dialogue: Dialogue[_T], *, cwd: str, env: Mapping[str, str] | None,
              program: str, timeout: float) -> _T:
    """Start the app-server, run `dialogue` with it within `timeout`, and close it."""
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
        result: Any = None
        while True:
            try:
                step = dialogue.send(result)
            except StopIteration as end:
                value: _T = end.value
                return value
            if step.notification:
                talk.send(Client.notify(step.method))
                result = None
            else:
                result = talk.request(step.method, step.params)
    finally:
        talk.close()


class _Talk:
    """The synchronous transport: one app-server process, bounded by a deadline. Only the
    answers to our requests count; what else the server says is read past, and a request of
    its own is refused."""

    def __init__(self, process: subprocess.Popen[bytes], deadline: float) -> None:
        self.process = process
        self.deadline = deadline
        self.client = Client()
        self.buffer = b""
        self.stderr = b""
        self.selector = selectors.DefaultSelector()
        assert process.stdout is not None and process.stderr is not None
        for stream in (process.stdout, process.stderr):
            os.set_blocking(stream.fileno(), False)
            self.selector.register(stream, selectors.EVENT_READ)

    def send(self, line: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(line)
            stdin.flush()
        except (BrokenPipeError, ConnectionResetError):
            raise self._ended() from None

    def request(self, method: str, params: Mapping[str, Any] | None) -> Any:
        request_id, line = self.client.request(method, params)
        self.send(line)
        while True:
            message = self.client.read(self._next_line(method))
            if isinstance(message, ServerRequest):
                self.send(Client.refuse(message))
            elif isinstance(message, Answer) and message.id == request_id:
                if message.error is not None:
                    raise AppServerRefused(f"codex app-server refused {method}: "
                                           f"{message.error}")
                return message.result

    def _next_line(self, method: str) -> bytes:
        while True:
            line, newline, rest = self.buffer.partition(b"\n")
            if newline:
                self.buffer = rest
                if line.strip():
                    return line
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
        return ended(code, self.stderr.decode("utf-8", "replace").splitlines())

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
