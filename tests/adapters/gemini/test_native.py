"""Gemini CLI's sessions in the one list: the fixtures the real CLI wrote (SOURCES.md), read as
native sessions, and imported by `cos sessions` / `cos import` run as a user runs them, from a
private HOME holding them where Gemini CLI keeps its logs."""

from __future__ import annotations

import shutil
from pathlib import Path

from coding_os.adapters.gemini.native import scan
from coding_os.sessions.index import native_row
from tests.helpers import copy_gemini_fixtures, gemini_twin
from tests.helpers import cos_in as run
from tests.helpers import cos_json_in as data

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOME = FIXTURES / "gemini-home"
A = "aa78fc04-dbe6-4180-b260-710d72261fc2"
R = "72a406ac-b866-4cc2-b23d-a76a2f95a6d8"
S = "bc799a31-3bc5-47fe-81d0-7617d8169e3c"
F = "c2773ed1-7bf7-41f7-8b9a-1b2ea72289ae"
L1 = "fb7f6adf-db62-4d67-bc1b-706bbcd2cab2"
L2 = "5bea7116-8ed2-4da6-83b3-a4448b17e42a"
# SOURCES.md's table: prompts, assistant messages, total tokens, title.
EXPECTED = {
    A: (2, 6, 3300, "Scripted: PLAIN: create notes.txt with alpha and beta, then rename bet"),
    R: (2, 3, 778, "REWIND: write rewind.txt with one line."),
    S: (1, 2, 587 + 153, "DELEGATE: ask the generalist to count the files."),
    F: (3, 8, 2093, "Scripted: PLAIN: create notes.txt with alpha and beta, then rename bet"),
    L1: (1, 3, 906, "LEGACY: write legacy.txt."),
    L2: (2, 3, 813, "MIGRATE: look at the folder."),
}


def gemini_home(home: Path, project: Path, legacy: Path) -> None:
    """The fixtures' Gemini dir under `home`, its two projects at `project` and `legacy`."""
    copy_gemini_fixtures(home, project, legacy)


def test_every_fixture_session_reads_as_a_native_session_with_sources_counts() -> None:
    natives, report, _ = scan(str(HOME))
    found = {native.native_id: native for native in natives}
    assert set(found) == set(EXPECTED)
    for native_id, (prompts, answers, tokens, title) in EXPECTED.items():
        native = found[native_id]
        assert native.agent == "gemini"
        assert (native.user_messages, native.assistant_messages) == (prompts, answers)
        assert native.tokens_with_subagents.total == tokens
        assert native.title == title and "<session_context>" not in (native.first_prompt or "")
    a = found[A].tokens
    assert (a.input, a.output, a.reasoning) == (3267, 33, 3)  # thoughts are output
    assert found[F].forked_from == A
    assert [sub.agent_type for sub in found[S].subagents] == ["generalist"]
    assert found[R].branches == 1  # one $rewindTo
    assert report.sessions == 6 and report.subagents == 1 and report.malformed_lines == 0
    assert report.unreadable == [] and report.torn_files == [] and report.unread_lines == {}


def test_a_resumes_twin_file_leaves_one_row_whose_transcript_is_the_first_file(
        tmp_path: Path) -> None:
    home = tmp_path / ".gemini"
    shutil.copytree(HOME, home)
    first = home / "tmp" / "project" / "chats" / "session-2026-12-06T08-07-aa78fc04.jsonl"
    twin = gemini_twin(first, "2026-12-06T08:08:02.000Z")
    natives, report, _ = scan(str(home))
    assert [native.native_id for native in natives].count(A) == 1
    assert report.sessions == 6 and report.unread_lines == {}
    native = next(native for native in natives if native.native_id == A)
    assert native.paths == (str(first), str(twin))
    row = native_row(native)
    prompts, answers, tokens, title = EXPECTED[A]
    assert (row.id, row.source_path, row.messages, row.tokens, row.title) == (
        A, str(first), prompts + answers, tokens, title)


