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
