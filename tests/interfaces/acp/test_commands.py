"""interfaces/acp/commands.py: the editor's /checkpoints, /rewind and /fork, and `_cos/rewind`,
over a real git repository and a cos session with checkpoints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.errors import InvalidInput
from coding_os.interfaces.acp import commands


@pytest.fixture
def deleted(isolated_env: Path, project: Path) -> tuple[Path, str, str]:
    """`project` with an untracked notes.txt, a cos session, a checkpoint of that session, then
    notes.txt deleted by a shell command (as an agent's Bash tool deletes it)."""
    (project / ".coding-os").mkdir(mode=0o700, exist_ok=True)
    (project / "notes.txt").write_text("one\ntwo\nthree\n", encoding="utf-8")
    session = api.create_session("cos", cwd=str(project))
    api.append_event(session, "user", {"text": "tidy up", "turn": 1}, cwd=str(project))
    checkpoint = str(api.checkpoint_create(session, cwd=str(project))["id"])
    api.append_event(session, "assistant", {"text": "removed notes", "turn": 1},
                     cwd=str(project))
    subprocess.run(["sh", "-c", "rm notes.txt"], cwd=project, check=True)
    return project, session, checkpoint


def _cos(project: Path, *args: str) -> Any:
    done = subprocess.run([sys.executable, "-m", "coding_os", *args, "--json"], cwd=project,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_available_names_the_three_commands() -> None:
    assert [c["name"] for c in commands.available()] == ["checkpoints", "rewind", "fork"]
    assert all(c["description"] for c in commands.available())


def test_a_prompt_that_is_not_a_command_is_left_to_the_agent(
        deleted: tuple[Path, str, str]) -> None:
    project, session, _checkpoint = deleted
    assert commands.run(session, str(project), "please /rewind later") is None
    assert commands.run(session, str(project), "/compact") is None


def test_checkpoints_names_each_by_the_id_cos_rewind_takes(
        deleted: tuple[Path, str, str]) -> None:
    project, session, checkpoint = deleted
    text = commands.run(session, str(project), "/checkpoints")
    assert text is not None and checkpoint in text
    listed = {row["id"] for row in _cos(project, "checkpoints", "--session", session)}
    assert checkpoint in listed


def test_rewind_dry_run_says_what_it_would_restore_and_changes_nothing(
        deleted: tuple[Path, str, str]) -> None:
    project, session, checkpoint = deleted
    answer = commands.rewind({"sessionId": session, "checkpoint": checkpoint, "mode": "code",
                              "dryRun": True, "cwd": str(project)})
    assert answer["restored"] is False
    assert {"path": "notes.txt", "action": "create"} in answer["files"]
    assert answer["insertions"] + answer["deletions"] >= 3
    assert not (project / "notes.txt").exists()


def test_rewind_both_restores_the_file_a_shell_command_deleted_and_the_conversation(
        deleted: tuple[Path, str, str]) -> None:
    project, session, checkpoint = deleted
    answer = commands.rewind({"sessionId": session, "checkpoint": checkpoint, "mode": "both",
                              "dryRun": False, "cwd": str(project)})
    assert answer["restored"] is True
    assert (project / "notes.txt").read_text(encoding="utf-8") == "one\ntwo\nthree\n"
    turns = api.session_turns(session, cwd=str(project))["turns"]
    assert [t["text"] for t in turns] == ["tidy up"]


def test_slash_rewind_both_restores_the_file_too(deleted: tuple[Path, str, str]) -> None:
    project, session, checkpoint = deleted
    text = commands.run(session, str(project), f"/rewind {checkpoint} both")
    assert text is not None and checkpoint in text
    assert (project / "notes.txt").exists()


def test_fork_answers_the_new_session(deleted: tuple[Path, str, str]) -> None:
    project, session, _checkpoint = deleted
    text = commands.run(session, str(project), "/fork")
    assert text is not None and text.startswith("Forked into session ses-")


@pytest.mark.parametrize(("params", "field"), [
    ({"checkpoint": "cp-x", "mode": "code"}, "sessionId"),
    ({"sessionId": "s", "mode": "code"}, "checkpoint"),
    ({"sessionId": "s", "checkpoint": "cp-x", "mode": "files"}, "mode"),
    ({"sessionId": "s", "checkpoint": "cp-x", "dryRun": "yes"}, "dryRun"),
])
def test_rewind_refuses_bad_params_naming_the_field(params: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        commands.rewind(params)


def test_rewind_refuses_a_checkpoint_of_another_session(
        deleted: tuple[Path, str, str]) -> None:
    project, _session, checkpoint = deleted
    other = api.create_session("cos", cwd=str(project))
    with pytest.raises(InvalidInput, match="checkpoint"):
        commands.rewind({"sessionId": other, "checkpoint": checkpoint, "cwd": str(project)})
    assert not (project / "notes.txt").exists()
