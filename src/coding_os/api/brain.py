"""The brain (DESIGN.md §8): tasks, the work log and search, in coding_os.brain. `who` is the
session a write is filed under (brain.attribution); the command line leaves it None and gets
the caller's panel or active session."""

from __future__ import annotations

from coding_os.api.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from coding_os.brain.attribution import Attribution
    from coding_os.sessions.index import Progress

__all__ = ["task_create", "task_move", "task_list", "task_show", "work_log_append", "work_log",
           "search"]


def task_create(title: object, body: object = None, status: object = "todo",
                who: Attribution | None = None, env: Mapping[str, str] | None = None,
                cwd: str | None = None) -> dict[str, object]:
    """Add a task to the project's board; returns it as JSON.

    Raises:
        InvalidInput: empty or too long title, too long body, unknown status.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    project = Project(env, cwd)
    with project.storage() as storage:
        task = tasks.create_task(storage, project.tiers, title, body, _who(project, who),
                                 status, redacting=project.redacting)
        return tasks.task_dict(task, moves=tasks.MOVES_IN_RESULT, storage=storage)


def task_move(task: object, status: object, note: object = None, force: bool = False,
              who: Attribution | None = None, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """Move a task to another status (to `doing`: claim it); returns it as JSON.

    Raises:
        InvalidInput: a bad task id, status or note.
        NotFound: no such task.
        Conflict: another session is doing it (without `force`), or it changed meanwhile.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    project = Project(env, cwd)
    with project.storage() as storage:
        moved = tasks.move_task(storage, project.tiers, task, status, _who(project, who), note,
                                force, redacting=project.redacting)
        return tasks.task_dict(moved, moves=tasks.MOVES_IN_RESULT, storage=storage)


def task_list(status: object = None, owner: str | None = None, cursor: object = None,
              limit: object = 50, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """A page of tasks by number: `{"tasks": [...], "next_cursor": TASK-n or None}`.

    Raises:
        InvalidInput: an unknown status, a bad cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    state, after, size = tasks.task_page_query(status, cursor, limit)
    with Project(env, cwd).storage() as storage:
        return tasks.task_page(storage, state, owner, after, size)


def task_show(task: object, env: Mapping[str, str] | None = None,
              cwd: str | None = None) -> dict[str, object]:
    """A task with its moves and its latest work-log lines.

    Raises:
        InvalidInput: a bad task id.
        NotFound: no such task.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    number = tasks.parse_task_id(task)
    with Project(env, cwd).storage() as storage:
        return tasks.show_task(storage, number)


def work_log_append(text: object, task: object = None, who: Attribution | None = None,
                    env: Mapping[str, str] | None = None,
                    cwd: str | None = None) -> dict[str, object]:
    """Add a line to the project's work log; returns it as JSON.

    Raises:
        InvalidInput: empty or too long text, a bad task id.
        NotFound: the task does not exist.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    project = Project(env, cwd)
    with project.storage() as storage:
        entry = tasks.append_work_log(storage, text, _who(project, who), task,
                                      redacting=project.redacting)
        return tasks.work_log_dict(entry)


def work_log(session: str | None = None, task: object = None, cursor: object = None,
             limit: object = 50, env: Mapping[str, str] | None = None,
             cwd: str | None = None) -> dict[str, object]:
    """A page of the work log, newest first: `{"entries": [...], "next_cursor": N or None}`.

    Raises:
        InvalidInput: a bad task id, cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain import tasks

    number, before, size = tasks.work_log_page_query(task, cursor, limit)
    with Project(env, cwd).storage() as storage:
        return tasks.work_log_page(storage, session, number, before, size)


def search(query: object, kinds: list[str] | None = None, session: str | None = None,
           cursor: object = None, limit: object = 20, progress: Progress | None = None,
           env: Mapping[str, str] | None = None, cwd: str | None = None) -> dict[str, object]:
    """A page of what the agents did that holds every word of `query` (observations, work log,
    tasks, transcripts), newest first: `{"results": [...], "next_cursor": N or None}`; a
    session started since the last import is searchable too.

    Raises:
        InvalidInput: a query without words, too long, a bad kind, cursor or limit.
        StorageError: the database cannot be used.
    """
    from coding_os.brain.search import check_request, search_synced

    before, size = check_request(query, cursor, limit)  # refused before anything is read
    project = Project(env, cwd)
    with project.storage() as storage:
        project.lookup_refresh(storage)
        return search_synced(storage, project.tiers, query, kinds, session, before, size,
                             progress)


def _who(project: Project, who: Attribution | None) -> Attribution:
    """`who`, else the caller's panel or active session (brain.attribution)."""
    from coding_os.brain.attribution import attribute

    return who if who is not None else attribute(project.caller, env=project.env, synthetic=None)
