"""Tasks on the project's shared board, and the work log.

A task is `TASK-<n>` with a title, a body, a status (`todo`, `doing`, `blocked`, `done`), an owner
session and the history of its moves. Moving a task to `doing` claims it for the moving session
and makes it that panel's current task (`.task-current`, which the `require_task_for_edits` gate
reads); a task another session is doing is not taken over unless asked (`force`). Moves are
compare-and-set in the database, so two sessions claiming one task at once never both win.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict

from coding_os.brain.attribution import Attribution
from coding_os.brain.paging import page_size, parse_cursor
from coding_os.errors import Conflict, InvalidInput, NotFound, StateIOError
from coding_os import durable, redact
from coding_os.clock import utc_now
from coding_os.state.identity import agent_of_session, is_session_id
from coding_os.state.statefile import parse_state, write_state
from coding_os.state.tiers import Tiers
from coding_os.storage.base import TASK_STATUSES, Storage, Task, WorkLogEntry

__all__ = ["parse_task_id", "check_status", "create_task", "move_task", "task_dict",
           "append_work_log", "work_log_dict", "task_page_query", "task_page",
           "work_log_page_query", "work_log_page", "show_task", "MAX_TITLE_CHARS",
           "MAX_BODY_CHARS", "MAX_LOG_CHARS"]

MAX_TITLE_CHARS = 200
MAX_BODY_CHARS = 16_000
MAX_NOTE_CHARS = 2_000
MAX_LOG_CHARS = 8_000
MOVES_IN_RESULT = 10  # moves a create or move answers with
MOVES_SHOWN = 200  # moves `cos tasks show` lists
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TASK_ID = re.compile(r"^(?:TASK-)?([1-9][0-9]{0,17})$", re.IGNORECASE)
TASK_CURRENT = ".task-current"


def parse_task_id(value: object) -> int:
    """The number of a task id given as `TASK-7`, `task-7`, `7` or 7.

    Raises:
        InvalidInput: anything else.
    """
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 10 ** 18:
        return value
    if isinstance(value, str):
        match = _TASK_ID.match(value.strip())
        if match:
            return int(match.group(1))
    raise InvalidInput(f"not a task id: {str(value)[:40]!r} (expected TASK-<number>)")


def check_status(value: object) -> str:
    """`value` when it is a task status.

    Raises:
        InvalidInput: it is not one.
    """
    if isinstance(value, str) and value in TASK_STATUSES:
        return value
    raise InvalidInput(f"unknown task status {str(value)[:40]!r}; use one of "
                       f"{', '.join(TASK_STATUSES)}")


def _text(value: object, what: str, limit: int, required: bool = False,
          redacting: bool = True) -> str:
    """`value` as stored text: a string within `limit`, without control characters other than
    newlines and tabs (they would reach other agents' and people's terminals as they are), and
    with the secrets it holds redacted (redact.py) when `redacting`.

    Raises:
        InvalidInput: it is not.
    """
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be text, got {type(value).__name__}")
    if required and not value.strip():
        raise InvalidInput(f"{what} must not be empty")
    if len(value) > limit:
        raise InvalidInput(f"{what} is longer than {limit} characters ({len(value)})")
    value = value.replace("\r\n", "\n")
    bad = _CONTROL.search(value)
    if bad:
        raise InvalidInput(f"{what} must not contain control characters "
                           f"(found U+{ord(bad.group()):04X})")
    return redact.redact(value) if redacting else value


def create_task(storage: Storage, tiers: Tiers, title: object, body: object,
                who: Attribution, status: object = "todo", redacting: bool = True) -> Task:
    """Add a task; created as `doing`, it is claimed by its creator. Its title and body are
    stored with their secrets redacted, unless not `redacting`.

    Raises:
        InvalidInput: empty or too long title, too long body, unknown status.
        StorageError: the database cannot be written.
    """
    title_text = " ".join(_text(title, "title", MAX_TITLE_CHARS, required=True,
                                redacting=redacting).split())
    body_text = _text(body, "body", MAX_BODY_CHARS, redacting=redacting)
    state = check_status(status)
    owner = who.session if state == "doing" else None
    task = storage.create_task(title_text, body_text, state, owner, who.session, who.source,
                               utc_now())
    if state == "doing":
        try:
            _set_current(tiers, task, who)
        except StateIOError as exc:  # the task is stored; only the panel's marker is behind
            raise StateIOError(f"{task.id} is created, but the panel's current task could not "
                               f"be set: {exc}") from None
    return task


def move_task(storage: Storage, tiers: Tiers, task_id: object, status: object,
              who: Attribution, note: object = None, force: bool = False,
              redacting: bool = True) -> Task:
    """Move a task to `status`; to `doing`, it becomes the mover's (see the module docstring).
    A note is stored with its secrets redacted, unless not `redacting`.

    Raises:
        InvalidInput: a bad task id, status or note.
        NotFound: no such task.
        Conflict: another session is doing it (without `force`), or it changed meanwhile.
        StorageError: the database cannot be used.
    """
    n = parse_task_id(task_id)
    state = check_status(status)
    note_text = _text(note, "note", MAX_NOTE_CHARS, redacting=redacting) or None
    task = storage.task(n)
    if task is None:
        raise NotFound(f"no task TASK-{n}")
    owner = task.owner
    if state == "doing":
        if (task.status == "doing" and task.owner and who.session
                and task.owner != who.session and not force):
            raise Conflict(f"TASK-{n} is being done by {task.owner}; move it with force to "
                           "take it over")
        owner = who.session or task.owner
    moved = storage.move_task(n, state, owner, who.session, who.source, utc_now(), note_text,
                              expect_status=task.status, expect_owner=task.owner)
    if moved is None:
        current = storage.task(n)
        if current is None:
            raise NotFound(f"no task TASK-{n}")
        raise Conflict(f"TASK-{n} changed meanwhile (now {current.status}"
                       f"{', ' + current.owner if current.owner else ''}); look and try again")
    try:
        if task.status == "doing" and task.owner and (state != "doing"
                                                      or moved.owner != task.owner):
            _clear_current(tiers, task)  # left doing, or taken over: no longer its task
        if state == "doing":
            _set_current(tiers, moved, who)
    except StateIOError as exc:  # the move is stored; only the panel's marker is behind
        raise StateIOError(f"TASK-{n} is moved to {state}, but the panel's current task could "
                           f"not be updated: {exc}") from None
    return moved


def append_work_log(storage: Storage, text: object, who: Attribution,
                    task_id: object = None, redacting: bool = True) -> WorkLogEntry:
    """Add a line to the work log, optionally for a task; stored with its secrets redacted,
    unless not `redacting`.

    Raises:
        InvalidInput: empty or too long text, a bad task id.
        NotFound: the task does not exist.
        StorageError: the database cannot be written.
    """
    line = _text(text, "text", MAX_LOG_CHARS, required=True, redacting=redacting)
    n = None
    if task_id is not None:
        n = parse_task_id(task_id)
        if storage.task(n) is None:
            raise NotFound(f"no task TASK-{n}")
    return storage.append_work_log(who.session, who.source, n, line, utc_now())


def task_dict(task: Task, moves: int = 0, storage: Storage | None = None
              ) -> dict[str, object]:
    """A task as JSON: its id first, and its latest `moves` moves (oldest of them first) with
    how many it has in all, when asked (a result stays small however often it moved)."""
    out: dict[str, object] = {"id": task.id, **asdict(task)}
    del out["n"]
    if moves and storage is not None:
        history = storage.task_moves(task.n)
        out["moves"] = [{k: v for k, v in asdict(m).items() if k not in ("seq", "task")}
                        for m in history[-moves:]]
        out["moves_total"] = len(history)
    return out


def work_log_dict(entry: WorkLogEntry) -> dict[str, object]:
    """A work-log line as JSON."""
    out = asdict(entry)
    out["task"] = f"TASK-{entry.task}" if entry.task is not None else None
    return out


def _panel_dir_of(tiers: Tiers, session: str) -> str | None:
    """The panel directory whose current session is `session`, if any."""
    agent = agent_of_session(session)
    if agent is None:
        return None
    panels = tiers.panels_dir(agent)
    try:
        names = os.listdir(panels)
    except OSError:
        return None
    for name in names:
        data = durable.read_small(os.path.join(panels, name, "session-id"), 8192)
        parsed = parse_state(data) if data else None
        if parsed is not None and parsed[0] == session:
            return os.path.join(panels, name)
    return None


def _set_current(tiers: Tiers, task: Task, who: Attribution) -> None:
    """Make `task` the current one of the panel running the owning session."""
    if not who.session or not is_session_id(who.session) or task.owner != who.session:
        return
    panel_dir = _panel_dir_of(tiers, who.session)
    if panel_dir is not None:
        write_state(os.path.join(panel_dir, TASK_CURRENT), who.session, task.id)


def _clear_current(tiers: Tiers, task: Task) -> None:
    """Remove the owner panel's `.task-current` when it still names `task`."""
    if not task.owner or not is_session_id(task.owner):
        return
    panel_dir = _panel_dir_of(tiers, task.owner)
    if panel_dir is None:
        return
    path = os.path.join(panel_dir, TASK_CURRENT)
    data = durable.read_small(path, 8192)
    if data and parse_state(data) == (task.owner, task.id):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass  # removed meanwhile: what was wanted
        except OSError as exc:
            raise durable.io_error(path, exc) from None


