"""Policy gates driven by the real Claude Code and Codex CLIs, through `cos init`'s hooks.

Each client runs one scripted prompt in a scratch repository whose `.coding-os.yaml` turns on
all three gates. The model first tries to write a file without a current task (blocked by
require_task_for_edits), sets the task from a shell step with `cos state set` (a shell tool is
not an edit tool), writes the file (allowed), then tries to write a protected path with its edit
tool and with a shell redirect (blocked by protect_paths), and to write a secret (blocked by
block_secrets). The tests read what the model server received after each call: the block
reason as the client reported it to the model (Claude Code's `tool_result`, Codex's
`function_call_output`/`custom_tool_call_output`), and check the files on disk and the hooks log.
A second pair of runs breaks a gate's configuration: non-strict, the call goes through and the
model is told; strict, the call is blocked.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import run_claude, run_codex
from tests.e2e.model_server import (
    ModelServer,
    ReceivedRequest,
    Step,
    Text,
    ToolCall,
    tool_output_text,
)
from tests.helpers import COS, CosProject, add_file_patch, new_project, require_clients, succeeded


pytestmark = pytest.mark.e2e

GATES_YAML = ("gates:\n"
              "  require_task_for_edits: true\n"
              "  protect_paths: ['.env', 'secrets/**']\n"
              "  block_secrets: true\n")
# Built at run time so no file of the repository holds a secret-shaped string verbatim.
SECRET = "AKIA" + "Q3EXAMPLE7KEY2ID"
PROMPT = "Write some files"
SET_TASK = f"'{COS}' state set .task-current TASK-1"


def edit_call(agent: str, project: Path, name: str, text: str) -> ToolCall:
    """A call of the client's own file-writing tool creating `name`."""
    if agent == "claude":
        return ToolCall("Write", {"file_path": str(project / name), "content": text})
    return ToolCall("apply_patch", {"input": add_file_patch(project / name, text)},
                    freeform=True)


def shell_call(agent: str, command: str) -> ToolCall:
    if agent == "claude":
        return ToolCall("Bash", {"command": command, "description": "Scripted command"})
    return ToolCall("exec_command", {"cmd": command})


def script(agent: str, project: Path) -> list[Step]:
    return [
        edit_call(agent, project, "first.txt", "before the task\n"),  # 0: no task yet
        shell_call(agent, SET_TASK),  # 1
        edit_call(agent, project, "first.txt", "with a task\n"),  # 2: allowed
        edit_call(agent, project, ".env", "A=1\n"),  # 3: protected
        shell_call(agent, "mkdir -p secrets && echo x > secrets/key.txt"),  # 4: protected
        edit_call(agent, project, "config.py", f"KEY = '{SECRET}'\n"),  # 5: a secret
        Text("All done."),
    ]


def tool_outputs(server: ModelServer, agent: str) -> list[str]:
    """What the client told the model each tool call returned, in call order, from the last
    request (it carries the whole conversation)."""
    if agent == "claude":
        turns = [r for r in server.requests_to("/v1/messages")
                 if isinstance(r.body, dict) and r.body.get("tools")]
        outputs = []
        for message in turns[-1]["messages"]:
            content = message.get("content")
            for block in content if isinstance(content, list) else []:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    outputs.append(tool_output_text(block.get("content")))
        return outputs
    turns = [r for r in server.requests_to("/v1/responses")
             if isinstance(r.body, dict) and r.body.get("tools")]
    return [tool_output_text(item.get("output")) for item in turns[-1]["input"]
            if isinstance(item, dict)
            and item.get("type") in ("function_call_output", "custom_tool_call_output")]


def last_request(server: ModelServer, agent: str) -> ReceivedRequest:
    path = "/v1/messages" if agent == "claude" else "/v1/responses"
    return [r for r in server.requests_to(path)
            if isinstance(r.body, dict) and r.body.get("tools")][-1]


@dataclass
class GatedSession:
    cp: CosProject
    outputs: list[str] = field(default_factory=list)
    log: list[dict[str, Any]] = field(default_factory=list)
    broken_open: str = ""  # the whole last request of the run with a broken, non-strict gate
    broken_open_outputs: list[str] = field(default_factory=list)
    broken_strict_outputs: list[str] = field(default_factory=list)


def run(agent: str, project: Path, server: ModelServer, home: Path) -> None:
    if agent == "claude":
        succeeded(run_claude(project, PROMPT, server, home))
    else:
        succeeded(run_codex(project, PROMPT, server, home))


