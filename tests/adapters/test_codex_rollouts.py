"""Codex rollouts import as native sessions: fixtures, names, forks, subagents, increments, bad input.

The fixtures are real rollouts from public projects (and two response-item payloads from
openai/codex), described with their counts in ../shared/fixtures/codex/SOURCES.md; the assertions
below repeat those counts.
"""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path
from typing import Any

import pytest

from coding_os.adapters.claude.transcripts import scan_claude
from coding_os.adapters.codex.rollouts import default_codex_dir, prompt_text, scan_codex
from coding_os.adapters import native
from coding_os.adapters.native import ImportState, NativeSession
from tests.helpers import (
    CODEX_FIXTURES,
    COMPACTED,
    OLD_EXEC,
    ROLLOUTS,
    TOOLS,
    TRUNCATED,
    copy_codex_fixtures,
    require_codex_fixtures,
)


def by_id(sessions: list[NativeSession]) -> dict[str, NativeSession]:
    return {s.native_id: s for s in sessions}


def line(kind: str, payload: dict[str, Any], second: int = 0) -> dict[str, Any]:
    return {"timestamp": f"2026-04-01T09:00:{second:02d}.000Z", "type": kind, "payload": payload}


def meta(thread: str, **extra: Any) -> dict[str, Any]:
    return line("session_meta", {"id": thread, "timestamp": "2026-04-01T09:00:00.000Z",
                                 "cwd": "/work/app", "cli_version": "0.170.0",
                                 "source": "cli", "git": {"branch": "main"}, **extra})


def prompt(text: str, second: int = 1) -> dict[str, Any]:
    return line("event_msg", {"type": "user_message", "message": text, "images": []}, second)


def answer(text: str, second: int = 2) -> dict[str, Any]:
    return line("response_item", {"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": text}]}, second)


def tokens(total: int, second: int = 3) -> dict[str, Any]:
    usage = {"input_tokens": total - 10, "cached_input_tokens": 5, "output_tokens": 10,
             "reasoning_output_tokens": 2, "total_tokens": total}
    return line("event_msg", {"type": "token_count",
                              "info": {"total_token_usage": usage, "last_token_usage": usage}},
                second)


def rollout(codex_home: Path, thread: str, lines: list[dict[str, Any]], mode: str = "w") -> Path:
    day = codex_home / "sessions" / "2026" / "04" / "01"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-04-01T09-00-00-{thread}.jsonl"
    with path.open(mode, encoding="utf-8") as handle:
        for item in lines:
            handle.write(json.dumps(item) + "\n")
    return path


def thread_id(n: int) -> str:
    return f"0000000{n}-0000-7000-8000-000000000000"


@pytest.fixture
def codex_home(tmp_path: Path) -> Path:
    return tmp_path / "codex"


# -- the fixtures ---------------------------------------------------------------------------------


def test_every_codex_rollout_fixture_imports(codex_home: Path) -> None:
    sessions, state = scan_codex(copy_codex_fixtures(codex_home))
    assert sorted(by_id(sessions)) == sorted(ROLLOUTS)
    assert state.report is not None
    assert (state.report.files_seen, state.report.malformed_lines) == (4, 0)
    assert state.report.unreadable == [] and state.report.torn_files == []
    for session in sessions:
        assert session.unknown_types == {} and not session.torn_tail
        assert session.subagents == () and session.forked_from is None


