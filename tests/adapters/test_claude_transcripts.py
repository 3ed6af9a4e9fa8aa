"""Claude Code transcripts import as native sessions: fixtures, layouts, links, increments, bad input.

The fixtures are real (and one synthetic) transcripts from public projects, described with their
counts in ../shared/fixtures/claude/SOURCES.md; the assertions below repeat those counts.
"""

from __future__ import annotations

import builtins
import json
import os
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.adapters.claude import transcripts
from coding_os.adapters.claude.transcripts import (
    classify_user_entry,
    default_claude_dir,
    project_key,
    scan_claude,
)
from coding_os.adapters import native
from coding_os.adapters.native import ImportState, NativeSession
from tests.helpers import (
    CLAUDE_FIXTURES,
    LOG_PROJECT,
    MAIN_1053,
    SMALL,
    VIEWER,
    assistant,
    conversation,
    copy_claude_fixtures,
    require_claude_fixtures,
    ts,
    user,
    write_jsonl,
)


WARMUP_PARENT = "58edcfae-5291-436c-91e4-54fbb188a0ca"


def by_id(sessions: list[NativeSession]) -> dict[str, NativeSession]:
    return {s.native_id: s for s in sessions}


@pytest.fixture
def claude_dir(tmp_path: Path) -> Path:
    return tmp_path / "claude"


# -- the fixtures ---------------------------------------------------------------------------------


def test_every_claude_fixture_imports_and_the_subagent_file_is_never_a_session(
    claude_dir: Path,
) -> None:
    sessions, state = scan_claude(copy_claude_fixtures(claude_dir))
    assert sorted(by_id(sessions)) == sorted([MAIN_1053, VIEWER, SMALL])
    assert state.report is not None
    assert state.report.files_seen == 4 and state.report.unreadable == []
    assert state.report.malformed_lines == 0 and state.report.torn_files == []
    assert [s.agent_id for s in state.report.orphan_subagents] == ["3be551df"]


def test_claude_1_0_53_session_matches_its_sources(claude_dir: Path) -> None:
    session = by_id(scan_claude(copy_claude_fixtures(claude_dir))[0])[MAIN_1053]
    counts = session.entry_counts
    assert sum(v for k, v in counts.items() if "/" not in k) == 38
    assert (counts["summary"], counts["user"], counts["assistant"], counts["system"]) == (
        3, 10, 17, 8)
    assert not any(k.startswith("system/") for k in counts)  # the hook lines have no subtype
    assert session.cwd == "/Users/dain/workspace/claude-code-log"
    assert session.project == LOG_PROJECT
    assert (session.cli_version, session.cli_versions) == ("1.0.53", ("1.0.53",))
    assert (session.created, session.last_active) == (
        "2025-07-16T09:51:45.996Z", "2025-07-16T09:58:22.380Z")
    assert session.compactions == 0 and session.subagents == ()
    # The three summaries point into earlier sessions (their leaves are not here): no title.
    assert (session.title, session.title_source) == (None, None)
    # 10 user entries: 9 tool results and one prompt.
    assert session.user_messages == 1
    assert session.first_prompt is not None
    assert session.first_prompt.startswith("now we have cache so we should change TUI")
    assert session.last_prompt == session.first_prompt
    # 17 assistant lines are 10 messages (one line per content block).
    assert session.assistant_messages == 10
    assert session.tokens.to_dict() == {"input": 264858, "cached": 205989,
                                        "cache_write": 58830, "output": 112, "reasoning": 0,
                                        "total": 264970}
    assert session.model == "claude-sonnet-4-20250514"
    assert session.unknown_types == {} and session.malformed_lines == 0