def test_cos_sessions_lists_gemini_sessions_of_the_checkout_with_exact_counts(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    repo = checkout[0]
    gemini_home(isolated_env, repo, tmp_path / "legacy")
    rows = data(checkout, "sessions", "--agent", "gemini")
    assert isinstance(rows, list)
    listed = {row["native_id"]: row for row in rows}
    assert set(listed) == {A, R, S, F}  # the legacy project's are not this checkout's
    for native_id, row in listed.items():
        prompts, answers, tokens, title = EXPECTED[native_id]
        assert row["agent"] == row["kind"] == "gemini"
        assert row["messages"] == prompts + answers and row["tokens"] == tokens
        assert row["title"] == title and row["cwd"] == str(repo)
        assert row["branch"] is None  # Gemini CLI records none
    assert listed[F]["forked_from"] == A
    everything = data(checkout, "sessions", "--scope", "all", "--agent", "gemini")
    assert isinstance(everything, list)
    assert {row["native_id"] for row in everything} == set(EXPECTED)


def test_a_gemini_session_whose_file_is_deleted_leaves_the_list(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    gemini_home(isolated_env, checkout[0], tmp_path / "legacy")
    first = data(checkout, "import")
    assert isinstance(first, dict) and first["sessions_added"] >= 6
    again = data(checkout, "import")
    assert isinstance(again, dict) and again["sessions_added"] == 0
    for path in (isolated_env / ".gemini" / "tmp" / "project" / "chats").glob("*72a406ac*"):
        path.unlink()
    after = data(checkout, "import")
    assert isinstance(after, dict) and after["sessions_removed"] == 1
    rows = data(checkout, "sessions", "--scope", "all", "--agent", "gemini")
    assert isinstance(rows, list) and R not in {row["native_id"] for row in rows}
    assert run(checkout, "sessions", "--agent", "gemini").returncode == 0


def test_turn_usage_adds_each_prompts_answers_up_and_prices_them_as_gemini_bills() -> None:
    from coding_os.adapters.gemini.native import turn_usage

    context = {"id": "c", "type": "user", "content": [{"text": "<session_context>x"}]}
    messages = [
        context,
        {"id": "g0", "type": "gemini", "model": "gemini-2.5-pro", "content": "before",
         "tokens": {"input": 7, "output": 1, "total": 8}},
        {"id": "p1", "type": "user", "content": [{"text": "first"}]},
        {"id": "g1", "type": "gemini", "model": "gemini-2.5-pro", "content": "",
         "tokens": {"input": 100, "cached": 40, "output": 10, "thoughts": 2, "tool": 5,
                    "total": 117}},
        {"id": "r1", "type": "user", "content": [{"functionResponse": {"name": "ls"}}]},
        {"id": "g2", "type": "gemini", "model": "gemini-2.5-pro", "content": "done"},
        {"id": "p2", "type": "user", "content": "second"},
        {"id": "g3", "type": "gemini", "model": "no-such-model", "content": "x",
         "tokens": {"input": 3, "output": 1, "total": 4}},
    ]
    turns = turn_usage(messages)
    assert [turn.prompt for turn in turns] == ["", "first", "second"]
    first = turns[1]
    # The tool-use prompt is input, the thoughts output; cached tokens are part of the input.
    assert (first.tokens.input, first.tokens.cached, first.tokens.output,
            first.tokens.reasoning) == (105, 40, 12, 2)
    assert first.models == ("gemini-2.5-pro",)
    # gemini-2.5-pro: $1.25 a million fresh input tokens, $0.125 cached, $10 output.
    assert first.cost is not None
    assert round(first.cost, 9) == round((65 * 1.25 + 40 * 0.125 + 12 * 10) / 1e6, 9)
    assert turns[2].cost is None  # a model with no price: its tokens, no cost
    assert turn_usage([context, {"id": "p", "type": "user", "content": "hi"}])[0].tokens.total \
        == 0  # a prompt nothing answered yet is a turn of no tokens


def test_cos_import_reads_again_only_the_gemini_file_that_changed_and_lists_what_it_holds(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path, tmp_path: Path) -> None:
    gemini_home(isolated_env, checkout[0], tmp_path / "legacy")
    chats = isolated_env / ".gemini" / "tmp" / "project" / "chats"
    legacy = len(list((isolated_env / ".gemini" / "tmp").rglob("*.json")))  # read every time
    first = data(checkout, "import")
    assert isinstance(first, dict) and first["files_unchanged"] == 0
    assert first["files_read"] >= 10 and legacy == 2  # and the other agents' logs
    rewound = next(chats.glob("session-*-72a406ac.jsonl"))
    with rewound.open("a", encoding="utf-8") as f:
        f.write('{"$rewindTo":"no such message"}\n')  # every message of R rewound
    again = data(checkout, "import")
    assert isinstance(again, dict)
    assert (again["files_read"], again["files_unchanged"]) == (
        1 + legacy, first["files_read"] - 1 - legacy)
    assert again["sessions_updated"] == 1  # R's row: every other one is as it was
    rows = {row["native_id"]: row for row in data(checkout, "sessions", "--agent", "gemini")}
    assert rows[R]["messages"] == 0
    assert rows[A]["messages"] == sum(EXPECTED[A][:2]) and rows[F]["forked_from"] == A
    # What is kept, damaged (a line cut short), is read again from the session's file.
    kept = checkout[0] / ".coding-os" / ".import-state.gemini.jsonl"
    lines = kept.read_bytes().splitlines(keepends=True)
    kept.write_bytes(b"".join(lines[:2] + [lines[2][:-20] + b"\n"] + lines[3:]))
    rewound.write_bytes(rewound.read_bytes().rsplit(b"\n", 2)[0] + b"\n")  # R as it was
    third = data(checkout, "import")
    assert isinstance(third, dict) and third["files_read"] == 2 + legacy
    rows = {row["native_id"]: row for row in data(checkout, "sessions", "--agent", "gemini")}
    assert {native_id: (row["messages"], row["tokens"]) for native_id, row in rows.items()} == {
        native_id: (prompts + answers, tokens) for native_id, (prompts, answers, tokens, _)
        in EXPECTED.items() if native_id in rows}
    # A rebuild reads every file, and leaves what is kept for the next import.
    before = kept.read_bytes()
    assert run(checkout, "index", "rebuild").returncode == 0
    assert kept.read_bytes() == before
    with rewound.open("a", encoding="utf-8") as f:
        f.write('{"$rewindTo":"no such message"}\n')
    fourth = data(checkout, "import")
    assert isinstance(fourth, dict) and fourth["files_read"] == 1 + legacy