def test_the_compacted_desktop_rollout_matches_its_sources(codex_home: Path) -> None:
    session = by_id(scan_codex(copy_codex_fixtures(codex_home))[0])[COMPACTED]
    counts = session.entry_counts
    assert sum(counts[k] for k in counts if "/" not in k) == 2722
    assert {k: counts[k] for k in counts if "/" not in k} == {
        "session_meta": 1, "response_item": 1302, "event_msg": 1132, "turn_context": 286,
        "compacted": 1}
    assert {k: counts[f"event_msg/{k}"] for k in (
        "token_count", "agent_message", "agent_reasoning", "user_message", "task_started",
        "task_complete", "context_compacted")} == {
        "token_count": 573, "agent_message": 255, "agent_reasoning": 199, "user_message": 38,
        "task_started": 33, "task_complete": 33, "context_compacted": 1}
    assert {k: counts[f"response_item/{k}"] for k in (
        "message", "function_call", "function_call_output", "reasoning", "custom_tool_call",
        "custom_tool_call_output", "web_search_call")} == {
        "message": 346, "function_call": 316, "function_call_output": 316, "reasoning": 219,
        "custom_tool_call": 49, "custom_tool_call_output": 49, "web_search_call": 7}
    assert (session.user_messages, session.assistant_messages) == (38, 255)
    assert session.compactions == 1
    assert (session.cwd, session.cli_version, session.model) == (
        "/redacted/path/59b923df4d", "0.104.0-alpha.1", "gpt-5.3-codex")
    assert (session.git_branch, session.git_commit, session.git_repository) == (
        "main", "7078dc6b1ce5dd75a54ad14563c663530b82963b", "redacted://url/454be97b1a")
    # Cumulative token counts: the last one is the total.
    assert session.tokens.to_dict() == {"input": 33810485, "cached": 31621504,
                                        "cache_write": 0, "output": 133999,
                                        "reasoning": 42113, "total": 33944484}
    assert (session.created, session.last_active) == (
        "2026-02-23T11:54:34.334Z", "2026-02-24T12:09:44.294Z")
    assert session.first_prompt == "[REDACTED_MESSAGE len=32 sha=821fd802]"
    assert session.last_prompt == "[REDACTED_MESSAGE len=98 sha=62d744dd]"


def test_the_truncated_mid_turn_rollout_matches_its_sources(codex_home: Path) -> None:
    session = by_id(scan_codex(copy_codex_fixtures(codex_home))[0])[TRUNCATED]
    counts = session.entry_counts
    assert {k: counts[k] for k in counts if "/" not in k} == {
        "session_meta": 1, "response_item": 11, "event_msg": 6, "turn_context": 1}
    assert counts["event_msg/token_count"] == 2 and "event_msg/task_complete" not in counts
    assert counts["response_item/function_call"] == 1
    assert "response_item/function_call_output" not in counts
    assert (session.user_messages, session.assistant_messages) == (1, 1)
    assert (session.cwd, session.cli_version) == ("/redacted/path/da0ba47443", "0.104.0-alpha.1")
    assert session.tokens.total == 34900
    assert session.compactions == 0


def test_the_unredacted_tui_rollout_matches_its_sources(codex_home: Path) -> None:
    session = by_id(scan_codex(copy_codex_fixtures(codex_home))[0])[TOOLS]
    counts = session.entry_counts
    assert {k: counts[k] for k in counts if "/" not in k} == {
        "session_meta": 1, "response_item": 249, "event_msg": 134, "turn_context": 2}
    assert (counts["event_msg/token_count"], counts["event_msg/exec_command_end"],
            counts["response_item/function_call"], counts["response_item/message"]) == (
        66, 43, 99, 17)
    assert (session.user_messages, session.assistant_messages) == (2, 13)
    assert (session.first_prompt, session.last_prompt) == (
        "show tools", "let's update the defailt context compart to 90 in env var")
    assert (session.cwd, session.cli_version, session.model) == (
        "/Users/Sample_User/repos/codemie-ai/codemie-code", "0.125.0", "gpt-5.5")
    assert (session.git_branch, session.git_repository) == (
        "feat/codex-agent-plugin", "git@github.com:codemie-ai/codemie-code.git")
    assert session.git_commit is not None and session.git_commit.startswith("c8c252ac")
    assert session.tokens.total == 6064954


