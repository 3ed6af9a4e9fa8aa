"""The brain (DESIGN.md §8): the project's tasks and their moves, the work log, and the
documents the full-text search finds (observations, work-log lines, tasks, transcripts).

Conformance: tests/storage/test_brain.py.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "BrainStore", "SEARCH_KINDS", "SearchDoc", "SearchHit", "SourceMark", "TASK_STATUSES", "Task",
    "TaskMove", "WorkLogEntry", "task_text",
]

TASK_STATUSES = ("todo", "doing", "blocked", "done")
SEARCH_KINDS = ("observation", "work_log", "task", "transcript")


@dataclass
class Task:
    """A task of the project's shared board; its id is `TASK-<n>`."""

    n: int
    title: str
    body: str
    status: str
    owner: str | None
    created: str
    updated: str
    created_by: str | None = None
    attributed_by: str | None = None  # how the creating session was known (see brain.attribution)

    @property
    def id(self) -> str:
        return f"TASK-{self.n}"


def task_text(title: str, body: str) -> str:
    """What the search finds a task by: its title, then its body."""
    return f"{title}\n{body}" if body else title


@dataclass
class TaskMove:
    """One change of a task's status (its creation is the first, from None)."""

    seq: int
    task: int
    from_status: str | None
    to_status: str
    owner: str | None
    session: str | None
    attributed_by: str | None
    ts: str
    note: str | None = None


@dataclass
class WorkLogEntry:
    """One line of the work log: what a session did, optionally for a task."""

    seq: int
    session: str | None
    attributed_by: str | None
    task: int | None
    text: str
    ts: str


@dataclass
class SearchDoc:
    """A text the full-text search finds: `kind` and `ref` name it uniquely."""

    kind: str  # one of SEARCH_KINDS
    ref: str
    session: str | None
    ts: str
    text: str


@dataclass
class SearchHit:
    """One search result; `id` orders results (newest first) and pages them."""

    id: int
    kind: str
    ref: str
    session: str | None
    ts: str
    text: str


@dataclass
class SourceMark:
    """How far a transcript file has been read into the search documents."""

    source: str
    inode: int
    read_to: int
    tail: str


class BrainStore(abc.ABC):
    """Tasks, their moves, the work log and the search documents; each task and work-log line
    is a search document too, written in the same transaction."""

    @abc.abstractmethod
    def create_task(self, title: str, body: str, status: str, owner: str | None,
                    session: str | None, attributed_by: str | None, ts: str) -> Task:
        """Add a task (and its first move, from nothing to `status`) and its search document.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def task(self, n: int) -> Task | None:
        """The task TASK-`n`, or None.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def tasks(self, status: str | None = None, owner: str | None = None, after: int = 0,
              limit: int = 50) -> list[Task]:
        """Tasks by number, those numbered above `after`, at most `limit`.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def move_task(self, n: int, status: str, owner: str | None, session: str | None,
                  attributed_by: str | None, ts: str, note: str | None = None,
                  expect_status: str | None = None,
                  expect_owner: str | None = None) -> Task | None:
        """Set a task's status and owner and record the move, in one transaction; None when
        there is no such task. With `expect_status`, the move happens only while the task is
        in that status and owned by `expect_owner` (compare and set); else None is returned
        too, and the caller re-reads the task to tell why.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def task_moves(self, n: int) -> list[TaskMove]:
        """A task's moves, oldest first.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def append_work_log(self, session: str | None, attributed_by: str | None, task: int | None,
                        text: str, ts: str) -> WorkLogEntry:
        """Add a work-log line and its search document.

        Raises:
            StorageError: the database cannot be written.
        """

    @abc.abstractmethod
    def work_log(self, session: str | None = None, task: int | None = None, before: int | None = None,
                 limit: int = 50) -> list[WorkLogEntry]:
        """Work-log lines, newest first, those numbered below `before`, at most `limit`.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def search(self, terms: Sequence[str], kinds: Sequence[str] | None = None,
               sessions: Sequence[str] | None = None, before: int | None = None,
               limit: int = 20) -> list[SearchHit]:
        """Documents holding every one of `terms` (whole words, any case), newest first, those
        with an id below `before`, of one of `sessions` when given, at most `limit`. The cost
        follows the page, not the table.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def source_marks(self) -> dict[str, SourceMark]:
        """How far each transcript file has been read into the search documents.

        Raises:
            StorageError: the database cannot be read.
        """

    @abc.abstractmethod
    def add_source_docs(self, mark: SourceMark, docs: Sequence[SearchDoc],
                        restart: bool = False) -> int:
        """Add a transcript file's newly read documents and move its mark, in one transaction;
        with `restart`, first drop every document read from that file (it was rewritten).
        Returns how many documents were new.

        Raises:
            StorageError: the database cannot be written; neither documents nor mark change.
        """

    @abc.abstractmethod
    def remove_source(self, source: str) -> int:
        """Forget a transcript file that is gone: its documents and its mark, in one
        transaction; return how many documents were removed.

        Raises:
            StorageError: the database cannot be written.
        """
