"""storage/index.py (IndexStore) on every backend: the session index (DESIGN.md §4.2), its
user-set names and the host of each row, and the migrations that changed it. One spec per
operation, each run against SQLite and PostgreSQL."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from importlib import import_module

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.storage.base import IndexRow, Storage
from coding_os.storage.migrations.sqlite import MIGRATIONS
from tests.helpers import STORABLE_TEXTS, each_backend, index_row

pytestmark = each_backend

TS = "2026-11-29T10:00:00.000Z"


def test_index_rows_are_upserted_and_counted_as_new_once(storage: Storage) -> None:
    rows = [index_row("a", native_id="n-a", title="first", messages=3, tokens=10),
            index_row("b", agent="codex", kind="codex", native_id="n-b")]
    assert storage.upsert_index_rows(rows) == 2
    assert storage.upsert_index_rows([index_row("a", native_id="n-a", title="second")]) == 0
    assert storage.index_count() == 2
    found = storage.index_row("a")
    assert found is not None and (found.title, found.messages) == ("second", 0)
    assert storage.upsert_index_rows([]) == 0


def test_an_index_row_is_found_by_id_or_native_id_and_the_id_wins(storage: Storage) -> None:
    storage.upsert_index_rows([
        index_row("ses-claude-20261129-100000-aaaa", native_id="u-1"),
        index_row("u-2", native_id="ses-claude-20261129-100000-aaaa", agent="codex",
                  kind="codex", last_active="2026-11-30T00:00:00.000Z"),
    ])
    by_native = storage.index_row("u-1")
    assert by_native is not None and by_native.id == "ses-claude-20261129-100000-aaaa"
    exact = storage.index_row("ses-claude-20261129-100000-aaaa")
    assert exact is not None and exact.id == "ses-claude-20261129-100000-aaaa"
    assert storage.index_row("nothing") is None


def test_index_rows_are_listed_most_recent_first_and_filtered(storage: Storage) -> None:
    storage.upsert_index_rows([
        index_row("a", last_active="2026-11-29T10:00:00.000Z", title="Fix the 100% bug"),
        index_row("b", agent="codex", kind="codex", last_active="2026-11-29T12:00:00.000Z",
                  cwd="/work/repo/sub"),
        index_row("c", last_active="2026-11-29T11:00:00.000Z", cwd="/work/repo-other",
                  project="/work/Repo-Other"),
        index_row("d", last_active="2026-11-29T09:00:00.000Z", cwd=None, title="under_score"),
    ])
    assert [r.id for r in storage.index_rows()] == ["b", "c", "a", "d"]
    assert [r.id for r in storage.index_rows(limit=2)] == ["b", "c"]
    assert storage.index_rows(limit=0) == []
    assert [r.id for r in storage.index_rows(agent="claude")] == ["c", "a", "d"]
    assert [r.id for r in storage.index_rows(kind="codex")] == ["b"]
    assert [r.id for r in storage.index_rows(cwd_under=["/work/repo"])] == ["b", "a"]
    assert [r.id for r in storage.index_rows(cwd_under=["/work/repo/", "/work/repo-other"])] \
        == ["b", "c", "a"]
    assert storage.index_rows(cwd_under=[]) == []
    # search: case-insensitive substring; LIKE wildcards in the query match themselves
    assert [r.id for r in storage.index_rows(search="100%")] == ["a"]
    assert [r.id for r in storage.index_rows(search="REPO-OTHER")] == ["c"]
    assert [r.id for r in storage.index_rows(search="po_ot")] == []
    assert [r.id for r in storage.index_rows(search="under_")] == ["d"]


def test_index_rows_filter_by_branch(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("a", branch="main"), index_row("b", branch="feature"),
                               index_row("c", branch=None)])
    assert [r.id for r in storage.index_rows(branch="feature")] == ["b"]
    assert len(storage.index_rows(branch=None)) == 3


def test_a_native_row_linked_to_a_cos_id_later_replaces_its_native_row(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("u-1", native_id="u-1")])
    storage.upsert_index_rows([index_row("ses-claude-20261129-100000-aaaa", native_id="u-1")])
    assert [r.id for r in storage.index_rows()] == ["ses-claude-20261129-100000-aaaa"]


def test_the_rows_of_one_upsert_apply_in_order_as_upserts_one_by_one(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("old", native_id="n-old", title="kept")])
    many = [index_row(f"b-{i}", native_id=f"n-b-{i}") for i in range(600)]
    batch = [index_row("u-1", native_id="u-1", title="native"),
             index_row("x", native_id="n-x", title="first"),
             index_row("ses-claude-20261129-100000-aaaa", native_id="u-1", title="linked"),
             index_row("x", native_id="n-x", title="second"), *many]
    assert storage.upsert_index_rows(batch) == 3 + 600
    assert {r.id: r.title for r in storage.index_rows() if not r.id.startswith("b-")} == {
        "old": "kept", "x": "second", "ses-claude-20261129-100000-aaaa": "linked"}
    # Many rows (more than one query's worth of ids), new ones and one already indexed.
    again = [index_row(f"c-{i}", native_id=f"n-c-{i}") for i in range(600)]
    assert storage.upsert_index_rows(
        [*again, index_row("b-0", native_id="n-b-0", title="again")]) == 600
    found = storage.index_row("b-0")
    assert found is not None and found.title == "again"
    assert storage.index_count() == 1203


def test_a_user_set_name_survives_upserts_and_a_cleared_index(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("a"), index_row("b")])
    assert storage.set_name("a", "my work") is True
    assert storage.set_name("zz", "nothing") is False
    storage.upsert_index_rows([index_row("a", title="t")])
    found = storage.index_row("a")
    assert found is not None and found.name == "my work"
    assert [r.id for r in storage.index_rows(search="MY WORK")] == ["a"]
    storage.clear_index()
    assert storage.index_count() == 0 and storage.index_rows() == []
    storage.upsert_index_rows([index_row("a"), index_row("b")])
    again = storage.index_row("a")
    assert again is not None and again.name == "my work"
    assert storage.set_name("a", None) is True
    cleared = storage.index_row("a")
    assert cleared is not None and cleared.name is None


def test_a_removed_index_row_is_gone_with_its_name(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("a")])
    storage.set_name("a", "n")
    assert storage.remove_index_row("a") is True
    assert storage.remove_index_row("a") is False
    storage.upsert_index_rows([index_row("a")])
    found = storage.index_row("a")
    assert found is not None and found.name is None


def test_an_index_row_round_trips_every_field(storage: Storage) -> None:
    row = index_row("ses-cos-20261129-100000-aaaa", agent="cos", kind="cos", native_id="n",
                    title="t \ud800", project="/p", worktree="/p/wt", cwd="/p/wt/x",
                    branch="main", created="2026-11-29T09:00:00.000Z", messages=7,
                    tokens=2**40, forked_from="ses-cos-20261129-090000-bbbb", parent=None,
                    status="open", source_path="/p/.coding-os/cos/transcripts/x.jsonl",
                    first_prompt="fix the\nlogin \ud800 page", last_prompt="now the tests")
    storage.upsert_index_rows([row])
    found = storage.index_row(row.id)
    assert found == IndexRow(**{**row.__dict__, "title": "t \ufffd",
                                "first_prompt": "fix the\nlogin \ufffd page"})
    listed = storage.index_rows()
    assert [(r.first_prompt, r.last_prompt) for r in listed] == [
        ("fix the\nlogin \ufffd page", "now the tests")]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.none() | STORABLE_TEXTS, last=st.none() | STORABLE_TEXTS)
def test_first_and_last_prompts_round_trip_and_an_upsert_replaces_them(
        storage: Storage, first: str | None, last: str | None) -> None:
    sid = "s-" + secrets.token_hex(6)
    storage.upsert_index_rows([index_row(sid, first_prompt="before", last_prompt="before")])
    storage.upsert_index_rows([index_row(sid, first_prompt=first, last_prompt=last)])
    found = storage.index_row(sid)
    assert found is not None and (found.first_prompt, found.last_prompt) == (first, last)


def _open_at_version_2(backend: str, open_database: Callable[[], Storage],
                       monkeypatch: pytest.MonkeyPatch) -> Callable[[], Storage]:
    """Migrate a fresh database of `backend` to schema version 2 only (as the coding-os before
    first/last prompts left it); return what opens it with this coding-os's migrations."""
    module, open_it = import_module(f"coding_os.storage.{backend}"), open_database
    migrations = getattr(module, "MIGRATIONS")
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", migrations[:2])
        old = open_it()
        try:
            assert old.schema_version() == 2
            old_row = IndexRow(id="old", agent="claude", kind="claude", native_id="n-old",
                               last_active="2026-11-29T10:00:00.000Z", title="kept")
            # coding-os at version 2 knew no prompt columns: write the row as it did.
            columns = INDEX_COLUMNS_V2
            placeholder = "?" if backend == "sqlite" else "%s"
            query = (f"INSERT INTO session_index ({', '.join(columns)}) "
                     f"VALUES ({', '.join([placeholder] * len(columns))})")
            with old._transaction() as conn:  # type: ignore[attr-defined]
                conn.execute(query, [getattr(old_row, c) for c in columns])
        finally:
            old.close()
    return open_it


