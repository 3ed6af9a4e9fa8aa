"""Background jobs in the benchmarks: `cos` run in a benchmark's scratch HOME, and the jobs and
the supervisor stopped at the end, their runners ended, so none outlives its run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

__all__ = ["COS", "cos", "stop_jobs", "kill_leftovers", "end_runner"]

COS = str(Path(sys.executable).with_name("cos"))


def cos(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 60.0) -> str:
    """The stdout of `cos ARGV`; a failure ends the benchmark with its stderr."""
    proc = subprocess.run([COS, *argv], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise SystemExit(f"cos {' '.join(argv)} failed (exit {proc.returncode}): "
                         f"{proc.stderr.strip()[-2000:]}")
    return proc.stdout


def stop_jobs(env: dict[str, str], cwd: Path, ids: list[str]) -> None:
    """`cos stop` every job of `ids`, `cos daemon stop`; end any runner still named in a
    state."""
    for job in ids:
        try:
            subprocess.run([COS, "stop", job], env=env, cwd=cwd, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            pass
    subprocess.run([COS, "daemon", "stop"], env=env, cwd=cwd, capture_output=True, timeout=60)
    kill_leftovers(Path(env["HOME"]))


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
