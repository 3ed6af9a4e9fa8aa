"""`cos resume` and `cos fork` as a user runs them, on the fixture layout of test_sessions_cli
(a private HOME holding Claude Code and Codex logs). Handovers run only through fake `claude` and
`codex` scripts placed first on PATH, which record their argv and directory.

Every test runs twice: on the default SQLite index and on PostgreSQL (`COS_DATABASE_URL` naming a
fresh schema of the test database, dropped afterwards; skipped when the server cannot be reached,
a failure under CI=true)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from coding_os import api
from tests.helpers import (
    COS,
    HERE,
    LATER,
    WORKTREE,
    claude_session,
    copy_claude_fixtures,
    copy_codex_fixtures,
    copy_gemini_fixtures,
    damage_sqlite,
    fake_agents,
    GEMINI_PLAIN,
    git,
    write_jsonl,
)
from tests.helpers import cos_in as run
from tests.helpers import cos_json_in as data


OTHER = "aaaaaaaa-0000-0000-0000-000000000003"  # a Claude session in another project
Project = tuple[Path, dict[str, str]]


BACKENDS = ("sqlite", "postgres")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment selecting the index backend: nothing for SQLite, a fresh schema's URL for
    PostgreSQL."""
    if request.param == "sqlite":
        return {}
    return {"COS_DATABASE_URL": request.getfixturevalue("pg_url")}


@pytest.fixture
def backend_checkout(isolated_env: Path, repo: Path, backend: dict[str, str]) -> Project:
    """An initialised checkout, and the environment pointing at fixture-filled native dirs and
    at the index backend under test."""
    (repo / ".coding-os").mkdir()
    copy_claude_fixtures(isolated_env / ".claude")
    codex_home = isolated_env / "codex-home"
    copy_codex_fixtures(codex_home)
    return repo, {"CODEX_HOME": str(codex_home), **backend}


def on_postgres(backend_checkout: Project) -> bool:
    return "COS_DATABASE_URL" in backend_checkout[1]


def pg_execute(backend_checkout: Project, statement: str) -> list[tuple[object, ...]]:
    """Run one SQL statement in the project's PostgreSQL schema; the rows it returns."""
    import psycopg

    with psycopg.connect(backend_checkout[1]["COS_DATABASE_URL"], autocommit=True) as conn:
        cursor = conn.execute(statement)
        return cursor.fetchall() if cursor.description else []


def pg_schema(backend_checkout: Project) -> str:
    """The schema the project's URL selects (libpq options=-csearch_path=<schema>)."""
    from psycopg.conninfo import conninfo_to_dict

    from coding_os.storage.postgres import search_path_schema

    options = conninfo_to_dict(backend_checkout[1]["COS_DATABASE_URL"]).get("options")
    schema = search_path_schema(str(options or ""))
    assert schema is not None
    return schema


def pg_tables(backend_checkout: Project) -> list[str]:
    """The tables of the project's PostgreSQL schema (the first of its search_path)."""
    return [str(name) for (name,) in pg_execute(
        backend_checkout, "SELECT table_name FROM information_schema.tables"
                 f" WHERE table_schema = '{pg_schema(backend_checkout)}' ORDER BY table_name")]


def cos_session(backend_checkout: Project, compacts: int = 1) -> str:
    """A cos-native session of the repo with two turns and `compacts` compact markers."""
    repo, env = backend_checkout
    caller = {**os.environ, **env}
    sid = api.create_session("claude", title="native work", env=caller, cwd=str(repo))
    for turn in (1, 2):
        api.append_event(sid, "user", {"text": f"prompt {turn}", "turn": turn}, env=caller,
                         cwd=str(repo))
        api.append_event(sid, "assistant", {"text": f"answer {turn}", "turn": turn}, env=caller,
                         cwd=str(repo))
    for _ in range(compacts):
        api.mark_compact(sid, "summary of the turns", 1, 4, env=caller, cwd=str(repo))
    return sid