def test_the_old_0_77_exec_rollout_matches_its_sources(codex_home: Path) -> None:
    session = by_id(scan_codex(copy_codex_fixtures(codex_home))[0])[OLD_EXEC]
    counts = session.entry_counts
    assert {k: counts[k] for k in counts if "/" not in k} == {
        "session_meta": 1, "response_item": 13, "event_msg": 8, "turn_context": 4}
    assert counts["response_item/ghost_snapshot"] == 1
    # One user_message event; the 3 user response items include injected context.
    assert (session.user_messages, session.assistant_messages) == (1, 0)
    assert session.first_prompt == (
        "what is current repository about? summarize purpuse and explain goals")
    assert (session.cwd, session.cli_version, session.git_branch) == (
        "/Users/Nikita_Levyankov/repos/EPMCDME/codemie-ai/codemie-code", "0.77.0", "codex")
    assert session.model == "gpt-5-1-codex-2025-11-13"
    assert session.tokens.total == 22774


@pytest.mark.parametrize(("fixture", "typed"), [
    ("codex__rollout_copy_paste_local_image.json", "pasted image"),
    ("codex__rollout_drag_drop_image.json", "dropped image"),
])
def test_an_image_payload_fixture_imports_as_the_text_typed_beside_the_image(
    codex_home: Path, fixture: str, typed: str
) -> None:
    require_codex_fixtures()
    payload = json.loads((CODEX_FIXTURES / fixture).read_text(encoding="utf-8"))
    assert [p["type"] for p in payload["content"]].count("input_image") == 1
    assert prompt_text(payload["content"]) == typed
    # Wrapped in its rollout envelope, in a rollout without prompt events (as before 0.1x).
    rollout(codex_home, thread_id(1), [meta(thread_id(1)), line("response_item", payload, 1)])
    (session,) = scan_codex(codex_home)[0]
    assert (session.user_messages, session.first_prompt) == (1, typed)
    assert session.entry_counts["response_item/message"] == 1


def test_injected_context_is_not_a_prompt() -> None:
    assert prompt_text([{"type": "input_text",
                         "text": "<environment_context>\n<cwd>/x</cwd>\n</environment_context>"}]) is None
    assert prompt_text([{"type": "input_text", "text": "# AGENTS.md instructions for /x\n..."}]) is None
    assert prompt_text([{"type": "input_image", "image_url": "data:"}]) == "[image]"
    assert prompt_text("plain") == "plain"


# -- names, forks, subagents, newer versions ------------------------------------------------------


def test_the_thread_name_is_the_last_session_index_line_for_its_id(codex_home: Path) -> None:
    one, two = thread_id(1), thread_id(2)
    rollout(codex_home, one, [meta(one), prompt("hello")])
    rollout(codex_home, two, [meta(two), prompt("other")])
    index = codex_home / "session_index.jsonl"
    rows = [{"id": one, "thread_name": "first", "updated_at": "2026-04-01T09:01:00Z"},
            {"id": two, "thread_name": "second", "updated_at": "2026-04-01T09:02:00Z"},
            {"id": one, "thread_name": "renamed", "updated_at": "2026-04-01T09:03:00Z"}]
    index.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    sessions, state = scan_codex(codex_home)
    names = {s.native_id: (s.title, s.title_source) for s in sessions}
    assert names == {one: ("renamed", "session_index"), two: ("second", "session_index")}
    with index.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": two, "thread_name": "third"}) + "\n")
    sessions, _ = scan_codex(codex_home, state)
    assert by_id(sessions)[two].title == "third"


def test_a_fork_carries_the_id_it_was_forked_from(codex_home: Path) -> None:
    one, two = thread_id(1), thread_id(2)
    rollout(codex_home, one, [meta(one), prompt("start")])
    rollout(codex_home, two, [meta(two, forked_from_id=one), prompt("start"), prompt("branch")])
    sessions = by_id(scan_codex(codex_home)[0])
    assert sessions[two].forked_from == one and sessions[one].forked_from is None
    assert sessions[two].last_prompt == "branch"


