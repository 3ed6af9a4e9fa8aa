"""A process spoken to in JSON lines on its stdin and stdout, as the latency benchmarks drive
`cos protocol`, `cos acp`, a job's runner and the agents themselves."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WAIT = 60.0  # seconds any one line may take


class Lines:
    """A process spoken to in JSON lines on stdin and stdout, with bounded reads."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        self._buffer = b""
        self.name = " ".join(os.path.basename(arg) for arg in argv[:3])

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + WAIT
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise SystemExit(f"{self.name}: no line in {WAIT}s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise SystemExit(f"{self.name} ended (exit {self.proc.wait()})")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            found: dict[str, Any] = json.loads(line)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def until(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        while True:
            message = self.read()
            if match(message):
                return message

    def end(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, 9)
            self.proc.wait()


def msg(event: dict[str, Any]) -> dict[str, Any]:
    """The `msg` of a protocol event (DESIGN.md §7), or {}."""
    found = event.get("msg")
    return found if isinstance(found, dict) else {}


class ProtocolSide:
    """`cos protocol` (argv) configured by `configure` (a configure op); a round is one
    `user_input`, timed to the first `agent_message`, which must say `answer(text)`, then read
    to the task's end."""

    def __init__(self, argv: list[str], configure: dict[str, Any],
                 answer: Callable[[str], str], cwd: Path, env: dict[str, str]) -> None:
        self.lines = Lines(argv, cwd, env)
        self.answer = answer
        self.lines.send({"id": "c0", "op": configure})
        configured = self.lines.until(lambda e: msg(e).get("type") in ("session_configured",
                                                                        "error"))
        if msg(configured).get("type") != "session_configured":
            raise SystemExit(f"{self.lines.name}: {msg(configured)}")
        self.rounds = 0

    def round(self, text: str) -> float:
        self.rounds += 1
        start = time.perf_counter()
        self.lines.send({"id": f"c{self.rounds}", "op": {"type": "user_input", "text": text}})
        first = self.lines.until(lambda e: msg(e).get("type") == "agent_message")
        elapsed = time.perf_counter() - start
        assert msg(first).get("text") == self.answer(text), first
        self.lines.until(lambda e: msg(e).get("type") in ("task_complete", "turn_aborted"))
        return elapsed

    def end(self) -> None:
        self.lines.send({"id": "end", "op": {"type": "shutdown"}})
        self.lines.end()
