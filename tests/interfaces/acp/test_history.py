"""interfaces/acp/history.py: `session/list` (the one list, paged) and `session/load` (the
lossless replay, streamed) over the shared fixtures laid out as sessions of a real git repo."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from coding_os import api
from coding_os.errors import InvalidInput, NotFound
from coding_os.interfaces.acp import history
from tests.helpers import (CLAUDE_FIXTURES, CODEX_FIXTURES, MAIN_1053, ROLLOUTS, TOOLS, VIEWER,
                           claude_project_dir, require_claude_fixtures, require_codex_fixtures)

_FIXTURE_CWDS = ("/Users/dain/workspace/claude-code-log", "/path/to/Demo")


def _claude(home: Path, repo: Path, source: str, session: str) -> None:
    """A fixture Claude Code session as if it had run in `repo`."""
    text = (CLAUDE_FIXTURES / source).read_text(encoding="utf-8")
    for cwd in _FIXTURE_CWDS:
        text = text.replace(json.dumps(cwd), json.dumps(str(repo)))
    target = claude_project_dir(home, repo) / f"{session}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def _codex(codex_home: Path, repo: Path, thread: str) -> None:
    """A fixture Codex rollout as if it had run in `repo`."""
    prefix, stamp = ROLLOUTS[thread]
    name = f"rollout-{stamp}-{thread}.jsonl"
    lines = []
    for line in (CODEX_FIXTURES / f"{prefix}{name}").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        if entry.get("type") == "session_meta":
            entry["payload"]["cwd"] = str(repo)
        lines.append(json.dumps(entry))
    day = codex_home / "sessions" / stamp[:4] / stamp[5:7] / stamp[8:10]
    day.mkdir(parents=True, exist_ok=True)
    (day / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def sessions(isolated_env: Path, project: Path, monkeypatch: pytest.MonkeyPatch
             ) -> tuple[Path, dict[str, str]]:
    """`project` with two Claude Code sessions and a Codex one made outside cos, and a cos
    session; the ids by name."""
    require_claude_fixtures()
    require_codex_fixtures()
    (project / ".coding-os").mkdir(mode=0o700, exist_ok=True)
    codex_home = isolated_env / "codex-home"
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    _claude(isolated_env, project, f"claude-code-log__{MAIN_1053}.jsonl", MAIN_1053)
    _claude(isolated_env, project, f"claude-code-viewer__{VIEWER}.jsonl", VIEWER)
    _codex(codex_home, project, TOOLS)
    cos = api.create_session("cos", cwd=str(project))
    api.append_event(cos, "user", {"text": "delete notes", "turn": 1}, cwd=str(project))
    api.append_event(cos, "tool_call", {"turn": 1, "tool": "Bash", "call_id": "c1",
                                        "input": {"command": "rm notes.txt"}}, cwd=str(project))
    api.append_event(cos, "tool_result", {"turn": 1, "call_id": "c1", "ok": True,
                                          "output": ""}, cwd=str(project))
    api.append_event(cos, "assistant", {"turn": 1, "text": "done"}, cwd=str(project))
    return project, {"log": MAIN_1053, "viewer": VIEWER, "codex": TOOLS, "cos": cos}


def _counts(updates: list[dict[str, Any]]) -> Counter[str]:
    return Counter(update["sessionUpdate"] for update in updates)


def _by_native(project: Path, native: str) -> str:
    return str(api.show_session(native, cwd=str(project))["id"])


def test_the_list_has_every_agents_sessions_newest_first_with_their_meta(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, ids = sessions
    page = history.list_page(str(project))
    listed = page["sessions"]
    assert "nextCursor" not in page
    natives = {row["_meta"]["cos/native_id"] for row in listed}
    assert {ids["log"], ids["viewer"], ids["codex"]} <= natives
    assert {row["_meta"]["cos/agent"] for row in listed} >= {"claude", "codex", "cos"}
    assert ids["cos"] in {row["sessionId"] for row in listed}
    stamps = [row["updatedAt"] for row in listed]
    assert stamps == sorted(stamps, reverse=True)
    assert all(set(row) == {"sessionId", "cwd", "title", "updatedAt", "_meta"} for row in listed)


def test_pages_follow_the_cursor_and_new_sessions_do_not_shift_them(
        sessions: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    project, _ids = sessions
    whole = [row["sessionId"] for row in history.list_page(str(project))["sessions"]]
    monkeypatch.setattr(history, "PAGE_SIZE", 2)
    first = history.list_page(str(project))
    assert [row["sessionId"] for row in first["sessions"]] == whole[:2]
    api.create_session("cos", cwd=str(project))  # arrives newest, between two pages
    seen = [row["sessionId"] for row in first["sessions"]]
    cursor = first.get("nextCursor")
    while cursor is not None:
        page = history.list_page(str(project), cursor)
        seen += [row["sessionId"] for row in page["sessions"]]
        cursor = page.get("nextCursor")
    assert seen == whole


def test_a_cursor_it_did_not_make_is_refused_naming_the_field(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, _ids = sessions
    with pytest.raises(InvalidInput, match="cursor"):
        history.list_page(str(project), "not-a-cursor")


def test_load_of_a_claude_session_replays_every_turn_and_tool_call(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, ids = sessions
    updates = list(history.load_updates(_by_native(project, ids["log"]), str(project)))
    counts = _counts(updates)
    # SOURCES.md: 10 user entries, 9 of them tool results: one typed prompt; 9 tool calls.
    assert counts["user_message_chunk"] == 1
    assert counts["tool_call"] == counts["tool_call_update"] == 9
    assert counts["agent_message_chunk"] == 8
    calls = {u["toolCallId"]: u for u in updates if u["sessionUpdate"] == "tool_call"}
    for update in updates:
        if update["sessionUpdate"] == "tool_call_update":
            assert update["toolCallId"] in calls
            assert update["status"] in ("completed", "failed")
    read = next(u for u in calls.values() if u["_meta"]["cos/tool"] == "Read")
    assert read["kind"] == "read" and read["locations"] == [{"path": read["rawInput"]["file_path"]}]
    edits = [u for u in calls.values() if u["_meta"]["cos/tool"] == "Edit"]
    assert edits and all(u["kind"] == "edit" for u in edits)
    diffs = [c for u in updates if u["sessionUpdate"] == "tool_call_update"
             and u["toolCallId"] == edits[0]["toolCallId"] for c in u["content"]
             if c["type"] == "diff"]
    assert diffs == [{"type": "diff", "path": edits[0]["rawInput"]["file_path"],
                      "oldText": edits[0]["rawInput"]["old_string"],
                      "newText": edits[0]["rawInput"]["new_string"]}]


def test_load_replays_subagent_sidechains_as_tool_calls(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, ids = sessions
    updates = list(history.load_updates(_by_native(project, ids["viewer"]), str(project)))
    calls = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    subagents = [u for u in calls if u["_meta"].get("cos/sidechain")]
    # SOURCES.md: 3 Task calls, 2 sidechain chains inline; the export's 13 main-chain calls.
    assert len(subagents) == 2
    assert len(calls) - len(subagents) == 13
    assert sum(1 for u in calls if u["_meta"]["cos/tool"] == "Task" and u not in subagents) == 3
    assert _counts(updates)["user_message_chunk"] == 2


def test_load_of_a_codex_session_replays_its_typed_prompts_and_every_call(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, ids = sessions
    counts = _counts(list(history.load_updates(_by_native(project, ids["codex"]),
                                               str(project))))
    # SOURCES.md: 2 user_message events; function_call 99 + custom_tool_call 3, each answered.
    assert counts["user_message_chunk"] == 2
    assert counts["tool_call"] == counts["tool_call_update"] == 102
    assert counts["agent_message_chunk"] == 13


def test_load_of_a_cos_session_replays_its_transcript(
        sessions: tuple[Path, dict[str, str]]) -> None:
    project, ids = sessions
    updates = list(history.load_updates(ids["cos"], str(project)))
    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    assert updates[1]["kind"] == "execute" and updates[1]["rawInput"] == {"command": "rm notes.txt"}
    assert updates[2]["status"] == "completed"


def test_an_unknown_session_is_not_found(sessions: tuple[Path, dict[str, str]]) -> None:
    project, _ids = sessions
    with pytest.raises(NotFound):
        history.load_updates("ses-00000000000000000000000000", str(project))


def test_load_of_a_session_the_engine_ran_replays_its_events_with_their_seqs(
        isolated_env: Path, project: Path) -> None:
    import subprocess
    import sys

    (project / ".coding-os").mkdir(mode=0o700, exist_ok=True)
    subprocess.run([sys.executable, "-m", "coding_os", "run", "--agent", "exec",
                    "echo replayed"], cwd=project, check=True, capture_output=True)
    [row] = [r for r in api.list_sessions("repo", cwd=str(project)) if r["kind"] == "cos"]
    updates = list(history.load_updates(str(row["id"]), str(project)))
    assert updates[0]["sessionUpdate"] == "user_message_chunk"
    assert updates[0]["content"]["text"] == "echo replayed"
    said = "".join(u["content"]["text"] for u in updates
                   if u["sessionUpdate"] == "agent_message_chunk")
    assert "replayed" in said
    seqs = [u["_meta"]["cos/seq"] for u in updates]
    assert seqs == sorted(seqs) and all(isinstance(seq, int) for seq in seqs)


def test_gemini_sessions_are_listed_and_loaded_with_their_tool_calls(
        isolated_env: Path, project: Path) -> None:
    import shutil

    (project / ".coding-os").mkdir(mode=0o700, exist_ok=True)
    fixtures = Path(__file__).resolve().parents[2] / "adapters" / "gemini" / "fixtures"
    gemini = isolated_env / ".gemini"
    shutil.copytree(fixtures / "gemini-home", gemini)
    (gemini / "projects.json").write_text(json.dumps({"projects": {str(project): "project"}}),
                                          encoding="utf-8")
    (gemini / "tmp" / "project" / ".project_root").write_text(str(project), encoding="utf-8")
    listed = [row for row in history.list_page(str(project))["sessions"]
              if row["_meta"]["cos/agent"] == "gemini"]
    assert listed
    counts: Counter[str] = Counter()
    for row in listed:
        counts += _counts(list(history.load_updates(row["sessionId"], str(project))))
    assert counts["user_message_chunk"] >= len(listed)
    assert counts["tool_call"] == counts["tool_call_update"] > 0
