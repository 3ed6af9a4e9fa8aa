"""The codex backend (runtime/backends/codex.py) with a missing program, one that ends at once,
and a few lines of Python standing in for `codex app-server`: lines that are not events become
native events, and requests it does not know are refused (the real one never misbehaves so). The
real Codex drives it in tests/e2e/test_runtime_codex.py.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from coding_os.errors import BackendError
from coding_os.runtime.backend import BackendConfig, BackendEvent
from coding_os.runtime.backends.codex import MAX_LINE, CodexBackend

WAIT = 30.0  # seconds any one event may take before the test fails


def run_backend(config: BackendConfig,
                scenario: Callable[[CodexBackend, str | None], Awaitable[None]]) -> None:
    """Start a backend, run `scenario` with it and its native id, and always close it."""

    async def main() -> None:
        backend = CodexBackend()
        try:
            native_id = await asyncio.wait_for(backend.start(config), WAIT)
            await scenario(backend, native_id)
        finally:
            await backend.close()

    asyncio.run(main())


def test_a_missing_program_is_a_backend_error(tmp_path: Path) -> None:
    config = BackendConfig(cwd=str(tmp_path), options={"program": str(tmp_path / "no-codex")})
    with pytest.raises(BackendError, match="not found"):
        asyncio.run(CodexBackend().start(config))


def test_a_program_that_ends_at_once_is_a_backend_error(tmp_path: Path) -> None:
    false = shutil.which("false")
    assert false is not None
    config = BackendConfig(cwd=str(tmp_path), options={"program": false})
    with pytest.raises(BackendError, match="ended"):
        asyncio.run(CodexBackend().start(config))


FAKE_APP_SERVER = '''
import json, sys
def ask():
    return json.loads(sys.stdin.readline())
def say(line):
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()
initialize = ask()
say("Codex says hi")
say("[1, 2]")
say("x" * (MAX_LINE + 10))
say(json.dumps({"id": initialize["id"], "result": {}}))
ask()  # initialized
start = ask()
say(json.dumps({"id": start["id"], "result": {"thread": {"id": "thread-1"}}}))
say(json.dumps({"id": "r1", "method": "item/tool/requestUserInput",
                "params": {"threadId": "thread-1"}}))
say(json.dumps({"method": "test/echo", "params": {"got": ask()}}))
'''


def test_lines_that_are_not_events_become_native_events_and_unknown_requests_are_refused(
        tmp_path: Path) -> None:
    """An app-server of a few lines stands in for Codex here: the real one never misbehaves so."""
    program = tmp_path / "fake-codex"
    program.write_text(f"#!{sys.executable}\nMAX_LINE = {MAX_LINE}\n{FAKE_APP_SERVER}",
                       encoding="utf-8")
    program.chmod(0o755)
    config = BackendConfig(cwd=str(tmp_path), options={"program": str(program)})

    async def scenario(backend: CodexBackend, native_id: str | None) -> None:
        assert native_id == "thread-1"
        async def every_event() -> list[BackendEvent]:
            return [event async for event in backend.events()]  # until the fake ends

        events = await asyncio.wait_for(every_event(), WAIT)
        assert events[0] == BackendEvent("native", {"raw": "Codex says hi"})
        assert events[1] == BackendEvent("native", {"raw": [1, 2]})
        assert events[2].type == "error" and "skipped" in events[2].fields["message"]
        assert events[3].fields["raw"]["method"] == "item/tool/requestUserInput"
        answer = events[4].fields["raw"]["params"]["got"]
        assert answer["id"] == "r1" and answer["error"]["code"] == -32601
        assert len(events) == 5

    run_backend(config, scenario)
