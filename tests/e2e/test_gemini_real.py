"""Gemini CLI as a first-class agent, with the real Gemini CLI 0.61 (`gemini -p … --yolo`)
against the scripted Gemini API server: `cos init --agent gemini` installs cos's hooks in the
project's `.gemini/settings.json`, a run leaves its panel, state and hooks-log lines tagged
gemini and a checkpoint before its shell command, and `cos rewind --code` brings back the file
that command removed; the session is in the one list, and `cos resume` hands over to `gemini
--resume <id>`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.helpers import cos, git

from .gemini_cli import (GEMINI_BIN, gemini_env, require_gemini, run_gemini,
                         write_gemini_settings)
from .gemini_server import GeminiServer, Text, ToolCall


def cos_json(project: Path, home: Path, *args: str) -> Any:
    proc = cos(*args, "--json", cwd=project, env={"HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_gemini_run_in_an_initialised_project_is_checkpointed_and_its_shell_rewound(
        isolated_env: Path, project: Path, gemini_server: GeminiServer) -> None:
    require_gemini()
    home = isolated_env
    write_gemini_settings(home)
    (project / "doomed.txt").write_text("keep me\n", encoding="utf-8")
    git(project, "add", "doomed.txt")
    git(project, "commit", "-q", "-m", "doomed")
    settings = project / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"ui": {"theme": "mine"}, "hooks": {"BeforeTool": [
        {"matcher": "write_file", "hooks": [{"type": "command", "command": "true"}]}]}}),
        encoding="utf-8")
    installed = cos_json(project, home, "init", "--agent", "gemini")
    assert installed["file"] == str(settings) and installed["changed"] is True
    written = json.loads(settings.read_text(encoding="utf-8"))
    assert written["ui"] == {"theme": "mine"}  # the user's own settings and hooks stay
    assert written["hooks"]["BeforeTool"][0]["matcher"] == "write_file"
    assert set(written["hooks"]) == {"SessionStart", "BeforeAgent", "BeforeTool", "AfterTool",
                                     "AfterAgent", "PreCompress", "SessionEnd"}
    assert "matcher" not in written["hooks"]["SessionStart"][0]
    assert written["hooks"]["BeforeTool"][1]["matcher"] == "*"
    before = settings.read_bytes()
    assert cos_json(project, home, "init", "--agent", "gemini")["changed"] is False
    assert settings.read_bytes() == before  # a second init changes no byte

    gemini_server.scripts = {"": [ToolCall("run_shell_command", {"command": "rm doomed.txt"}),
                                  Text("Removed it.")]}
    run = run_gemini(project, "remove doomed.txt", gemini_server, home)
    assert run.returncode == 0, run.stderr[-3000:]
    session_id = json.loads(run.stdout)["session_id"]
    assert not (project / "doomed.txt").exists()

    assert (project / ".coding-os" / "gemini" / "panels" / session_id).is_dir()
    log = cos_json(project, home, "hooks-log")
    ours = [line for line in log if line.get("agent") == "gemini"]
    events = [line["payload_event"] if line.get("payload_event") else line["event"]
              for line in ours]
    for event in ("SessionStart", "BeforeAgent", "BeforeTool", "AfterTool", "SessionEnd"):
        assert event in events, events
    [before_tool] = [line for line in ours if line.get("payload_event") == "BeforeTool"]
    assert before_tool["tool"] == "run_shell_command" and before_tool["checkpoint"]
    checkpoint = str(before_tool["checkpoint"])

    rewind = cos("rewind", checkpoint, "--code", cwd=project,
                 env={"HOME": str(home)})
    assert rewind.returncode == 0, rewind.stderr
    assert (project / "doomed.txt").read_text(encoding="utf-8") == "keep me\n"

    rows = cos_json(project, home, "sessions", "--agent", "gemini")
    [row] = [row for row in rows if row["native_id"] == session_id]  # a prompt, two answers
    assert (row["agent"], row["messages"], row["title"]) == ("gemini", 3, "remove doomed.txt")

    removed = cos_json(project, home, "uninstall", "--agent", "gemini")
    assert removed[0]["changed"] is True
    assert json.loads(settings.read_text(encoding="utf-8")) == {
        "ui": {"theme": "mine"}, "hooks": {"BeforeTool": [
            {"matcher": "write_file", "hooks": [{"type": "command", "command": "true"}]}]}}


def test_cos_resume_of_a_gemini_session_hands_over_to_gemini_resume(
        isolated_env: Path, project: Path, gemini_server: GeminiServer) -> None:
    require_gemini()
    home = isolated_env
    write_gemini_settings(home)
    gemini_server.scripts = {"": [Text("First answer."), Text("Second answer.")]}
    first = run_gemini(project, "FIRST: say something", gemini_server, home)
    assert first.returncode == 0, first.stderr[-3000:]
    session_id = json.loads(first.stdout)["session_id"]
    shown = cos("resume", session_id, "--dry-run", "--json", cwd=project,
                env=gemini_env(gemini_server, home))
    assert shown.returncode == 0, shown.stderr
    handover = json.loads(shown.stdout)["handover"]
    assert handover["argv"] == ["gemini", "--resume", session_id]
    assert handover["cwd"] == str(project)
    handed = subprocess.run(
        [str(GEMINI_BIN), *handover["argv"][1:], "-p", "SECOND: and again",
         "--output-format", "json", "--yolo"], cwd=handover["cwd"], capture_output=True,
        text=True, timeout=120, env=gemini_env(gemini_server, home))
    assert handed.returncode == 0, handed.stderr[-3000:]
    sent = json.dumps(gemini_server.agent_requests()[-1].body)
    assert "FIRST: say something" in sent and "First answer." in sent
