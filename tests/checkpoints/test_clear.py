"""After `/clear` (DESIGN.md §5): the cleared session's latest checkpoint is the first entry
`cos checkpoints --session NEW` offers, so the user can rewind across the clear."""

from __future__ import annotations

import json
from pathlib import Path

from coding_os.state.caller import read_panel_session
from tests.helpers import cos, cos_json, fire, rewind_ok


PID = {"CLAUDE_PID": "4242"}
BEFORE = "0f3c9a7e-1b2d-4c5e-8f90-0000000000b1"
AFTER = "0f3c9a7e-1b2d-4c5e-8f90-0000000000a2"


def session_of(project: Path, native: str) -> str:
    current = read_panel_session(str(project / ".coding-os" / "claude" / "panels" / native))
    assert current is not None
    return current[0]


def hook(project: Path, event: str, native: str, **payload: object) -> None:
    proc = fire(event, {"session_id": native, **payload}, cwd=project, env=PID)
    assert proc.returncode == 0, proc.stderr


def cleared_project(project: Path) -> tuple[str, str]:
    """A session with two prompts (the second after an edit), then `/clear` in the same Claude
    Code process: a new native id, so a new cos session."""
    hook(project, "SessionStart", BEFORE, source="startup")
    hook(project, "UserPromptSubmit", BEFORE, prompt="first prompt")
    (project / "README.md").write_text("edited in the first session\n", encoding="utf-8")
    hook(project, "UserPromptSubmit", BEFORE, prompt="second prompt")
    hook(project, "Stop", BEFORE, last_assistant_message="done")
    hook(project, "SessionEnd", BEFORE, reason="clear")
    hook(project, "SessionStart", AFTER, source="clear")
    return session_of(project, BEFORE), session_of(project, AFTER)


def test_after_clear_the_new_sessions_list_starts_with_the_cleared_sessions_latest_checkpoint(
        project: Path) -> None:
    old, new = cleared_project(project)
    assert old != new
    theirs = cos_json("checkpoints", "--session", old, cwd=project)
    assert isinstance(theirs, list) and len(theirs) >= 2
    listed = cos_json("checkpoints", "--session", new, cwd=project)
    assert isinstance(listed, list) and len(listed) == 1
    first = listed[0]
    assert first["from_cleared_session"] == old
    assert first["id"] == theirs[0]["id"] and first["session"] == old
    assert "from_cleared_session" not in theirs[0]


def test_the_new_sessions_own_checkpoints_follow_the_cleared_sessions_latest(
        project: Path) -> None:
    old, new = cleared_project(project)
    hook(project, "UserPromptSubmit", AFTER, prompt="third prompt, after the clear")
    (project / "notes.txt").write_text("new work\n", encoding="utf-8")
    hook(project, "UserPromptSubmit", AFTER, prompt="fourth prompt")
    listed = cos_json("checkpoints", "--session", new, cwd=project)
    assert isinstance(listed, list)
    assert [row["session"] for row in listed] == [old, new, new]
    assert listed[0]["from_cleared_session"] == old
    assert [row.get("from_cleared_session") for row in listed[1:]] == [None, None]
    assert [row["prompt"] for row in listed[1:]] == ["fourth prompt",
                                                     "third prompt, after the clear"]


def test_rewinding_to_the_offered_entry_restores_the_tree_as_the_cleared_session_left_it(
        project: Path) -> None:
    _, new = cleared_project(project)
    (project / "README.md").write_text("edited after the clear\n", encoding="utf-8")
    (project / "extra.txt").write_text("x\n", encoding="utf-8")
    offered = cos_json("checkpoints", "--session", new, cwd=project)[0]  # type: ignore[index]
    rewind_ok(project, offered["id"], "--code")
    assert (project / "README.md").read_text(encoding="utf-8") == "edited in the first session\n"
    assert not (project / "extra.txt").exists()


def test_a_session_not_started_by_clear_offers_only_its_own_checkpoints(project: Path) -> None:
    hook(project, "SessionStart", BEFORE, source="startup")
    hook(project, "UserPromptSubmit", BEFORE, prompt="first prompt")
    proc = cos("checkpoints", "--session", session_of(project, BEFORE), "--json", cwd=project)
    listed = json.loads(proc.stdout)
    assert len(listed) == 1 and "from_cleared_session" not in listed[0]