def test_subagent_threads_link_to_their_session_and_are_never_sessions(codex_home: Path) -> None:
    root, child, grandchild, lost = thread_id(1), thread_id(2), thread_id(3), thread_id(4)

    def spawned(thread: str, parent: str) -> dict[str, Any]:
        source = {"subagent": {"thread_spawn": {"parent_thread_id": parent, "depth": 1,
                                                "agent_nickname": "Ada", "agent_role": None}}}
        return meta(thread, parent_thread_id=parent, source=source, thread_source="subagent",
                    agent_nickname="Ada")

    rollout(codex_home, root, [meta(root), prompt("lead"), answer("done"), tokens(100)])
    rollout(codex_home, child, [spawned(child, root), prompt("help"), answer("sub done"),
                                tokens(40)])
    rollout(codex_home, grandchild, [spawned(grandchild, child), prompt("deeper")])
    rollout(codex_home, lost, [spawned(lost, thread_id(9)), prompt("orphan")])
    sessions, state = scan_codex(codex_home)
    assert [s.native_id for s in sessions] == [root]
    subagents = sessions[0].subagents
    assert [(s.agent_id, s.parent, s.layout) for s in subagents] == [
        (child, root, "thread"), (grandchild, child, "thread")]
    assert (subagents[0].first_prompt, subagents[0].description) == ("help", "Ada")
    assert subagents[0].tokens.total == 40 and sessions[0].tokens.total == 100
    assert sessions[0].tokens_with_subagents.total == 140
    assert state.report is not None
    assert [s.agent_id for s in state.report.orphan_subagents] == [lost]


def test_a_newer_rollout_counts_completed_user_items_and_unknown_line_types(
    codex_home: Path,
) -> None:
    one = thread_id(1)
    item = {"type": "item_completed", "item": {"type": "UserMessage", "id": "x",
                                               "content": [{"type": "text", "text": "Say hi"}]}}
    rollout(codex_home, one, [
        meta(one), line("world_state", {"full": True}), line("event_msg", item, 1),
        line("token_usage_record", {"usage": {}}), answer("hi"), line("compacted", {}),
        line("turn_context", {"model": "gpt-6"}), tokens(500),
    ])
    (session,) = scan_codex(codex_home)[0]
    assert (session.user_messages, session.first_prompt) == (1, "Say hi")
    assert session.unknown_types == {"token_usage_record": 1, "world_state": 1}
    assert (session.compactions, session.model, session.tokens.total) == (1, "gpt-6", 500)


def test_codex_home_is_honoured_and_home_dot_codex_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    assert default_codex_dir() == str(isolated_env / ".codex")
    rollout(isolated_env / ".codex", thread_id(1), [meta(thread_id(1)), prompt("home")])
    assert [s.native_id for s in scan_codex()[0]] == [thread_id(1)]
    moved = tmp_path / "codex-home"
    rollout(moved, thread_id(2), [meta(thread_id(2)), prompt("moved")])
    monkeypatch.setenv("CODEX_HOME", str(moved))
    assert [s.native_id for s in scan_codex()[0]] == [thread_id(2)]


# -- incremental import -------------------------------------------------------------------------


