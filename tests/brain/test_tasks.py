"""brain.tasks: creating, claiming and moving tasks, the panel's `.task-current`, the work log."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from coding_os.brain.attribution import Attribution
from coding_os.brain.tasks import (
    append_work_log,
    check_status,
    create_task,
    move_task,
    parse_task_id,
    task_dict,
)
from coding_os.errors import Conflict, InvalidInput, NotFound
from coding_os.state.statefile import parse_state
from coding_os.state.tiers import Tiers
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import COS, start_panel


def current_task(tiers: Tiers, panel: str) -> tuple[str, str] | None:
    path = Path(tiers.panel_dir("claude", panel)) / ".task-current"
    return parse_state(path.read_bytes()) if path.exists() else None


@pytest.mark.parametrize("given,n", [("TASK-7", 7), ("task-7", 7), (" 7 ", 7), (7, 7),
                                     ("TASK-123456789012345678", 123456789012345678)])
def test_a_task_id_is_read_in_its_usual_spellings(given: object, n: int) -> None:
    assert parse_task_id(given) == n


@pytest.mark.parametrize("bad", ["TASK-x", "TASK-0", "TASK--1", "0", "", "TASK-1.5", True, 0, -3,
                                 10 ** 18, 1.0, None, ["TASK-1"], "TASK-1; DROP TABLE tasks",
                                 "TASK-1234567890123456789"])
def test_anything_else_is_not_a_task_id(bad: object) -> None:
    with pytest.raises(InvalidInput, match="not a task id"):
        parse_task_id(bad)


@pytest.mark.parametrize("bad", ["Doing", "done ", "finished", "", None, 1])
def test_an_unknown_status_is_refused_naming_the_known_ones(bad: object) -> None:
    with pytest.raises(InvalidInput, match="todo, doing, blocked, done"):
        check_status(bad)


def test_a_task_created_as_doing_is_claimed_by_its_creator_and_becomes_its_current_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    task = create_task(storage, tiers, "  Write   the\ttests ", None, Attribution(session, "panel"),
                       "doing")
    assert (task.id, task.title, task.owner, task.attributed_by) == (
        "TASK-1", "Write the tests", session, "panel")
    assert current_task(tiers, "p1") == (session, "TASK-1")


def test_a_task_created_as_todo_has_no_owner_and_sets_no_current_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    task = create_task(storage, tiers, "Later", "body", Attribution(session, "panel"))
    assert (task.status, task.owner, task.created_by) == ("todo", None, session)
    assert current_task(tiers, "p1") is None


@pytest.mark.parametrize("title,message", [("", "must not be empty"), ("   ", "must not be empty"),
                                           ("x" * 201, "longer than 200"), (None, "must be text"),
                                           (5, "must be text"), ("a\x00b", "control characters")])
def test_a_bad_title_is_refused_and_nothing_is_stored(
        storage: SQLiteStorage, tiers: Tiers, title: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        create_task(storage, tiers, title, None, Attribution(None, "cli"))
    assert storage.tasks() == []


def test_a_too_long_body_is_refused(storage: SQLiteStorage, tiers: Tiers) -> None:
    with pytest.raises(InvalidInput, match="longer than 16000"):
        create_task(storage, tiers, "t", "b" * 16_001, Attribution(None, "cli"))


def test_moving_to_doing_claims_the_task_and_writes_the_panels_current_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    create_task(storage, tiers, "Claim me", None, Attribution(None, "cli"))
    moved = move_task(storage, tiers, "TASK-1", "doing", Attribution(session, "panel"), "on it")
    assert (moved.status, moved.owner) == ("doing", session)
    assert current_task(tiers, "p1") == (session, "TASK-1")
    last = storage.task_moves(1)[-1]
    assert (last.from_status, last.to_status, last.session, last.note) == (
        "todo", "doing", session, "on it")


@pytest.mark.parametrize("leaving_to", ["done", "blocked", "todo"])
def test_the_current_task_is_cleared_when_the_task_leaves_doing(
        storage: SQLiteStorage, tiers: Tiers, leaving_to: str) -> None:
    session = start_panel(tiers, "p1")
    create_task(storage, tiers, "Work", None, Attribution(session, "panel"), "doing")
    moved = move_task(storage, tiers, 1, leaving_to, Attribution(session, "panel"))
    assert moved.owner == session  # the owner stays, for the record
    assert current_task(tiers, "p1") is None


def test_leaving_doing_keeps_a_current_task_that_names_another_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    who = Attribution(session, "panel")
    create_task(storage, tiers, "One", None, who, "doing")
    create_task(storage, tiers, "Two", None, who, "doing")
    assert current_task(tiers, "p1") == (session, "TASK-2")
    move_task(storage, tiers, "TASK-1", "done", who)
    assert current_task(tiers, "p1") == (session, "TASK-2")


def test_a_task_another_session_is_doing_is_a_conflict_and_stays_theirs(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    first = start_panel(tiers, "p1")
    second = start_panel(tiers, "p2")
    create_task(storage, tiers, "Mine", None, Attribution(first, "panel"), "doing")
    with pytest.raises(Conflict, match=f"TASK-1 is being done by {first}") as caught:
        move_task(storage, tiers, "TASK-1", "doing", Attribution(second, "panel"))
    assert caught.value.exit_code == 7
    task = storage.task(1)
    assert task is not None and task.owner == first and len(storage.task_moves(1)) == 1
    assert current_task(tiers, "p2") is None
    assert current_task(tiers, "p1") == (first, "TASK-1")


def test_force_takes_a_task_over_and_makes_it_the_new_owners_current_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    first = start_panel(tiers, "p1")
    second = start_panel(tiers, "p2")
    create_task(storage, tiers, "Mine", None, Attribution(first, "panel"), "doing")
    moved = move_task(storage, tiers, "TASK-1", "doing", Attribution(second, "panel"),
                      force=True)
    assert moved.owner == second
    assert current_task(tiers, "p2") == (second, "TASK-1")


def test_force_takeover_clears_the_previous_owners_current_task(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    first = start_panel(tiers, "p1")
    second = start_panel(tiers, "p2")
    create_task(storage, tiers, "Mine", None, Attribution(first, "panel"), "doing")
    move_task(storage, tiers, "TASK-1", "doing", Attribution(second, "panel"), force=True)
    assert current_task(tiers, "p1") is None


def test_the_owner_moving_its_own_doing_task_to_doing_again_is_no_conflict(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    create_task(storage, tiers, "Mine", None, Attribution(session, "panel"), "doing")
    assert move_task(storage, tiers, 1, "doing", Attribution(session, "panel")).owner == session


def test_a_move_on_a_stale_read_is_a_conflict_naming_the_current_state(
        storage: SQLiteStorage, tiers: Tiers, monkeypatch: pytest.MonkeyPatch) -> None:
    first = start_panel(tiers, "p1")
    second = start_panel(tiers, "p2")
    create_task(storage, tiers, "Race", None, Attribution(None, "cli"))
    real_task = storage.task

    def read_then_lose_the_race(n: int) -> object:
        found = real_task(n)
        monkeypatch.setattr(storage, "task", real_task)
        storage.move_task(n, "doing", first, first, "panel", "2026-11-29T10:00:00.000Z",
                          expect_status="todo", expect_owner=None)
        return found

    monkeypatch.setattr(storage, "task", read_then_lose_the_race)
    with pytest.raises(Conflict, match=f"TASK-1 changed meanwhile \\(now doing, {first}\\)"):
        move_task(storage, tiers, "TASK-1", "doing", Attribution(second, "panel"))
    assert current_task(tiers, "p2") is None
    assert [m.owner for m in storage.task_moves(1)] == [None, first]


def test_moving_an_unknown_task_is_not_found_naming_it(storage: SQLiteStorage,
                                                       tiers: Tiers) -> None:
    with pytest.raises(NotFound, match="no task TASK-42"):
        move_task(storage, tiers, "TASK-42", "done", Attribution(None, "cli"))


def test_a_move_without_a_session_keeps_the_owner(storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    create_task(storage, tiers, "T", None, Attribution(session, "panel"), "doing")
    moved = move_task(storage, tiers, 1, "blocked", Attribution(None, "cli"), "waiting")
    assert (moved.status, moved.owner) == ("blocked", session)


def test_a_work_log_line_names_its_session_and_task(storage: SQLiteStorage, tiers: Tiers) -> None:
    session = start_panel(tiers, "p1")
    create_task(storage, tiers, "T", None, Attribution(None, "cli"))
    entry = append_work_log(storage, "did a thing", Attribution(session, "injected"), "TASK-1")
    assert (entry.session, entry.attributed_by, entry.task, entry.text) == (
        session, "injected", 1, "did a thing")
    with pytest.raises(NotFound, match="no task TASK-9"):
        append_work_log(storage, "x", Attribution(None, "cli"), "TASK-9")
    with pytest.raises(InvalidInput, match="must not be empty"):
        append_work_log(storage, "  ", Attribution(None, "cli"))
    with pytest.raises(InvalidInput, match="longer than 8000"):
        append_work_log(storage, "x" * 8001, Attribution(None, "cli"))
    assert len(storage.work_log()) == 1


def test_a_task_as_json_has_its_id_first_and_its_moves(storage: SQLiteStorage,
                                                      tiers: Tiers) -> None:
    task = create_task(storage, tiers, "T", None, Attribution(None, "cli"))
    out = task_dict(task, moves=True, storage=storage)
    assert list(out)[0] == "id" and out["id"] == "TASK-1" and "n" not in out
    assert out["moves"] == [{"from_status": None, "to_status": "todo", "owner": None,
                             "session": None, "attributed_by": "cli", "ts": task.created,
                             "note": None}]


def test_of_many_processes_claiming_one_task_at_once_exactly_one_wins(
        project: Path, tiers: Tiers) -> None:
    storage = SQLiteStorage(tiers.database)
    try:
        create_task(storage, tiers, "Contended", None, Attribution(None, "cli"))
    finally:
        storage.close()
    sessions = {f"racer{i}": start_panel(tiers, f"racer{i}") for i in range(8)}
    procs = {panel: subprocess.Popen(
        [COS, "tasks", "move", "TASK-1", "doing", "--json"], cwd=project,
        env={**os.environ, "COS_AGENT": "claude", "COS_PANEL_ID": panel},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for panel in sessions}
    results = {panel: (proc.wait(timeout=120), *proc.communicate()) for panel, proc in
               procs.items()}
    winners = [panel for panel, (code, _, _) in results.items() if code == 0]
    assert len(winners) == 1, results
    for panel, (code, out, err) in results.items():
        assert "Traceback" not in err
        if panel not in winners:
            assert code == 7 and out == "" and len(err.strip().splitlines()) == 1, (code, err)
    winner = winners[0]
    storage = SQLiteStorage(tiers.database)
    try:
        task = storage.task(1)
        moves = storage.task_moves(1)
    finally:
        storage.close()
    assert task is not None and (task.status, task.owner) == ("doing", sessions[winner])
    assert [(m.from_status, m.to_status, m.owner) for m in moves] == [
        (None, "todo", None), ("todo", "doing", sessions[winner])]
    holding = [panel for panel in sessions if current_task(tiers, panel) is not None]
    assert holding == [winner]


def test_a_moves_result_holds_only_its_latest_moves_and_their_count(
        storage: SQLiteStorage, tiers: Tiers) -> None:
    from coding_os.brain.tasks import MOVES_IN_RESULT

    who = Attribution(start_panel(tiers, "p1"), "panel")
    task = create_task(storage, tiers, "Busy", None, who)
    for number in range(15):
        task = move_task(storage, tiers, task.id, ("doing", "blocked")[number % 2], who,
                         note="n" * 2000)
    shown = task_dict(task, moves=MOVES_IN_RESULT, storage=storage)
    assert shown["moves_total"] == 16
    assert len(shown["moves"]) == MOVES_IN_RESULT  # type: ignore[arg-type]
    assert shown["moves"][-1]["to_status"] == task.status  # type: ignore[index]


@pytest.mark.parametrize("field", ["title", "body", "note", "text"])
def test_control_characters_are_refused_but_newlines_and_tabs_kept(
        storage: SQLiteStorage, tiers: Tiers, field: str) -> None:
    who = Attribution(start_panel(tiers, "p1"), "panel")
    bad = "red \x1b[31m alert"
    with pytest.raises(InvalidInput, match="U\\+001B"):
        if field in ("title", "body"):
            create_task(storage, tiers, bad if field == "title" else "ok",
                        bad if field == "body" else None, who)
        elif field == "note":
            move_task(storage, tiers, create_task(storage, tiers, "t", None, who).id, "done",
                      who, note=bad)
        else:
            append_work_log(storage, bad, who)
    entry = append_work_log(storage, "line one\r\nline\ttwo", who)
    assert entry.text == "line one\nline\ttwo"


@pytest.mark.parametrize("redacting", [True, False], ids=["redacted", "redact-false"])
def test_tasks_and_work_log_lines_are_stored_without_their_secrets(project: Path,
                                                                   redacting: bool) -> None:
    """A key pasted into a task's title, body or move note, or a work-log line, is stored
    redacted (the database file holds no byte of it); `redact: false` keeps it as written."""
    import sqlite3

    key = "AKIA" + "QW7HZ2LX5RT4MBNE"
    token = "ghp_" + "x7Kq2Lm9Pz4Rt8Vw3Yb6Nc1Dh5Fj0Gs2Ha9J"
    if not redacting:
        (project / ".coding-os.yaml").write_text("redact: false\n", encoding="utf-8")

    def cos(*args: str) -> str:
        proc = subprocess.run([COS, *args], cwd=project, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    cos("tasks", "new", f"rotate {key}", "--body", f"the token {token} leaked")
    cos("tasks", "move", "TASK-1", "doing", "--note", f"GITHUB_TOKEN={token}")
    cos("work-log", "add", f"revoked {key} and {token}")
    shown = cos("tasks", "show", "TASK-1", "--json") + cos("work-log", "--json")
    db = project / ".coding-os" / "coding-os.db"
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    stored = db.read_bytes()
    for secret in (key, token):
        assert (secret in shown) is not redacting
        assert (secret.encode() in stored) is not redacting
    if redacting:
        assert "[REDACTED:" in shown