def test_claude_1_0_108_inline_sidechains_are_two_subagents_of_their_session(
    claude_dir: Path,
) -> None:
    session = by_id(scan_claude(copy_claude_fixtures(claude_dir))[0])[VIEWER]
    counts = session.entry_counts
    assert (counts["user"], counts["assistant"]) == (25, 28)
    assert sum(v for k, v in counts.items() if "/" not in k) == 53
    assert (session.cwd, session.git_branch, session.cli_version) == (
        "/path/to/Demo", "main", "1.0.108")
    assert (session.created, session.last_active) == (
        "2025-09-07T09:52:03.071Z", "2025-09-07T09:54:26.499Z")
    # Three Task calls were made, but only two sidechain chains were written: two subagents.
    subagents = session.subagents
    assert [s.layout for s in subagents] == ["inline", "inline"]
    assert {s.parent for s in subagents} == {VIEWER}
    assert sum(s.entries for s in subagents) == 22
    assert [s.entries for s in subagents] == [7, 15]
    assert [s.assistant_messages for s in subagents] == [3, 7]
    assert subagents[0].first_prompt is not None
    assert subagents[0].first_prompt.startswith("Examine the package.json file(s)")
    assert subagents[1].first_prompt is not None
    assert subagents[1].first_prompt.startswith("Analyze the current project structure")
    assert sum((s.tokens for s in subagents), native.TokenTotals()).to_dict() == {
        "input": 155736, "cached": 133998, "cache_write": 21673, "output": 1626,
        "reasoning": 0, "total": 157362}
    # The main chain: 10 assistant messages; the only thing typed is a slash command (the
    # expansion after it is an isMeta entry), shown since no plain prompt exists.
    assert session.assistant_messages == 10
    assert session.tokens.total == 216399 + 2003
    assert session.user_messages == 1
    assert session.first_prompt == "/orchestrator @CLAUDE.md を最新の状態にアップデートしてください"
    assert session.compactions == 0 and session.title is None


def test_claude_2_1_schema_fixture_matches_its_sources(claude_dir: Path) -> None:
    session = by_id(scan_claude(copy_claude_fixtures(claude_dir))[0])[SMALL]
    counts = session.entry_counts
    assert sum(v for k, v in counts.items() if "/" not in k) == 89
    assert (counts["user"], counts["assistant"], counts["summary"]) == (10, 10, 1)
    assert {k: v for k, v in counts.items() if k.startswith("system/")} == {
        "system/compact_boundary": 2, "system/api_error": 4, "system/session_start": 1,
        "system/stop_hook_summary": 1, "system/turn_duration": 1, "system/error": 1,
        "system/api_refusal": 1, "system/model_refusal_fallback": 1}
    assert counts["attachment"] == 38
    attachment_types = {k for k in counts if k.startswith("attachment/")}
    assert len(attachment_types) == 30
    assert {"attachment/hook_success", "attachment/hook_blocking_error",
            "attachment/queued_command", "attachment/compact_file_reference",
            "attachment/edited_text_file"} <= attachment_types
    for kind in ("file-history-snapshot", "custom-title", "ai-title", "last-prompt",
                 "agent-name", "pr-link", "permission-mode", "mode", "queue-operation",
                 "progress", "frame-link", "bridge-session", "atis-latch", "relocated",
                 "started", "result"):
        assert counts[kind] == 1, kind
    assert counts["worktree-state"] == 2
    # Types this importer does not know are counted and kept, never fatal.
    assert session.unknown_types == {"atis-latch": 1, "bridge-session": 1, "frame-link": 1,
                                     "relocated": 1, "result": 1, "started": 1}
    # custom-title wins over ai-title.
    assert (session.title, session.title_source) == ("Stage0 small fixture", "custom-title")
    assert session.compactions == 2
    # The 9 sidechain entries are one chain, rooted at the session_start entry.
    assert [(s.layout, s.agent_id, s.entries) for s in session.subagents] == [
        ("inline", "sys1", 9)]
    assert session.subagents[0].first_prompt == "Hello"
    assert session.cwd == "/tmp"
    assert session.cli_versions[:5] == ("2.1.80", "2.1.111", "2.1.112", "2.1.161", "2.1.220")
    assert session.pr_links == ("https://example.invalid/org/repo/pull/1",)


def test_a_2_0_sibling_subagent_links_to_its_parent_session_when_the_parent_is_there(
    claude_dir: Path,
) -> None:
    copy_claude_fixtures(claude_dir)
    parent = claude_dir / "projects" / LOG_PROJECT / f"{WARMUP_PARENT}.jsonl"
    write_jsonl(parent, conversation(WARMUP_PARENT, 1))
    sessions, state = scan_claude(claude_dir)
    session = by_id(sessions)[WARMUP_PARENT]
    assert state.report is not None and state.report.orphan_subagents == []
    assert [(s.agent_id, s.layout, s.parent) for s in session.subagents] == [
        ("3be551df", "sibling", WARMUP_PARENT)]
    warmup = session.subagents[0]
    assert (warmup.first_prompt, warmup.entries, warmup.user_messages,
            warmup.assistant_messages) == ("Warmup", 2, 1, 1)
    assert warmup.tokens.total == 3811 + 247
    assert str(parent) in session.paths and warmup.path in session.paths
    assert "3be551df" not in by_id(sessions) and "agent-3be551df" not in by_id(sessions)


