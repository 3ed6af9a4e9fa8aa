"""The session index: native and cos-native sessions mapped to rows, refreshed incrementally."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from coding_os.sessions import index, transcript
from coding_os.adapters.native import STATE_VERSION, NativeSession, NativeSubagent, TokenTotals
from coding_os.state.tiers import Tiers
from coding_os.storage.base import SessionRecord
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import (
    MAIN_1053,
    ROLLOUTS,
    SMALL,
    VIEWER,
    conversation,
    copy_claude_fixtures,
    copy_codex_fixtures,
    cos,
    git,
    write_jsonl,
)


NATIVE_IDS = {MAIN_1053, VIEWER, SMALL, *ROLLOUTS}


@pytest.fixture
def homes(tmp_path: Path) -> tuple[Path, Path]:
    """Claude's and Codex's dirs holding every fixture, laid out as the tools keep them."""
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    copy_claude_fixtures(claude)
    copy_codex_fixtures(codex)
    return claude, codex


def refresh(storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path],
            full: bool = False) -> index.RefreshReport:
    return index.refresh(storage, tiers, str(homes[0]), str(homes[1]), full=full)


def native(**fields: object) -> NativeSession:
    base: dict[str, object] = dict(agent="claude", native_id="u-1", path="/logs/u-1.jsonl")
    base.update(fields)
    return NativeSession(**base)  # type: ignore[arg-type]


# mapping


def test_a_native_session_is_filed_under_its_native_id_or_the_cos_id_the_hooks_linked() -> None:
    session = native(cwd="/nowhere/app", git_branch="dev", created="2026-01-01T00:00:00.000Z",
                     last_active="2026-01-02T00:00:00.000Z", user_messages=2,
                     assistant_messages=3, title="Named")
    row = index.native_row(session)
    assert (row.id, row.native_id, row.kind, row.title, row.branch, row.messages) == (
        "u-1", "u-1", "claude", "Named", "dev", 5)
    # a cwd that is no checkout here (or gone) is its own project and worktree
    assert (row.project, row.worktree, row.cwd) == ("/nowhere/app", "/nowhere/app", "/nowhere/app")
    linked = index.native_row(session, "ses-claude-20261129-100000-aaaa", "ended")
    assert (linked.id, linked.native_id, linked.status) == (
        "ses-claude-20261129-100000-aaaa", "u-1", "ended")


def test_a_native_row_counts_subagent_tokens_and_falls_back_to_the_first_prompt() -> None:
    sub = NativeSubagent(agent="claude", agent_id="a1", parent="u-1", layout="nested",
                         path="/x", tokens=TokenTotals(input=5, output=5))
    row = index.native_row(native(tokens=TokenTotals(input=100, output=20), subagents=(sub,),
                                  first_prompt="  fix the bug\nin detail", continues="u-0",
                                  created="2026-01-01T00:00:00.000Z"))
    assert (row.tokens, row.title, row.forked_from, row.parent) == (130, "fix the bug", "u-0", None)
    assert row.last_active == "2026-01-01T00:00:00.000Z"  # no later entry: its creation


def test_project_and_worktree_of_a_native_session_come_from_its_checkout(repo: Path) -> None:
    (repo / "sub").mkdir()
    wt = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(wt))
    assert index.native_row(native(cwd=str(repo / "sub"))).worktree == str(repo)
    in_worktree = index.native_row(native(cwd=str(wt)))
    assert (in_worktree.project, in_worktree.worktree) == (str(repo), str(wt.resolve()))


def test_a_cos_transcript_maps_to_a_row_with_title_messages_tokens_and_status(
        tiers: Tiers) -> None:
    sid = transcript.create(tiers, "claude", project="/p", worktree="/p/wt", branch="main")
    transcript.append(tiers, sid, "user", {"turn": 1, "text": "first prompt\nsecond line"})
    transcript.append(tiers, sid, "assistant",
                      {"turn": 1, "text": "ok", "usage": {"input": 7, "output": 3}})
    row, problems = index.cos_row(transcript.transcript_path(tiers, sid))
    assert row is not None and problems == []
    assert (row.id, row.kind, row.title, row.messages, row.tokens, row.status) == (
        sid, "cos", "first prompt", 2, 10, "open")
    assert (row.project, row.worktree, row.cwd, row.branch) == ("/p", "/p/wt", "/p/wt", "main")
    transcript.append(tiers, sid, "rewind", {"to_seq": 1})
    transcript.set_title(tiers, sid, "Renamed")
    transcript.close(tiers, sid)
    row, _ = index.cos_row(transcript.transcript_path(tiers, sid))
    assert row is not None and (row.title, row.messages, row.status) == ("Renamed", 1, "closed")


def test_a_cos_row_keeps_the_first_prompt_and_the_last_one_still_visible(tiers: Tiers) -> None:
    sid = transcript.create(tiers, "claude")
    for turn, text in enumerate(["add a login page", "now the tests", "undo that"], start=1):
        transcript.append(tiers, sid, "user", {"turn": turn, "text": text})
        transcript.append(tiers, sid, "assistant", {"turn": turn, "text": "ok"})
    row, _ = index.cos_row(transcript.transcript_path(tiers, sid))
    assert row is not None and (row.first_prompt, row.last_prompt) == (
        "add a login page", "undo that")
    transcript.append(tiers, sid, "rewind", {"to_seq": 4})  # "undo that" is rewound away
    row, _ = index.cos_row(transcript.transcript_path(tiers, sid))
    assert row is not None and (row.first_prompt, row.last_prompt) == (
        "add a login page", "now the tests")


def test_prompts_in_a_row_are_cut_to_their_preview_length_and_storable(tiers: Tiers) -> None:
    from coding_os.adapters.native import PROMPT_PREVIEW_CHARS

    sid = transcript.create(tiers, "claude")
    transcript.append(tiers, sid, "user", {"turn": 1, "text": "x" * (PROMPT_PREVIEW_CHARS + 50)})
    transcript.append(tiers, sid, "user", {"turn": 2, "text": "odd \ud800 char"})
    row, _ = index.cos_row(transcript.transcript_path(tiers, sid))
    assert row is not None and row.first_prompt == "x" * PROMPT_PREVIEW_CHARS
    assert row.last_prompt == "odd \ufffd char"
    native_row = index.native_row(native(first_prompt="y" * (PROMPT_PREVIEW_CHARS + 1),
                                         last_prompt="z\udfff"))
    assert (native_row.first_prompt, native_row.last_prompt) == (
        "y" * PROMPT_PREVIEW_CHARS, "z\ufffd")


def test_a_cos_sidechain_is_never_a_row(tiers: Tiers) -> None:
    parent = transcript.create(tiers, "claude")
    side = transcript.create(tiers, "claude", parent=parent)
    row, _ = index.cos_row(transcript.transcript_path(tiers, side))
    assert row is None


# refresh


def test_imported_fixture_sessions_keep_their_first_and_last_prompt_in_the_index(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    from tests.helpers import COMPACTED, TOOLS

    refresh(storage, tiers, homes)
    expected = {
        # Claude Code 1.0.108: only a slash command was typed (SOURCES.md)
        VIEWER: ("/orchestrator @CLAUDE.md を最新の状態にアップデートしてください",) * 2,
        # Codex desktop rollout, 38 user messages, redacted
        COMPACTED: ("[REDACTED_MESSAGE len=32 sha=821fd802]",
                    "[REDACTED_MESSAGE len=98 sha=62d744dd]"),
        TOOLS: ("show tools", "let's update the defailt context compart to 90 in env var"),
    }
    for native_id, prompts in expected.items():
        row = storage.index_row(native_id)
        assert row is not None and (row.first_prompt, row.last_prompt) == prompts, native_id
    main = storage.index_row(MAIN_1053)
    assert main is not None and main.first_prompt is not None
    assert main.first_prompt.startswith("now we have cache so we should change TUI")


def test_every_fixture_is_indexed_once_and_subagents_are_never_rows(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    report = refresh(storage, tiers, homes)
    assert (report.files_seen, report.files_read, report.sessions_added) == (8, 8, 7)
    assert report.subagents >= 2 and report.orphan_subagents == 1  # the 2.0.x Warmup agent
    assert report.unknown_types["atis-latch"] == 1 and report.malformed_lines == 0
    rows = storage.index_rows()
    assert {r.id for r in rows} == NATIVE_IDS
    assert not any("3be551df" in r.id for r in rows)
    assert [r.last_active for r in rows] == sorted((r.last_active for r in rows), reverse=True)
    saved = json.loads((tiers.state_dir / Path(index.STATE_FILE)).read_text(encoding="utf-8"))
    assert saved["version"] == STATE_VERSION and len(saved["files"]) == 8
    assert (Path(tiers.state_dir) / saved["pack"]).is_file()


def test_a_second_refresh_reads_nothing_and_changes_nothing(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    refresh(storage, tiers, homes)
    again = refresh(storage, tiers, homes)
    assert (again.files_read, again.files_unchanged, again.bytes_read) == (0, 8, 0)
    assert (again.sessions_added, again.sessions_updated, again.sessions) == (0, 0, 7)
    assert (again.aggregates_loaded, again.subagents, again.orphan_subagents) == (0, 3, 1)


def test_a_refresh_with_one_changed_rollout_reads_back_that_files_aggregate_alone(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    from tests.helpers import TRUNCATED

    refresh(storage, tiers, homes)
    path = next(homes[1].glob(f"sessions/**/rollout-*-{TRUNCATED}.jsonl"))
    size = path.stat().st_size
    added = {"timestamp": "2026-02-23T13:30:00.000Z", "type": "event_msg",
             "payload": {"type": "user_message", "message": "and then?", "images": []}}
    write_jsonl(path, [added], mode="a")
    report = refresh(storage, tiers, homes)
    assert (report.files_read, report.bytes_read) == (1, path.stat().st_size - size)
    assert (report.aggregates_loaded, report.sessions_updated, report.sessions) == (1, 1, 7)
    row = storage.index_row(TRUNCATED)
    assert row is not None and row.last_prompt == "and then?"


def test_a_native_session_whose_logs_are_gone_leaves_the_index_at_the_next_refresh(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    from tests.helpers import TRUNCATED

    refresh(storage, tiers, homes)
    next(homes[1].glob(f"sessions/**/rollout-*-{TRUNCATED}.jsonl")).unlink()
    report = refresh(storage, tiers, homes)
    assert (report.sessions_removed, report.sessions, report.aggregates_loaded) == (1, 6, 0)
    (homes[0] / "projects" / "-tmp" / f"{SMALL}.jsonl").unlink()
    assert refresh(storage, tiers, homes).sessions_removed == 1
    assert {r.id for r in storage.index_rows()} == NATIVE_IDS - {TRUNCATED, SMALL}


def test_a_kept_aggregate_cut_short_means_the_logs_are_read_again(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    refresh(storage, tiers, homes)
    before = storage.index_rows()
    saved = json.loads((Path(tiers.state_dir) / index.STATE_FILE).read_text(encoding="utf-8"))
    pack = Path(tiers.state_dir) / saved["pack"]
    pack.write_bytes(pack.read_bytes()[:100])  # as a disk that lost what was not flushed
    for path in homes[1].glob("sessions/**/rollout-*.jsonl"):
        with path.open("a", encoding="utf-8") as handle:
            handle.write("{}\n")
    report = refresh(storage, tiers, homes)
    assert report.files_read == 8 and any("read again" in w for w in report.warnings)
    assert [(r.id, r.messages, r.last_prompt) for r in storage.index_rows()] == [
        (r.id, r.messages, r.last_prompt) for r in before]
    again = refresh(storage, tiers, homes)
    assert (again.files_read, again.aggregates_loaded, again.warnings) == (0, 0, [])


def test_an_appended_transcript_updates_only_its_row(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    session = "11111111-2222-3333-4444-555555555555"
    path = homes[0] / "projects" / "-work-app" / f"{session}.jsonl"
    write_jsonl(path, conversation(session, 1))
    first = refresh(storage, tiers, homes)
    assert first.sessions_added == 8
    write_jsonl(path, conversation(session, 2)[2:], mode="a")
    with path.open("a", encoding="utf-8") as handle:
        handle.write("{not json\n")
    report = refresh(storage, tiers, homes)
    assert (report.files_read, report.sessions_added, report.sessions_updated) == (1, 0, 1)
    assert report.malformed_lines == 1
    row = storage.index_row(session)
    assert row is not None and row.messages == 4 and row.cwd == "/work/app"


def test_a_native_session_the_hooks_saw_gets_the_cos_id(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    refresh(storage, tiers, homes)
    sid = "ses-claude-20261129-100000-aaaa"
    storage.upsert_session(SessionRecord(id=sid, agent="claude", panel="p", native_id=VIEWER,
                                         started="x", last_active="x", status="ended"))
    report = refresh(storage, tiers, homes, full=True)
    assert (report.sessions_added, report.sessions_updated) == (1, 6)  # filed anew, under the cos id
    row = storage.index_row(VIEWER)
    assert row is not None and (row.id, row.status) == (sid, "ended")
    assert storage.index_row(sid) == row and storage.index_count() == 7


def test_an_empty_index_is_refilled_from_the_kept_state_without_reading_the_logs(
        tmp_path: Path, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    first = SQLiteStorage(str(tmp_path / "a.db"))
    refresh(first, tiers, homes)
    fresh = SQLiteStorage(str(tmp_path / "b.db"))  # as after a deleted database
    report = refresh(fresh, tiers, homes)
    assert (report.files_read, report.sessions_added) == (0, 7)
    assert {r.id for r in fresh.index_rows()} == NATIVE_IDS


def test_rebuild_reads_everything_and_gives_the_same_rows(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    refresh(storage, tiers, homes)
    before = storage.index_rows()
    report = index.rebuild(storage, tiers, str(homes[0]), str(homes[1]))
    assert report.full and (report.files_read, report.sessions_added) == (8, 7)
    assert storage.index_rows() == before


def test_a_corrupt_import_state_means_a_full_import_not_an_error(
        storage: SQLiteStorage, tiers: Tiers, homes: tuple[Path, Path]) -> None:
    refresh(storage, tiers, homes)
    (Path(tiers.state_dir) / index.STATE_FILE).write_bytes(b"\xff{garbage")
    report = refresh(storage, tiers, homes)
    assert (report.files_read, report.sessions_added, report.sessions_updated) == (8, 0, 7)


def test_cos_transcripts_are_indexed_and_a_removed_one_leaves_the_index(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    empty = (str(tmp_path / "no-claude"), str(tmp_path / "no-codex"))
    sid = transcript.create(tiers, "claude", project="/p", worktree="/p")
    transcript.create(tiers, "claude", parent=sid)  # a sidechain: never listed
    report = index.refresh(storage, tiers, *empty)
    assert (report.sessions_added, report.sessions) == (1, 1)
    assert [r.id for r in storage.index_rows()] == [sid]
    unchanged = index.refresh(storage, tiers, *empty)
    assert (unchanged.files_read, unchanged.files_unchanged, unchanged.sessions) == (0, 2, 1)
    transcript.append(tiers, sid, "user", {"turn": 1, "text": "hi"})
    assert index.refresh(storage, tiers, *empty).sessions_updated == 1
    os.unlink(transcript.transcript_path(tiers, sid))
    gone = index.refresh(storage, tiers, *empty)
    assert gone.sessions_removed == 1 and storage.index_rows() == []


def test_a_cos_transcript_with_bad_lines_is_indexed_and_the_lines_counted(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path) -> None:
    sid = transcript.create(tiers, "claude")
    path = transcript.transcript_path(tiers, sid)
    with open(path, "ab") as handle:
        handle.write(b"not json\n\xff\xfe\n{\"v\":1,\"seq\":3")
    report = index.refresh(storage, tiers, str(tmp_path / "x"), str(tmp_path / "y"))
    assert report.sessions_added == 1 and report.malformed_lines == 2
    assert report.torn_files == [path]


# secrets (redact.py)

TOKEN = "xox" + "b-123456789012-abcdefABCDEF"  # made up, built at run time


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "redact-false"])
def test_the_prompts_a_row_copies_from_a_log_have_their_secrets_redacted(
        storage: SQLiteStorage, tiers: Tiers, tmp_path: Path, redacting: bool) -> None:
    if not redacting:
        (tmp_path / ".coding-os.yaml").write_text("redact: false\n", encoding="utf-8")
    claude, codex = tmp_path / "claude", tmp_path / "codex"
    session = "11111111-2222-3333-4444-555555555555"
    entries = conversation(session, 2)
    entries[0]["message"]["content"] = f"post with {TOKEN} please"
    entries[2]["message"]["content"] = f"and SLACK_TOKEN={TOKEN} again"
    write_jsonl(claude / "projects" / "-work-app" / f"{session}.jsonl", entries)
    cos_session = transcript.create(tiers, "claude", project="/abs/root", worktree="/abs/root")
    transcript.append(tiers, cos_session, "user", {"text": f"my token {TOKEN}", "turn": 1})
    index.refresh(storage, tiers, str(claude), str(codex))
    rows = [storage.index_row(session), storage.index_row(cos_session)]
    kept = repr(rows) + "".join(path.read_text(encoding="utf-8")
                                for path in Path(tiers.state_dir).glob(".import-state.*"))
    assert (TOKEN[5:] in kept) is not redacting
    if redacting:
        assert rows[0] is not None and rows[0].first_prompt == \
            "post with [REDACTED:slack_token] please"
        assert rows[0].last_prompt == "and SLACK_TOKEN=[REDACTED:slack_token] again"
        assert rows[1] is not None and rows[1].title == "my token [REDACTED:slack_token]"


# several hosts on one shared database


def test_a_hosts_rebuild_on_a_shared_database_leaves_another_hosts_rows_alone(
        pg_url: str, homes: tuple[Path, Path], tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    alpha, beta = Tiers(str(tmp_path / "a" / ".coding-os")), Tiers(str(tmp_path / "b" / ".coding-os"))
    empty = (str(tmp_path / "no-claude"), str(tmp_path / "no-codex"))
    with PostgresStorage(pg_url) as storage:
        index.refresh(storage, alpha, str(homes[0]), str(homes[1]), host="alpha")
        alpha_rows = {r.id: r for r in storage.index_rows()}
        assert set(alpha_rows) >= NATIVE_IDS
        assert {r.host for r in alpha_rows.values()} == {"alpha"}
        own = transcript.create(beta, "claude", project="/b", worktree="/b")
        first = index.refresh(storage, beta, *empty, host="beta")
        assert first.full is False and first.sessions_added == 1  # beta's own part was empty
        index.rebuild(storage, beta, *empty, host="beta")
        os.unlink(transcript.transcript_path(beta, own))
        index.refresh(storage, beta, *empty, host="beta")
        index.rebuild(storage, beta, *empty, host="beta")
        assert {r.id: r for r in storage.index_rows()} == alpha_rows
        assert storage.index_rows(hosts=["beta"], local_host="beta") == []


def test_a_rebuild_on_a_shared_database_keeps_rows_without_a_host_it_does_not_write_again(
        pg_url: str, tmp_path: Path) -> None:
    from coding_os.storage.base import IndexRow
    from coding_os.storage.postgres import PostgresStorage

    beta = Tiers(str(tmp_path / "b" / ".coding-os"))
    empty = (str(tmp_path / "no-claude"), str(tmp_path / "no-codex"))
    own = transcript.create(beta, "claude", project="/b", worktree="/b")
    with PostgresStorage(pg_url) as storage:
        # rows indexed before hosts were recorded: one of another host, one of beta's
        storage.upsert_index_rows([
            IndexRow(id="n-of-alpha", agent="claude", kind="claude", native_id="n-of-alpha",
                     last_active="2026-11-29T10:00:00.000Z"),
            IndexRow(id=own, agent="claude", kind="cos", last_active="2026-11-29T10:00:00.000Z")])
        index.rebuild(storage, beta, *empty, host="beta")
        assert {r.id: r.host for r in storage.index_rows()} == {"n-of-alpha": None,
                                                                 own: "beta"}


def test_the_same_session_id_from_a_second_host_keeps_the_first_hosts_row_with_a_warning(
        pg_url: str, homes: tuple[Path, Path], tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    alpha, beta = Tiers(str(tmp_path / "a" / ".coding-os")), Tiers(str(tmp_path / "b" / ".coding-os"))
    with PostgresStorage(pg_url) as storage:
        index.refresh(storage, alpha, str(homes[0]), str(homes[1]), host="alpha")
        before = {r.id: r for r in storage.index_rows()}
        # beta holds copies of the same logs (the same native ids)
        report = index.refresh(storage, beta, str(homes[0]), str(homes[1]), host="beta")
        assert report.sessions_added == 0 and report.sessions_updated == 0
        assert {sid for sid, _ in report.foreign_sessions} == set(before)
        assert {host for _, host in report.foreign_sessions} == {"alpha"}
        assert len(report.warnings) == 1 and "another host" in report.warnings[0]
        assert report.to_dict()["foreign_sessions"][0][1] == "alpha"
        assert {r.id: r for r in storage.index_rows()} == before


def test_a_refresh_registers_the_projects_root_on_this_host(
        project: Path, homes: tuple[Path, Path]) -> None:
    from coding_os.hosts.identity import project_key

    tiers = Tiers(str(project / ".coding-os"))
    storage = SQLiteStorage(tiers.database)
    index.refresh(storage, tiers, str(homes[0]), str(homes[1]), host="alpha")
    key = project_key(str(project))
    assert key is not None and storage.project_hosts(key) == {"alpha": str(project)}
    storage.close()


def test_on_a_database_of_one_host_a_renamed_host_keeps_listing_and_updating_its_sessions(
        project: Path, homes: tuple[Path, Path]) -> None:
    tiers = Tiers(str(project / ".coding-os"))
    session = transcript.create(tiers, "claude", project=str(project), worktree=str(project))
    with SQLiteStorage(tiers.database) as storage:
        index.refresh(storage, tiers, str(homes[0]), str(homes[1]), host="old-name")
        listed = {r.id for r in storage.index_rows()}
        assert session in listed
        transcript.append(tiers, session, "user", {"text": "after the rename", "turn": 1})
        report = index.refresh(storage, tiers, str(homes[0]), str(homes[1]), host="new-name")
        assert (report.foreign_sessions, report.warnings) == ([], [])
        rows = {r.id: r for r in storage.index_rows(hosts=["new-name"], local_host="new-name")}
        assert set(rows) == listed
        assert rows[session].last_prompt == "after the rename"
        index.rebuild(storage, tiers, str(homes[0]), str(homes[1]), host="newer-name")
        assert {r.host for r in storage.index_rows()} == {"newer-name"}


def test_the_projects_root_is_registered_once_per_database_not_on_every_refresh(
        project: Path, homes: tuple[Path, Path], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.hosts import identity

    asked: list[str] = []
    real = identity.project_keys
    monkeypatch.setattr(identity, "project_keys", lambda root: asked.append(root) or real(root))
    tiers = Tiers(str(project / ".coding-os"))
    session = transcript.create(tiers, "claude", project=str(project), worktree=str(project))
    with SQLiteStorage(tiers.database) as storage:
        index.refresh(storage, tiers, str(homes[0]), str(homes[1]), host="alpha")
        for turn in range(3):
            transcript.append(tiers, session, "user", {"text": f"turn {turn}", "turn": turn + 1})
            assert index.refresh(storage, tiers, str(homes[0]), str(homes[1]),
                                 host="alpha").sessions_updated == 1
    assert asked == [str(project)]
    with SQLiteStorage(str(tmp_path / "other" / "coding-os.db")) as other:
        index.refresh(other, tiers, str(homes[0]), str(homes[1]), host="alpha")
        key = identity.project_key(str(project))
        assert key is not None and other.project_hosts(key) == {"alpha": str(project)}


@pytest.mark.slow
def test_a_lookup_after_switching_to_a_shared_database_imports_this_hosts_sessions(
        pg_url: str, project: Path, tmp_path: Path) -> None:
    from coding_os.storage.postgres import PostgresStorage

    tiers = Tiers(str(project / ".coding-os"))
    mine = transcript.create(tiers, "claude", project=str(project), worktree=str(project))
    listed = cos("sessions", "--json", cwd=project, env={"COS_HOST": "beta"})
    assert [row["id"] for row in json.loads(listed.stdout)] == [mine]
    other = Tiers(str(tmp_path / "alpha" / ".coding-os"))
    transcript.create(other, "claude", project="/elsewhere", worktree="/elsewhere")
    with PostgresStorage(pg_url) as storage:  # another host indexed first
        index.refresh(storage, other, str(tmp_path / "none"), str(tmp_path / "none"),
                      host="alpha")
    shared = cos("sessions", "--json", cwd=project,
                 env={"COS_HOST": "beta", "COS_DATABASE_URL": pg_url})
    assert shared.returncode == 0, shared.stderr
    assert [row["id"] for row in json.loads(shared.stdout)] == [mine]


# a refresh leaves the rows a rebuild would

FIXTURES = Path(__file__).resolve().parents[1] / "adapters" / "fixtures"
ORIGINAL = "9d5d1580-9251-4b4c-890c-2c3c1ce1b6d9"  # claude_trees/before.jsonl (SOURCES.md there)
FORKED = "844413bd-db15-4494-a5b7-90e231dbba07"  # claude_trees/fork.jsonl, forked from it
CODEX_MAIN, CODEX_SUB = "0000000a-0000-7000-8000-000000000000", "0000000b-0000-7000-8000-000000000000"


def _jsonl(entries: list[dict[str, object]]) -> bytes:
    return b"".join(json.dumps(entry).encode("utf-8") + b"\n" for entry in entries)


def _codex_line(kind: str, payload: dict[str, object], second: int) -> dict[str, object]:
    return {"timestamp": f"2026-04-01T09:00:{second:02d}.000Z", "type": kind, "payload": payload}


def _codex_turn(text: str, second: int) -> list[dict[str, object]]:
    usage = {"input_tokens": 100 + second, "cached_input_tokens": 5, "output_tokens": 10,
             "reasoning_output_tokens": 2, "total_tokens": 110 + second}
    return [_codex_line("event_msg", {"type": "user_message", "message": text}, second),
            _codex_line("response_item", {"type": "message", "role": "assistant",
                                          "content": [{"type": "output_text", "text": "ok"}]},
                        second),
            _codex_line("event_msg", {"type": "token_count",
                                      "info": {"total_token_usage": usage}}, second)]


def logs_whose_rows_depend_on_other_files() -> dict[str, bytes]:
    """Native logs (path under a home holding `claude/` and `codex/`) whose rows are read from
    other files too: a Codex thread reverted twice in place and a fork of it (the real
    rollouts of adapters/fixtures/codex_history), a thread with a subagent thread and a name;
    a Claude Code session with its fork (adapters/fixtures/claude_trees), two summaries cos
    wrote of it (one naming the entry it continues, one not), a session titled by a summary
    entry of another file, with a 2.0.x and a 2.1.x subagent."""
    from coding_os.adapters.claude.compact import compacted_entries
    from coding_os.adapters.claude.tree import read_tree

    files: dict[str, bytes] = {}
    for path in sorted((FIXTURES / "codex_history").glob("rollout-*.jsonl")):
        files[f"codex/sessions/2026/12/02/{path.name}"] = path.read_bytes()
    day = "codex/sessions/2026/04/01/rollout-2026-04-01T09-00-00"
    meta = {"timestamp": "2026-04-01T09:00:00.000Z", "cwd": "/work/app", "cli_version": "0.170.0"}
    files[f"{day}-{CODEX_MAIN}.jsonl"] = _jsonl(
        [_codex_line("session_meta", {"id": CODEX_MAIN, "source": "cli", **meta}, 0),
         *_codex_turn("build it", 1)])
    spawned = {"subagent": {"thread_spawn": {"parent_thread_id": CODEX_MAIN}}}
    files[f"{day}-{CODEX_SUB}.jsonl"] = _jsonl(
        [_codex_line("session_meta", {"id": CODEX_SUB, "source": spawned, **meta}, 2),
         *_codex_turn("look around", 3)])
    files["codex/session_index.jsonl"] = _jsonl([{"id": CODEX_MAIN, "thread_name": "named"}])
    folder = "claude/projects/-tmp-ftrees-run-proj"
    before = (FIXTURES / "claude_trees" / "before.jsonl").read_bytes()
    files[f"{folder}/{ORIGINAL}.jsonl"] = before
    files[f"{folder}/{FORKED}.jsonl"] = (FIXTURES / "claude_trees" / "fork.jsonl").read_bytes()
    chain = read_tree([json.loads(line) for line in before.splitlines()]).live
    split = next(i for i, e in enumerate(chain) if e.get("type") == "user"
                 and "prompt two" in json.dumps(e.get("message")))
    for number, direction in enumerate(("up-to", "from"), start=1):
        made = compacted_entries(chain, split, direction, "what happened",
                                 "2026-12-02T05:00:00.000Z", f"5a5a5a5a-0000-4000-8000-00000000000{number}")
        files[f"{folder}/{made.session}.jsonl"] = _jsonl(made.entries)
    files["claude/projects/-work-app/s1.jsonl"] = _jsonl(conversation("s1", 2))
    files["claude/projects/-work-app/s2.jsonl"] = _jsonl(
        [{"type": "summary", "summary": "Titled from elsewhere", "leafUuid": "s1:a1"},
         *conversation("s2", 1, start=10)])
    files["claude/projects/-work-app/agent-x.jsonl"] = _jsonl(conversation("s1", 1, prefix="x"))
    files["claude/projects/-work-app/s1/subagents/agent-y.jsonl"] = _jsonl(
        conversation("s1", 1, prefix="y"))
    files["claude/projects/-work-app/s1/subagents/agent-y.meta.json"] = json.dumps(
        {"agentType": "explorer", "description": "looks around"}).encode("utf-8")
    return files


def _more(name: str, number: int) -> bytes:
    """Lines appended to the log `name`, as its tool would write them."""
    if name.endswith("session_index.jsonl"):
        return _jsonl([{"id": CODEX_MAIN, "thread_name": f"renamed {number}"}])
    if name.startswith("codex/"):
        return _jsonl(_codex_turn(f"more {number}", 40 + number))
    session = Path(name).stem
    return _jsonl(conversation(session, 1, start=100 + 2 * number, prefix=f"m{number}"))


def _replace(path: Path, data: bytes) -> None:
    """Write `data` as a new file at `path` (a new inode: seen as changed whatever its mtime)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    spare = path.with_name(path.name + ".new")
    spare.write_bytes(data)
    os.replace(spare, path)


