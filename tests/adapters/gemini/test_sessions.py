"""Gemini CLI's session files read as native sessions: the real files of fixtures/ (written by
Gemini CLI 0.61.0 and 0.38.2, see fixtures/SOURCES.md, whose figures the assertions repeat), the
layout of a Gemini dir, and files that are damaged or are not what they seem."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from coding_os import jsonwire
from coding_os.adapters.gemini import sessions
from coding_os.adapters.gemini.messages import GeminiTokens
from coding_os.adapters.gemini.sessions import (
    GeminiSession,
    default_gemini_dir,
    is_subagent_name,
    read_projects,
    read_session,
    scan_gemini,
    subagent_files,
)
from coding_os.errors import CosError
from tests.helpers import gemini_twin

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOME = FIXTURES / "gemini-home"
PROJECT_CHATS = HOME / "tmp" / "project" / "chats"
LEGACY_CHATS = HOME / "tmp" / "legacy" / "chats"
PROJECT = "/tmp/cos-gemini-fixtures/project"
LEGACY = "/tmp/cos-gemini-fixtures/legacy"

A = "aa78fc04-dbe6-4180-b260-710d72261fc2"
R = "72a406ac-b866-4cc2-b23d-a76a2f95a6d8"
S = "bc799a31-3bc5-47fe-81d0-7617d8169e3c"
SUBAGENT = "0456292b-6ccc-424b-8356-a37725bc09d9"
F = "c2773ed1-7bf7-41f7-8b9a-1b2ea72289ae"
L1 = "fb7f6adf-db62-4d67-bc1b-706bbcd2cab2"
L2 = "5bea7116-8ed2-4da6-83b3-a4448b17e42a"
A_SUMMARY = "Scripted: PLAIN: create notes.txt with alpha and beta, then rename bet"

# fixtures/SOURCES.md, "Expected readings": file, id, prompts, assistant, tool calls, thoughts,
# live messages, tokens (input, output, thoughts, total), title, title source.
EXPECTED = [
    (PROJECT_CHATS / "session-2026-12-06T08-07-aa78fc04.jsonl", A, 2, 6, 4, 1, 16,
     (3267, 30, 3, 3300), A_SUMMARY, "summary"),
    (FIXTURES / "snapshots" / "plain.jsonl", A, 1, 4, 3, 1, 9, (1586, 20, 3, 1609),
     "PLAIN: create notes.txt with alpha and beta, then rename beta.", "first_prompt"),
    (PROJECT_CHATS / "session-2026-12-06T08-07-72a406ac.jsonl", R, 2, 3, 1, 0, 7,
     (763, 15, 0, 778), "REWIND: write rewind.txt with one line.", "first_prompt"),
    (PROJECT_CHATS / "session-2026-12-06T08-07-bc799a31.jsonl", S, 1, 2, 1, 0, 5,
     (577, 10, 0, 587), "DELEGATE: ask the generalist to count the files.", "first_prompt"),
    (PROJECT_CHATS / S / f"{SUBAGENT}.jsonl", SUBAGENT, 1, 2, 2, 0, 4, (143, 10, 0, 153),
     '{ "response": "There are 3 files." }', "summary"),
    (LEGACY_CHATS / "session-2026-12-06T08-07-fb7f6adf.json", L1, 1, 3, 2, 1, 4,
     (888, 15, 3, 906), "LEGACY: write legacy.txt.", "first_prompt"),
    (LEGACY_CHATS / "session-2026-12-06T08-07-5bea7116.jsonl", L2, 2, 3, 1, 0, 7,
     (798, 15, 0, 813), "MIGRATE: look at the folder.", "first_prompt"),
]


def by_id(found: list[GeminiSession]) -> dict[str, GeminiSession]:
    return {session.native_id: session for session in found}


def tokens(session: GeminiSession) -> tuple[int, int, int, int]:
    return (session.tokens.input, session.tokens.output, session.tokens.thoughts,
            session.tokens.total)


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e[0].name)
def test_every_fixture_session_reads_with_the_counts_of_sources_md(expected: tuple) -> None:
    path, native_id, prompts, assistant, calls, thoughts, live, spent, title, source = expected
    session = read_session(path)
    assert session.native_id == native_id
    assert (session.user_messages, session.assistant_messages, session.tool_calls,
            session.thoughts, session.messages) == (prompts, assistant, calls, thoughts, live)
    assert tokens(session) == spent
    assert (session.title, session.title_source) == (title, source)
    assert session.malformed_lines == {} and not session.torn_tail
    assert session.git_branch is None


def test_the_fork_counts_only_its_own_tokens_once_linked_to_its_source() -> None:
    fork = by_id(scan_gemini(HOME).sessions)[F]
    assert (fork.user_messages, fork.assistant_messages, fork.tool_calls, fork.messages) \
        == (3, 8, 5, 21)
    assert fork.forked_from == A and fork.copied_messages == 16
    assert tokens(fork) == (2083, 10, 0, 2093)
    assert fork.imported_from == (
        "/tmp/cos-gemini-fixtures/home/.gemini/tmp/project/chats/"
        "session-2026-12-06T08-07-aa78fc04.jsonl")
    assert (fork.title, fork.title_source) == (A_SUMMARY, "summary")  # A's, copied


def test_the_scan_lists_each_session_once_newest_first_with_its_project() -> None:
    scan = scan_gemini(HOME)
    assert scan.problems == [] and scan.orphans == []
    assert [s.native_id for s in scan.sessions] == [L2, L1, F, S, R, A]
    for session in scan.sessions:
        expected = LEGACY if session.native_id in (L1, L2) else PROJECT
        assert session.project == expected and session.cwd == expected


def test_a_title_or_first_prompt_is_never_the_injected_session_context() -> None:
    scan = scan_gemini(HOME)
    found = scan.sessions + [sub for session in scan.sessions for sub in session.subagents]
    assert sum(session.context_messages for session in found) >= 3  # it is there, unread
    for session in found:
        for text in (session.title, session.first_prompt, session.last_prompt):
            assert text and not text.startswith("<"), (session.native_id, text)


def test_a_resumed_session_keeps_its_first_start_and_both_turns() -> None:
    session = by_id(scan_gemini(HOME).sessions)[A]
    assert session.started == "2026-12-06T08:07:03.685Z"  # not the resume's metadata line
    assert session.last_active == "2026-12-06T08:07:11.289Z"
    assert session.record_counts["metadata"] == 2
    assert session.first_prompt == "PLAIN: create notes.txt with alpha and beta, then rename beta."
    assert session.last_prompt == "RESUMED: what does notes.txt hold now?"
    assert session.model == "gemini-3.8-flash"
    assert session.summary == A_SUMMARY
    assert session.metadata["memoryScratchpad"]["version"] == 1  # kept as written


def test_a_rewound_session_counts_its_live_conversation_and_the_rewind() -> None:
    session = by_id(scan_gemini(HOME).sessions)[R]
    assert session.rewinds == 1 and session.rewound_messages == 2
    assert session.last_prompt == "REWIND third prompt"
    assert session.recorded_tokens.total == 1134  # what the rewound answer cost too
    assert session.tokens.total == 778


def test_a_subagent_is_attached_to_its_parent_never_listed_as_a_session() -> None:
    scan = scan_gemini(HOME)
    parent = by_id(scan.sessions)[S]
    assert SUBAGENT not in by_id(scan.sessions)
    [subagent] = parent.subagents
    assert (subagent.native_id, subagent.parent, subagent.kind, subagent.agent_name) \
        == (SUBAGENT, S, "subagent", "generalist")
    assert subagent.first_prompt == "SUBTASK: count the files of the project."
    assert subagent.directories == (PROJECT,)
    assert parent.delegations == ((SUBAGENT, "generalist"),)
    assert parent.tokens_with_subagents == parent.tokens + subagent.tokens


def test_a_sessions_subagent_files_are_named_from_the_folder_of_its_file() -> None:
    main = PROJECT_CHATS / "session-2026-12-06T08-07-bc799a31.jsonl"
    assert subagent_files(str(main)) == [
        (f"{S}/{SUBAGENT}.jsonl", str(PROJECT_CHATS / S / f"{SUBAGENT}.jsonl"))]
    assert subagent_files(str(PROJECT_CHATS / "session-2026-12-06T08-07-aa78fc04.jsonl")) == []
    assert subagent_files(str(LEGACY_CHATS / "session-2026-12-06T08-07-fb7f6adf.json")) == []


def test_a_subagent_folder_or_file_that_is_a_symlink_or_no_subagent_name_is_left_out(
        tmp_path: Path) -> None:
    chats = chats_copy(tmp_path) / "tmp" / "project" / "chats"
    main = chats / "session-2026-12-06T08-07-bc799a31.jsonl"
    (chats / S / "notes.txt").write_text("x", encoding="utf-8")
    (chats / S / "x.jsonl").symlink_to(tmp_path / "outside.jsonl")
    (chats / S / ".hidden.jsonl").write_text("{}\n", encoding="utf-8")
    assert [name for name, _ in subagent_files(str(main))] == [f"{S}/{SUBAGENT}.jsonl"]
    (chats / S).rename(tmp_path / "moved")
    (chats / S).symlink_to(tmp_path / "moved")
    assert subagent_files(str(main)) == []


def test_a_subagent_name_is_the_sessions_id_folder_and_a_plain_jsonl_file() -> None:
    assert is_subagent_name(S, f"{S}/{SUBAGENT}.jsonl")
    for name in (f"{SUBAGENT}.jsonl", f"{A}/{SUBAGENT}.jsonl", f"{S}/../{SUBAGENT}.jsonl",
                 f"/{S}/{SUBAGENT}.jsonl", f"{S}/x/{SUBAGENT}.jsonl", f"{S}/{SUBAGENT}.json",
                 f"{S}/.jsonl", f"{S}/..", f"{S}/"):
        assert not is_subagent_name(S, name), name
    assert not is_subagent_name("..", f"../{SUBAGENT}.jsonl")


def test_a_session_of_gemini_cli_0_38_reads_from_its_json_document() -> None:
    session = by_id(scan_gemini(HOME).sessions)[L1]
    assert session.format == "json"
    assert session.model == "gemini-3-flash-preview"
    assert session.context_messages == 0  # 0.38 kept the context out of the file
    assert session.started == "2026-12-06T08:07:50.908Z"


def test_a_json_session_resumed_by_0_61_is_one_session_of_its_fullest_file() -> None:
    session = by_id(scan_gemini(HOME).sessions)[L2]
    assert session.format == "jsonl"
    assert [os.path.basename(p) for p in session.paths] == [
        "session-2026-12-06T08-07-5bea7116.jsonl",
        "session-2026-12-06T08-07-5bea7116.json",
        "session-2026-12-06T08-08-5bea7116.jsonl",
    ]
    assert session.models == ("gemini-3-flash-preview", "gemini-3.8-flash")
    assert session.started == "2026-12-06T08:07:57.400Z"


def test_the_empty_twin_of_a_fork_is_one_of_its_paths_not_a_session() -> None:
    fork = by_id(scan_gemini(HOME).sessions)[F]
    assert [os.path.basename(p) for p in fork.paths] == [
        "session-1796544463414-c2773ed1.jsonl", "session-2026-12-06T08-07-c2773ed1.jsonl"]


def test_the_twin_a_resume_in_another_minute_writes_is_neither_a_session_nor_the_transcript(
        tmp_path: Path) -> None:
    home = chats_copy(tmp_path)
    first = home / "tmp" / "project" / "chats" / "session-2026-12-06T08-07-aa78fc04.jsonl"
    # Resumed a minute later and left at once: the twin is the newest file of the session.
    twin = gemini_twin(first, "2026-12-06T08:08:02.000Z")
    alone = read_session(twin)
    assert (alone.native_id, alone.user_messages, alone.assistant_messages,
            alone.context_messages) == (A, 0, 0, 1)
    scan = scan_gemini(home)
    assert [s.native_id for s in scan.sessions].count(A) == 1
    session = by_id(scan.sessions)[A]
    assert session.path == str(first) and session.paths == (str(first), str(twin))
    _, _, prompts, assistant, calls, thoughts, live, spent, title, source = EXPECTED[0]
    assert (session.user_messages, session.assistant_messages, session.tool_calls,
            session.thoughts, session.messages) == (prompts, assistant, calls, thoughts, live)
    assert tokens(session) == spent and (session.title, session.title_source) == (title, source)
    assert session.started == "2026-12-06T08:07:03.685Z"


def test_sessions_serialise_as_json() -> None:
    for session in scan_gemini(HOME).sessions:
        data = jsonwire.loads(jsonwire.dumps(session.to_dict()))
        assert isinstance(data, dict) and data["native_id"] == session.native_id
        assert "live_ids" not in data


# -- where the sessions are ----------------------------------------------------------------------


def test_gemini_cli_home_moves_the_gemini_dir_as_the_cli_does(tmp_path: Path) -> None:
    assert default_gemini_dir({"GEMINI_CLI_HOME": str(tmp_path)}) == str(tmp_path / ".gemini")
    # Without it, the caller's HOME, as the CLI's os.homedir() reads it.
    assert default_gemini_dir({"HOME": "/x"}) == "/x/.gemini"
    assert default_gemini_dir({}) == os.path.join(os.path.expanduser("~"), ".gemini")


def test_the_default_scan_reads_under_gemini_cli_home(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(HOME, tmp_path / ".gemini")
    monkeypatch.setenv("GEMINI_CLI_HOME", str(tmp_path))
    assert len(scan_gemini().sessions) == 6


def test_a_slug_missing_from_projects_json_maps_by_its_project_root_marker(
        tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    (home / "projects.json").write_text('{"projects": {}}', encoding="utf-8")
    assert read_projects(str(home)) == {"legacy": LEGACY, "project": PROJECT}


def test_a_folder_named_by_the_project_hash_maps_to_its_project(tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    digest = hashlib.sha256(PROJECT.encode()).hexdigest()
    (home / "tmp" / "project").rename(home / "tmp" / digest)
    (home / "tmp" / digest / ".project_root").unlink()
    assert read_projects(str(home))[digest] == PROJECT
    assert by_id(scan_gemini(home).sessions)[A].project == PROJECT


def test_a_broken_projects_json_is_reported_and_the_markers_still_map(tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    (home / "projects.json").unlink()
    (home / "projects.json").mkdir()
    scan = scan_gemini(home)
    assert len(scan.problems) == 1 and "projects.json" in scan.problems[0]
    assert by_id(scan.sessions)[A].project == PROJECT


# -- damage and files that are not what they seem ------------------------------------------------


def chats_copy(tmp_path: Path) -> Path:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    return home


def test_unreadable_lines_are_counted_and_the_session_is_not_lost(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-12-06T08-07-aa78fc04.jsonl"
    lines = (PROJECT_CHATS / path.name).read_bytes().splitlines(keepends=True)
    damaged = [lines[0], b"not json at all\n", b"[1, 2]\n", b"\xff\xfe\n", lines[1],
               b"[" * 300 + b"]" * 300 + b"\n", *lines[2:], b'{"id": "cut off mid-app']
    path.write_bytes(b"".join(damaged))
    session = read_session(path)
    assert session.malformed_lines == {"not_json": 3, "not_object": 1}
    assert session.unreadable_lines == 4 and session.torn_tail
    assert (session.user_messages, session.assistant_messages, session.tool_calls,
            tokens(session)) == (2, 6, 4, (3267, 30, 3, 3300))


def test_a_line_over_the_limit_is_counted_and_skipped(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "MAX_LINE_BYTES", 4096)
    monkeypatch.setattr(sessions, "_READ_CHUNK", 1000)  # the long line spans several reads
    path = tmp_path / "session-2026-12-06T08-07-abcdef12.jsonl"
    meta = {"sessionId": "abcdef12-0000", "projectHash": "0" * 64, "kind": "main"}
    prompt = {"id": "p", "type": "user", "content": [{"text": "hello"}]}
    huge = {"id": "h", "type": "user", "content": [{"text": "x" * 10_000}]}
    path.write_text("\n".join(json.dumps(r) for r in (meta, huge, prompt)) + "\n",
                    encoding="utf-8")
    session = read_session(path)
    assert session.malformed_lines == {"too_long": 1}
    assert session.first_prompt == "hello" and session.messages == 1


def test_a_symlinked_session_file_is_neither_listed_nor_read(tmp_path: Path) -> None:
    home = chats_copy(tmp_path)
    chats = home / "tmp" / "project" / "chats"
    outside = tmp_path / "outside.jsonl"
    shutil.copy(chats / "session-2026-12-06T08-07-72a406ac.jsonl", outside)
    (chats / "session-2026-12-06T08-07-72a406ac.jsonl").unlink()
    link = chats / "session-2026-12-06T08-07-72a406ac.jsonl"
    link.symlink_to(outside)
    assert R not in by_id(scan_gemini(home).sessions)
    with pytest.raises(CosError) as refused:
        read_session(link)
    assert "\n" not in str(refused.value)


def test_a_fifo_named_like_a_session_is_reported_without_blocking_the_scan(
        tmp_path: Path) -> None:
    home = chats_copy(tmp_path)
    fifo = home / "tmp" / "project" / "chats" / "session-2026-12-06T09-00-deadbeef.jsonl"
    os.mkfifo(fifo)
    scan = scan_gemini(home)
    assert len(scan.sessions) == 6
    assert len(scan.problems) == 1 and "deadbeef" in scan.problems[0]


def test_a_json_session_over_the_limit_is_reported_not_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sessions, "MAX_JSON_BYTES", 1000)
    scan = scan_gemini(chats_copy(tmp_path))
    assert L1 not in by_id(scan.sessions)
    assert any("fb7f6adf" in problem and "larger" in problem for problem in scan.problems)


def test_unknown_fields_and_message_types_are_counted_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "session-2026-12-06T08-07-0badc0de.jsonl"
    records = [
        {"sessionId": "0badc0de-1", "projectHash": "0" * 64, "kind": "main", "futureField": 1},
        {"id": "p", "type": "user", "content": "a prompt", "mood": "calm"},
        {"id": "c", "type": "compression", "content": "a summary of earlier turns"},
        {"$future": True},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    conversation = sessions.read_conversation(path)
    session = conversation.session
    assert session.unknown_fields == {"message:mood": 1, "metadata:futureField": 1}
    assert session.unknown_types == {"compression": 1}
    assert session.metadata["futureField"] == 1
    assert conversation.messages[0]["mood"] == "calm"
    assert [e.kind for e in conversation.entries] == ["prompt", "other"]
    assert conversation.other_records == ({"$future": True},)
    assert session.record_counts["other"] == 1


def test_a_file_without_a_session_id_is_listed_by_its_name_with_a_warning(
        tmp_path: Path) -> None:
    path = tmp_path / "session-2026-12-06T08-07-0badc0de.jsonl"
    path.write_text(json.dumps({"id": "p", "type": "user", "content": "hi"}) + "\n",
                    encoding="utf-8")
    session = read_session(path)
    assert session.native_id == "session-2026-12-06T08-07-0badc0de"
    assert session.first_prompt == "hi" and len(session.warnings) == 1


def test_a_subagent_whose_parent_is_gone_is_an_orphan_not_a_session(tmp_path: Path) -> None:
    home = chats_copy(tmp_path)
    (home / "tmp" / "project" / "chats" / "session-2026-12-06T08-07-bc799a31.jsonl").unlink()
    scan = scan_gemini(home)
    assert [orphan.native_id for orphan in scan.orphans] == [SUBAGENT]
    assert SUBAGENT not in by_id(scan.sessions) and S not in by_id(scan.sessions)


def test_tokens_add_and_subtract_field_by_field() -> None:
    one = GeminiTokens(input=10, output=2, cached=1, thoughts=3, tool=0, total=15)
    two = GeminiTokens(input=5, output=1, total=6)
    assert one + two == GeminiTokens(15, 3, 1, 3, 0, 21)
    assert two - one == GeminiTokens()
