"""The `claude` backend of the engine (runtime/backends/claude.py) with a missing program or a
few lines of Python standing in for Claude Code: one-line errors, no process left behind, and
lines that are not JSON or too long become events, not crashes. The real Claude Code drives it
in tests/e2e/test_runtime_claude.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from coding_os.errors import BackendError
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends import backend_for
from coding_os.runtime.backends.claude import LINE_LIMIT, ClaudeBackend

TIMEOUT = 30.0  # seconds for any one thing the backend does


def run(test: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 4 * TIMEOUT))


def test_a_missing_program_is_a_backend_error_with_one_line(tmp_path: Path) -> None:
    async def test() -> None:
        backend = backend_for("claude")
        with pytest.raises(BackendError) as raised:
            await backend.start(BackendConfig(cwd=str(tmp_path), env={"PATH": str(tmp_path)}))
        assert "not found" in str(raised.value) and "\n" not in str(raised.value)
        await backend.close()

    run(test)


def test_a_program_that_exits_at_once_is_a_backend_error_naming_its_last_words(
        tmp_path: Path) -> None:
    program = fake_program(tmp_path, "import sys\nprint('no such session', file=sys.stderr)\n"
                                     "sys.exit(3)\n")

    async def test() -> None:
        backend = ClaudeBackend()
        with pytest.raises(BackendError, match="exited at once.*code 3.*no such session"):
            await backend.start(BackendConfig(cwd=str(tmp_path), options={"program": program}))
        await backend.close()

    run(test)


def test_a_start_that_gets_no_answer_or_is_cancelled_leaves_no_process(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # It never answers; it writes its pid whole (a rename), then waits.
    program = fake_program(tmp_path, f"""
import os, time
with open({str(pid_file)!r} + ".new", "w") as f:
    f.write(str(os.getpid()))
os.replace({str(pid_file)!r} + ".new", {str(pid_file)!r})
time.sleep(60)
""")

    def left_running() -> bool:
        """Whether the stand-in still runs (one that never wrote its pid did not outlive start:
        it is ended and waited for before start returns)."""
        if not pid_file.exists():
            return False
        pid = int(pid_file.read_text(encoding="utf-8"))
        pid_file.unlink()
        assert pid > 1
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        os.kill(pid, signal.SIGKILL)  # the test fails, and leaves nothing behind
        return True

    async def test() -> None:
        config = BackendConfig(cwd=str(tmp_path), options={"program": program,
                                                           "start_timeout": 0.5})
        with pytest.raises(BackendError, match="did not answer initialize within 0.5s"):
            await ClaudeBackend().start(config)
        assert not left_running()
        with pytest.raises(TimeoutError):  # the engine's own bound on start
            await asyncio.wait_for(ClaudeBackend().start(BackendConfig(
                cwd=str(tmp_path), options={"program": program})), 0.5)
        assert not left_running()

    run(test)


def test_lines_that_are_not_json_or_too_long_become_events_not_crashes(tmp_path: Path) -> None:
    # A stand-in that answers initialize, then prints what the backend must survive.
    program = fake_program(tmp_path, f"""
import json, sys
request = json.loads(sys.stdin.readline())
print("a banner, not JSON")
print(json.dumps({{"type": "control_response", "response": {{"subtype": "success",
      "request_id": request["request_id"], "response": {{}}}}}}))
sys.stdout.flush()
sys.stdin.readline()
print("x" * {LINE_LIMIT + 10})
print(json.dumps({{"type": "result", "subtype": "success", "usage": {{"input_tokens": 1}}}}))
""")

    async def test() -> None:
        backend = ClaudeBackend()
        try:
            await backend.start(BackendConfig(cwd=str(tmp_path), options={"program": program}))
            await backend.submit("hi")
            seen = [event async for event in backend.events()]
        finally:
            await backend.close()
        assert seen[0] == BackendEvent("native", {"raw": "a banner, not JSON"})
        assert [e.type for e in seen[1:]] == ["error", "task_complete", "error"]
        assert "skipped" in str(seen[1].fields["message"])
        assert seen[2].fields == {"usage": {"input": 1}}
        assert seen[3].fields["fatal"] is True  # the process ended by itself

    run(test)


def fake_program(tmp_path: Path, source: str) -> str:
    """An executable Python script standing in for the program (not for the backend)."""
    path = tmp_path / "fake-claude"
    path.write_text(f"#!{sys.executable}\n{source}", encoding="utf-8")
    path.chmod(0o755)
    return str(path)