def run_gated(root: Path, agent: str) -> GatedSession:
    require_clients()
    cp = new_project(root, agent)
    (cp.project / ".coding-os.yaml").write_text(GATES_YAML, encoding="utf-8")
    session = GatedSession(cp=cp)
    with ModelServer(script(agent, cp.project)) as server:
        run(agent, cp.project, server, cp.home)
        session.outputs = tool_outputs(server, agent)
    session.log = cp.log()
    # A broken glob, not strict: the write goes through and the model is told.
    (cp.project / ".coding-os.yaml").write_text(
        "gates:\n  protect_paths: ['secrets/[oops']\n", encoding="utf-8")
    with ModelServer([edit_call(agent, cp.project, "open.txt", "x\n"), Text("Ok.")]) as server:
        run(agent, cp.project, server, cp.home)
        session.broken_open_outputs = tool_outputs(server, agent)
        session.broken_open = json.dumps(last_request(server, agent).body)
    # The same, strict: the write is blocked.
    (cp.project / ".coding-os.yaml").write_text(
        "gates:\n  protect_paths: {paths: ['secrets/[oops'], strict: true}\n", encoding="utf-8")
    with ModelServer([edit_call(agent, cp.project, "strict.txt", "x\n"), Text("Ok.")]) as server:
        run(agent, cp.project, server, cp.home)
        session.broken_strict_outputs = tool_outputs(server, agent)
    return session


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedSession]:
    yield run_gated(tmp_path_factory.mktemp("gates-claude"), "claude")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatedSession]:
    yield run_gated(tmp_path_factory.mktemp("gates-codex"), "codex")


@pytest.fixture(params=["claude", "codex"])
def gated(request: pytest.FixtureRequest) -> GatedSession:
    result: GatedSession = request.getfixturevalue(request.param)
    return result


def pre_tool_lines(session: GatedSession) -> list[dict[str, Any]]:
    return [line for line in session.log if line["event"] == "PreToolUse"]


def test_every_scripted_call_reached_the_client_and_came_back_to_the_model(
        gated: GatedSession) -> None:
    assert len(gated.outputs) == 6, gated.outputs


def test_an_edit_without_a_current_task_is_blocked_with_the_fix_in_the_reason(
        gated: GatedSession) -> None:
    reported = gated.outputs[0]
    assert "Blocked by coding-os gate require_task_for_edits" in reported
    assert "cos state set .task-current TASK-<n>" in reported
    assert "hook error" in reported if gated.cp.agent == "claude" else \
        "blocked by PreToolUse hook" in reported


def test_a_task_set_from_a_shell_step_lets_the_session_edit(gated: GatedSession) -> None:
    assert "Blocked" not in gated.outputs[1], gated.outputs[1]
    assert "Blocked" not in gated.outputs[2], gated.outputs[2]
    assert (gated.cp.project / "first.txt").read_text(encoding="utf-8") == "with a task\n"
    # The shell step's `cos state set` landed in the panel of the session that made it.
    first_write = [line for line in pre_tool_lines(gated)
                   if line.get("gates", "").endswith("require_task_for_edits:allow")]
    assert first_write and first_write[0]["task"] == "TASK-1"


def test_writes_to_protected_paths_are_blocked_from_the_edit_tool_and_the_shell(
        gated: GatedSession) -> None:
    assert "Blocked by coding-os gate protect_paths" in gated.outputs[3]
    assert "'.env'" in gated.outputs[3]
    assert "Blocked by coding-os gate protect_paths" in gated.outputs[4]
    assert "'secrets/**'" in gated.outputs[4]
    assert not (gated.cp.project / ".env").exists()
    assert not (gated.cp.project / "secrets").exists()  # the whole command was refused


def test_a_secret_is_blocked_and_neither_the_reason_nor_the_log_repeats_it(
        gated: GatedSession) -> None:
    reported = gated.outputs[5]
    assert "Blocked by coding-os gate block_secrets" in reported
    assert "(pattern aws_access_key_id)" in reported
    reason = reported[reported.index("Blocked by"):]
    if gated.cp.agent == "codex":
        # Codex appends the refused command (here the patch) after the hook's reason.
        reason = reason.split(". Command:")[0]
    assert SECRET not in reason
    assert not (gated.cp.project / "config.py").exists()
    log_text = (gated.cp.state / ".hooks.log").read_text(encoding="utf-8")
    assert SECRET not in log_text
    for path in gated.cp.state.rglob("*"):
        if path.is_file() and path.suffix in (".jsonl", ".json", ".log"):
            assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path


def test_each_gate_decision_is_in_the_hooks_log(gated: GatedSession) -> None:
    blocked = [line.get("blocked_by") for line in pre_tool_lines(gated)]
    assert blocked == ["require_task_for_edits", None, None, "protect_paths", "protect_paths",
                       "block_secrets"]
    for line in pre_tool_lines(gated):
        assert line.get("gates"), line


def test_a_broken_gate_fails_open_and_the_model_is_told(gated: GatedSession) -> None:
    assert "Blocked" not in gated.broken_open_outputs[0]
    assert (gated.cp.project / "open.txt").exists()
    assert "coding-os gate protect_paths could not check this call" in gated.broken_open


def test_a_broken_strict_gate_blocks_saying_it_could_not_check(gated: GatedSession) -> None:
    reported = gated.broken_strict_outputs[0]
    assert "Blocked by coding-os gate protect_paths: it could not check" in reported
    assert not (gated.cp.project / "strict.txt").exists()