def count_opens(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    opened: list[str] = []
    real_open = builtins.open

    def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(os.fspath(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(native, "open", counting_open, raising=False)
    return opened


def test_unchanged_rollouts_cost_a_stat_and_an_appended_one_is_read_from_its_offset(
    codex_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_codex_fixtures(codex_home)
    first, state = scan_codex(codex_home)
    opened = count_opens(monkeypatch)
    again, state = scan_codex(codex_home, ImportState.loads(state.dumps()))
    assert opened == [] and again == first
    assert state.report is not None and state.report.files_unchanged == 4
    path = next(codex_home.glob(f"sessions/**/rollout-*-{TRUNCATED}.jsonl"))
    before = path.stat().st_size
    rollout_lines = [prompt("and then?", 59), answer("then this", 59), tokens(40000, 59)]
    with path.open("a", encoding="utf-8") as handle:
        for item in rollout_lines:
            handle.write(json.dumps(item) + "\n")
    sessions, state = scan_codex(codex_home, state)
    assert opened == [str(path)]
    assert state.report is not None
    assert state.report.bytes_read == path.stat().st_size - before
    session = by_id(sessions)[TRUNCATED]
    assert (session.user_messages, session.last_prompt, session.tokens.total) == (
        2, "and then?", 40000)
    assert sessions == scan_codex(codex_home)[0]


def test_a_scan_of_what_changed_assembles_only_the_threads_it_touches(codex_home: Path) -> None:
    copy_codex_fixtures(codex_home)
    main, sub = thread_id(1), thread_id(2)
    rollout(codex_home, main, [meta(main), prompt("build it")])
    spawned = {"subagent": {"thread_spawn": {"parent_thread_id": main}}}
    child = rollout(codex_home, sub, [meta(sub, source=spawned), prompt("look around")])
    whole, state = scan_codex(codex_home)
    unchanged, state = scan_codex(codex_home, state, changed_only=True)
    assert unchanged == [] and state.report is not None
    assert (state.report.sessions, state.report.subagents, state.report.files_opened) == (5, 1, 0)
    rollout(codex_home, sub, [answer("found it", 5)], mode="a")
    touched, state = scan_codex(codex_home, state, changed_only=True)
    # The subagent's rollout changed: its parent session is what is assembled again.
    assert [s.native_id for s in touched] == [main]
    assert touched == [s for s in scan_codex(codex_home)[0] if s.native_id == main]
    assert touched[0].subagents[0].path == str(child)
    assert touched[0].subagents[0].assistant_messages == 1
    assert len(whole) == 5 and state.report is not None and state.report.vanished == []
    child.unlink()
    os.unlink(rollout(codex_home, main, []))
    gone, state = scan_codex(codex_home, state, changed_only=True)
    assert gone == [] and state.report is not None
    assert (state.report.vanished, state.report.sessions) == ([main], 4)


def test_one_state_holds_both_agents_and_each_scan_keeps_the_others_records(
    tmp_path: Path, codex_home: Path
) -> None:
    rollout(codex_home, thread_id(1), [meta(thread_id(1)), prompt("x")])
    claude_dir = tmp_path / "claude"
    transcript = claude_dir / "projects" / "-a" / "s1.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text(json.dumps({"type": "user", "uuid": "u", "parentUuid": None,
                                      "message": {"content": "hi"}}) + "\n", encoding="utf-8")
    _, state = scan_codex(codex_home)
    _, state = scan_claude(claude_dir, state)
    assert {r.agent for r in state.files.values()} == {"claude", "codex"}
    sessions, state = scan_codex(codex_home, state)
    assert state.report is not None and state.report.files_unchanged == 1
    assert len(state.files) == 2 and [s.native_id for s in sessions] == [thread_id(1)]


# -- bad input ------------------------------------------------------------------------------------


def test_bad_rollout_lines_are_counted_and_never_fatal(codex_home: Path) -> None:
    one = thread_id(1)
    path = rollout(codex_home, one, [meta(one), prompt("first")])
    huge = json.dumps(prompt("z" * (3 << 20), 5)).encode()
    with path.open("ab") as handle:
        handle.write(b'{"type": "event_msg", "payload": "\xc3("}\n' + b"not json at all\n"
                     + b'"a string"\n' + b"\n" + huge + b"\n"
                     + json.dumps(prompt("last", 6)).encode() + b"\n" + b'{"timestamp": "20')
    day = path.parent
    (day / "rollout-2026-04-01T09-00-00-empty.jsonl").write_bytes(b"")
    (day / f"rollout-2026-04-01T09-00-00-{thread_id(7)}.jsonl").mkdir()
    (codex_home / "session_index.jsonl").write_bytes(b"\xff\xfe\x00garbage\n{}\n")
    sessions, state = scan_codex(codex_home)
    (session,) = sessions
    assert (session.user_messages, session.last_prompt) == (3, "last")
    assert session.malformed_lines == 3 and session.torn_tail
    assert state.report is not None
    assert [reason for _, reason in state.report.unreadable] == ["is a directory"]
    assert state.report.empty_files == [str(day / "rollout-2026-04-01T09-00-00-empty.jsonl")]
    assert state.report.malformed_lines == 4