INDEX_COLUMNS_V2 = ("id", "native_id", "agent", "kind", "title", "name", "project", "worktree",
                    "cwd", "branch", "created", "last_active", "messages", "tokens",
                    "forked_from", "parent", "status", "source_path")


def test_a_version_2_index_upgrades_and_its_old_rows_have_no_prompts_until_reindexed(
        storage_backend: str, open_database: Callable[[], Storage],
        monkeypatch: pytest.MonkeyPatch) -> None:
    open_it = _open_at_version_2(storage_backend, open_database, monkeypatch)
    storage = open_it()  # this coding-os migrates it on open
    try:
        assert storage.schema_version() == len(MIGRATIONS) >= 3
        old = storage.index_row("old")
        assert old is not None and (old.title, old.first_prompt, old.last_prompt) == (
            "kept", None, None)
        assert [r.id for r in storage.index_rows()] == ["old"]
        storage.upsert_index_rows([IndexRow(id="old", agent="claude", kind="claude",
                                            native_id="n-old",
                                            last_active="2026-11-29T10:00:00.000Z",
                                            title="kept", first_prompt="hello",
                                            last_prompt="bye")])
        again = storage.index_row("n-old")
        assert again is not None and (again.first_prompt, again.last_prompt) == ("hello", "bye")
    finally:
        storage.close()


