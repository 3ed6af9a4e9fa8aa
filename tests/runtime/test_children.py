"""The processes a backend starts die with the process that started them (runtime/children.py):
the child by the kernel's parent-death signal, what it started in its session by `end`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from coding_os.runtime import children
from tests.helpers import live as alive, processes_with, until

# The process that starts a child as a backend does, with a list of sessions, says the child's
# pid, and waits to be killed. The child's command is in its environment (not on its command
# line, where the test looks for the child's processes).
PARENT = """
import os, subprocess, sys, time
from coding_os.runtime import children
children.record_sessions(sys.argv[1])
child = subprocess.Popen(["/bin/sh", "-c", os.environ["COMMAND"]], **children.options())
print(child.pid, flush=True)
time.sleep(3600)
"""


def test_a_child_dies_with_its_parent_and_end_kills_what_it_started_in_its_session(
        tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    word = f"{600 + os.getpid() % 100}.{time.time_ns() % 10**6}"  # a sleep no other test runs
    # Children of the child: a plain one, a subshell's, and one in a process group of its own
    # (still in the child's session).
    command = (f"sleep {word} & (sleep {word}; true) & "
               f"{sys.executable} -c 'import os, sys, time; os.setpgid(0, 0); "
               f"time.sleep(float(sys.argv[1]))' {word} & wait")
    with subprocess.Popen([sys.executable, "-c", PARENT, str(sessions)], stdout=subprocess.PIPE,
                          text=True, env={**os.environ, "COMMAND": command}) as parent:
        try:
            assert parent.stdout is not None
            child = int(parent.stdout.readline())
            # the child, its subshell, and the three sleeping
            until(lambda: len(processes_with(word)) == 5, "the child to start its three")
            parent.kill()
            parent.wait()
            until(lambda: not alive(child), "the child to die with its parent", timeout=10)
            left = processes_with(word)
            assert len(left) == 4  # the signal reaches the child only
            assert set(left) <= set(children.end(str(sessions)))
            until(lambda: not processes_with(word), "what the child started to be killed",
                  timeout=10)
            assert sessions.read_bytes() == b""
        finally:
            parent.kill()
            for pid in processes_with(word):
                os.kill(pid, signal.SIGKILL)


def test_end_passes_over_a_listed_session_whose_number_was_given_again(tmp_path: Path) -> None:
    sessions = tmp_path / "sessions"
    other = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        with open(f"/proc/{other.pid}/stat", encoding="ascii") as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])
        sessions.write_text(f"{other.pid} {start - 1}\n", encoding="ascii")
        assert children.end(str(sessions)) == []
        assert alive(other.pid)
        sessions.write_text(f"{other.pid} {start}\n", encoding="ascii")
        assert children.end(str(sessions)) == [other.pid]
        assert other.wait(timeout=10) == -signal.SIGKILL
    finally:
        other.kill()
        other.wait()


def test_a_child_started_without_a_list_still_dies_with_its_parent() -> None:
    with subprocess.Popen(
            [sys.executable, "-c", PARENT.replace("children.record_sessions(sys.argv[1])", "")],
            stdout=subprocess.PIPE, text=True, env={**os.environ, "COMMAND": "exec sleep 600"}
    ) as parent:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        try:
            assert alive(child)
            parent.kill()
            parent.wait()
            until(lambda: not alive(child), "the child to die with its parent", timeout=10)
        finally:
            parent.kill()
            if alive(child):
                os.kill(child, signal.SIGKILL)
