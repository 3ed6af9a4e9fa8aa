"""The state layer driven by the real Claude Code and Codex CLIs, through `cos init`'s hooks.

Each client runs a scripted session (edit a file, run a shell command, delegate to a subagent,
compact) in a scratch git repository where `cos init --agent <client>` installed the hooks; the
tests then read what coding-os recorded: the session id in the panel directory, a hooks-log line
for every event fired, presence, heartbeat, observations and the summary in the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.harness import run_claude, run_codex
from tests.e2e.model_server import (
    ModelServer,
    Step,
    Text,
    ToolCall,
    claude_edit_script,
    codex_edit_script,
)
from tests.helpers import (
    COS,
    EDITED_LINE,
    ORIGINAL_LINE,
    SUBAGENT_MARKER,
    CosProject,
    new_project,
    require_clients,
    succeeded,
    wait_for_spawned_agent,
)


pytestmark = pytest.mark.e2e

EXPECTED_EVENTS = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop",
                   "SubagentStart", "SubagentStop", "PreCompact", "SessionEnd"}


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosProject]:
    """Claude Code: Read, Edit, Bash, a subagent; then `-p /compact --resume` of the session."""
    require_clients()
    root = tmp_path_factory.mktemp("cos-claude")
    cp = new_project(root, "claude")
    hello = str(cp.project / "hello.txt")
    main = claude_edit_script(hello, ORIGINAL_LINE, EDITED_LINE, "rm -f gone.txt; echo ran > ran.txt")
    main = main[:-1] + [
        ToolCall("Agent", {"description": "Scripted subagent",
                           "prompt": f"{SUBAGENT_MARKER}: write sub.txt", "run_in_background": False}),
        Text("All done."),
    ]
    sub: list[Step] = [ToolCall("Bash", {"command": "echo sub > sub.txt", "description": "sub"}),
                       Text("Sub done.")]
    with ModelServer({"": main, SUBAGENT_MARKER: sub}) as server:
        first = succeeded(run_claude(cp.project, "Say hello to coding-os", server, cp.home))
        cp.native_id = json.loads(first.stdout)["session_id"]
        cp.results.append(first)
        cp.results.append(succeeded(run_claude(cp.project, "/compact", server, cp.home,
                                               extra_args=("--resume", cp.native_id))))
    yield cp


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosProject]:
    """Codex: cat, apply_patch, a command, a subagent, then an automatic compaction."""
    require_clients()
    root = tmp_path_factory.mktemp("cos-codex")
    cp = new_project(root, "codex")
    hello = str(cp.project / "hello.txt")
    main = codex_edit_script(hello, ORIGINAL_LINE, EDITED_LINE,
                             "printenv CODEX_THREAD_ID > ran.txt")[:-1] + [
        ToolCall("spawn_agent", {"message": f"{SUBAGENT_MARKER}: write sub.txt"},
                 namespace="multi_agent_v1"),
        wait_for_spawned_agent,
        Text("All done."),
    ]
    sub: list[Step] = [ToolCall("exec_command", {"cmd": "echo sub > sub.txt"}), Text("Sub done.")]
    with ModelServer({"": main, SUBAGENT_MARKER: sub}) as server:
        cp.results.append(succeeded(run_codex(cp.project, "Say hello to coding-os", server, cp.home,
                                              config_toml="model_auto_compact_token_limit = 100000")))
    cp.native_id = (cp.project / "ran.txt").read_text(encoding="utf-8").strip()
    yield cp


CLIENTS = ["claude", "codex"]


@pytest.fixture(params=CLIENTS)
def run(request: pytest.FixtureRequest) -> CosProject:
    result: CosProject = request.getfixturevalue(request.param)
    return result


def panel_session(cp: CosProject) -> tuple[str, str]:
    session_file = cp.state / cp.agent / "panels" / cp.native_id / "session-id"
    owner, native = session_file.read_text(encoding="utf-8").split()
    return owner, native


def test_the_client_did_its_work_with_the_hooks_installed(run: CosProject) -> None:
    assert (run.project / "hello.txt").read_text(encoding="utf-8") == EDITED_LINE + "\n"
    assert (run.project / "ran.txt").exists() and (run.project / "sub.txt").exists()
    assert not any("cos hook" in r.stderr for r in run.results)


def test_the_session_id_lives_in_the_clients_panel_directory(run: CosProject) -> None:
    session, native = panel_session(run)
    assert session.startswith(f"ses-{run.agent}-") and native == run.native_id
    panels = sorted(p.name for p in (run.state / run.agent / "panels").iterdir())
    assert panels == [run.native_id]  # subagents and compaction stay in the session's panel
    assert (run.state / run.agent / ".active-session").read_text(encoding="utf-8").split() == \
        [session, run.native_id]


def test_every_event_fired_has_a_hooks_log_line_of_this_session(run: CosProject) -> None:
    session, _ = panel_session(run)
    lines = run.log()
    assert {line["event"] for line in lines} >= EXPECTED_EVENTS
    for line in lines:
        if line["event"] in EXPECTED_EVENTS:
            assert (line["agent"], line["panel"], line["session"]) == \
                (run.agent, run.native_id, session), line
        assert "error" not in line and "db_error" not in line, line


def test_compaction_and_resume_keep_the_same_session(run: CosProject) -> None:
    session, _ = panel_session(run)
    starts = [line for line in run.log() if line["event"] == "SessionStart"]
    sources = [line["source"] for line in starts]
    assert "startup" in sources and "compact" in sources
    assert {line["session"] for line in starts} == {session}
    compact = [line for line in starts if line["source"] == "compact"]
    assert all(line.get("kept") == "1" for line in compact)


def test_presence_and_heartbeat_are_recorded(run: CosProject) -> None:
    session, _ = panel_session(run)
    presence = json.loads((run.state / run.agent / "sessions" / f"{session}.json")
                          .read_text(encoding="utf-8"))
    assert (presence["native_id"], presence["panel"], presence["status"]) == \
        (run.native_id, run.native_id, "ended")
    assert presence["project"] == str(run.project)
    heartbeat = run.state / run.agent / "panels" / run.native_id / "heartbeat"
    assert heartbeat.read_text(encoding="utf-8").split()[0] == session
    assert time.time() - heartbeat.stat().st_mtime < 600


def test_observations_and_summary_reach_the_database(run: CosProject) -> None:
    session, _ = panel_session(run)
    tools = run.db("SELECT tool, text FROM observations WHERE session = ? AND event = 'PostToolUse'",
                   session)
    texts = " ".join(str(text) for _, text in tools)
    assert "ran.txt" in texts and "sub.txt" in texts  # the main shell command and the subagent's
    edit_tool = "Edit" if run.agent == "claude" else "apply_patch"
    assert edit_tool in {tool for tool, _ in tools}
    assert run.db("SELECT native_id, status FROM sessions WHERE id = ?", session) == \
        [(run.native_id, "ended")]
    reason, prompts, tool_calls = run.db(
        "SELECT reason, prompts, tool_calls FROM session_summaries WHERE session = ?", session)[0]
    assert reason == "end:other" and prompts >= 1 and tool_calls == len(tools)


def test_whoami_from_a_real_payload_names_the_session(run: CosProject) -> None:
    payload = (Path(__file__).parent / "payloads" / f"{run.agent}-PostToolUse.json").read_text(
        encoding="utf-8")
    body = json.loads(payload)
    body["session_id"] = run.native_id
    proc = subprocess.run([COS, "whoami", "--json", "--payload", "-"], cwd=run.project,
                          env={"PATH": os.environ["PATH"], "HOME": str(run.home),
                               "COS_AGENT": run.agent},
                          input=json.dumps(body), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert (info["panel_source"], info["session_id"]) == ("payload", panel_session(run)[0])
