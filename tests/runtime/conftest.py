"""Fixtures of the engine's tests: the backends the conformance scenarios run against (one list:
adding a backend is one entry of BACKENDS), and a `cos protocol` process to talk to."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import COS

ROOT = Path(__file__).resolve().parents[2]
ECHO_AGENT = ROOT / "examples" / "echo_agent.py"


@dataclass(frozen=True)
class BackendCase:
    """How one backend is driven through the same scenarios: the configure op's fields, an
    input that ends at once and the message it shows, and a slow input with the message that
    says it is under way (a prefix: exec's names the pid of its process group)."""

    agent: str
    configure: dict[str, Any]
    quick: str
    quick_says: str
    slow: str
    slow_says: str
    approvals: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


BACKENDS = {
    "exec": BackendCase("exec", {"agent": "exec"}, "echo hello", "hello",
                        "echo started $$; exec sleep 30", "started"),
    "python": BackendCase("python", {"agent": "python", "target": f"{ECHO_AGENT}:EchoAgent"},
                          "hello", "echo: hello", "sleep 30", "sleeping 30s", approvals=True),
}


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> BackendCase:
    """Each backend of BACKENDS in turn."""
    return BACKENDS[request.param]


Event = dict[str, Any]


class ProtocolProcess:
    """A `cos protocol` subprocess: send ops, read events with bounded waits."""

    def __init__(self, cwd: Path, *args: str, env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([COS, "protocol", *args], cwd=cwd, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._buffer = b""
        self.seen: list[Event] = []
        self._next_id = 0

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, op_type: str, **fields: Any) -> str:
        self._next_id += 1
        submission = f"c{self._next_id}"
        self.send_raw(json.dumps({"id": submission, "op": {"type": op_type, **fields}})
                      .encode() + b"\n")
        return submission

    def read(self, timeout: float = 15) -> Event:
        """The next event (fails after `timeout` seconds without one)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no event in {timeout}s; seen {self.seen[-5:]}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"cos protocol ended; stderr: {self.stderr()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        event: Event = json.loads(line)
        self.seen.append(event)
        return event

    def until(self, match: Callable[[Event], bool], timeout: float = 15) -> list[Event]:
        """Events up to and including the first that matches."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            event = self.read(max(deadline - time.monotonic(), 0.01))
            got.append(event)
            if match(event):
                return got

    def until_says(self, prefix: str, timeout: float = 15) -> list[Event]:
        """Events up to and including the first message that starts with `prefix`."""
        return self.until(lambda event: str(event["msg"].get("text", "")).startswith(prefix),
                          timeout)

    def until_type(self, kind: str, timeout: float = 15) -> list[Event]:
        """Events up to and including the first of type `kind`."""
        return self.until(lambda event: event["msg"]["type"] == kind, timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def end(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def protocol(project: Path) -> Iterator[Callable[..., ProtocolProcess]]:
    """Start `cos protocol` processes in the project; every one is ended after the test."""
    started: list[ProtocolProcess] = []

    def start(*args: str) -> ProtocolProcess:
        process = ProtocolProcess(project, *args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.end()