def task_page_query(status: object, cursor: object, limit: object) -> tuple[str | None, int, int]:
    """The status, the task number to start after and the page size of a task listing.

    Raises:
        InvalidInput: an unknown status, a bad cursor or limit.
    """
    state = check_status(status) if status is not None else None
    after = parse_task_id(cursor) if cursor is not None else 0
    return state, after, page_size(limit)


def task_page(storage: Storage, status: str | None, owner: str | None, after: int,
              size: int) -> dict[str, object]:
    """A page of tasks by number: `{"tasks": [...], "next_cursor": TASK-n or None}`."""
    rows = storage.tasks(status=status, owner=owner, after=after, limit=size + 1)
    page, more = rows[:size], len(rows) > size
    return {"tasks": [task_dict(t) for t in page],
            "next_cursor": page[-1].id if more else None}


def work_log_page_query(task: object, cursor: object,
                        limit: object) -> tuple[int | None, int | None, int]:
    """The task number, the entry to start before and the page size of a work-log listing.

    Raises:
        InvalidInput: a bad task id, cursor or limit.
    """
    n = parse_task_id(task) if task is not None else None
    return n, parse_cursor(cursor), page_size(limit)


def work_log_page(storage: Storage, session: str | None, task: int | None, before: int | None,
                  size: int) -> dict[str, object]:
    """A page of the work log, newest first: `{"entries": [...], "next_cursor": N or None}`."""
    rows = storage.work_log(session=session, task=task, before=before, limit=size + 1)
    page, more = rows[:size], len(rows) > size
    return {"entries": [work_log_dict(e) for e in page],
            "next_cursor": page[-1].seq if more else None}


def show_task(storage: Storage, task: int) -> dict[str, object]:
    """Task `task` (a number, `parse_task_id`'s) with its moves and its latest work-log lines.

    Raises:
        NotFound: no such task.
        StorageError: the database cannot be read.
    """
    found = storage.task(task)
    if found is None:
        raise NotFound(f"no task TASK-{task}")
    out = task_dict(found, moves=MOVES_SHOWN, storage=storage)
    out["work_log"] = [work_log_dict(e) for e in storage.work_log(task=task, limit=20)]
    return out
