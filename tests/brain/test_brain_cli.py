"""`cos tasks`, `cos work-log` and `cos search` as a user's shell runs them: exit codes, one-line
errors, `--json` shapes, and never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from coding_os.state.identity import mint_session_id
from coding_os.state.statefile import write_state
from tests.helpers import cos


PANEL_A = {"COS_AGENT": "claude", "COS_PANEL_ID": "panel-a"}
PANEL_B = {"COS_AGENT": "claude", "COS_PANEL_ID": "panel-b"}


def start_panel(project: Path, panel: str) -> str:
    session = mint_session_id("claude")
    write_state(str(project / ".coding-os" / "claude" / "panels" / panel / "session-id"),
                session, "-")
    return session


def run(project: Path, *args: str, env: dict[str, str] | None = None
        ) -> subprocess.CompletedProcess[str]:
    proc = cos(*args, cwd=project, env=env or PANEL_A)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc


def ok_json(project: Path, *args: str, env: dict[str, str] | None = None) -> object:
    proc = run(project, *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_error(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("args,needle", [
    (("tasks", "move", "TASK-x", "doing"), "not a task id"),
    (("tasks", "move", "TASK-1", "finished"), "finished"),
    (("tasks", "move", "TASK-0", "done"), "not a task id"),
    (("tasks", "show", "1.5"), "not a task id"),
    (("tasks", "new", "x" * 201), "longer than 200"),
    (("tasks", "new", ""), "must not be empty"),
    (("tasks", "new", "t", "--status", "started"), "started"),
    (("tasks", "--after", "TASK-?"), "not a task id"),
    (("tasks", "--limit", "0"), "limit"),
    (("work-log", "add", ""), "must not be empty"),
    (("work-log", "add", "x", "--task", "nope"), "not a task id"),
    (("work-log", "--before", "-3"), "cursor"),
    (("search", ""), "at least one word"),
    (("search", "***"), "at least one word"),
    (("search", "--", "-- ; ' \""), "at least one word"),
    (("search", "x" * 1001), "longer than 1000"),
    (("search", "word", "--kind", "secrets"), "secrets"),
    (("search", "word", "--limit", "101"), "limit"),
    (("search", "word", "--cursor", "abc"), "cursor"),
    (("search", "word", "--cursor", "9" * 23), "cursor"),
    (("search", "word", "--cursor", "\u00b2"), "cursor"),
    (("work-log", "--before", "9" * 23), "cursor"),
    (("work-log", "--before", "\u00b9"), "cursor"),
    (("tasks", "new", "red \x1b[31m alert"), "control characters"),
])
@pytest.mark.slow
def test_bad_input_exits_2_with_one_line(project: Path, args: tuple[str, ...],
                                         needle: str) -> None:
    assert needle in one_line_error(run(project, *args), 2)


@pytest.mark.parametrize("args", [("tasks", "move", "TASK-42", "doing"), ("tasks", "show", "42"),
                                  ("work-log", "add", "x", "--task", "TASK-42")])
def test_an_unknown_task_exits_1_naming_it(project: Path, args: tuple[str, ...]) -> None:
    assert "TASK-42" in one_line_error(run(project, *args), 1)


def test_a_task_another_panel_is_doing_exits_7_and_force_takes_it_over(project: Path) -> None:
    first = start_panel(project, "panel-a")
    second = start_panel(project, "panel-b")
    created = ok_json(project, "tasks", "new", "Shared work", "--status", "doing")
    assert isinstance(created, dict) and created["owner"] == first
    message = one_line_error(run(project, "tasks", "move", "TASK-1", "doing", env=PANEL_B), 7)
    assert first in message and "force" in message
    taken = ok_json(project, "tasks", "move", "TASK-1", "doing", "--force", env=PANEL_B)
    assert isinstance(taken, dict) and taken["owner"] == second


def test_task_json_shapes(project: Path) -> None:
    session = start_panel(project, "panel-a")
    created = ok_json(project, "tasks", "new", "First task", "--body", "details")
    assert isinstance(created, dict)
    assert list(created)[0] == "id" and created["id"] == "TASK-1"
    assert {k: created[k] for k in ("title", "body", "status", "owner", "created_by",
                                    "attributed_by")} == {
        "title": "First task", "body": "details", "status": "todo", "owner": None,
        "created_by": session, "attributed_by": "panel"}
    assert [m["to_status"] for m in created["moves"]] == ["todo"]
    moved = ok_json(project, "tasks", "move", "task-1", "doing", "--note", "go")
    assert isinstance(moved, dict) and moved["owner"] == session
    assert moved["moves"][-1]["note"] == "go"
    for i in range(3):
        ok_json(project, "tasks", "new", f"more {i}")
    page = ok_json(project, "tasks", "--limit", "2")
    assert isinstance(page, dict) and set(page) == {"tasks", "next_cursor"}
    assert [t["id"] for t in page["tasks"]] == ["TASK-1", "TASK-2"]
    assert page["next_cursor"] == "TASK-2"
    rest = ok_json(project, "tasks", "--after", "TASK-2")
    assert [t["id"] for t in rest["tasks"]] == ["TASK-3", "TASK-4"]  # type: ignore[index]
    assert rest["next_cursor"] is None  # type: ignore[index]
    doing = ok_json(project, "tasks", "--status", "doing")
    assert [t["id"] for t in doing["tasks"]] == ["TASK-1"]  # type: ignore[index]
    ok_json(project, "work-log", "add", "worked on it", "--task", "TASK-1")
    shown = ok_json(project, "tasks", "show", "TASK-1")
    assert isinstance(shown, dict) and [e["text"] for e in shown["work_log"]] == ["worked on it"]
    assert shown["work_log"][0]["task"] == "TASK-1"


def test_work_log_json_pages_newest_first(project: Path) -> None:
    session = start_panel(project, "panel-a")
    for i in range(3):
        entry = ok_json(project, "work-log", "add", f"line {i}")
        assert isinstance(entry, dict)
        assert (entry["session"], entry["attributed_by"], entry["task"]) == (
            session, "panel", None)
    page = ok_json(project, "work-log", "--limit", "2")
    assert isinstance(page, dict) and set(page) == {"entries", "next_cursor"}
    assert [e["text"] for e in page["entries"]] == ["line 2", "line 1"]
    rest = ok_json(project, "work-log", "--before", str(page["next_cursor"]))
    assert [e["text"] for e in rest["entries"]] == ["line 0"]  # type: ignore[index]
    assert ok_json(project, "work-log", "--session", "ses-nobody") == {"entries": [],
                                                                      "next_cursor": None}


def test_a_shell_without_a_panel_session_writes_with_no_session(project: Path) -> None:
    entry = ok_json(project, "work-log", "add", "from a plain shell", env={"COS_AGENT": "claude"})
    assert isinstance(entry, dict) and (entry["session"], entry["attributed_by"]) == (None, "cli")


def test_search_json_shape_and_paging(project: Path) -> None:
    for i in range(3):
        ok_json(project, "work-log", "add", f"searchable item {i}")
    ok_json(project, "tasks", "new", "searchable task")
    page = ok_json(project, "search", "SEARCHABLE", "--limit", "2")
    assert isinstance(page, dict) and set(page) == {"results", "next_cursor"}
    results = page["results"]
    assert isinstance(results, list) and len(results) == 2
    assert set(results[0]) == {"kind", "ref", "session", "ts", "snippet"}
    assert [r["kind"] for r in results] == ["task", "work_log"]
    rest = ok_json(project, "search", "searchable", "--cursor", str(page["next_cursor"]))
    assert [r["snippet"] for r in rest["results"]] == [  # type: ignore[index]
        "searchable item 1", "searchable item 0"]
    only = ok_json(project, "search", "searchable", "--kind", "task")
    assert [r["ref"] for r in only["results"]] == ["TASK-1"]  # type: ignore[index]
    assert ok_json(project, "search", "'; DROP TABLE tasks; --") == {"results": [],
                                                                      "next_cursor": None}
    assert len(ok_json(project, "tasks")["tasks"]) == 1  # type: ignore[index]


def test_plain_output_is_one_line_per_item(project: Path) -> None:
    start_panel(project, "panel-a")
    assert run(project, "tasks", "new", "Plain").stdout == "TASK-1\n"
    listing = run(project, "tasks").stdout.splitlines()
    assert len(listing) == 1 and listing[0].startswith("TASK-1") and "Plain" in listing[0]
    assert run(project, "work-log", "add", "plain line").stdout.strip().isdigit()
    found = run(project, "search", "plain").stdout.splitlines()
    assert len(found) == 2


def test_a_claude_code_session_started_since_the_last_import_is_searchable_at_once(
        project: Path, isolated_env: Path) -> None:
    from tests.helpers import conversation, write_jsonl

    native = "cccccccc-0000-0000-0000-000000000042"
    entries = conversation(native, 1, prefix="quokka ")
    for entry in entries:
        entry["cwd"] = str(project)
    key = "".join(c if c.isalnum() else "-" for c in str(project))
    ok_json(project, "search", "anything")  # an import and a sync before the session exists
    write_jsonl(isolated_env / ".claude" / "projects" / key / f"{native}.jsonl", entries)
    page = ok_json(project, "search", "quokka", "--kind", "transcript")
    assert isinstance(page, dict)
    assert [(hit["session"], hit["snippet"]) for hit in page["results"]] == [
        (native, "prompt quokka 0")]
