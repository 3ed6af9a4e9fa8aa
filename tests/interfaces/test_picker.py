"""The picker's rows and preview (the keys are tested under tmux in tests/interfaces/test_picker_tmux.py)."""

from __future__ import annotations

from pathlib import Path

from coding_os import api
from coding_os.interfaces import picker


def test_the_preview_shows_the_first_and_last_prompt_one_line_each() -> None:
    row: dict[str, object] = {"id": "ses-claude-20261129-100000-aaaa", "agent": "claude",
                              "messages": 4, "tokens": 10, "first_prompt": "add a\nlogin page",
                              "last_prompt": "now   the tests"}
    lines = picker._preview(row)
    assert "first prompt add a login page" in lines
    assert "last prompt now the tests" in lines
    assert "id          ses-claude-20261129-100000-aaaa" in lines
    assert len(lines) <= picker.PREVIEW_LINES


def test_the_row_and_preview_show_control_characters_from_a_transcript_visibly() -> None:
    row: dict[str, object] = {"id": "i", "agent": "claude", "messages": 1,
                              "title": "t \x1b]0;pwned\x07 \x9b2J",
                              "first_prompt": "p \x1b[2J\x1b[H"}
    shown = [picker.session_row(row, 200), *picker._preview(row)]
    assert not any(ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0 for line in shown for c in line)
    assert shown[0].endswith("t ^[]0;pwned^G M-^[2J")
    assert "first prompt p ^[[2J^[[H" in shown


def test_the_preview_has_a_line_for_every_field_it_can_show() -> None:
    every = {"id": "i", "title": "t", "name": "n", "native_id": "u", "agent": "claude",
             "cwd": "/c", "branch": "b", "created": "c", "last_active": "l", "messages": 1,
             "tokens": 2, "forked_from": "f", "first_prompt": "p", "last_prompt": "q"}
    assert len(picker._preview(every)) == picker.PREVIEW_LINES


def test_the_rows_the_picker_loads_carry_the_prompts_of_each_session(
        repo: Path, isolated_env: Path) -> None:
    env = {"HOME": str(isolated_env)}
    sid = api.create_session("claude", env=env, cwd=str(repo))
    api.append_event(sid, "user", {"text": "first ask", "turn": 1}, env=env, cwd=str(repo))
    api.append_event(sid, "user", {"text": "second ask", "turn": 2}, env=env, cwd=str(repo))
    api.import_sessions(env=env, cwd=str(repo))
    (row,) = api.resumable_sessions(env=env, cwd=str(repo))
    assert (row["id"], row["first_prompt"], row["last_prompt"]) == (
        sid, "first ask", "second ask")
    assert set(row) == set(api.PICKER_FIELDS)
    listed = api.list_sessions(env=env, cwd=str(repo))
    assert list(listed[0]) == list(api.SESSION_FIELDS)  # list rows keep their documented fields