def test_a_2_1_nested_subagent_links_to_its_parent_with_the_type_from_its_meta_file(
    claude_dir: Path,
) -> None:
    require_claude_fixtures()
    folder = claude_dir / "projects" / LOG_PROJECT
    write_jsonl(folder / f"{WARMUP_PARENT}.jsonl", conversation(WARMUP_PARENT, 2))
    nested = folder / WARMUP_PARENT / "subagents" / "agent-3be551df.jsonl"
    nested.parent.mkdir(parents=True)
    shutil.copyfile(CLAUDE_FIXTURES / "claude-code-log__agent-3be551df.jsonl", nested)
    (nested.parent / "agent-3be551df.meta.json").write_text(
        '{"agentType":"general-purpose","spawnDepth":1}', encoding="utf-8")
    sessions, _ = scan_claude(claude_dir)
    assert [s.native_id for s in sessions] == [WARMUP_PARENT]
    (subagent,) = sessions[0].subagents
    assert (subagent.layout, subagent.agent_id, subagent.agent_type, subagent.parent) == (
        "nested", "3be551df", "general-purpose", WARMUP_PARENT)


# -- titles, prompts, tokens ----------------------------------------------------------------------


def test_the_last_custom_title_wins_over_every_ai_title(claude_dir: Path) -> None:
    path = claude_dir / "projects" / "-work-app" / "s1.jsonl"
    write_jsonl(path, conversation("s1", 1) + [
        {"type": "custom-title", "customTitle": "first name", "sessionId": "s1"},
        {"type": "ai-title", "aiTitle": "model title", "sessionId": "s1"},
        {"type": "custom-title", "customTitle": "renamed", "sessionId": "s1"},
        {"type": "ai-title", "aiTitle": "later model title", "sessionId": "s1"},
    ])
    write_jsonl(claude_dir / "projects" / "-work-app" / "s2.jsonl", conversation("s2", 1) + [
        {"type": "ai-title", "aiTitle": "old ai", "sessionId": "s2"},
        {"type": "ai-title", "aiTitle": "new ai", "sessionId": "s2"},
    ])
    sessions = by_id(scan_claude(claude_dir)[0])
    assert (sessions["s1"].title, sessions["s1"].title_source) == ("renamed", "custom-title")
    assert (sessions["s2"].title, sessions["s2"].title_source) == ("new ai", "ai-title")