# Each log of `logs_whose_rows_depend_on_other_files`, by a part of its name.
LOGS = ("76c6ad64d4b2.jsonl", "_01a234f8-1b35", "_01a234f8-1bdc", "6b35be6969ef.jsonl",
        CODEX_MAIN, CODEX_SUB, "session_index", ORIGINAL, FORKED, "000000000001.jsonl",
        "000000000002.jsonl", "/s1.jsonl", "/s2.jsonl", "agent-x", "agent-y.jsonl",
        "agent-y.meta")


def _change(home: Path, originals: dict[str, bytes], op: tuple[str, str, int]) -> None:
    what, log, number = op
    (name,) = [name for name in originals if log in name]
    path = home / name
    if what == "append" and path.exists() and name.endswith(".jsonl"):
        with path.open("ab") as handle:
            handle.write(_more(name, number))
    elif what == "cut" and path.exists():
        lines = path.read_bytes().splitlines(keepends=True)
        _replace(path, b"".join(lines[:number % (len(lines) + 1)]))
    elif what == "torn" and path.exists() and name.endswith(".jsonl"):
        with path.open("ab") as handle:
            handle.write(_more(name, number)[:20])
    elif what == "remove" and path.exists():
        path.unlink()
    else:  # put back as it was first (or written again)
        _replace(path, originals[name])


