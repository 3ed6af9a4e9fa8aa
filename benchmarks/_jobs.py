"""Background jobs a benchmark leaves behind: their runners ended, so none outlives its run."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

__all__ = ["kill_leftovers", "end_runner"]


def kill_leftovers(home: Path) -> None:
    """End every runner still named in a job's state of `home` (a benchmark that failed midway,
    or a job `cos stop` did not end)."""
    for state in (home / ".coding-os" / "jobs").glob("*/state.json"):
        try:
            pid = json.loads(state.read_bytes()).get("pid")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(pid, int):
            end_runner(pid)


def end_runner(pid: int) -> None:
    """End a runner left running: SIGTERM (it then ends its agent's processes, which are in
    groups of their own), and SIGKILL to its group if it is still there after 10 s."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)  # a runner leads a session (and group) of its own
    except OSError:
        pass
