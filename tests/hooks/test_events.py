"""One hook event at a time, through the library entry the hook uses: unknown events and fields
are logged and accepted, every event is observed (subagents, compaction, the files a patch tool
writes), and a broken or locked database or a torn spool line never fails the hook nor loses an
observation."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from coding_os import api
from coding_os.state.caller import read_panel_session
from tests.helpers import fire_in_process as fire
from tests.helpers import hook_env as env
from tests.helpers import panel_session as sid


def test_unknown_events_and_fields_are_logged_and_accepted(repo: Path, isolated_env: Path) -> None:
    result = fire(repo, isolated_env, "Notification", "n1", message="hi", brand_new_field={"x": 1})
    assert result.exit_code == 0 and result.output is None
    line = api.hooks_log(env=env(isolated_env), cwd=str(repo))[-1]
    assert (line["event"], line["unknown_event"]) == ("Notification", "1")


def test_subagent_and_compact_events_are_observed(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    fire(repo, isolated_env, "SubagentStart", "n1", agent_id="ag1", agent_type="Explore")
    fire(repo, isolated_env, "SubagentStop", "n1", agent_id="ag1", agent_type="Explore",
         agent_transcript_path="/x/agent-ag1.jsonl")
    fire(repo, isolated_env, "PreCompact", "n1", trigger="manual", custom_instructions="")
    rows = api.session_observations(sid(repo, "n1"), env=env(isolated_env), cwd=str(repo))
    assert [r["event"] for r in rows] == ["SessionStart", "SubagentStart", "SubagentStop", "PreCompact"]
    assert rows[1]["data"] == {"agent_id": "ag1", "agent_type": "Explore"}
    assert rows[3]["data"] == {"trigger": "manual"}


def test_patch_tools_record_the_files_they_write(repo: Path, isolated_env: Path) -> None:
    patch = ("*** Begin Patch\n*** Update File: /r/a.py\n@@\n-x\n+y\n*** Add File: /r/b.py\n+z\n"
             "*** End Patch\n")
    api.hook("SessionStart", {"session_id": "cx", "source": "startup"},
             env={**env(isolated_env), "COS_AGENT": "codex"}, cwd=str(repo))
    api.hook("PostToolUse", {"session_id": "cx", "tool_name": "apply_patch",
                             "tool_input": {"command": patch}, "tool_response": "Success"},
             env={**env(isolated_env), "COS_AGENT": "codex"}, cwd=str(repo))
    rows = api.session_observations(env=env(isolated_env), cwd=str(repo))
    assert rows[-1]["data"]["paths"] == ["/r/a.py", "/r/b.py"]  # type: ignore[index]


def test_hooks_log_limit_zero_returns_no_lines(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    assert api.hooks_log(limit=0, env=env(isolated_env), cwd=str(repo)) == []
    assert len(api.hooks_log(limit=1, env=env(isolated_env), cwd=str(repo))) == 1
    by_native = api.hooks_log(session="n1", env=env(isolated_env), cwd=str(repo))
    assert [line["event"] for line in by_native] == ["SessionStart"]


def test_a_broken_database_does_not_fail_the_hook(repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir(mode=0o700)  # as cos makes it
    (repo / ".coding-os" / "coding-os.db").write_bytes(b"this is not a database" * 100)
    result = fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    assert result.exit_code == 0 and result.session == sid(repo, "n1")
    fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash", tool_input={"command": "ls"})
    log = api.hooks_log(env=env(isolated_env), cwd=str(repo))
    assert "db_error" in log[0]
    spooled = (repo / ".coding-os" / ".observations.jsonl").read_text().splitlines()
    assert len(spooled) == 2  # kept for when the database is back


@pytest.mark.slow
def test_a_locked_database_never_stalls_tool_hooks_and_stop_fails_open(
        repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    holder = sqlite3.connect(repo / ".coding-os" / "coding-os.db", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    try:
        tool = fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash",
                    tool_input={"command": "make"})
        stop = fire(repo, isolated_env, "Stop", "n1", last_assistant_message="done")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert tool.exit_code == stop.exit_code == 0
    log = api.hooks_log(env=env(isolated_env), cwd=str(repo))
    assert "db_error" not in log[-2] and "locked" in str(log[-1]["db_error"])
    fire(repo, isolated_env, "Stop", "n1", last_assistant_message="again")
    events = [r["event"] for r in api.session_observations(sid(repo, "n1"), env=env(isolated_env),
                                                            cwd=str(repo))]
    assert events == ["SessionStart", "PostToolUse", "Stop", "Stop"]  # nothing was lost


def test_a_torn_spool_line_never_costs_the_next_observation(repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    spool = repo / ".coding-os" / ".observations.jsonl"
    with open(spool, "ab") as f:
        f.write(b'{"oid": "torn", "session": "x", "ev')  # a hook killed mid-append
    api.session_observations(env=env(isolated_env), cwd=str(repo))  # ingests up to the tear
    fire(repo, isolated_env, "UserPromptSubmit", "n1", prompt="after the tear")
    rows = api.session_observations(sid(repo, "n1"), env=env(isolated_env), cwd=str(repo))
    assert [r["event"] for r in rows] == ["SessionStart", "UserPromptSubmit"]
    assert (repo / ".coding-os" / ".observations.jsonl.torn").read_bytes().startswith(b'{"oid": "torn"')


def test_projects_sharing_one_database_keep_every_observation(
        repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / ".git").mkdir()
    shared = {"COS_DATABASE_URL": f"sqlite:///{tmp_path / 'shared.db'}"}
    for project in (repo, other):
        e = env(isolated_env, **shared)
        api.hook("SessionStart", {"session_id": project.name, "source": "startup"}, env=e,
                 cwd=str(project))
        for n in range(3):
            api.hook("UserPromptSubmit", {"session_id": project.name, "prompt": f"p{n}"}, env=e,
                     cwd=str(project))
        api.hook("Stop", {"session_id": project.name}, env=e, cwd=str(project))
    rows = api.session_observations(env=env(isolated_env, **shared), cwd=str(repo))
    assert len([r for r in rows if r["event"] == "UserPromptSubmit"]) == 6


# Secrets: redacted before the log line and the observation are written (redact.py).

SECRET = "sk-" + "ant-api03-Qw3rTy7uIoP1aSdFgHjKl9zXcVbNm2"  # made up, built at run time


def stored_texts(repo: Path) -> str:
    state = repo / ".coding-os"
    return "".join(p.read_text(encoding="utf-8", errors="replace")
                   for p in (state / ".hooks.log", state / ".observations.jsonl") if p.exists())


def test_a_secret_a_cut_would_halve_is_redacted_whole_in_prompts_answers_and_commands(
        repo: Path, isolated_env: Path) -> None:
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    for limit in (2000, 4000):  # the prompt's and answer's excerpt, the tool input's summary
        around = "x " * ((limit - 10) // 2) + SECRET + " and more"
        fire(repo, isolated_env, "UserPromptSubmit", "n1", prompt=around)
        fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash",
             tool_input={"command": around}, tool_response={"stdout": ""})
        fire(repo, isolated_env, "Stop", "n1", last_assistant_message=around)
    stored = stored_texts(repo)
    assert "[REDACTED:anthropic_api_key" in stored
    for start in range(0, len(SECRET) - 6, 6):
        assert SECRET[start:start + 12] not in stored


def test_redact_false_keeps_the_texts_as_they_were(repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os.yaml").write_text("redact: false\n", encoding="utf-8")
    fire(repo, isolated_env, "SessionStart", "n1", source="startup")
    fire(repo, isolated_env, "UserPromptSubmit", "n1", prompt=f"use {SECRET}")
    fire(repo, isolated_env, "PostToolUse", "n1", tool_name="Bash",
         tool_input={"command": f"ANTHROPIC_API_KEY={SECRET} make"}, tool_response={})
    assert stored_texts(repo).count(SECRET) == 3  # the log's command, the two observations


def test_a_gemini_call_of_a_cos_tool_gets_its_session_merged_into_the_tool_input(
        repo: Path, isolated_env: Path) -> None:
    gemini = {**env(isolated_env), "COS_AGENT": "gemini"}
    api.hook("SessionStart", {"session_id": "g1", "source": "startup"}, env=gemini, cwd=str(repo))
    session = read_panel_session(str(repo / ".coding-os" / "gemini" / "panels" / "g1"))
    assert session is not None
    result = api.hook("BeforeTool", {"session_id": "g1", "hook_event_name": "BeforeTool",
                                     "tool_name": "mcp_cos_cos_task_create",
                                     "tool_input": {"title": "t"}}, env=gemini, cwd=str(repo))
    assert result.output == {"hookSpecificOutput": {
        "hookEventName": "BeforeTool",
        "tool_input": {"title": "t", "agent_session": session[0]}}}
    other = api.hook("BeforeTool", {"session_id": "g1", "hook_event_name": "BeforeTool",
                                    "tool_name": "mcp_other_cos_task_create",
                                    "tool_input": {"title": "t"}}, env=gemini, cwd=str(repo))
    assert other.output is None  # another server's tool of the same name is left alone
    # A server of the user's named `cos_tools` gives names that start like cos's own.
    lookalike = api.hook("BeforeTool", {"session_id": "g1", "hook_event_name": "BeforeTool",
                                        "tool_name": "mcp_cos_tools_cos_task_create",
                                        "tool_input": {"title": "t"}}, env=gemini, cwd=str(repo))
    assert lookalike.output is None