CHANGES = st.lists(st.lists(st.tuples(st.sampled_from(["append", "cut", "torn", "remove",
                                                          "restore"]),
                                      st.sampled_from(LOGS), st.integers(0, 60)),
                            min_size=1, max_size=3), min_size=1, max_size=4)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHANGES)
@example([[("cut", "76c6ad64d4b2.jsonl", 12)]])  # the fork's base loses what it continues
@example([[("remove", ORIGINAL, 0)], [("restore", ORIGINAL, 0)]])  # a copy's original
@example([[("append", "session_index", 1)], [("cut", "/s1.jsonl", 2)]])  # a name; a leaf
@example([[("remove", "/s2.jsonl", 0), ("remove", CODEX_MAIN, 0)]])  # a title; a parent
def test_a_refresh_after_any_appends_changes_and_removals_leaves_the_rows_of_a_rebuild(
        batches: list[list[tuple[str, str, int]]]) -> None:
    originals = logs_whose_rows_depend_on_other_files()
    with tempfile.TemporaryDirectory() as scratch:
        top = Path(scratch)
        home = top / "home"
        for name, data in originals.items():
            _replace(home / name, data)
        dirs = (str(home / "claude"), str(home / "codex"))
        kept, fresh = Tiers(str(top / "kept" / ".coding-os")), Tiers(str(top / "fresh" / ".coding-os"))
        with SQLiteStorage(kept.database) as refreshed, SQLiteStorage(fresh.database) as rebuilt:
            index.refresh(refreshed, kept, *dirs, host="h")
            for batch in batches:
                for op in batch:
                    _change(home, originals, op)
                report = index.refresh(refreshed, kept, *dirs, host="h")
                full = index.rebuild(rebuilt, fresh, *dirs, host="h")
                assert refreshed.index_rows() == rebuilt.index_rows(), batches
                assert (report.sessions, report.subagents, report.orphan_subagents) == (
                    full.sessions, full.subagents, full.orphan_subagents)
