"""`cos doctor` and `cos init --agent codex` with the real Codex (scripted model): the hooks check
fails until the user adds what init printed to their own Codex configuration, and then Codex
runs cos's hooks, whose checkpoint before a shell `rm` brings the file back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.harness import run_codex, write_codex_config
from tests.e2e.model_server import ModelServer, Text, ToolCall
from tests.helpers import cos, git, require_clients, succeeded
from tests.helpers import cos_doctor as doctor
from tests.helpers import doctor_checks as by_name

pytestmark = pytest.mark.e2e


def test_codex_runs_cos_hooks_with_only_the_set_up_init_printed_and_doctor_says_when(
        repo: Path, isolated_env: Path) -> None:
    require_clients()
    (repo / "victim.txt").write_text("the file the agent deletes\n", encoding="utf-8")
    git(repo, "add", "victim.txt")
    git(repo, "commit", "-q", "-m", "victim")
    user_config = isolated_env / ".codex" / "config.toml"
    with ModelServer([ToolCall("exec_command", {"cmd": "rm victim.txt"}),
                      Text("Deleted.")]) as server:
        write_codex_config(user_config.parent, server)  # the user's own Codex set-up
        proc = cos("init", "--agent", "codex", "--json", cwd=repo)
        assert proc.returncode == 0, proc.stderr
        steps = json.loads(proc.stdout)["user_steps"]
        printed = cos("init", "--agent", "codex", cwd=repo).stdout  # as the user reads it
        assert [step["file"] for step in steps] == [str(user_config)]
        for line in steps[0]["append"].splitlines():
            assert f"  {line}" in printed.splitlines(), printed
        assert "bypass" not in printed and "--trust" not in printed

        code, report = doctor(repo)
        hooks = by_name(report)["hooks"]
        assert code == 6 and hooks["status"] == "fail", hooks
        assert f"Codex does not trust {repo}" in hooks["detail"]
        assert steps[0]["append"].splitlines()[0] in hooks["fix"]

        with open(user_config, "a", encoding="utf-8") as f:  # exactly what init said to do
            f.write(steps[0]["append"])
        hooks = by_name(doctor(repo)[1])["hooks"]
        assert hooks["status"] == "ok", hooks
        assert f"Codex trusts {repo}" in hooks["detail"]

        ran = succeeded(run_codex(repo, "Delete the victim file", server, isolated_env,
                                  as_set_up=True))
    assert not (repo / "victim.txt").exists()
    assert "clamping" not in ran.stderr  # no warning about cos's hooks on every run
    rows = json.loads(cos("hooks-log", "--json", cwd=repo).stdout)
    events = [row["event"] for row in rows]
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"):
        assert event in events, rows
    before_rm = next(row for row in rows if row["event"] == "PreToolUse"
                     and row.get("input") == "rm victim.txt")
    assert before_rm.get("checkpoint"), before_rm
    preview = cos("rewind", str(before_rm["checkpoint"]), "--code", "--dry-run", "--json",
                  cwd=repo)
    assert preview.returncode == 0, preview.stderr
    assert "victim.txt" in preview.stdout  # the checkpoint before `rm` brings the file back