def test_index_rows_are_listed_by_host_and_a_row_without_one_is_the_local_hosts(
        storage: Storage) -> None:
    storage.upsert_index_rows([
        index_row("a", host="alpha", last_active="2026-11-29T10:00:00.000Z"),
        index_row("b", host="beta", last_active="2026-11-29T11:00:00.000Z"),
        index_row("old", last_active="2026-11-29T09:00:00.000Z"),
    ])
    assert [r.id for r in storage.index_rows()] == ["b", "a", "old"]
    assert [r.id for r in storage.index_rows(hosts=["alpha"], local_host="alpha")] == ["a", "old"]
    assert [r.id for r in storage.index_rows(hosts=["beta"], local_host="alpha")] == ["b"]
    assert [r.id for r in storage.index_rows(hosts=["beta"])] == ["b", "old"]
    assert [r.id for r in storage.index_rows(hosts=["alpha", "beta"], local_host="gamma")] \
        == ["b", "a"]
    assert storage.index_rows(hosts=[]) == []
    assert storage.index_row("b").host == "beta"  # type: ignore[union-attr]
    assert storage.index_hosts(["a", "b", "old", "nothing"]) == {
        "a": "alpha", "b": "beta", "old": None}


def test_a_row_of_another_host_with_the_same_id_does_not_replace_the_first(
        storage: Storage) -> None:
    storage.upsert_index_rows([index_row("same", host="alpha", title="from alpha")])
    assert storage.upsert_index_rows([index_row("same", host="beta", title="from beta")]) == 0
    kept = storage.index_row("same")
    assert kept is not None and (kept.host, kept.title) == ("alpha", "from alpha")
    storage.upsert_index_rows([index_row("same", host="alpha", title="again alpha")])
    assert storage.index_row("same").title == "again alpha"  # type: ignore[union-attr]
    # a row without a host (a caller that does not know it) updates it and keeps the host
    storage.upsert_index_rows([index_row("same", title="no host")])
    kept = storage.index_row("same")
    assert kept is not None and (kept.host, kept.title) == ("alpha", "no host")


