"""The acp backend (runtime/backends/acp.py) driving the real ACP agents offline: the pinned
`gemini --acp` against the scripted Gemini API server (tests/e2e/gemini_server.py) and the pinned
`claude-agent-acp` against the scripted Anthropic server (tests/e2e/model_server.py).

Whole `cos run` and `cos protocol` processes: a task whose tools ask permission, answered by
cos (a checkpoint first); a denied command that does not run; an interrupt of a slow command;
`cos rewind` undoing a file the agent wrote and one its shell command removed. A scripted ACP
agent drives the same backend in tests/runtime/backends/test_acp.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.gemini_cli import GEMINI_BIN, gemini_env, require_gemini, write_gemini_settings
from tests.e2e.gemini_server import GeminiServer
from tests.e2e.harness import BIN_DIR, claude_env
from tests.e2e.model_server import ModelServer, Text, ToolCall
from tests.helpers import COS, ProtocolProcess, cos, cos_json, git, require_clients

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 180.0


def gemini_setup(tmp_path: Path, server: GeminiServer) -> dict[str, str]:
    """The environment of a cos run of `gemini --acp` against `server`: a private HOME, the
    pinned clients first on PATH."""
    require_gemini()
    home = tmp_path / "home"
    write_gemini_settings(home)
    env = gemini_env(server, home)
    env["PATH"] = f"{BIN_DIR}:{env['PATH']}"
    return env


def claude_setup(tmp_path: Path, server: ModelServer) -> dict[str, str]:
    """The environment of a cos run of `claude-agent-acp` against `server`."""
    require_clients()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = claude_env(server, home)
    env["PATH"] = f"{BIN_DIR}:{env['PATH']}"
    return env


def cos_run(project: Path, env: dict[str, str], agent: str, prompt: str,
            approve: str = "allow") -> list[dict[str, Any]]:
    """`cos run --agent AGENT --approve APPROVE --json PROMPT`: its events."""
    done = subprocess.run([COS, "run", "--agent", agent, "--approve", approve, "--json", prompt],
                          cwd=project, env=env, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, stdin=subprocess.DEVNULL)
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert events, f"no events; exit {done.returncode}; stderr: {done.stderr[-2000:]}"
    return events


def msgs(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [event["msg"] for event in events if event["msg"]["type"] == kind]


def committed(project: Path) -> None:
    (project / "notes.txt").write_text("first\n", encoding="utf-8")
    (project / "doomed.txt").write_text("keep me\n", encoding="utf-8")
    git(project, "add", "notes.txt", "doomed.txt")
    git(project, "commit", "-q", "-m", "files")


def rewinds_both(project: Path, session: str) -> None:
    """The session's checkpoints: rewinding to the one before its prompt brings back the file
    its write changed and the one its command removed."""
    rows = cos_json("checkpoints", "--session", session, cwd=project)
    assert isinstance(rows, list)
    triggers = [row["trigger"] for row in rows]
    assert triggers[-1] == "prompt" and any(t.startswith("tool") for t in triggers), triggers
    rewound = cos("rewind", "--code", rows[-1]["id"], cwd=project)
    assert rewound.returncode == 0, rewound.stderr
    assert (project / "notes.txt").read_text(encoding="utf-8") == "first\n"
    assert (project / "doomed.txt").read_text(encoding="utf-8") == "keep me\n"


def test_gemini_through_acp_writes_and_runs_a_command_after_asking_and_cos_rewinds_both(
        project: Path, tmp_path: Path) -> None:
    committed(project)
    script = [ToolCall("write_file", {"file_path": str(project / "notes.txt"),
                                      "content": "changed\n"}),
              ToolCall("run_shell_command", {"command": "rm doomed.txt"}),
              Text("both done")]
    with GeminiServer(script) as server:
        env = gemini_setup(tmp_path, server)
        events = cos_run(project, env, "gemini", "change notes and remove doomed")
    kinds = [event["msg"]["type"] for event in events]
    assert "task_complete" in kinds, events
    assert len(msgs(events, "approval_request")) == 2, events
    assert (project / "notes.txt").read_text(encoding="utf-8") == "changed\n"
    assert not (project / "doomed.txt").exists()
    assert msgs(events, "agent_message")[-1]["text"].strip() == "both done"
    assert all(result["ok"] for result in msgs(events, "tool_result")), events
    assert msgs(events, "task_complete")[0]["usage"]["input"] > 0  # Gemini's quota _meta
    configured = msgs(events, "session_configured")[0]
    assert configured["agent"] == "gemini" and configured["native_id"]
    rewinds_both(project, events[0]["session"])


def test_a_denied_gemini_command_does_not_run(project: Path, tmp_path: Path) -> None:
    committed(project)
    script = [ToolCall("run_shell_command", {"command": "rm doomed.txt"}), Text("as you wish")]
    with GeminiServer(script) as server:
        env = gemini_setup(tmp_path, server)
        events = cos_run(project, env, "acp:gemini", "remove doomed", approve="deny")
    assert len(msgs(events, "approval_request")) == 1, events
    assert (project / "doomed.txt").exists()
    assert "task_complete" in [event["msg"]["type"] for event in events], events


def test_claude_agent_acp_runs_commands_after_asking_and_cos_rewinds_them(
        project: Path, tmp_path: Path) -> None:
    committed(project)
    # Claude Code writes a file only after reading it: a command writes it here.
    script = [ToolCall("Bash", {"command": "echo changed > notes.txt", "description": "write"}),
              ToolCall("Bash", {"command": "rm doomed.txt", "description": "remove"}),
              Text("both done")]
    with ModelServer(script) as server:
        env = claude_setup(tmp_path, server)
        events = cos_run(project, env, "acp:claude-agent-acp", "change notes and remove doomed")
    kinds = [event["msg"]["type"] for event in events]
    assert "task_complete" in kinds, events
    assert len(msgs(events, "approval_request")) == 2, events
    assert msgs(events, "task_complete")[0]["usage"]["output"] > 0
    assert (project / "notes.txt").read_text(encoding="utf-8") == "changed\n"
    assert not (project / "doomed.txt").exists()
    rewinds_both(project, events[0]["session"])


def test_an_interrupt_stops_gemini_during_a_slow_command_and_the_session_goes_on(
        project: Path, tmp_path: Path) -> None:
    script = [ToolCall("run_shell_command", {"command": "sleep 20; touch late.txt"}),
              Text("slept"), Text("second answer")]
    with GeminiServer(script) as server:
        env = gemini_setup(tmp_path, server)
        process = ProtocolProcess(project, "--agent", "gemini", env=env)
        try:
            process.send("configure", permission_mode="bypassPermissions")
            process.until_type("session_configured", timeout=120)
            process.send("user_input", text="sleep a while")
            process.until_type("tool_call", timeout=120)
            process.send("interrupt")
            aborted = process.until_type("turn_aborted", timeout=60)[-1]["msg"]
            assert aborted["reason"] == "interrupted"
            process.send("shutdown")
            assert process.proc.wait(timeout=60) == 0
        finally:
            process.end()
    assert not (project / "late.txt").exists()



def test_a_claude_agent_acp_session_resumes_in_a_new_process_after_a_kill(
        project: Path, tmp_path: Path) -> None:
    """(Gemini CLI 0.61's session/load answers "No previous sessions found for this project"
    for a session its own earlier process wrote here, so its resume is not tested.)"""
    script = [Text("first answer"), Text("second answer")]
    with ModelServer(script) as server:
        env = claude_setup(tmp_path, server)
        first = ProtocolProcess(project, "--agent", "acp:claude-agent-acp", env=env)
        try:
            first.send("configure")
            configured = first.until_type("session_configured", timeout=120)[-1]
            session, native_id = configured["session"], configured["msg"]["native_id"]
            first.send("user_input", text="remember the word PELICAN")
            last_seq = first.until_type("task_complete", timeout=120)[-1]["seq"]
        finally:
            first.end()  # killed: the next process resumes the agent's own session
        second = ProtocolProcess(project, "--session", session, env=env)
        try:
            second.send("resume", session=session, last_seq=last_seq)
            second.send("user_input", text="which word?")
            got = second.until_type("task_complete", timeout=120)
            second.send("shutdown")
            assert second.proc.wait(timeout=60) == 0
        finally:
            second.end()
        latest = json.dumps(server.requests[-1].body)
    configured_again = [e["msg"] for e in got if e["msg"]["type"] == "session_configured"]
    assert configured_again and configured_again[0]["native_id"] == native_id
    assert "PELICAN" in latest and "which word?" in latest