def report(backend_checkout: Project, *args: str, cwd: Path | None = None,
           env: dict[str, str] | None = None) -> dict[str, object]:
    target = (backend_checkout[0], {**backend_checkout[1], **(env or {})})
    result = data(target, *args, cwd=cwd)
    assert isinstance(result, dict)
    return result


def session_id(result: dict[str, object]) -> str:
    session = result["session"]
    assert isinstance(session, dict)
    return str(session["id"])


# -- by id ----------------------------------------------------------------------------------------


def test_resume_by_native_id_reports_the_claude_handover_in_the_sessions_directory(
        backend_checkout: Project, isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    result = report(backend_checkout, "resume", HERE)
    assert session_id(result) == HERE
    assert result["path"] == "native_import"  # the first lookup missed the empty index
    assert result["cwd"] == str(backend_checkout[0]) and result["relocation"] is None
    assert result["handover"] == {
        "argv": ["claude", "--resume", HERE], "cwd": str(backend_checkout[0]),
        "command": f"cd {backend_checkout[0]} && claude --resume {HERE}"}
    restored = result["restored"]
    assert isinstance(restored, dict) and (restored["kind"], restored["messages"]) == (
        "native_log", 2)
    assert report(backend_checkout, "resume", HERE)["path"] == "index"


def test_a_missing_session_exits_1_with_one_line_and_no_picker(backend_checkout: Project) -> None:
    proc = run(backend_checkout, "resume", "ses-claude-20261129-100000-ffff")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "cos: no session ses-claude-20261129-100000-ffff\n"


@pytest.mark.slow
@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/../b", "..", "a\x01b", "a\\b"])
def test_a_malformed_id_is_refused_before_any_lookup(backend_checkout: Project, key: str) -> None:
    proc = run(backend_checkout, "resume", key)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    state = backend_checkout[0] / ".coding-os"
    assert not (state / "coding-os.db").exists() and not (state / ".import-state.json").exists()
    fork = run(backend_checkout, "fork", key)
    assert fork.returncode == 2 and not (state / "coding-os.db").exists()
    if on_postgres(backend_checkout):  # not even connected: the fresh schema was never migrated
        assert pg_tables(backend_checkout) == []


def test_a_session_of_another_project_exits_4_with_the_command_to_run_there(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    other = tmp_path / "other project"
    other.mkdir()
    claude_session(isolated_env, OTHER, other.resolve())
    proc = run(backend_checkout, "resume", OTHER, "--json")
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr == f"cos: cd '{other.resolve()}' && cos resume {OTHER}\n"
    fork = run(backend_checkout, "fork", OTHER, "--json")
    assert fork.returncode == 4 and fork.stderr == (
        f"cos: cd '{other.resolve()}' && cos fork {OTHER}\n")
    # Where the message says, it resumes.
    assert session_id(report(backend_checkout, "resume", OTHER, cwd=other)) == OTHER


def test_a_session_of_a_linked_worktree_resumes_there_with_a_relocation_note(
        backend_checkout: Project, isolated_env: Path) -> None:
    repo = backend_checkout[0]
    worktree = (repo.parent / "wt")
    git(repo, "worktree", "add", "-q", str(worktree))
    worktree = worktree.resolve()
    claude_session(isolated_env, WORKTREE, worktree)
    result = report(backend_checkout, "resume", WORKTREE)
    assert result["cwd"] == str(worktree)
    assert isinstance(result["relocation"], str) and str(worktree) in result["relocation"]
    handover = result["handover"]
    assert isinstance(handover, dict) and handover["cwd"] == str(worktree)
    from_there = report(backend_checkout, "resume", WORKTREE, cwd=worktree)
    assert from_there["relocation"] is None


@pytest.mark.slow
def test_a_session_whose_worktree_vanished_resumes_in_the_project_with_a_note(
        backend_checkout: Project, isolated_env: Path) -> None:
    repo = backend_checkout[0]
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    claude_session(isolated_env, WORKTREE, worktree.resolve())
    assert report(backend_checkout, "resume", WORKTREE)["cwd"] == str(worktree.resolve())
    shutil.rmtree(worktree)
    result = report(backend_checkout, "resume", WORKTREE)
    assert result["cwd"] == str(repo)
    assert isinstance(result["relocation"], str) and "is gone" in result["relocation"]


# -- by name --------------------------------------------------------------------------------------


@pytest.mark.slow
def test_resume_by_exact_name_and_several_sessions_with_one_name_exit_5_listing_the_ids(
        backend_checkout: Project, isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    claude_session(isolated_env, LATER, backend_checkout[0], second=100)
    assert run(backend_checkout, "sessions", "rename", HERE, "big refactor").returncode == 0
    assert session_id(report(backend_checkout, "resume", "big refactor")) == HERE
    assert run(backend_checkout, "resume", "big").returncode == 1  # exact names only, never a guess
    assert run(backend_checkout, "sessions", "rename", LATER, "big refactor").returncode == 0
    proc = run(backend_checkout, "resume", "big refactor")
    assert proc.returncode == 5 and proc.stdout == "" and proc.stderr.count("\n") == 1
    assert HERE in proc.stderr and LATER in proc.stderr


# -- --continue -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_continue_picks_the_latest_of_this_checkout_but_not_the_callers_own_session(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    claude_session(isolated_env, LATER, backend_checkout[0], second=100)
    other = tmp_path / "elsewhere"
    other.mkdir()
    claude_session(isolated_env, OTHER, other.resolve(), second=500)  # latest, other project
    assert session_id(report(backend_checkout, "resume", "--continue")) == LATER
    inside_later = {"CLAUDE_CODE_SESSION_ID": LATER, "COS_AGENT": "claude"}
    assert session_id(report(backend_checkout, "resume", "-c", env=inside_later)) == HERE
    assert session_id(report(backend_checkout, "resume", "-c", cwd=other)) == OTHER


def test_continue_with_no_session_here_is_not_found(backend_checkout: Project) -> None:
    proc = run(backend_checkout, "resume", "-c")
    assert proc.returncode == 1 and proc.stderr == (
        f"cos: no session to continue in {backend_checkout[0]}\n")


def test_resume_without_a_way_to_find_the_session_is_a_usage_error(
        backend_checkout: Project) -> None:
    proc = run(backend_checkout, "resume")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1


# -- --from-pr ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_from_pr_finds_the_session_whose_log_links_the_pull_request(
        backend_checkout: Project, isolated_env: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    claude_session(isolated_env, LATER, backend_checkout[0], second=100)
    key = "".join(c if c.isalnum() else "-" for c in str(backend_checkout[0]))
    write_jsonl(isolated_env / ".claude" / "projects" / key / f"{HERE}.jsonl", [
        {"type": "pr-link", "sessionId": HERE, "prNumber": 7,
         "prUrl": "https://example.invalid/org/repo/pull/7", "prRepository": "org/repo",
         "timestamp": "2026-01-01T00:10:00.000Z"}], mode="a")
    for pr in ("7", "#7", "https://example.invalid/org/repo/pull/7"):
        assert session_id(report(backend_checkout, "resume", "--from-pr", pr)) == HERE
    missing = run(backend_checkout, "resume", "--from-pr", "8")
    assert missing.returncode == 1 and missing.stderr == "cos: no session links pull request 8\n"
    assert run(backend_checkout, "resume", "--from-pr", "not a pr").returncode == 2


# -- cos-native sessions and a broken index -------------------------------------------------------


def test_a_cos_native_session_restores_its_transcript_and_has_no_handover(
        backend_checkout: Project) -> None:
    sid = cos_session(backend_checkout, compacts=2)
    result = report(backend_checkout, "resume", sid)
    assert result["handover"] is None and "cos-native" in str(result["handover_note"])
    restored = result["restored"]
    assert isinstance(restored, dict)
    assert (restored["kind"], restored["entries"], restored["compacts"], restored["summaries"],
            restored["messages"]) == ("transcript", 7, 2, 0, 4)
    readable = run(backend_checkout, "resume", sid)  # nothing to hand over: the report, exit 0
    assert readable.returncode == 0 and "7 transcript entries, 2 compacts" in readable.stdout


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["delete", "corrupt"])
def test_a_deleted_or_corrupt_index_is_rebuilt_and_a_direct_scan_finds_the_session(
        backend_checkout: Project, damage: str) -> None:
    """SQLite: the database file deleted, or overwritten with garbage. PostgreSQL: the schema
    dropped (a new one is made on open), or every index row deleted (the tables stay)."""
    sid = cos_session(backend_checkout)
    assert report(backend_checkout, "resume", sid)["path"] == "direct_scan"  # not indexed yet
    assert report(backend_checkout, "resume", sid)["path"] == "index"
    if on_postgres(backend_checkout):
        if damage == "delete":
            pg_execute(backend_checkout, f'DROP SCHEMA "{pg_schema(backend_checkout)}" CASCADE')
            assert pg_tables(backend_checkout) == []
        else:
            pg_execute(backend_checkout, "DELETE FROM session_index")
    else:
        damage_sqlite(backend_checkout[0], damage)
    result = report(backend_checkout, "resume", sid)
    assert session_id(result) == sid and result["path"] == "direct_scan"
    rebuilt = result["rebuilt"]
    assert isinstance(rebuilt, list)
    if not on_postgres(backend_checkout):
        assert any(("missing" if damage == "delete" else "corrupt") in note for note in rebuilt)
    assert any(note.startswith("index: ") for note in rebuilt), rebuilt
    assert report(backend_checkout, "resume", sid)["path"] == "index"  # the index was repaired
    listed = data(backend_checkout, "sessions", "--scope", "all")
    assert isinstance(listed, list) and sid in [row["id"] for row in listed]


def test_dry_run_prints_the_report_readably_and_runs_nothing(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    path, record = fake_agents(tmp_path)
    proc = run((backend_checkout[0], {**backend_checkout[1], **path}), "resume", HERE, "--dry-run")
    assert proc.returncode == 0 and not record.exists()
    assert "found by   native_import" in proc.stdout
    assert f"handover   cd {backend_checkout[0]} && claude --resume {HERE}" in proc.stdout


# -- the handover ---------------------------------------------------------------------------------


def test_resume_hands_over_to_claude_in_the_sessions_directory(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    repo = backend_checkout[0]
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    claude_session(isolated_env, WORKTREE, worktree.resolve())
    path, record = fake_agents(tmp_path)
    (repo / "sub").mkdir()
    proc = run((repo, {**backend_checkout[1], **path}), "resume", WORKTREE, cwd=repo / "sub")
    assert proc.returncode == 0, proc.stderr
    assert record.read_text(encoding="utf-8").splitlines() == [
        str(worktree.resolve()), "claude", "--resume", WORKTREE]
    assert "another worktree" in proc.stderr


def test_resume_without_the_agent_on_path_is_one_clear_line(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    proc = run((backend_checkout[0], {**backend_checkout[1], "PATH": str(empty)}), "resume", HERE)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("cos: claude is not on PATH")


# -- fork -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_fork_of_a_cos_native_session_starts_with_a_fork_entry_and_leaves_the_source(
        backend_checkout: Project) -> None:
    sid = cos_session(backend_checkout)
    source = backend_checkout[0] / ".coding-os" / "claude" / "transcripts" / f"{sid}.jsonl"
    before = source.read_bytes()
    result = report(backend_checkout, "fork", sid, "--at", "3", "--name", "branch idea")
    new = result["session"]
    assert isinstance(new, str) and new != sid and result["handover"] is None
    assert (result["fork_point"], result["copied"]) == (3, 3)
    lines = [json.loads(line) for line in
             Path(str(result["transcript"])).read_text(encoding="utf-8").splitlines()]
    assert [e["type"] for e in lines[:2]] == ["session_meta", "fork"]
    assert (lines[1]["forked_from"], lines[1]["fork_point"]) == (sid, 3)
    assert source.read_bytes() == before
    shown = report(backend_checkout, "sessions", "show", new)
    assert (shown["forked_from"], shown["name"]) == (sid, "branch idea")
    assert session_id(report(backend_checkout, "resume", "branch idea")) == new
    dry = report(backend_checkout, "fork", sid, "--dry-run")
    assert dry["session"] is None and dry["dry_run"] is True


def test_fork_of_a_claude_session_hands_over_to_claudes_own_fork(
        backend_checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    claude_session(isolated_env, HERE, backend_checkout[0])
    path, record = fake_agents(tmp_path)
    with_fake = (backend_checkout[0], {**backend_checkout[1], **path})
    result = report(with_fake, "fork", HERE)
    assert result["handover"] == {
        "argv": ["claude", "--resume", HERE, "--fork-session"], "cwd": str(backend_checkout[0]),
        "command": f"cd {backend_checkout[0]} && claude --resume {HERE} --fork-session"}
    assert not record.exists()
    dry = run(with_fake, "fork", HERE, "--dry-run")
    assert dry.returncode == 0 and "--fork-session" in dry.stdout and not record.exists()
    assert run(with_fake, "fork", HERE, "--at", "1").returncode == 2
    proc = run(with_fake, "fork", HERE)
    assert proc.returncode == 0, proc.stderr
    assert record.read_text(encoding="utf-8").splitlines() == [
        str(backend_checkout[0]), "claude", "--resume", HERE, "--fork-session"]


# -- sidechains -----------------------------------------------------------------------------------


def test_a_sidechain_is_never_continued_nor_listed_and_its_parent_is(
        backend_checkout: Project) -> None:
    repo, env = backend_checkout
    caller = {**os.environ, **env}
    parent = cos_session(backend_checkout)
    sidechain = api.create_session("claude", parent=parent, env=caller, cwd=str(repo))
    api.append_event(sidechain, "user", {"text": "subagent prompt", "turn": 1}, env=caller,
                     cwd=str(repo))  # the sidechain is the most recently active transcript
    assert session_id(report(backend_checkout, "resume", "--continue")) == parent
    listed = data(backend_checkout, "sessions", "--scope", "all")
    assert isinstance(listed, list)
    assert parent in [row["id"] for row in listed]
    assert sidechain not in [row["id"] for row in listed]
    assert all(row["parent"] is None for row in listed)
    # Resumed by its own id, a sidechain is not a session: a clean not-found, no picker.
    proc = run(backend_checkout, "resume", sidechain)
    assert proc.returncode == 1 and proc.stdout == "" and proc.stderr == (
        f"cos: no session {sidechain}\n")


# -- a resume killed half way ---------------------------------------------------------------------

RUNS = 20
MANY = 250  # Claude Code sessions in the repo: enough logs that the repair takes a while


def damage_index(backend_checkout: Project) -> None:
    """Lose the index and the import state, so that the next lookup scans every log again."""
    state = backend_checkout[0] / ".coding-os"
    (state / ".import-state.json").unlink(missing_ok=True)
    if on_postgres(backend_checkout):
        pg_execute(backend_checkout,
                   f'DROP SCHEMA IF EXISTS "{pg_schema(backend_checkout)}" CASCADE')
        return
    for extra in ("", "-wal", "-shm"):
        (state / f"coding-os.db{extra}").unlink(missing_ok=True)


def index_exists(backend_checkout: Project) -> bool:
    """Whether a lookup has (re)made the index store since `damage_index`."""
    if on_postgres(backend_checkout):
        return bool(pg_tables(backend_checkout))
    return (backend_checkout[0] / ".coding-os" / "coding-os.db").exists()


def comparable(result: dict[str, object]) -> dict[str, object]:
    """A restore report without how it was found and what was repaired on the way (those
    depend on what the killed run left)."""
    return {key: value for key, value in result.items() if key not in ("path", "rebuilt")}


def killed_resume(backend_checkout: Project, args: list[str], delay: float) -> int:
    """Start `cos <args>`, SIGKILL it `delay` seconds later; its exit status (-9 when killed)."""
    proc = subprocess.Popen([COS, *args], cwd=backend_checkout[0],
                            env={**os.environ, **backend_checkout[1]},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(timeout=delay)  # a bounded wait for the kill moment, not for a condition
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
    return proc.wait(timeout=60)


@pytest.mark.slow
def test_a_resume_killed_while_it_repairs_the_index_leaves_nothing_the_next_one_trips_on(
        backend_checkout: Project, isolated_env: Path) -> None:
    """`cos resume` (by native id, by cos id, --continue) SIGKILLed at delays spread over one
    uninterrupted run while it rebuilds a lost index from MANY logs: the next resume reports the
    same session and counts, and the listing is the one from before."""
    repo = backend_checkout[0]
    for n in range(MANY):
        claude_session(isolated_env, f"bbbbbbbb-0000-0000-0000-{n:012d}", repo, second=n)
    sid = cos_session(backend_checkout)
    keys: list[list[str]] = [["resume", HERE, "--json"], ["resume", sid, "--json"],
                             ["resume", "--continue", "--json"]]
    claude_session(isolated_env, HERE, repo, second=MANY + 10)
    listing = data(backend_checkout, "sessions", "--scope", "all")
    assert isinstance(listing, list) and len(listing) == MANY + 9  # + the fixtures + HERE + sid
    expected = {}
    for args in keys:
        damage_index(backend_checkout)
        expected[args[1]] = comparable(report(backend_checkout, *args[:-1]))
    assert session_id(expected["--continue"]) == sid  # the newest of this checkout
    damage_index(backend_checkout)
    started = time.monotonic()
    uninterrupted = report(backend_checkout, "resume", HERE)
    duration = time.monotonic() - started
    assert comparable(uninterrupted) == expected[HERE]
    assert uninterrupted["path"] == "native_import"
    killed = mid_repair = 0
    for run_number in range(RUNS):
        args = keys[run_number % len(keys)]
        damage_index(backend_checkout)
        status = killed_resume(backend_checkout, args, duration * (run_number + 0.5) / RUNS)
        killed += status == -signal.SIGKILL
        state = repo / ".coding-os"
        if (status == -signal.SIGKILL and index_exists(backend_checkout)
                and not (state / ".import-state.json").exists()):
            mid_repair += 1  # killed after it opened the index, before the import finished
        after = report(backend_checkout, *args[:-1])
        assert comparable(after) == expected[args[1]], f"run {run_number}: {args}"
        assert data(backend_checkout, "sessions", "--scope", "all") == listing, f"run {run_number}"
    assert killed >= RUNS // 2, f"only {killed} of {RUNS} runs were killed"
    assert mid_repair >= 3, f"only {mid_repair} kills landed before the import finished"


def test_cos_fork_of_a_gemini_session_says_in_one_line_that_gemini_cli_has_no_fork(
        checkout: Project, isolated_env: Path, tmp_path: Path) -> None:
    copy_gemini_fixtures(isolated_env, checkout[0], tmp_path / "legacy")
    for args in ((), ("--dry-run",), ("--json",)):
        fork = run(checkout, "fork", GEMINI_PLAIN[:8], *args)
        assert fork.returncode == 2 and fork.stdout == ""
        assert fork.stderr == (f"cos: {GEMINI_PLAIN} is a Gemini CLI session, and Gemini CLI has "
                               f"no fork on its command line: `cos resume {GEMINI_PLAIN}` "
                               "continues it\n")
    resume = data(checkout, "resume", GEMINI_PLAIN[:8], "--dry-run")
    assert isinstance(resume, dict)
    assert resume["handover"]["argv"] == ["gemini", "--resume", GEMINI_PLAIN]