def test_a_native_row_of_another_host_is_not_replaced_by_a_linked_cos_id(
        storage: Storage) -> None:
    storage.upsert_index_rows([index_row("n-1", native_id="n-1", host="alpha")])
    storage.upsert_index_rows([index_row("ses-x", native_id="n-1", host="beta")])
    assert sorted(r.id for r in storage.index_rows()) == ["n-1", "ses-x"]
    storage.upsert_index_rows([index_row("ses-y", native_id="n-1", host="alpha")])
    assert sorted(r.id for r in storage.index_rows()) == ["ses-x", "ses-y"]


def test_rehosting_the_index_gives_every_named_row_to_one_host(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("a", host="alpha"), index_row("b", host="beta"),
                               index_row("old")])
    assert storage.rehost_index("beta") == 1
    assert sorted((r.id, r.host) for r in storage.index_rows()) == [
        ("a", "beta"), ("b", "beta"), ("old", None)]
    assert storage.rehost_index("beta") == 0


@pytest.mark.slow
def test_clearing_one_hosts_index_leaves_the_other_hosts_rows(storage: Storage) -> None:
    storage.upsert_index_rows([index_row("a", host="alpha"), index_row("b", host="beta"),
                               index_row("old")])
    storage.clear_index(host="alpha", keep_unowned=True)
    assert sorted(r.id for r in storage.index_rows()) == ["b", "old"]
    storage.upsert_index_rows([index_row("a", host="alpha")])
    storage.clear_index(host="alpha")
    assert [r.id for r in storage.index_rows()] == ["b"]
    storage.clear_index()
    assert storage.index_count() == 0


@pytest.mark.slow
def test_migration_6_leaves_earlier_rows_without_a_host_and_lists_them_as_the_local_hosts(
        storage_backend: str, open_database: Callable[[], Storage],
        monkeypatch: pytest.MonkeyPatch) -> None:
    module, open_it = import_module(f"coding_os.storage.{storage_backend}"), open_database
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", getattr(module, "MIGRATIONS")[:5])
        old = open_it()
        try:
            assert old.schema_version() == 5
            placeholder = "?" if storage_backend == "sqlite" else "%s"
            with old._transaction() as conn:  # type: ignore[attr-defined]
                conn.execute("INSERT INTO session_index (id, agent, kind, last_active) VALUES "
                             f"({', '.join([placeholder] * 4)})",
                             ("ses-old", "claude", "claude", TS))
        finally:
            old.close()
    storage = open_it()
    try:
        assert storage.schema_version() == len(MIGRATIONS)
        row = storage.index_row("ses-old")
        assert row is not None and row.host is None
        assert [r.id for r in storage.index_rows(hosts=["here"], local_host="here")] == ["ses-old"]
        assert storage.index_rows(hosts=["there"], local_host="here") == []
        storage.upsert_index_rows([IndexRow(id="ses-old", agent="claude", kind="claude",
                                            last_active=TS, host="here")])
        assert storage.index_row("ses-old").host == "here"  # type: ignore[union-attr]
    finally:
        storage.close()

