"""storage/brain.py (BrainStore) on every backend: tasks and their moves, the work log and
full-text search, and the migration that made older observations searchable. One spec per
operation, each run against SQLite and PostgreSQL.

The terms given to `search` are what brain.search.parse_query makes of a query: each a word's
letters and digits in lower case, several parts of one word space-separated (a phrase).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module

import pytest

from coding_os.storage.base import SearchDoc, SearchHit, SourceMark, Storage
from coding_os.storage.migrations.sqlite import MIGRATIONS
from tests.helpers import each_backend, observation

pytestmark = each_backend

TS = "2026-11-29T10:00:00.000Z"


def log_line(storage: Storage, text: str, session: str | None = "ses-a",
             task: int | None = None, ts: str = TS) -> int:
    return storage.append_work_log(session, "cli", task, text, ts).seq


def refs(hits: Sequence[SearchHit]) -> list[str]:
    return [hit.ref for hit in hits]


def test_tasks_are_numbered_from_one_and_their_creation_is_their_first_move(
        storage: Storage) -> None:
    first = storage.create_task("First", "", "todo", None, "ses-a", "cli", TS)
    second = storage.create_task("Second", "the body", "doing", "ses-b", "ses-b", "injected", TS)
    assert (first.n, first.id, second.n, second.id) == (1, "TASK-1", 2, "TASK-2")
    assert (second.title, second.body, second.status, second.owner, second.created_by,
            second.attributed_by) == ("Second", "the body", "doing", "ses-b", "ses-b",
                                      "injected")
    assert storage.task(2) == second and storage.task(3) is None
    (move,) = storage.task_moves(2)
    assert (move.task, move.from_status, move.to_status, move.owner, move.session,
            move.attributed_by, move.note) == (2, None, "doing", "ses-b", "ses-b", "injected",
                                               None)
    assert [t.n for t in storage.tasks()] == [1, 2]
    assert [t.n for t in storage.tasks(status="doing")] == [2]
    assert [t.n for t in storage.tasks(owner="ses-b")] == [2]
    assert [t.n for t in storage.tasks(after=1)] == [2]
    assert [t.n for t in storage.tasks(limit=1)] == [1]
    assert storage.task_moves(3) == []


def test_task_moves_are_kept_oldest_first_with_their_owner_and_note(storage: Storage) -> None:
    storage.create_task("Work", "", "todo", None, "ses-a", "cli", TS)
    storage.move_task(1, "doing", "ses-a", "ses-a", "panel", "2026-11-29T10:01:00.000Z", "start")
    storage.move_task(1, "blocked", "ses-a", "ses-a", "panel", "2026-11-29T10:02:00.000Z")
    done = storage.move_task(1, "done", "ses-a", "ses-b", "injected", "2026-11-29T10:03:00.000Z",
                             "finished")
    assert done is not None and (done.status, done.owner) == ("done", "ses-a")
    assert done.updated == "2026-11-29T10:03:00.000Z" and done.created == TS
    moves = storage.task_moves(1)
    assert [(m.from_status, m.to_status, m.session, m.note) for m in moves] == [
        (None, "todo", "ses-a", None), ("todo", "doing", "ses-a", "start"),
        ("doing", "blocked", "ses-a", None), ("blocked", "done", "ses-b", "finished")]
    assert [m.seq for m in moves] == sorted(m.seq for m in moves)
    assert storage.move_task(99, "done", None, "ses-a", "cli", TS) is None


def test_a_move_expecting_a_stale_status_or_owner_is_refused_and_changes_nothing(
        storage: Storage) -> None:
    storage.create_task("Claim me", "", "todo", None, "ses-a", "cli", TS)
    won = storage.move_task(1, "doing", "ses-a", "ses-a", "panel", TS,
                            expect_status="todo", expect_owner=None)
    assert won is not None and (won.status, won.owner) == ("doing", "ses-a")
    # a second claimer read the task while it was still todo
    assert storage.move_task(1, "doing", "ses-b", "ses-b", "panel", TS,
                             expect_status="todo", expect_owner=None) is None
    # right status, wrong owner
    assert storage.move_task(1, "done", "ses-b", "ses-b", "panel", TS,
                             expect_status="doing", expect_owner="ses-b") is None
    task = storage.task(1)
    assert task is not None and (task.status, task.owner) == ("doing", "ses-a")
    assert len(storage.task_moves(1)) == 2
    assert storage.move_task(1, "done", "ses-a", "ses-a", "panel", TS,
                             expect_status="doing", expect_owner="ses-a") is not None


def test_the_work_log_pages_newest_first_and_filters_by_session_and_task(
        storage: Storage) -> None:
    storage.create_task("T", "", "todo", None, None, "cli", TS)
    seqs = [log_line(storage, f"line {i}", session="ses-a" if i % 2 else "ses-b",
                     task=1 if i >= 3 else None) for i in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    assert [e.seq for e in storage.work_log()] == seqs[::-1]
    assert [e.seq for e in storage.work_log(limit=2)] == seqs[:2:-1]
    assert [e.seq for e in storage.work_log(before=seqs[3], limit=2)] == [seqs[2], seqs[1]]
    assert [e.text for e in storage.work_log(session="ses-a")] == ["line 3", "line 1"]
    assert [e.text for e in storage.work_log(task=1)] == ["line 4", "line 3"]
    entry = storage.work_log(limit=1)[0]
    assert (entry.session, entry.attributed_by, entry.task, entry.ts) == ("ses-b", "cli", 1, TS)


def test_search_finds_documents_holding_every_word_in_any_case_and_only_whole_words(
        storage: Storage) -> None:
    log_line(storage, "Fixed the Login bug in AuthService")
    log_line(storage, "login page styling")
    storage.create_task("Deploy LOGIN", "after the bug is fixed", "todo", None, None, "cli", TS)
    assert sorted(h.kind for h in storage.search(["login"])) == ["task", "work_log",
                                                                 "work_log"]
    both = storage.search(["login", "bug"])
    assert sorted(h.kind for h in both) == ["task", "work_log"]
    assert [h.text for h in storage.search(["authservice"])] == [
        "Fixed the Login bug in AuthService"]
    assert storage.search(["log"]) == []  # a word, never a prefix or substring
    assert storage.search(["login", "nowhere"]) == []
    assert storage.search([]) == []


def test_a_word_split_by_punctuation_is_found_as_a_phrase(storage: Storage) -> None:
    log_line(storage, "renamed foo_bar today")
    log_line(storage, "the foo-bar flag")
    log_line(storage, "bar foo reversed")
    log_line(storage, "foo and bar apart")
    assert sorted(h.text for h in storage.search(["foo bar"])) == ["renamed foo_bar today",
                                                                   "the foo-bar flag"]
    assert len(storage.search(["foo", "bar"])) == 4


def test_a_file_name_a_number_and_an_address_are_found_by_their_parts(
        storage: Storage) -> None:
    # PostgreSQL's default parser would keep each of these as one lexeme; parse_query makes
    # them phrases of their letters and digits, which both backends must find.
    log_line(storage, "mail ann@example.com about /usr/local/bin/cos")
    log_line(storage, "edited src/coding_os/brain/search.py and set pi to 3.14")
    assert len(storage.search(["search py"])) == 1
    assert len(storage.search(["search"])) == 1
    assert len(storage.search(["3 14"])) == 1
    assert len(storage.search(["ann example com"])) == 1
    assert len(storage.search(["usr local bin cos"])) == 1
    assert len(storage.search(["example"])) == 1


def test_search_filters_by_kind_and_session(storage: Storage) -> None:
    log_line(storage, "alpha from a", session="ses-a")
    log_line(storage, "alpha from b", session="ses-b")
    storage.create_task("alpha task", "", "todo", None, "ses-a", "cli", TS)
    storage.add_observations([observation("o1", "ses-b", text="alpha observed")])
    assert sorted(h.kind for h in storage.search(["alpha"], kinds=["work_log"])) == [
        "work_log", "work_log"]
    assert sorted(h.kind for h in storage.search(["alpha"], kinds=["task", "observation"])) == [
        "observation", "task"]
    assert sorted(h.text for h in storage.search(["alpha"], sessions=["ses-b"])) == [
        "alpha from b", "alpha observed"]
    assert storage.search(["alpha"], kinds=["transcript"]) == []


def test_search_results_come_newest_first_and_page_by_id_without_repeats(
        storage: Storage) -> None:
    for i in range(7):
        log_line(storage, f"paged entry number{i}")
    log_line(storage, "unrelated")
    everything = storage.search(["paged"], limit=100)
    assert [h.text for h in everything] == [f"paged entry number{i}" for i in range(6, -1, -1)]
    ids = [h.id for h in everything]
    assert ids == sorted(ids, reverse=True)
    walked: list[int] = []
    before = None
    while True:
        page = storage.search(["paged"], before=before, limit=3)
        if not page:
            break
        walked.extend(h.id for h in page)
        before = page[-1].id
    assert walked == ids


def test_an_observation_stored_twice_has_one_search_document(storage: Storage) -> None:
    row = observation("o-zebra", "ses-a", text="a zebra crossed")
    assert storage.add_observations([row]) == 1
    assert storage.add_observations([row, observation("o-other", "ses-a", text="zebra again")]) == 1
    storage.add_observations([observation("o-none", "ses-a", text=None), observation("o-empty", "ses-a", text="")])
    hits = storage.search(["zebra"])
    assert [(h.kind, h.ref) for h in hits] == [("observation", "o-other"),
                                               ("observation", "o-zebra")]
    assert hits[1].session == "ses-a" and hits[1].text == "a zebra crossed"


def source_doc(ref: str, text: str, session: str = "s-t") -> SearchDoc:
    return SearchDoc("transcript", ref, session, TS, text)


def test_source_documents_move_the_mark_and_are_never_duplicated(storage: Storage) -> None:
    assert storage.source_marks() == {}
    docs = [source_doc("k:0", "first message"), source_doc("k:40", "second message")]
    assert storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 80, "tail1"), docs) == 2
    assert storage.source_marks() == {"/t/a.jsonl": SourceMark("/t/a.jsonl", 7, 80, "tail1")}
    assert storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 80, "tail1"), docs) == 0
    assert len(storage.search(["message"])) == 2
    assert storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 120, "tail2"),
                                   [source_doc("k:80", "third message")]) == 1
    assert storage.source_marks()["/t/a.jsonl"].read_to == 120
    assert len(storage.search(["message"])) == 3


def test_a_document_replaced_in_place_keeps_its_id_and_is_found_by_its_new_text_only(
        storage: Storage) -> None:
    storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 10, "t"), [source_doc("k:0", "old words")])
    log_line(storage, "newer entry")
    (old,) = storage.search(["old"])
    storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 10, "t"),
                            [source_doc("k:0", "fresh words")])
    assert storage.search(["old"]) == []
    (fresh,) = storage.search(["fresh"])
    assert fresh.id == old.id and fresh.text == "fresh words"
    assert [h.text for h in storage.search(["words"])] == ["fresh words"]


def test_a_restart_drops_only_that_files_documents(storage: Storage) -> None:
    storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 80, "t"),
                            [source_doc("a:0", "apple one"), source_doc("a:40", "apple two")])
    storage.add_source_docs(SourceMark("/t/b.jsonl", 8, 40, "t"), [source_doc("b:0", "apple b")])
    log_line(storage, "apple in the log")
    added = storage.add_source_docs(SourceMark("/t/a.jsonl", 9, 30, "u"),
                                    [source_doc("a:0", "apple rewritten")], restart=True)
    assert added == 1
    assert sorted(h.text for h in storage.search(["apple"])) == [
        "apple b", "apple in the log", "apple rewritten"]
    assert storage.source_marks()["/t/a.jsonl"] == SourceMark("/t/a.jsonl", 9, 30, "u")
    assert storage.search(["one"]) == [] and storage.search(["two"]) == []


def test_a_removed_source_takes_its_documents_and_mark_with_it(storage: Storage) -> None:
    storage.add_source_docs(SourceMark("/t/a.jsonl", 7, 80, "t"),
                            [source_doc("a:0", "walrus one"), source_doc("a:40", "walrus two")])
    storage.add_source_docs(SourceMark("/t/b.jsonl", 8, 40, "t"), [source_doc("b:0", "walrus b")])
    assert storage.remove_source("/t/a.jsonl") == 2
    assert [h.text for h in storage.search(["walrus"])] == ["walrus b"]
    assert list(storage.source_marks()) == ["/t/b.jsonl"]
    assert storage.remove_source("/t/a.jsonl") == 0


def test_accents_are_kept_the_same_way_on_both_backends(storage: Storage) -> None:
    log_line(storage, "un café noir")
    assert [h.text for h in storage.search(["café"])] == ["un café noir"]
    assert storage.search(["cafe"]) == []


def test_a_task_is_found_by_its_title_and_body(storage: Storage) -> None:
    storage.create_task("Write the parser", "handle quoted strings", "todo", None, "ses-a",
                        "cli", TS)
    (hit,) = storage.search(["quoted", "parser"])
    assert (hit.kind, hit.ref, hit.session) == ("task", "TASK-1", "ses-a")


def test_migration_4_makes_the_observations_stored_before_it_searchable(
        storage_backend: str, open_database: Callable[[], Storage],
        monkeypatch: pytest.MonkeyPatch) -> None:
    module, open_it = import_module(f"coding_os.storage.{storage_backend}"), open_database
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", getattr(module, "MIGRATIONS")[:3])
        old = open_it()
        try:
            assert old.schema_version() == 3
            placeholder = "?" if storage_backend == "sqlite" else "%s"
            # coding-os at version 3 stored observations without search documents
            with old._transaction() as conn:  # type: ignore[attr-defined]
                for oid, text in (("o1", "kingfisher seen early"), ("o2", None),
                                  ("o3", "kingfisher seen late")):
                    conn.execute("INSERT INTO observations (oid, session, agent, panel, ts, "
                                 "event, tool, text, data) VALUES "
                                 f"({', '.join([placeholder] * 9)})",
                                 (oid, "ses-old", "claude", "p1", TS, "PostToolUse", None, text,
                                  "{}"))
        finally:
            old.close()
    storage = open_it()
    try:
        assert storage.schema_version() == len(MIGRATIONS)
        assert refs(storage.search(["kingfisher"])) == ["o3", "o1"]
        storage.add_observations([observation("o4", "ses-new", text="kingfisher seen again")])
        log_line(storage, "a kingfisher in the log")
        hits = storage.search(["kingfisher"])
        assert refs(hits) == ["1", "o4", "o3", "o1"]
        assert len({h.id for h in hits}) == 4
    finally:
        storage.close()


@pytest.mark.slow
def test_of_sixteen_connections_claiming_one_task_at_once_exactly_one_wins(
        storage: Storage, open_database: Callable[[], Storage]) -> None:
    storage.create_task("Contended", "", "todo", None, None, "cli", TS)
    start = threading.Barrier(16)

    def claim(i: int) -> bool:
        own = open_database()  # a connection of its own
        try:
            start.wait(timeout=30)
            return own.move_task(1, "doing", f"ses-{i}", f"ses-{i}", "panel", TS,
                                 expect_status="todo", expect_owner=None) is not None
        finally:
            own.close()

    with ThreadPoolExecutor(16) as pool:
        won = list(pool.map(claim, range(16)))
    assert won.count(True) == 1
    winner = f"ses-{won.index(True)}"
    task = storage.task(1)
    assert task is not None and (task.status, task.owner) == ("doing", winner)
    assert [(m.to_status, m.owner) for m in storage.task_moves(1)] == [("todo", None),
                                                                      ("doing", winner)]


def test_concurrent_writers_number_tasks_and_work_log_lines_without_gaps_or_repeats(
        storage: Storage, open_database: Callable[[], Storage]) -> None:
    start = threading.Barrier(8)

    def write(i: int) -> tuple[int, int]:
        own = open_database()
        try:
            start.wait(timeout=30)
            task = own.create_task(f"task {i}", "", "todo", None, f"ses-{i}", "cli", TS)
            line = own.append_work_log(f"ses-{i}", "cli", task.n, f"concurrent line {i}", TS)
            return task.n, line.seq
        finally:
            own.close()

    with ThreadPoolExecutor(8) as pool:
        written = list(pool.map(write, range(8)))
    assert sorted(n for n, _ in written) == list(range(1, 9))
    assert len({seq for _, seq in written}) == 8
    assert len(storage.search(["concurrent"], limit=100)) == 8

