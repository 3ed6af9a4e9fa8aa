"""The panel lifecycle (DESIGN.md §3.6) through the library entry the hook uses: SessionStart
mints, resumes, clears and forks sessions and binds them to their panel; a tool event on a panel
without a session adopts it; SessionEnd and orphans are summarised from the observations."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from coding_os import api
from tests.helpers import db_rows
from tests.helpers import fire_in_process as fire
from tests.helpers import hook_env as env
from tests.helpers import panel_dir as panel
from tests.helpers import panel_session as sid


def test_startup_mints_a_session_with_presence_heartbeat_and_index_row(repo: Path, isolated_env: Path) -> None:
    result = fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    session = sid(repo, "n1")
    assert result.session == session and result.output is None
    presence = json.loads((repo / ".coding-os" / "claude" / "sessions" / f"{session}.json").read_text())
    assert (presence["panel"], presence["native_id"], presence["status"]) == ("n1", "n1", "active")
    assert (panel(repo, "n1") / "heartbeat").is_file()
    assert (repo / ".coding-os" / "claude" / ".active-session").read_text().split() == [session, "n1"]
    assert db_rows(repo, "SELECT id, native_id, source FROM sessions") == [(session, "n1", "startup")]


def test_resume_of_a_known_native_id_keeps_its_cos_session(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    first = sid(repo, "n1")
    fire(repo, isolated_env, "SessionEnd", "n1", reason="exit")
    # The panel directory is gone (reaped, or another machine); the index still knows the id.
    import shutil

    shutil.rmtree(panel(repo, "n1"))
    fire(repo, isolated_env, "SessionStart", "n1", source="resume")
    assert sid(repo, "n1") == first


def test_resume_of_an_unknown_native_id_mints_and_links_a_session(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n9", source="resume")
    session = sid(repo, "n9")
    assert db_rows(repo, "SELECT native_id FROM sessions WHERE id = ?", session) == [("n9",)]


def test_clear_mints_a_new_session_linked_to_the_previous_and_clears_markers(
        repo: Path, isolated_env: Path) -> None:
    e = env(isolated_env, COS_PANEL_ID="tab-1")
    api.hook("SessionStart", {"session_id": "a", "source": "startup"}, env=e, cwd=str(repo))
    before = sid(repo, "tab-1")
    api.state_set(".gate-tests", "passed", env=e, cwd=str(repo))
    api.state_set(".model", "opus", env=e, cwd=str(repo))
    api.hook("SessionStart", {"session_id": "b", "source": "clear"}, env=e, cwd=str(repo))
    after = sid(repo, "tab-1")
    assert after != before
    assert not (panel(repo, "tab-1") / ".gate-tests").exists()
    assert (repo / ".coding-os" / "claude" / ".model").exists()  # agent tier is not volatile
    assert db_rows(repo, "SELECT cleared_from FROM sessions WHERE id = ?", after) == [(before,)]
    assert db_rows(repo, "SELECT count(*) FROM sessions") == [(2,)]


def test_fork_links_the_new_session_to_its_source(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "parent", source="startup")
    parent = sid(repo, "parent")
    fire(repo, isolated_env, "SessionStart", "child", source="fork", forked_from_session_id="parent")
    child = sid(repo, "child")
    assert child != parent
    assert db_rows(repo, "SELECT forked_from FROM sessions WHERE id = ?", child) == [(parent,)]


@pytest.mark.parametrize("source", ["startup", "compact", "weird-new-source"])
def test_session_start_sources_always_leave_the_panel_with_a_session(
        repo: Path, isolated_env: Path, source: str) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source=source)
    assert sid(repo, "n1").startswith("ses-claude-")


def test_clear_in_claude_code_links_the_new_session_through_the_agent_process(
        repo: Path, isolated_env: Path) -> None:
    # Claude Code gives the cleared conversation a new session id (so a new panel); the agent
    # process, CLAUDE_PID in every hook's environment, stays the same.
    e = env(isolated_env, CLAUDE_PID="4242")
    api.hook("SessionStart", {"session_id": "before", "source": "startup"}, env=e, cwd=str(repo))
    api.hook("SessionEnd", {"session_id": "before", "reason": "clear"}, env=e, cwd=str(repo))
    other = env(isolated_env, CLAUDE_PID="5151")
    api.hook("SessionStart", {"session_id": "elsewhere", "source": "startup"}, env=other,
             cwd=str(repo))
    api.hook("SessionStart", {"session_id": "after", "source": "clear"}, env=e, cwd=str(repo))
    assert db_rows(repo, "SELECT cleared_from FROM sessions WHERE id = ?", sid(repo, "after")) == \
        [(sid(repo, "before"),)]


def test_a_fork_with_a_new_native_id_is_linked_through_the_agent_process(
        repo: Path, isolated_env: Path) -> None:
    e = env(isolated_env, CLAUDE_PID="777")
    api.hook("SessionStart", {"session_id": "src", "source": "startup"}, env=e, cwd=str(repo))
    api.hook("SessionStart", {"session_id": "forked", "source": "fork"}, env=e, cwd=str(repo))
    assert db_rows(repo, "SELECT forked_from FROM sessions WHERE id = ?", sid(repo, "forked")) == \
        [(sid(repo, "src"),)]


def test_two_panels_minting_the_same_id_in_the_same_second_get_different_sessions(
        repo: Path, isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.hooks import sessions

    ids = iter(["ses-claude-20261129-100000-aaaa", "ses-claude-20261129-100000-aaaa",
                "ses-claude-20261129-100000-bbbb"])
    monkeypatch.setattr(sessions, "mint_session_id", lambda agent, now=None: next(ids))
    fire(repo, isolated_env, "SessionStart", "one", source="startup")
    fire(repo, isolated_env, "SessionStart", "two", source="startup")
    assert (sid(repo, "one"), sid(repo, "two")) == ("ses-claude-20261129-100000-aaaa",
                                                    "ses-claude-20261129-100000-bbbb")


def test_a_tool_event_on_a_panel_without_a_session_adopts_it(repo: Path, isolated_env: Path) -> None:
    result = fire(repo, isolated_env, "PostToolUse", "late", tool_name="Bash",
                  tool_input={"command": "ls"}, tool_response={"stdout": ""})
    assert result.session == sid(repo, "late")
    log = api.hooks_log(env=env(isolated_env), cwd=str(repo))
    assert log[-1]["adopted"] == "1"
    fire(repo, isolated_env, "Stop", "late", stop_hook_active=False)
    assert db_rows(repo, "SELECT source FROM sessions WHERE id = ?", result.session) == [("adopt",)]


def test_a_panel_reaped_by_gc_rebinds_its_native_session_when_it_fires_again(
        repo: Path, isolated_env: Path) -> None:
    import shutil

    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    first = sid(repo, "n1")
    shutil.rmtree(panel(repo, "n1"))  # what `cos gc --panels` does to an idle panel
    result = fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash",
                  tool_input={"command": "ls"})
    assert result.session == first == sid(repo, "n1")


def test_session_end_writes_the_summary_from_the_observations(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    fire(repo, isolated_env, "UserPromptSubmit", "n1", prompt="first")
    fire(repo, isolated_env, "UserPromptSubmit", "n1", prompt="second")
    fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Write",
         tool_input={"file_path": "/r/a.py", "content": "x"}, tool_response={})
    fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash", tool_input={"command": "false"},
         tool_response={"is_error": True})
    fire(repo, isolated_env, "SessionEnd", "n1", reason="logout")
    summary = api.session_summary(sid(repo, "n1"), env=env(isolated_env), cwd=str(repo))
    assert summary is not None
    assert (summary["reason"], summary["prompts"], summary["tool_calls"], summary["errors"],
            summary["files"], summary["last_prompt"]) == ("end:logout", 2, 2, 1, ["/r/a.py"], "second")
    assert db_rows(repo, "SELECT status FROM sessions") == [("ended",)]


@pytest.mark.slow
def test_no_summary_is_written_from_a_spool_that_could_not_be_stored_first(
        repo: Path, isolated_env: Path) -> None:
    e = env(isolated_env, COS_PANEL_ID="tab")
    api.hook("SessionStart", {"session_id": "a", "source": "startup"}, env=e, cwd=str(repo))
    first = sid(repo, "tab")
    api.hook("UserPromptSubmit", {"session_id": "a", "prompt": "one"}, env=e, cwd=str(repo))
    holder = sqlite3.connect(repo / ".coding-os" / "coding-os.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:  # the new session starts while the database is locked: its orphan waits
        api.hook("SessionStart", {"session_id": "b", "source": "startup"}, env=e, cwd=str(repo))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert db_rows(repo, "SELECT count(*) FROM session_summaries") == [(0,)]
    api.hook("Stop", {"session_id": "b"}, env=e, cwd=str(repo))  # retried, now complete
    assert db_rows(repo, "SELECT session, reason, prompts FROM session_summaries") == \
        [(first, "orphan", 1)]


def test_an_orphan_whose_summary_failed_at_startup_is_summarised_later(
        repo: Path, isolated_env: Path) -> None:
    e = env(isolated_env, COS_PANEL_ID="tab")
    api.hook("SessionStart", {"session_id": "a", "source": "startup"}, env=e, cwd=str(repo))
    first = sid(repo, "tab")
    api.hook("UserPromptSubmit", {"session_id": "a", "prompt": "one"}, env=e, cwd=str(repo))
    broken = {**e, "COS_DATABASE_URL": "bogus://nowhere"}
    result = api.hook("SessionStart", {"session_id": "b", "source": "startup"}, env=broken,
                      cwd=str(repo))
    assert result.exit_code == 0 and sid(repo, "tab") != first
    api.hook("SessionEnd", {"session_id": "b", "reason": "exit"}, env=e, cwd=str(repo))
    reasons = dict(db_rows(repo, "SELECT session, reason FROM session_summaries"))
    assert reasons == {first: "orphan", sid(repo, "tab"): "end:exit"}


def test_a_dead_process_of_another_pid_namespace_is_not_judged_here(
        repo: Path, isolated_env: Path) -> None:
    import subprocess

    process = subprocess.Popen(["sleep", "60"])
    e = env(isolated_env, CLAUDE_PID=str(process.pid))
    api.hook("SessionStart", {"session_id": "elsewhere", "source": "startup"}, env=e,
             cwd=str(repo))
    process.kill()
    process.wait()
    other = sid(repo, "elsewhere")
    record_path = repo / ".coding-os" / "claude" / "sessions" / f"{other}.json"
    record = json.loads(record_path.read_text())
    record["host_ns"] = "another-boot:1"  # written by a container sharing the project dir
    record_path.write_text(json.dumps(record))
    fire(repo, isolated_env, "SessionStart", "here", source="startup")
    assert db_rows(repo, "SELECT count(*) FROM session_summaries WHERE session = ?", other) == [(0,)]


def test_startup_of_a_native_id_the_engine_filed_binds_the_engines_session(
        repo: Path, isolated_env: Path) -> None:
    """cos's engine gives Claude Code its session id and files it in the index before the
    agent starts (runtime/core.py): its SessionStart binds that cos session, and no second one
    is made for the same native id."""
    from coding_os.clock import utc_now
    from coding_os.sessions.database import with_index
    from coding_os.state.caller import Caller
    from coding_os.storage.base import SessionRecord

    e = env(isolated_env)
    now = utc_now()
    engine = SessionRecord(id="ses-claude-20261202-000000-e0e0", agent="claude", panel="engine",
                           native_id="n7", project=str(repo), cwd=str(repo), source="engine",
                           started=now, last_active=now)
    with_index(Caller(e, str(repo)).tiers, e, lambda storage: storage.upsert_session(engine))
    fire(repo, isolated_env, "SessionStart", "n7", source="startup")
    assert sid(repo, "n7") == engine.id
    assert db_rows(repo, "SELECT id FROM sessions WHERE native_id = ?", "n7") == [(engine.id,)]
    fire(repo, isolated_env, "SessionStart", "n8", source="startup")  # one it never filed
    assert sid(repo, "n8") not in (engine.id, None)
