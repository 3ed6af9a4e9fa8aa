"""The hook entry (interfaces/hook.py) when its output cannot be written — the reader went away,
a full disk behind a redirection, stdout closed: one line on stderr, exit 1 (never a blocking 2),
and the state is written all the same."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.helpers import COS, fire, log_lines, run_shell


def test_a_reader_that_went_away_is_exit_1_with_one_line_and_the_state_is_written(
        project: Path) -> None:
    assert fire("SessionStart", {"session_id": "b", "source": "startup"}, cwd=project).returncode == 0
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        body = json.dumps({"hook_event_name": "SessionStart", "cwd": str(project),
                           "session_id": "b", "source": "compact"})
        proc = subprocess.run([COS, "hook", "SessionStart"], cwd=project, input=body.encode(),
                              stdout=write_end, stderr=subprocess.PIPE, timeout=60,
                              env=dict(os.environ, COS_AGENT="claude"))
    finally:
        os.close(write_end)
    assert proc.returncode == 1
    assert proc.stderr.decode().splitlines() == [
        "cos hook: the agent closed stdout before the hook's output was written"]
    assert "source=compact" in log_lines(project)[-1]


def test_a_write_error_of_the_output_is_one_line_and_a_non_blocking_exit_1(project: Path) -> None:
    """A write error other than a closed pipe (a full disk behind a redirection) is one line
    on stderr with no traceback, exit 1 (never a blocking 2), and the state is written."""
    assert fire("SessionStart", {"session_id": "f", "source": "startup"}, cwd=project).returncode == 0
    proc = run_shell("exec {cos} hook {event} >/dev/full", project,
                     {"session_id": "f", "source": "compact"}, "SessionStart")
    assert proc.returncode == 1
    assert "No space left on device" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "source=compact" in log_lines(project)[-1]


def test_a_hook_with_output_and_stdout_closed_says_so_in_one_line(project: Path) -> None:
    assert fire("SessionStart", {"session_id": "o", "source": "startup"}, cwd=project).returncode == 0
    proc = run_shell("exec {cos} hook {event} >&-", project,
                     {"session_id": "o", "source": "compact"}, "SessionStart")
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "closed stdout" in lines[0], proc.stderr
    assert "source=compact" in log_lines(project)[-1]  # the state is written all the same
    both = run_shell("exec {cos} hook {event} >&- 2>&-", project,
                     {"session_id": "o", "source": "compact"}, "SessionStart")
    assert both.returncode == 1 and both.stderr == ""