def test_a_1_0_summary_titles_the_session_holding_its_leaf(claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    write_jsonl(folder / "old.jsonl", conversation("old", 2))
    write_jsonl(folder / "new.jsonl", [
        {"type": "summary", "summary": "Fix the login bug", "leafUuid": "old:a1"},
        *conversation("new", 1, start=100, prefix="n"),
    ])
    sessions = by_id(scan_claude(claude_dir)[0])
    assert (sessions["old"].title, sessions["old"].title_source) == ("Fix the login bug",
                                                                     "summary")
    assert sessions["new"].title is None


def test_first_and_last_prompt_skip_tool_results_summaries_meta_and_command_lines(
    claude_dir: Path,
) -> None:
    s = "s1"
    entries = [
        user("c0", None, "<local-command-caveat>Caveat: local</local-command-caveat>", 0, s,
             isMeta=True),
        user("c1", "c0", "<command-name>/model</command-name>\n<command-args></command-args>",
             1, s),
        user("c2", "c1", "<local-command-stdout>Set model</local-command-stdout>", 2, s),
        user("u1", "c2", [{"type": "text", "text": "Add a login page"}], 3, s),
        assistant("a1", "u1", "m1", "r1", 4, s),
        user("t1", "a1", [{"type": "tool_result", "tool_use_id": "x", "content": "ok"}], 5, s,
             toolUseResult={"stdout": "ok"}),
        user("m1", "t1", "expanded skill text", 6, s, isMeta=True),
        {"type": "system", "subtype": "compact_boundary", "uuid": "b1", "parentUuid": None,
         "sessionId": s, "timestamp": ts(7)},
        user("cs", "b1", "This session is being continued from a previous conversation", 8, s,
             isCompactSummary=True),
        user("u2", "cs", "Now add tests", 9, s),
        user("i1", "u2", [{"type": "text", "text": "[Request interrupted by user]"}], 10, s),
        user("t2", "i1", [{"type": "tool_result", "tool_use_id": "y", "content": "done"}], 11, s),
    ]
    write_jsonl(claude_dir / "projects" / "-work-app" / f"{s}.jsonl", entries)
    (session,) = scan_claude(claude_dir)[0]
    assert (session.first_prompt, session.last_prompt) == ("Add a login page", "Now add tests")
    assert session.user_messages == 3  # two prompts and the /model command
    assert session.compactions == 1


def test_user_entries_are_classified_by_what_the_person_typed() -> None:
    assert classify_user_entry({"message": {"content": "hi"}}) == ("prompt", "hi")
    assert classify_user_entry({"message": {"content": "x"}, "isCompactSummary": True})[0] == (
        "compact_summary")
    assert classify_user_entry({"message": {"content": "<bash-input>ls</bash-input>"}}) == (
        "command", "!ls")
    assert classify_user_entry({"message": {"content": [{"type": "image"}]}}) == (
        "prompt", "[image]")
    assert classify_user_entry({"message": None}) == ("other", "")


def test_tokens_count_each_message_once_per_request_however_many_lines_carry_it(
    claude_dir: Path,
) -> None:
    s = "s1"
    entries = [
        user("u1", None, "go", 0, s),
        # One message streamed as three lines (thinking, text, tool_use): one usage.
        assistant("a1", "u1", "msg_1", "req_1", 1, s),
        assistant("a2", "a1", "msg_1", "req_1", 1, s),
        assistant("a3", "a2", "msg_1", "req_1", 1, s, output=7),  # usage grew while streaming
        # The same message id under another request (a retry) is another call.
        assistant("a4", "a3", "msg_1", "req_2", 2, s),
        assistant("a5", "a4", "msg_2", "req_3", 3, s),
    ]
    write_jsonl(claude_dir / "projects" / "-work-app" / f"{s}.jsonl", entries)
    (session,) = scan_claude(claude_dir)[0]
    assert session.assistant_messages == 3
    assert session.tokens.to_dict() == {"input": 3 * 1110, "cached": 3000, "cache_write": 300,
                                        "output": 7 + 5 + 5, "reasoning": 0,
                                        "total": 3 * 1110 + 17}


def test_claude_config_dir_is_honoured_and_home_dot_claude_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, isolated_env: Path
) -> None:
    assert default_claude_dir() == str(isolated_env / ".claude")
    write_jsonl(isolated_env / ".claude" / "projects" / "-a" / "home.jsonl",
                conversation("home", 1))
    assert [s.native_id for s in scan_claude()[0]] == ["home"]
    moved = tmp_path / "elsewhere"
    write_jsonl(moved / "projects" / "-a" / "moved.jsonl", conversation("moved", 1))
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(moved))
    assert [s.native_id for s in scan_claude()[0]] == ["moved"]
    assert project_key("/Users/dain/workspace/claude-code-log") == LOG_PROJECT


# -- copies: resume and fork by copy ---------------------------------------------------------------


