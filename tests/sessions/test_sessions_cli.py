"""`cos import`, `cos index rebuild` and `cos sessions` as a user runs them, on a private HOME
holding copies of the fixtures where Claude Code and Codex keep their logs."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import (
    COS,
    HERE,
    MAIN_1053,
    NATIVE_IDS,
    ROLLOUTS,
    SMALL,
    VIEWER,
    WORKTREE,
    claude_session,
    conversation,
    cos,
    damage_sqlite,
    git,
)
from tests.helpers import cos_in as run
from tests.helpers import cos_json_in as data


def ids(rows: object) -> list[str]:
    assert isinstance(rows, list)
    return [row["id"] for row in rows]


def test_import_counts_files_and_sessions_and_a_second_import_reads_nothing(
        checkout: tuple[Path, dict[str, str]]) -> None:
    first = data(checkout, "import")
    assert isinstance(first, dict)
    assert (first["files_seen"], first["files_read"], first["sessions_added"]) == (8, 8, 7)
    assert first["unknown_types"]["frame-link"] == 1 and first["malformed_lines"] == 0
    second = data(checkout, "import")
    assert isinstance(second, dict)
    assert (second["files_unchanged"], second["files_read"]) == (8, 0)
    assert (second["sessions_added"], second["sessions_updated"]) == (0, 0)
    readable = run(checkout, "import")
    assert readable.returncode == 0 and "8 unchanged, 0 read" in readable.stdout


def test_sessions_in_scope_all_lists_every_fixture_session_and_never_a_subagent(
        checkout: tuple[Path, dict[str, str]]) -> None:
    rows = data(checkout, "sessions", "--scope", "all")
    assert set(ids(rows)) == NATIVE_IDS and len(ids(rows)) == 7
    assert isinstance(rows, list)
    assert list(rows[0]) == ["id", "native_id", "agent", "kind", "title", "name", "project",
                             "worktree", "cwd", "branch", "created", "last_active", "messages",
                             "tokens", "forked_from", "parent", "status", "host"]
    assert [r["last_active"] for r in rows] == sorted((r["last_active"] for r in rows),
                                                      reverse=True)
    assert all(r["parent"] is None for r in rows)


def test_agent_search_and_limit_narrow_the_list(checkout: tuple[Path, dict[str, str]]) -> None:
    assert set(ids(data(checkout, "sessions", "--scope", "all", "--agent", "codex"))) \
        == set(ROLLOUTS)
    assert ids(data(checkout, "sessions", "--scope", "all", "--search", "STAGE0 small")) == [SMALL]
    everything = ids(data(checkout, "sessions", "--scope", "all"))
    assert ids(data(checkout, "sessions", "--scope", "all", "--limit", "2")) == everything[:2]
    assert data(checkout, "sessions", "--scope", "all", "--limit", "0") == []


def test_the_default_scope_is_this_worktree_and_repo_widens_to_all_its_worktrees(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path) -> None:
    repo = checkout[0]
    (repo / "sub").mkdir()
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    claude_session(isolated_env, HERE, repo / "sub")
    claude_session(isolated_env, WORKTREE, worktree.resolve(), second=100)
    assert ids(data(checkout, "sessions")) == [HERE]
    assert ids(data(checkout, "sessions", "--scope", "worktree", cwd=repo / "sub")) == [HERE]
    assert ids(data(checkout, "sessions", cwd=worktree)) == [WORKTREE]
    assert ids(data(checkout, "sessions", "--scope", "repo")) == [WORKTREE, HERE]
    assert len(ids(data(checkout, "sessions", "--scope", "all"))) == 9


def test_sessions_imports_what_changed_first(checkout: tuple[Path, dict[str, str]],
                                             isolated_env: Path) -> None:
    assert data(checkout, "sessions") == []
    claude_session(isolated_env, HERE, checkout[0])
    rows = data(checkout, "sessions")
    assert isinstance(rows, list) and ids(rows) == [HERE]
    assert (rows[0]["agent"], rows[0]["kind"], rows[0]["messages"], rows[0]["title"]) == (
        "claude", "claude", 2, "prompt 0")


@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_a_deleted_or_corrupt_database_is_rebuilt_by_the_next_listing(
        checkout: tuple[Path, dict[str, str]], damage: str) -> None:
    before = ids(data(checkout, "sessions", "--scope", "all"))
    damage_sqlite(checkout[0], damage)
    proc = run(checkout, "sessions", "--scope", "all", "--json")
    assert proc.returncode == 0, proc.stderr
    assert ids(json.loads(proc.stdout)) == before


def test_index_rebuild_reads_every_log_again(checkout: tuple[Path, dict[str, str]]) -> None:
    data(checkout, "import")
    report = data(checkout, "index", "rebuild")
    assert isinstance(report, dict)
    assert (report["full"], report["files_read"], report["sessions_added"]) == (True, 8, 7)
    proc = run(checkout, "index", "rebuild")
    assert proc.returncode == 0 and proc.stderr == ""  # no progress lines without a TTY


def test_index_rebuild_shows_progress_on_stderr_when_it_is_a_terminal(
        checkout: tuple[Path, dict[str, str]]) -> None:
    if shutil.which("script") is None:
        pytest.skip("util-linux script(1) is needed to give cos a terminal")
    proc = subprocess.run(["script", "-qec", f"{shlex.quote(COS)} index rebuild --json >/dev/null",
                           "/dev/null"], cwd=checkout[0], env={**os.environ, **checkout[1]},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cos: scanning Claude Code transcripts" in proc.stdout  # the terminal shows stderr
    assert "cos: writing 7 index rows" in proc.stdout


def test_show_rename_and_search_by_name(checkout: tuple[Path, dict[str, str]]) -> None:
    shown = data(checkout, "sessions", "show", VIEWER)
    assert isinstance(shown, dict) and shown["kind"] == "claude"
    assert shown["source_path"].endswith(f"{VIEWER}.jsonl")
    proc = run(checkout, "sessions", "rename", VIEWER, "orchestrator work")
    assert proc.returncode == 0, proc.stderr
    assert ids(data(checkout, "sessions", "--scope", "all", "--search", "orchestrator W")) \
        == [VIEWER]
    bad = run(checkout, "sessions", "rename", VIEWER, "../etc")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "name" in bad.stderr


def test_show_gives_the_first_and_last_prompt_which_list_rows_leave_out(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, checkout[0])
    second = conversation(HERE, 2, prefix="")[2:]  # a later turn: "prompt 1"
    for entry in second:
        entry["cwd"] = str(checkout[0])
    log = next((isolated_env / ".claude" / "projects").rglob(f"{HERE}.jsonl"))
    with log.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(entry) + "\n" for entry in second)
    shown = data(checkout, "sessions", "show", HERE)
    assert isinstance(shown, dict)
    assert (shown["first_prompt"], shown["last_prompt"]) == ("prompt 0", "prompt 1")
    assert shown["path"] == "native_import"  # the first lookup imported it
    readable = run(checkout, "sessions", "show", HERE)
    assert readable.returncode == 0, readable.stderr
    assert "first_prompt prompt 0\n" in readable.stdout
    assert "last_prompt  prompt 1\n" in readable.stdout
    rows = data(checkout, "sessions")
    assert isinstance(rows, list) and ids(rows) == [HERE]
    assert "first_prompt" not in rows[0] and "last_prompt" not in rows[0]


def test_a_name_with_a_slash_is_kept_and_resumes_by_that_name(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, checkout[0])
    proc = run(checkout, "sessions", "rename", HERE, "CI/CD")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"{HERE}: named CI/CD\n"
    shown = data(checkout, "sessions", "show", HERE)
    assert isinstance(shown, dict) and shown["name"] == "CI/CD"
    report = data(checkout, "resume", "CI/CD")
    assert isinstance(report, dict) and report["session"]["id"] == HERE
    assert report["session"]["name"] == "CI/CD"
    assert report["handover"]["argv"] == ["claude", "--resume", HERE]
    for bad in ("../x", "a/../b", "..", "/etc", "a\\b"):
        refused = run(checkout, "sessions", "rename", HERE, bad)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, (bad, refused.stderr)
        assert run(checkout, "resume", bad, "--json").returncode == 2
    again = data(checkout, "sessions", "show", HERE)
    assert isinstance(again, dict) and again["name"] == "CI/CD"


def _delete_database(checkout: tuple[Path, dict[str, str]]) -> Path:
    database = checkout[0] / ".coding-os" / "coding-os.db"
    for extra in ("", "-wal", "-shm"):
        database.with_name(database.name + extra).unlink(missing_ok=True)
    return database


def test_show_after_the_index_was_deleted_finds_the_session_and_says_it_repaired_it(
        checkout: tuple[Path, dict[str, str]]) -> None:
    repo, env = checkout
    created = subprocess.run(
        [sys.executable, "-c", "from coding_os import api; sid = api.create_session('claude'); "
         "api.append_event(sid, 'user', {'turn': 1, 'text': 'first ask'}); print(sid)"],
        cwd=repo, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    sid = created.stdout.strip()
    assert ids(data(checkout, "sessions")) == [sid]
    intact = data(checkout, "sessions", "show", sid)
    assert isinstance(intact, dict) and intact["first_prompt"] == "first ask"
    assert (intact["path"], intact["repaired"]) == ("index", [])
    quiet = run(checkout, "sessions", "show", sid)
    assert quiet.returncode == 0 and "index repaired" not in quiet.stdout

    database = _delete_database(checkout)
    shown = data(checkout, "sessions", "show", sid)
    assert isinstance(shown, dict)
    assert (shown["id"], shown["kind"], shown["path"]) == (sid, "cos", "direct_scan")
    assert shown["first_prompt"] == "first ask"
    assert any(note.startswith(f"database: {database} was missing") for note in shown["repaired"])
    assert any(note.startswith("index: ") for note in shown["repaired"])
    assert database.exists()

    _delete_database(checkout)
    readable = run(checkout, "sessions", "show", sid)
    assert readable.returncode == 0, readable.stderr
    lines = [line for line in readable.stdout.splitlines() if "repaired" in line]
    assert len(lines) == 1 and lines[0].startswith("index repaired (found by direct scan): ")
    assert "was missing" in lines[0]

    _delete_database(checkout)
    native = data(checkout, "sessions", "show", VIEWER)
    assert isinstance(native, dict)
    assert (native["id"], native["path"]) == (VIEWER, "native_import") and native["repaired"]


def test_rm_refuses_a_native_session_and_keeps_its_log(
        checkout: tuple[Path, dict[str, str]], isolated_env: Path) -> None:
    proc = run(checkout, "sessions", "rm", MAIN_1053)
    assert proc.returncode == 2 and "never deletes" in proc.stderr
    assert list((isolated_env / ".claude").rglob(f"{MAIN_1053}.jsonl"))
    assert MAIN_1053 in ids(data(checkout, "sessions", "--scope", "all"))


def test_rm_moves_a_cos_session_to_the_trash(checkout: tuple[Path, dict[str, str]]) -> None:
    repo, env = checkout
    created = subprocess.run(
        [sys.executable, "-c", "from coding_os import api; print(api.create_session('claude'))"],
        cwd=repo, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    sid = created.stdout.strip()
    assert ids(data(checkout, "sessions")) == [sid]
    removed = data(checkout, "sessions", "rm", sid)
    assert isinstance(removed, dict)
    day, *where = Path(removed["trash"]).relative_to(
        repo.resolve() / ".coding-os" / "trash").parts  # the day's folder, as retention's
    assert len(day) == 8 and day.isdigit() and where == ["claude", "transcripts", f"{sid}.jsonl"]
    assert data(checkout, "sessions") == []
    assert run(checkout, "sessions", "show", sid).returncode == 1


def test_gc_purges_a_removed_session_a_week_after_its_trash_day(
        checkout: tuple[Path, dict[str, str]]) -> None:
    repo, env = checkout
    created = subprocess.run(
        [sys.executable, "-c", "from coding_os import api; print(api.create_session('claude'))"],
        cwd=repo, env={**os.environ, **env}, capture_output=True, text=True, check=True)
    sid = created.stdout.strip()
    removed = data(checkout, "sessions", "rm", sid)
    assert isinstance(removed, dict)
    trash = repo.resolve() / ".coding-os" / "trash"
    day = Path(removed["trash"]).relative_to(trash).parts[0]
    assert Path(removed["trash"]) == trash / day / "claude" / "transcripts" / f"{sid}.jsonl"
    kept = data(checkout, "gc")
    assert isinstance(kept, dict) and kept["transcripts"]["purged"] == []
    (trash / day).rename(trash / "20200101")  # the day it was removed, long past its week
    report = data(checkout, "gc")
    assert isinstance(report, dict) and report["transcripts"]["purged"] == ["trash/20200101"]
    assert not list(trash.rglob(f"{sid}.jsonl"))


@pytest.mark.parametrize("args", [("--limit", "-1"), ("--scope", "bogus"), ("--limit", "x")])
def test_bad_input_exits_2_with_one_line(checkout: tuple[Path, dict[str, str]],
                                         args: tuple[str, ...]) -> None:
    proc = run(checkout, "sessions", *args)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("cos: ") and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("session", ["../x", "a b", ""])
def test_a_malformed_id_is_refused_before_any_lookup(checkout: tuple[Path, dict[str, str]],
                                                     session: str) -> None:
    proc = run(checkout, "sessions", "show", session)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


def test_an_unknown_session_is_not_found(checkout: tuple[Path, dict[str, str]]) -> None:
    proc = run(checkout, "sessions", "show", "ses-claude-20261129-100000-ffff")
    assert proc.returncode == 1 and proc.stderr == "cos: no session ses-claude-20261129-100000-ffff\n"


def test_the_index_lives_in_postgres_when_the_url_selects_it(
        checkout: tuple[Path, dict[str, str]], pg_url: str) -> None:  # noqa: F811
    on_pg = (checkout[0], {**checkout[1], "COS_DATABASE_URL": pg_url})
    assert set(ids(data(on_pg, "sessions", "--scope", "all"))) == NATIVE_IDS
    assert run(on_pg, "sessions", "rename", SMALL, "stage zero").returncode == 0
    rebuilt = data(on_pg, "index", "rebuild")
    assert isinstance(rebuilt, dict) and rebuilt["sessions_added"] == 7
    named = data(on_pg, "sessions", "--scope", "all", "--search", "stage ZERO")
    assert isinstance(named, list) and [(r["id"], r["name"]) for r in named] == [
        (SMALL, "stage zero")]
    assert not (checkout[0] / ".coding-os" / "coding-os.db").exists()


@pytest.mark.parametrize("fmt,marker", [("md", "# "), ("html", "<!doctype html>"), ("json", '"turns"')])
def test_export_renders_a_native_session_found_by_its_native_id(
        checkout: tuple[Path, dict[str, str]], fmt: str, marker: str, tmp_path: Path) -> None:
    native = "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"  # the Claude Code 1.0.108 fixture
    proc = run(checkout, "export", native, "--format", fmt)
    assert proc.returncode == 0, proc.stderr
    assert marker in proc.stdout and "/orchestrator" in proc.stdout
    out = tmp_path / f"export.{fmt}"
    assert run(checkout, "export", native, "--format", fmt, "-o", str(out)).returncode == 0
    assert out.read_text(encoding="utf-8") == proc.stdout


def test_export_of_an_unknown_session_or_format_is_a_clear_error(
        checkout: tuple[Path, dict[str, str]]) -> None:
    missing = run(checkout, "export", "ses-claude-20261129-100000-abcd")
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1
    bad = run(checkout, "export", "x", "--format", "pdf")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_gc_moves_expired_cos_transcripts_to_the_trash_and_reports_both_collectors(
        checkout: tuple[Path, dict[str, str]]) -> None:
    repo, env = checkout
    transcripts = repo / ".coding-os" / "claude" / "transcripts"
    transcripts.mkdir(parents=True)
    old = transcripts / "ses-claude-20250101-000000-aaaa.jsonl"
    old.write_text('{"v":1,"seq":0,"ts":"2025-01-01T00:00:00.000Z","type":"session_meta"}\n',
                   encoding="utf-8")
    os.utime(old, (0, 1_700_000_000))
    dry = data(checkout, "gc", "--dry-run")
    assert isinstance(dry, dict) and dry["transcripts"]["trashed"] == [
        "claude/transcripts/" + old.name]
    assert old.exists()
    report = run(checkout, "gc", cwd=repo)
    assert report.returncode == 0 and "1 transcripts moved to the trash" in report.stdout
    assert not old.exists()
    assert list((repo / ".coding-os" / "trash").rglob(old.name))
    bad = cos("gc", cwd=repo, env={**env, "COS_CLEANUP_PERIOD_DAYS": "0"})
    assert bad.returncode == 2 and "minimum is 1 day" in bad.stderr


def test_branch_keeps_the_sessions_of_the_branch_checked_out_here(
        checkout: tuple[Path, dict[str, str]]) -> None:
    everything = data(checkout, "sessions", "--scope", "all")
    assert isinstance(everything, list)
    on_main = [row["id"] for row in everything if row["branch"] == "main"]
    assert on_main and len(on_main) < len(everything)  # the fixtures span several branches
    assert ids(data(checkout, "sessions", "--scope", "all", "--branch")) == on_main
    repo = checkout[0]
    git(repo, "checkout", "-q", "--detach")
    detached = run(checkout, "sessions", "--branch")
    assert detached.returncode == 2 and "not on a branch" in detached.stderr