def test_a_fork_by_copy_is_linked_to_the_session_it_continues(claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    original = conversation("orig", 2)
    write_jsonl(folder / "orig.jsonl", original)
    # As Claude Code 2.1 forks: the history copied with the new session id, then new turns.
    copied = [dict(e, sessionId="fork") for e in original]
    fresh = conversation("fork", 1, start=100, prefix="f")
    fresh[0]["parentUuid"] = "orig:a1"
    write_jsonl(folder / "fork.jsonl", copied + fresh)
    sessions = by_id(scan_claude(claude_dir)[0])
    fork, orig = sessions["fork"], sessions["orig"]
    assert (fork.continues, fork.copied_entries) == ("orig", 4)
    assert orig.continued_by == ("fork",) and orig.continues is None
    assert fork.first_prompt == "prompt 0" and fork.last_prompt == "prompt f0"
    # Tokens are spend: the copied messages stay the original's.
    assert fork.tokens.total == orig.tokens.total // 2
    assert fork.created == ts(100) and orig.created == ts(0)


def test_a_scan_of_what_changed_assembles_the_sessions_it_touches_and_their_copies(
        claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    original = conversation("orig", 2)
    write_jsonl(folder / "orig.jsonl", original)
    fresh = conversation("fork", 1, start=100, prefix="f")
    fresh[0]["parentUuid"] = "orig:a1"
    write_jsonl(folder / "fork.jsonl", [dict(e, sessionId="fork") for e in original] + fresh)
    write_jsonl(folder / "other.jsonl", conversation("other", 1))
    _, state = scan_claude(claude_dir)
    unchanged, state = scan_claude(claude_dir, state, changed_only=True)
    assert unchanged == [] and state.report is not None
    assert (state.report.sessions, state.report.files_opened) == (3, 0)
    write_jsonl(folder / "orig.jsonl", conversation("orig", 1, start=50, prefix="more",
                                                    parent="orig:a1"), mode="a")
    touched, state = scan_claude(claude_dir, state, changed_only=True)
    whole = by_id(scan_claude(claude_dir)[0])
    # The original changed; its copy is read from it (tokens, the entries it shares).
    assert [s.native_id for s in touched] == ["fork", "orig"]  # newest activity first
    assert touched == [whole["fork"], whole["orig"]]
    assert state.report is not None and state.report.sessions == 3


def test_the_original_is_found_whichever_transcript_continued_further(claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    base = conversation("a", 3)
    write_jsonl(folder / "a.jsonl", base)  # went on to turn 3 before the fork was made...
    branch = [dict(e, sessionId="b") for e in base[:2]]
    later = conversation("b", 1, start=500, prefix="b")  # ...from turn 1, much later
    later[0]["parentUuid"] = "a:a0"
    write_jsonl(folder / "b.jsonl", branch + later)
    cousin = [dict(e, sessionId="c") for e in base[:2]]
    latest = conversation("c", 1, start=900, prefix="c")
    latest[0]["parentUuid"] = "a:a0"
    write_jsonl(folder / "c.jsonl", cousin + latest)
    sessions = by_id(scan_claude(claude_dir)[0])
    assert sessions["b"].continues == "a" and sessions["c"].continues == "a"
    assert sessions["a"].continued_by == ("b", "c")


def test_a_copy_starting_at_a_compaction_links_to_the_compacted_session(
    claude_dir: Path,
) -> None:
    folder = claude_dir / "projects" / "-work-app"
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "cb",
                "parentUuid": None, "sessionId": "a", "timestamp": ts(50)}
    after = conversation("a", 1, start=51, prefix="x")
    after[0]["parentUuid"] = "cb"
    write_jsonl(folder / "a.jsonl", conversation("a", 2) + [boundary] + after)
    tail = [dict(e, sessionId="b") for e in [boundary] + after]
    write_jsonl(folder / "b.jsonl", tail + conversation("b", 1, start=300, prefix="y"))
    sessions = by_id(scan_claude(claude_dir)[0])
    assert sessions["b"].continues == "a" and sessions["b"].copied_entries == 3


# -- incremental import -------------------------------------------------------------------------


class OpenCounter:
    """Counts the files the importer opens (native.refresh_file opens every transcript)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real_open = builtins.open

        def counting_open(file: Any, *args: Any, **kwargs: Any) -> Any:
            self.paths.append(os.fspath(file))
            return real_open(file, *args, **kwargs)

        monkeypatch.setattr(native, "open", counting_open, raising=False)
        monkeypatch.setattr(transcripts, "open", counting_open, raising=False)


def test_an_unchanged_directory_is_imported_again_without_opening_a_file(
    claude_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_claude_fixtures(claude_dir)
    first, state = scan_claude(claude_dir)
    opens = OpenCounter(monkeypatch)
    # Through JSON, as the index keeps it between runs.
    again, state2 = scan_claude(claude_dir, ImportState.loads(state.dumps()))
    assert opens.paths == []
    assert again == first
    assert state2.report is not None
    assert (state2.report.files_unchanged, state2.report.bytes_read) == (4, 0)


def test_the_state_survives_a_store_that_reorders_json_keys(
    claude_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = claude_dir / "projects" / "-work-app"
    base = conversation("orig", 3)
    write_jsonl(folder / "orig.jsonl", base)
    write_jsonl(folder / "fork.jsonl", [dict(e, sessionId="fork") for e in base]
                + conversation("fork", 1, start=100, prefix="f"))
    first, state = scan_claude(claude_dir)
    # PostgreSQL jsonb, for one, keeps no key order.
    reordered = ImportState.from_dict(json.loads(json.dumps(state.to_dict(), sort_keys=True)))
    opens = OpenCounter(monkeypatch)
    again, _ = scan_claude(claude_dir, reordered)
    assert opens.paths == [] and again == first
    assert by_id(again)["fork"].continues == "orig"


def test_an_appended_transcript_is_read_from_its_last_offset_only(
    claude_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_claude_fixtures(claude_dir)
    path = claude_dir / "projects" / LOG_PROJECT / f"{MAIN_1053}.jsonl"
    _, state = scan_claude(claude_dir)
    before = path.stat().st_size
    extra = [user("new-u", "44124fd9-f7f4-4409-ae40-96f164cd92e4", "one more thing", 900,
                  MAIN_1053),
             {"type": "custom-title", "customTitle": "TUI launches cached HTML",
              "sessionId": MAIN_1053}]
    write_jsonl(path, extra, mode="a")
    appended = path.stat().st_size - before
    opens = OpenCounter(monkeypatch)
    sessions, state2 = scan_claude(claude_dir, state)
    assert opens.paths == [str(path)]
    assert state2.report is not None
    assert state2.report.bytes_read == appended
    session = by_id(sessions)[MAIN_1053]
    assert session.last_prompt == "one more thing" and session.user_messages == 2
    assert session.title == "TUI launches cached HTML"
    assert session.tokens.total == 264970  # the earlier lines were not counted twice
    fresh, _ = scan_claude(claude_dir)
    assert fresh == sessions


def test_a_rewritten_transcript_is_parsed_again_from_the_start(claude_dir: Path) -> None:
    path = claude_dir / "projects" / "-work-app" / "s1.jsonl"
    write_jsonl(path, conversation("s1", 3))
    _, state = scan_claude(claude_dir)
    write_jsonl(path, conversation("s1", 4, prefix="z"))
    sessions, state2 = scan_claude(claude_dir, state)
    assert sessions[0].first_prompt == "prompt z0" and sessions[0].user_messages == 4
    assert sessions == scan_claude(claude_dir)[0]


def test_a_deleted_transcript_leaves_the_state_and_the_list(claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    write_jsonl(folder / "s1.jsonl", conversation("s1", 1))
    write_jsonl(folder / "s2.jsonl", conversation("s2", 1))
    _, state = scan_claude(claude_dir)
    (folder / "s2.jsonl").unlink()
    sessions, state2 = scan_claude(claude_dir, state)
    assert [s.native_id for s in sessions] == ["s1"]
    assert list(state2.files) == [str(folder / "s1.jsonl")]


def test_records_of_other_agents_and_directories_are_kept(claude_dir: Path, tmp_path: Path) -> None:
    write_jsonl(claude_dir / "projects" / "-a" / "s1.jsonl", conversation("s1", 1))
    other = tmp_path / "other-claude"
    write_jsonl(other / "projects" / "-b" / "s2.jsonl", conversation("s2", 1))
    _, state = scan_claude(claude_dir)
    sessions, state = scan_claude(other, state)
    assert [s.native_id for s in sessions] == ["s2"]
    assert len(state.files) == 2
    sessions, state = scan_claude(claude_dir, state)
    assert [s.native_id for s in sessions] == ["s1"] and len(state.files) == 2


# -- bad input ------------------------------------------------------------------------------------


def test_bad_lines_are_counted_and_never_fatal(claude_dir: Path) -> None:
    folder = claude_dir / "projects" / "-work-app"
    folder.mkdir(parents=True)
    good = [json.dumps(e).encode() for e in conversation("s1", 2)]
    huge = json.dumps(user("big", "s1:a0", "x" * (4 << 20), 30, "s1")).encode()
    lines = [good[0], b'{"type": "user", "bad": "\xc3("}', b"{not json", b"[1, 2]", b"", b"   ",
             good[1], huge, good[2], good[3], b'{"type": "user", "message": {"con']
    (folder / "s1.jsonl").write_bytes(b"\n".join(lines))  # the last line is torn
    (folder / "empty.jsonl").write_bytes(b"")
    (folder / "dir.jsonl").mkdir()
    (folder / "nul.jsonl").write_bytes(b"\x00" * 100 + b"\n")
    sessions, state = scan_claude(claude_dir)
    (session,) = sessions
    assert session.native_id == "s1"
    assert session.malformed_lines == 3
    assert session.torn_tail is True
    # The huge prompt is read (not malformed); it hangs off a0 beside u1, so it is a branch.
    assert session.entry_counts["user"] == 3
    assert session.user_messages == 2 and session.last_prompt == "prompt 1"
    assert state.report is not None
    assert state.report.unreadable == [(str(folder / "dir.jsonl"), "is a directory")]
    assert state.report.torn_files == [str(folder / "s1.jsonl")]
    assert sorted(state.report.empty_files) == [str(folder / "empty.jsonl"),
                                                str(folder / "nul.jsonl")]
    assert state.report.malformed_lines == 4


def test_a_torn_last_line_is_read_once_its_writer_finishes_it(claude_dir: Path) -> None:
    path = claude_dir / "projects" / "-work-app" / "s1.jsonl"
    write_jsonl(path, conversation("s1", 1))
    line = json.dumps(user("u9", "s1:a0", "finished later", 40, "s1")) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line[:25])
    sessions, state = scan_claude(claude_dir)
    assert sessions[0].torn_tail and sessions[0].user_messages == 1
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line[25:])
    sessions, state = scan_claude(claude_dir, state)
    assert not sessions[0].torn_tail and sessions[0].malformed_lines == 0
    assert (sessions[0].user_messages, sessions[0].last_prompt) == (2, "finished later")


def test_an_unreadable_state_document_starts_a_full_import(claude_dir: Path) -> None:
    write_jsonl(claude_dir / "projects" / "-a" / "s1.jsonl", conversation("s1", 1))
    for text in ("", "{", "[]", '{"version": 99, "files": {}}',
                 '{"version": 1, "files": {"x": {"agent": "claude"}}}'):
        state = ImportState.loads(text)
        assert [s.native_id for s in scan_claude(claude_dir, state)[0]] == ["s1"]


def test_a_prompt_preview_is_cut_to_its_length(claude_dir: Path) -> None:
    write_jsonl(claude_dir / "projects" / "-a" / "s1.jsonl",
                [user("u", None, "y" * 10_000, 0, "s1")])
    (session,) = scan_claude(claude_dir)[0]
    assert session.first_prompt == "y" * native.PROMPT_PREVIEW_CHARS


# -- properties -----------------------------------------------------------------------------------


def project_tree(claude_dir: Path) -> None:
    """A project with every layout at once: copies, inline, sibling and nested subagents."""
    copy_claude_fixtures(claude_dir)
    folder = claude_dir / "projects" / LOG_PROJECT
    write_jsonl(folder / f"{WARMUP_PARENT}.jsonl", conversation(WARMUP_PARENT, 2))
    base = conversation("orig", 2)
    write_jsonl(folder / "orig.jsonl", base)
    write_jsonl(folder / "fork1.jsonl", [dict(e, sessionId="fork1") for e in base]
                + conversation("fork1", 1, start=80, prefix="f"))
    write_jsonl(folder / "fork2.jsonl", [dict(e, sessionId="fork2") for e in base]
                + conversation("fork2", 1, start=90, prefix="g"))
    nested = folder / "orig" / "subagents"
    nested.mkdir(parents=True)
    shutil.copyfile(CLAUDE_FIXTURES / "claude-code-log__agent-3be551df.jsonl",
                    nested / "agent-n1.jsonl")
    (nested / "agent-n1.meta.json").write_text('{"agentType": "Explore"}', encoding="utf-8")
    (folder / "memory").mkdir()


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    claude_dir = tmp_path_factory.mktemp("tree") / "claude"
    project_tree(claude_dir)
    yield claude_dir


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.randoms(use_true_random=False))
def test_import_is_the_same_whatever_order_the_files_are_discovered_in(
    tree: Path, order: random.Random, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected, expected_state = scan_claude(tree)
    real_list_dir = native.list_dir

    def shuffled(path: str) -> list[tuple[str, bool]]:
        found = real_list_dir(path)
        order.shuffle(found)
        return found

    with monkeypatch.context() as patch:
        patch.setattr(transcripts, "list_dir", shuffled)
        sessions, state = scan_claude(tree)
    assert sessions == expected
    assert state.to_dict() == expected_state.to_dict()
    assert [s.native_id for s in sessions if s.continues] == ["fork2", "fork1"]


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cuts=st.lists(st.integers(min_value=0, max_value=125_342), max_size=8))
def test_importing_a_growing_transcript_piece_by_piece_equals_one_import(
    tmp_path_factory: pytest.TempPathFactory, cuts: list[int]
) -> None:
    require_claude_fixtures()
    data = (CLAUDE_FIXTURES / f"claude-code-viewer__{VIEWER}.jsonl").read_bytes()
    claude_dir = tmp_path_factory.mktemp("pieces") / "claude"
    path = claude_dir / "projects" / "-path-to-Demo" / f"{VIEWER}.jsonl"
    path.parent.mkdir(parents=True)
    state: ImportState | None = None
    written = 0
    with path.open("wb") as handle:
        for cut in sorted(set(cuts)) + [len(data)]:
            handle.write(data[written:cut])
            handle.flush()
            written = max(written, cut)
            sessions, state = scan_claude(claude_dir, state)
    whole, _ = scan_claude(claude_dir)
    assert sessions == whole
    assert state is not None and state.report is not None


# -- trees ----------------------------------------------------------------------------------------


def test_after_a_resume_at_the_counts_follow_the_live_chain_not_every_line(
    claude_dir: Path,
) -> None:
    s = "s1"
    entries = conversation(s, 3)
    # `claude --resume s1 --resume-session-at s1:a0 "again"`: a new chain from the first answer.
    entries.append(user("x-u", f"{s}:a0", "again", 50, s))
    entries.append(assistant("x-a", "x-u", "xm", "xr", 51, s, output=7))
    write_jsonl(claude_dir / "projects" / "-work-app" / f"{s}.jsonl", entries)
    (session,) = scan_claude(claude_dir)[0]
    assert session.entry_counts["user"] == 4 and session.entry_counts["assistant"] == 4
    assert (session.user_messages, session.assistant_messages) == (2, 2)
    assert (session.first_prompt, session.last_prompt) == ("prompt 0", "again")
    assert session.tokens.output == 5 + 7


def test_a_transcript_growing_into_a_tree_imports_the_same_piece_by_piece(
    claude_dir: Path,
) -> None:
    s = "s1"
    path = claude_dir / "projects" / "-work-app" / f"{s}.jsonl"
    write_jsonl(path, conversation(s, 3))
    _, state = scan_claude(claude_dir)
    write_jsonl(path, [user("x-u", f"{s}:a1", "again", 50, s)], mode="a")
    sessions, _ = scan_claude(claude_dir, state)
    assert sessions == scan_claude(claude_dir)[0]
    assert sessions[0].user_messages == 3 and sessions[0].last_prompt == "again"


def test_a_state_of_an_older_format_is_read_again_whole(claude_dir: Path) -> None:
    path = claude_dir / "projects" / "-work-app" / "s1.jsonl"
    write_jsonl(path, conversation("s1", 2))
    _, state = scan_claude(claude_dir)
    older = state.to_dict()
    older["version"] = 1  # aggregates without heads, before trees
    for record in older["files"].values():
        del record["head"], record["aggregate"]["nodes"]
    sessions, state2 = scan_claude(claude_dir, ImportState.from_dict(older))
    assert state2.report is not None and state2.report.files_opened == 1
    assert sessions == scan_claude(claude_dir)[0]


def test_a_real_resume_at_transcript_counts_its_live_conversation(claude_dir: Path) -> None:
    source = Path(__file__).resolve().parent / "fixtures" / "claude_trees" / "resume_at.jsonl"
    folder = claude_dir / "projects" / "-work-app"
    folder.mkdir(parents=True)
    shutil.copy(source, folder / "9d5d1580-9251-4b4c-890c-2c3c1ce1b6d9.jsonl")
    (session,) = scan_claude(claude_dir)[0]
    assert (session.entry_counts["user"], session.entry_counts["assistant"]) == (4, 4)
    assert (session.user_messages, session.assistant_messages) == (2, 2)
    assert (session.first_prompt, session.last_prompt) == ("prompt one", "prompt four, in place")
