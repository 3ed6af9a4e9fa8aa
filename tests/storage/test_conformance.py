"""One behaviour suite every storage backend must pass (SQLite and PostgreSQL).

The PostgreSQL tests run in a fresh schema of database `test` (COS_TEST_PG_URL, default
postgresql://postgres@127.0.0.1:5432/test) that is dropped afterwards. When the server cannot be
reached they are skipped, or fail under CI=true.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coding_os.storage.base import (
    IndexRow,
    Observation,
    ReplicaSource,
    SearchDoc,
    SearchHit,
    SessionRecord,
    SessionSummary,
    SourceMark,
    Storage,
    StorageError,
)
from coding_os.storage.migrations.postgres import MIGRATIONS as PG_MIGRATIONS
from coding_os.storage.migrations.sqlite import MIGRATIONS
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import PG_URL


def _postgres(request: pytest.FixtureRequest, tmp: Path) -> Storage:
    from coding_os.storage.postgres import PostgresStorage

    url: str = request.getfixturevalue("pg_url")
    return PostgresStorage(url)


BACKENDS: dict[str, Callable[[pytest.FixtureRequest, Path], Storage]] = {
    "sqlite": lambda request, tmp: SQLiteStorage(str(tmp / "state" / "coding-os.db")),
    "postgres": _postgres,
}


@pytest.fixture(params=sorted(BACKENDS))
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    backend = BACKENDS[request.param](request, tmp_path)
    yield backend
    backend.close()


def session(sid: str, **fields: object) -> SessionRecord:
    base: dict[str, object] = dict(id=sid, agent="claude", panel="p1", native_id="n-" + sid,
                                   started="2026-11-29T10:00:00.000Z",
                                   last_active="2026-11-29T10:00:00.000Z")
    base.update(fields)
    return SessionRecord(**base)  # type: ignore[arg-type]


def obs(oid: str, sid: str, event: str = "PostToolUse", **fields: object) -> Observation:
    return Observation(oid=oid, session=sid, agent="claude", panel="p1",
                       ts="2026-11-29T10:00:01.000Z", event=event, **fields)  # type: ignore[arg-type]


def test_a_fresh_database_is_migrated_to_the_latest_version(storage: Storage) -> None:
    assert storage.schema_version() == len(MIGRATIONS)
    assert storage.migrate() == len(MIGRATIONS)  # idempotent


def test_sessions_upsert_and_lookup_by_id_and_native_id(storage: Storage) -> None:
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa"))
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa", status="ended"))
    found = storage.session("ses-claude-20261129-100000-aaaa")
    assert found is not None and found.status == "ended"
    by_native = storage.session_by_native("claude", "n-ses-claude-20261129-100000-aaaa")
    assert by_native is not None and by_native.id == found.id
    assert storage.session_by_native("codex", "n-ses-claude-20261129-100000-aaaa") is None
    assert storage.session("ses-claude-20261129-100000-ffff") is None


def test_touch_moves_last_activity_forward_only(storage: Storage) -> None:
    sid = "ses-claude-20261129-100000-aaaa"
    storage.upsert_session(session(sid))
    storage.touch_session(sid, "2026-11-29T12:00:00.000Z")
    storage.touch_session(sid, "2026-11-29T11:00:00.000Z", status="ended")
    found = storage.session(sid)
    assert found is not None
    assert (found.last_active, found.status) == ("2026-11-29T12:00:00.000Z", "ended")


def test_a_sessions_fork_point_is_kept_by_a_later_upsert_that_does_not_know_it(
        storage: Storage) -> None:
    point = '{"checkpoint": "cp-20261129-100000-000-abcd", "uuid": "u1"}'
    storage.upsert_session(session("s1", forked_from="s0", fork_point=point))
    storage.upsert_session(session("s1", forked_from="s0", status="ended"))
    found = storage.session("s1")
    assert found is not None and found.fork_point == point and found.status == "ended"


def test_sessions_are_listed_most_recent_first(storage: Storage) -> None:
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa", last_active="2026-11-29T10:00:00Z"))
    storage.upsert_session(session("ses-codex-20261129-100000-bbbb", agent="codex",
                                   last_active="2026-11-29T11:00:00Z"))
    assert [s.id for s in storage.sessions()] == ["ses-codex-20261129-100000-bbbb",
                                                   "ses-claude-20261129-100000-aaaa"]
    assert [s.id for s in storage.sessions("claude")] == ["ses-claude-20261129-100000-aaaa"]


def test_observations_are_stored_once_per_oid(storage: Storage) -> None:
    rows = [obs("o1", "s1", tool="Bash", data={"ok": True}), obs("o2", "s1"), obs("o3", "s2")]
    assert storage.add_observations(rows) == 3
    assert storage.add_observations(rows[:2]) == 0
    assert [o.oid for o in storage.observations()] == ["o1", "o2", "o3"]
    first = storage.observations(session="s1")[0]
    assert (first.tool, first.data) == ("Bash", {"ok": True})


def test_text_with_lone_surrogates_is_stored_with_replacement_characters(storage: Storage) -> None:
    assert storage.add_observations([obs("o1", "s1", text="bad \ud800 text")]) == 1
    assert storage.observations()[0].text == "bad \ufffd text"
    storage.upsert_session(session("ses-claude-20261129-100000-aaaa", cwd="/odd/\udfff"))
    found = storage.session("ses-claude-20261129-100000-aaaa")
    assert found is not None and found.cwd == "/odd/\ufffd"


def test_a_summary_is_written_once_and_the_first_writer_wins(storage: Storage) -> None:
    first = SessionSummary(session="s1", agent="claude", panel="p1", reason="orphan", prompts=2,
                           files=["a.py"])
    assert storage.write_summary(first) is True
    assert storage.write_summary(SessionSummary(session="s1", agent="claude", panel="p1",
                                                reason="end:other")) is False
    stored = storage.summary("s1")
    assert stored is not None and (stored.reason, stored.prompts, stored.files) == ("orphan", 2, ["a.py"])
    assert storage.summary("s2") is None


def test_sqlite_database_is_in_wal_mode_and_private(tmp_path: Path) -> None:
    path = tmp_path / "s" / "coding-os.db"
    SQLiteStorage(str(path)).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
    assert names == [name for name, _ in MIGRATIONS]
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_database_from_a_newer_coding_os_is_refused(tmp_path: Path) -> None:
    from coding_os.storage.base import StorageError

    path = tmp_path / "coding-os.db"
    SQLiteStorage(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(StorageError, match="newer than this coding-os"):
        SQLiteStorage(str(path))


def test_a_failing_migration_leaves_the_schema_at_the_last_applied_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.storage import sqlite as sqlite_module

    path = tmp_path / "coding-os.db"
    SQLiteStorage(str(path)).close()
    broken = MIGRATIONS + [("0002_broken", "CREATE TABLE extra (x INTEGER); CREATE TABLE sessions (y)")]
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", broken)
    with pytest.raises(StorageError, match="migrating"):
        SQLiteStorage(str(path))
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "extra" not in tables  # the half-applied migration was rolled back whole


def test_observations_of_one_session_come_in_order_and_up_to_the_limit(storage: Storage) -> None:
    storage.add_observations([obs(f"o{i}", "s1" if i % 2 else "s2") for i in range(1, 8)])
    assert [o.oid for o in storage.observations(session="s1")] == ["o1", "o3", "o5", "o7"]
    assert [o.oid for o in storage.observations(session="s1", limit=2)] == ["o1", "o3"]
    assert [o.oid for o in storage.observations(limit=3)] == ["o1", "o2", "o3"]
    assert storage.observations(session="s9") == []


def test_a_nul_character_in_a_text_never_makes_the_batch_fail(storage: Storage) -> None:
    # A NUL in a prompt must not leave the spool unstorable. SQLite keeps it; PostgreSQL's TEXT
    # cannot hold one, so that backend stores U+FFFD in its place.
    assert storage.add_observations([obs("o1", "s1", text="a\x00b", data={"k": "v\x00"})]) == 1
    assert storage.write_summary(SessionSummary(session="s1", agent="claude", panel="p1",
                                                reason="orphan", last_prompt="x\x00"))
    stored = storage.observations()[0]
    assert stored.text in ("a\x00b", "a\ufffdb") and stored.data == {"k": "v\x00"}
    summary = storage.summary("s1")
    assert summary is not None and summary.last_prompt in ("x\x00", "x\ufffd")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3),
    max_leaves=8,
)
# Text UTF-8 can hold (lone surrogates are stored as U+FFFD: a test of their own covers them).
TEXTS = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.none() | TEXTS, text=st.none() | TEXTS,
       data=st.dictionaries(st.text(), JSON_VALUES, max_size=4))
def test_an_observation_round_trips_through_the_database(
        storage: Storage, tool: str | None, text: str | None, data: dict[str, object]) -> None:
    oid = secrets.token_hex(8)
    assert storage.add_observations([obs(oid, "s-" + oid, tool=tool, text=text, data=data)]) == 1
    (stored,) = storage.observations(session="s-" + oid)
    assert (stored.oid, stored.tool, stored.text, stored.data) == (oid, tool, text, data)


# PostgreSQL only


def test_postgres_migrations_keep_the_sqlite_versions() -> None:
    # Version N is the same logical schema in both dialects (placeholders keep them aligned).
    assert [name for name, _ in PG_MIGRATIONS] == [name for name, _ in MIGRATIONS]


def test_postgres_creates_the_schema_named_in_the_url_and_records_each_migration(
        pg_schemas: Callable[[bool], str]) -> None:
    import psycopg

    from coding_os.storage.postgres import PostgresStorage

    url = pg_schemas(False)
    PostgresStorage(url).close()
    with psycopg.connect(url) as conn:
        schema = conn.execute("SELECT current_schema()").fetchone()
        names = [r[0] for r in conn.execute("SELECT name FROM schema_migrations ORDER BY version")]
        tables = {r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")}
    assert schema is not None and schema[0] == url.rsplit("%3D", 1)[1]
    assert names == [name for name, _ in PG_MIGRATIONS]
    assert {"sessions", "observations", "session_summaries", "meta", "schema_migrations"} <= tables


def test_sixteen_concurrent_first_openers_of_a_fresh_postgres_schema_all_succeed(
        pg_schemas: Callable[[bool], str]) -> None:
    from coding_os.storage.postgres import PostgresStorage

    url = pg_schemas(False)  # not even the schema exists yet
    start = threading.Barrier(16)

    def open_one(_: int) -> int:
        start.wait(timeout=30)
        storage = PostgresStorage(url)
        try:
            return storage.schema_version()
        finally:
            storage.close()

    with ThreadPoolExecutor(16) as pool:
        versions = list(pool.map(open_one, range(16)))
    assert versions == [len(PG_MIGRATIONS)] * 16
    storage = PostgresStorage(url)
    try:
        assert storage.migrate() == len(PG_MIGRATIONS)
    finally:
        storage.close()


def test_a_failing_postgres_migration_leaves_the_schema_at_the_last_applied_version(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import psycopg

    from coding_os.storage import postgres as postgres_module

    postgres_module.PostgresStorage(pg_url).close()
    broken = PG_MIGRATIONS + [("0002_broken", "CREATE TABLE extra (x INTEGER); CREATE TABLE sessions (y INTEGER)")]
    monkeypatch.setattr(postgres_module, "MIGRATIONS", broken)
    with pytest.raises(StorageError, match="^migrating postgresql://postgres@"):
        postgres_module.PostgresStorage(pg_url)
    with psycopg.connect(pg_url) as conn:
        versions = [r[0] for r in conn.execute("SELECT version FROM schema_migrations")]
        extra = conn.execute("SELECT to_regclass('extra')").fetchone()
    assert versions == list(range(1, len(PG_MIGRATIONS) + 1))
    assert extra == (None,)  # the half-applied migration was rolled back whole


@pytest.mark.parametrize("url", ["postgresql://someone:s3cret@127.0.0.1:1/test",
                                 "postgres://someone:s3cret@127.0.0.1:1/test?connect_timeout=2"])
def test_an_unreachable_postgres_is_a_one_line_storage_error_without_the_password(
        url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("psycopg")
    from coding_os.storage import open_storage

    monkeypatch.setenv("COS_DATABASE_URL", url)
    with pytest.raises(StorageError) as caught:
        open_storage("/nonexistent/coding-os.db")
    message = str(caught.value)
    assert message.startswith("cannot open database postgresql://someone@127.0.0.1:1/test: ")
    assert "refused" in message and "s3cret" not in message and "\n" not in message


def test_open_storage_selects_postgres_for_postgresql_and_postgres_urls(
        pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.storage import open_storage
    from coding_os.storage.postgres import PostgresStorage

    for url in (pg_url, "postgres://" + pg_url.partition("://")[2]):
        monkeypatch.setenv("COS_DATABASE_URL", url)
        storage = open_storage(str(tmp_path / "unused.db"))
        try:
            assert isinstance(storage, PostgresStorage)
            assert storage.schema_version() == len(PG_MIGRATIONS)
        finally:
            storage.close()
    assert not (tmp_path / "unused.db").exists()


def test_a_postgres_connection_lost_under_the_backend_is_reopened(pg_url: str) -> None:
    import psycopg

    from coding_os.storage.postgres import PostgresStorage

    name = "cos-test-" + secrets.token_hex(6)  # an application_name in the URL is kept
    storage = PostgresStorage(pg_url + "&application_name=" + name)
    try:
        storage.upsert_session(session("ses-claude-20261129-100000-aaaa"))
        with psycopg.connect(PG_URL, autocommit=True) as admin:
            killed = admin.execute("SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                                   "WHERE application_name = %s", (name,)).fetchall()
        assert killed == [(True,)]
        with pytest.raises(StorageError, match="^database postgresql://"):
            storage.sessions()
        assert [s.id for s in storage.sessions()] == ["ses-claude-20261129-100000-aaaa"]
    finally:
        storage.close()


@pytest.mark.parametrize("options,schema", [
    ("-csearch_path=cos_a", "cos_a"),
    ("-c search_path=Cos_A,public", "cos_a"),
    ('-csearch_path="My\\ ""Schema""",public', 'My "Schema"'),  # a backslash escapes a space
    ("--search-path=b -c statement_timeout=0", "b"),
    ("-csearch_path=a -csearch_path=b", "b"),
    ("-csearch_path=$user,public", None),
    ("-c statement_timeout=0", None),
    ("", None),
])
def test_the_schema_is_read_from_libpq_options_as_the_server_reads_it(
        options: str, schema: str | None) -> None:
    pytest.importorskip("psycopg")
    from coding_os.storage.postgres import search_path_schema

    assert search_path_schema(options) == schema


def test_importing_the_storage_package_does_not_import_psycopg(tmp_path: Path) -> None:
    probe = ("import sys\n"
             "from coding_os.storage import open_storage\n"
             f"open_storage({str(tmp_path / 'coding-os.db')!r}).close()\n"
             "assert not [m for m in sys.modules if m.startswith('psycopg')], sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={k: v for k, v in os.environ.items() if k != "COS_DATABASE_URL"})
    assert proc.returncode == 0, proc.stderr


# The session index (DESIGN.md §4.2), on every backend


def index_row(sid: str, **fields: object) -> IndexRow:
    base: dict[str, object] = dict(id=sid, agent="claude", kind="claude", native_id=None,
                                   cwd="/work/repo", last_active="2026-11-29T10:00:00.000Z")
    base.update(fields)
    return IndexRow(**base)  # type: ignore[arg-type]


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
@given(first=st.none() | TEXTS, last=st.none() | TEXTS)
def test_first_and_last_prompts_round_trip_and_an_upsert_replaces_them(
        storage: Storage, first: str | None, last: str | None) -> None:
    sid = "s-" + secrets.token_hex(6)
    storage.upsert_index_rows([index_row(sid, first_prompt="before", last_prompt="before")])
    storage.upsert_index_rows([index_row(sid, first_prompt=first, last_prompt=last)])
    found = storage.index_row(sid)
    assert found is not None and (found.first_prompt, found.last_prompt) == (first, last)


def _backend_opener(backend: str, request: pytest.FixtureRequest,
                    tmp_path: Path) -> tuple[object, Callable[[], Storage]]:
    """The storage module of `backend` (whose MIGRATIONS a test may cut short) and what opens
    one database of it, the same each time."""
    from coding_os.storage import postgres as postgres_module
    from coding_os.storage import sqlite as sqlite_module

    if backend == "sqlite":
        return sqlite_module, lambda: sqlite_module.SQLiteStorage(str(tmp_path / "coding-os.db"))
    url: str = request.getfixturevalue("pg_url")
    return postgres_module, lambda: postgres_module.PostgresStorage(url)


def _open_at_version_2(backend: str, request: pytest.FixtureRequest, tmp_path: Path,
                       monkeypatch: pytest.MonkeyPatch) -> Callable[[], Storage]:
    """Migrate a fresh database of `backend` to schema version 2 only (as the coding-os before
    first/last prompts left it); return what opens it with this coding-os's migrations."""
    module, open_it = _backend_opener(backend, request, tmp_path)
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


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_a_version_2_index_upgrades_and_its_old_rows_have_no_prompts_until_reindexed(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    open_it = _open_at_version_2(backend, request, tmp_path, monkeypatch)
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


def test_sqlite_lists_a_page_of_the_index_without_sorting_the_whole_table(tmp_path: Path) -> None:
    storage = SQLiteStorage(str(tmp_path / "coding-os.db"))
    try:
        plan = " ".join(str(row[-1]) for row in storage._query(
            "EXPLAIN QUERY PLAN SELECT id FROM session_index "
            "ORDER BY last_active DESC, id DESC LIMIT 50"))
    finally:
        storage.close()
    assert "session_index_last_active" in plan and "TEMP B-TREE" not in plan


# The brain (DESIGN.md §8): tasks, their moves, the work log and full-text search, on every
# backend. The terms given to `search` are what brain.search.parse_query makes of a query: each
# a word's letters and digits in lower case, several parts of one word space-separated (a phrase).

TS = "2026-11-29T10:00:00.000Z"


def backend_of(request: pytest.FixtureRequest) -> str:
    return str(request.node.callspec.params["storage"])


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
    storage.add_observations([obs("o1", "ses-b", text="alpha observed")])
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
    row = obs("o-zebra", "ses-a", text="a zebra crossed")
    assert storage.add_observations([row]) == 1
    assert storage.add_observations([row, obs("o-other", "ses-a", text="zebra again")]) == 1
    storage.add_observations([obs("o-none", "ses-a", text=None), obs("o-empty", "ses-a", text="")])
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


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_migration_4_makes_the_observations_stored_before_it_searchable(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    module, open_it = _backend_opener(backend, request, tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", getattr(module, "MIGRATIONS")[:3])
        old = open_it()
        try:
            assert old.schema_version() == 3
            placeholder = "?" if backend == "sqlite" else "%s"
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
        storage.add_observations([obs("o4", "ses-new", text="kingfisher seen again")])
        log_line(storage, "a kingfisher in the log")
        hits = storage.search(["kingfisher"])
        assert refs(hits) == ["1", "o4", "o3", "o1"]
        assert len({h.id for h in hits}) == 4
    finally:
        storage.close()


def test_of_sixteen_connections_claiming_one_task_at_once_exactly_one_wins(
        storage: Storage, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    storage.create_task("Contended", "", "todo", None, None, "cli", TS)
    backend = backend_of(request)
    start = threading.Barrier(16)

    def claim(i: int) -> bool:
        own = BACKENDS[backend](request, tmp_path)  # a connection of its own
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
        storage: Storage, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    backend = backend_of(request)
    start = threading.Barrier(8)

    def write(i: int) -> tuple[int, int]:
        own = BACKENDS[backend](request, tmp_path)
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


# Several hosts (DESIGN.md §8): hosts of rows, replicated lines, project roots, published jobs


def source(session: str = "s1", stream: str = "transcript", host: str = "alpha",
           **fields: object) -> ReplicaSource:
    base: dict[str, object] = dict(session=session, stream=stream, host=host, agent="worker",
                                   path=f"/home/u/{session}.jsonl", project_key="git:abc",
                                   root="/home/u/repo")
    base.update(fields)
    return ReplicaSource(**base)  # type: ignore[arg-type]


def test_a_session_keeps_its_host_across_an_upsert_that_does_not_know_it(
        storage: Storage) -> None:
    storage.upsert_session(session("s1", host="alpha"))
    storage.upsert_session(session("s1", status="ended"))
    found = storage.session("s1")
    assert found is not None and (found.host, found.status) == ("alpha", "ended")
    storage.upsert_session(session("s2"))
    assert storage.session("s2").host is None  # type: ignore[union-attr]


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


LINES = [b'{"a": 1}', b"", b"caf\xc3\xa9 \xff\xfe not utf-8", b"nul \x00 and cr \r",
         b"\t  spaces  "]


def test_replicated_lines_are_stored_exactly_once_and_in_order(storage: Storage) -> None:
    numbered = list(enumerate(LINES, 1))
    assert storage.add_replica_lines(source(), numbered[:3]) == 3
    assert storage.add_replica_lines(source(), numbered[:3]) == 0  # a second run adds nothing
    assert storage.add_replica_lines(source(), numbered[2:]) == 2
    assert storage.replica_lines("s1", "transcript") == numbered
    assert storage.replica_lines("s1", "transcript", after=3) == numbered[3:]
    assert storage.replica_lines("s1", "transcript", after=1, limit=2) == numbered[1:3]
    stored = storage.replica_source("s1", "transcript")
    assert stored is not None
    assert (stored.lines, stored.host, stored.agent, stored.project_key, stored.root) == \
        (5, "alpha", "worker", "git:abc", "/home/u/repo")
    assert stored.updated
    assert storage.add_replica_lines(source(), []) == 0
    assert storage.replica_source("s1", "transcript").lines == 5  # type: ignore[union-attr]


def test_a_line_already_stored_under_its_seq_is_kept(storage: Storage) -> None:
    storage.add_replica_lines(source(), [(1, b"first")])
    assert storage.add_replica_lines(source(), [(1, b"other"), (2, b"second")]) == 1
    assert storage.replica_lines("s1", "transcript") == [(1, b"first"), (2, b"second")]


def test_the_replicated_count_is_the_highest_seq_without_a_gap_below(storage: Storage) -> None:
    storage.add_replica_lines(source(), [(1, b"a"), (3, b"c"), (4, b"d")])
    assert storage.replica_source("s1", "transcript").lines == 1  # type: ignore[union-attr]
    storage.add_replica_lines(source(), [(2, b"b")])
    assert storage.replica_source("s1", "transcript").lines == 4  # type: ignore[union-attr]
    assert [seq for seq, _ in storage.replica_lines("s1", "transcript")] == [1, 2, 3, 4]


def test_lines_of_the_same_session_id_from_another_host_are_refused(storage: Storage) -> None:
    storage.add_replica_lines(source(), [(1, b"alpha's line")])
    with pytest.raises(StorageError, match="host alpha"):
        storage.add_replica_lines(source(host="beta"), [(1, b"beta's"), (2, b"more")])
    with pytest.raises(StorageError, match="host alpha"):
        storage.add_replica_lines(source(host="beta", stream="native"), [(1, b"beta's")])
    assert storage.replica_lines("s1", "transcript") == [(1, b"alpha's line")]
    assert [s.stream for s in storage.replica_sources("s1")] == ["transcript"]
    assert storage.replica_source("s1", "transcript").host == "alpha"  # type: ignore[union-attr]


def test_bad_replicated_lines_are_refused_and_nothing_is_stored(storage: Storage) -> None:
    for bad in ([(0, b"x")], [(1, b"a\nb")], [(1, "text")]):
        with pytest.raises(StorageError):
            storage.add_replica_lines(source(), bad)  # type: ignore[arg-type]
    assert storage.replica_source("s1", "transcript") is None
    assert storage.replica_lines("s1", "transcript") == []


def test_a_session_has_one_source_per_stream_and_removing_one_keeps_the_others(
        storage: Storage) -> None:
    storage.add_replica_lines(source(stream="transcript"), [(1, b"t1"), (2, b"t2")])
    storage.add_replica_lines(source(stream="events"), [(1, b"e1")])
    storage.add_replica_lines(source("s2", stream="native"), [(1, b"n1")])
    assert [s.stream for s in storage.replica_sources("s1")] == ["events", "transcript"]
    assert storage.remove_replica("s1", "transcript") == 2
    assert storage.replica_source("s1", "transcript") is None
    assert storage.replica_lines("s1", "transcript") == []
    assert storage.replica_lines("s1", "events") == [(1, b"e1")]
    assert storage.remove_replica("s1", "transcript") == 0
    # started over after a removal, from 1
    assert storage.add_replica_lines(source(stream="transcript"), [(1, b"new")]) == 1
    assert storage.replica_source("s1", "transcript").lines == 1  # type: ignore[union-attr]


def test_a_project_is_mapped_to_its_root_on_each_host(storage: Storage) -> None:
    assert storage.project_hosts("git:abc") == {}
    storage.set_project_host("git:abc", "alpha", "/home/a/repo")
    storage.set_project_host("git:abc", "beta", "/srv/b/checkout")
    storage.set_project_host("git:abc", "alpha", "/home/a/moved")
    storage.set_project_host("origin:example.com/x", "alpha", "/elsewhere")
    assert storage.project_hosts("git:abc") == {"alpha": "/home/a/moved",
                                                "beta": "/srv/b/checkout"}


def test_published_jobs_replace_only_their_hosts_rows(storage: Storage) -> None:
    storage.publish_jobs("alpha", [{"id": "job-1", "status": "running", "n": 1},
                                   {"id": "job-2", "status": "done"}])
    storage.publish_jobs("beta", [{"id": "job-1", "status": "running", "note": "é"}])
    storage.publish_jobs("alpha", [{"id": "job-2", "status": "failed"}])
    assert storage.host_jobs() == [("alpha", {"id": "job-2", "status": "failed"}),
                                   ("beta", {"id": "job-1", "status": "running", "note": "é"})]
    assert storage.host_jobs("beta") == [("beta", {"id": "job-1", "status": "running",
                                                    "note": "é"})]
    with pytest.raises(StorageError):
        storage.publish_jobs("alpha", [{"status": "no id"}])
    assert storage.host_jobs("alpha") == [("alpha", {"id": "job-2", "status": "failed"})]
    storage.publish_jobs("alpha", [])
    assert storage.host_jobs("alpha") == []


def another_connection(storage: Storage, request: pytest.FixtureRequest) -> Storage:
    """A second connection to the same database as `storage` (another process's, in effect)."""
    if isinstance(storage, SQLiteStorage):
        return SQLiteStorage(storage.path)
    from coding_os.storage.postgres import PostgresStorage

    return PostgresStorage(request.getfixturevalue("pg_url"))


def test_two_hosts_replicating_one_session_id_at_once_never_mix_lines(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    stores = [storage, another_connection(storage, request)]
    try:
        def push(index: int) -> str:
            host = ("alpha", "beta")[index]
            try:
                for seq in range(1, 31):
                    stores[index].add_replica_lines(source(host=host, stream=f"st{seq % 2}"),
                                                    [(seq, host.encode())])
            except StorageError:
                return "refused"
            return "done"

        with ThreadPoolExecutor(2) as pool:
            outcomes = sorted(pool.map(push, range(2)))
        assert outcomes == ["done", "refused"]
        owners = {s.host for s in storage.replica_sources("s1")}
        assert len(owners) == 1
        lines = storage.replica_lines("s1", "st0") + storage.replica_lines("s1", "st1")
        assert {line for _, line in lines} == {owners.pop().encode()} and len(lines) == 30
    finally:
        stores[1].close()


def test_moving_a_session_gives_its_row_and_replicated_files_to_the_new_host(
        storage: Storage) -> None:
    storage.upsert_index_rows([index_row("ses-m", native_id="n-m", host="alpha"),
                               index_row("other", host="alpha")])
    storage.add_replica_lines(source("ses-m"), [(1, b"one"), (2, b"two")])
    storage.add_replica_lines(source("n-m", stream="native"), [(1, b"native")])
    storage.add_replica_lines(source("other"), [(1, b"kept")])
    assert storage.move_session("ses-m", "alpha", "beta") is True
    assert storage.index_row("ses-m").host == "beta"  # type: ignore[union-attr]
    assert storage.index_row("other").host == "alpha"  # type: ignore[union-attr]
    assert {(s.session, s.host, s.lines) for s in
            storage.replica_sources("ses-m") + storage.replica_sources("n-m")} == {
        ("ses-m", "beta", 2), ("n-m", "beta", 1)}
    assert storage.replica_source("other", "transcript").host == "alpha"  # type: ignore[union-attr]
    # the new owner goes on from the lines stored; the old one is refused
    assert storage.add_replica_lines(source("ses-m", host="beta", root="/b/repo"),
                                     [(3, b"three")]) == 1
    with pytest.raises(StorageError, match="host beta"):
        storage.add_replica_lines(source("ses-m"), [(4, b"alpha's")])
    assert [line for _, line in storage.replica_lines("ses-m", "transcript")] == [
        b"one", b"two", b"three"]
    # compare-and-set: a stale owner, or a session that is not there, changes nothing
    assert storage.move_session("ses-m", "alpha", "gamma") is False
    assert storage.move_session("nothing", "alpha", "gamma") is False
    assert storage.index_row("ses-m").host == "beta"  # type: ignore[union-attr]
    assert storage.move_session("ses-m", "beta", "alpha") is True
    assert storage.replica_source("ses-m", "transcript").host == "alpha"  # type: ignore[union-attr]


def test_two_hosts_moving_one_session_at_once_exactly_one_wins(
        storage: Storage, request: pytest.FixtureRequest) -> None:
    for round_ in range(5):
        sid = f"race-{round_}"
        storage.upsert_index_rows([index_row(sid, host="alpha")])
        storage.add_replica_lines(source(sid), [(1, b"line")])
        stores = [storage, another_connection(storage, request)]
        try:
            with ThreadPoolExecutor(2) as pool:
                won = list(pool.map(lambda i: stores[i].move_session(sid, "alpha",
                                                                      ("beta", "gamma")[i]),
                                    range(2)))
        finally:
            stores[1].close()
        assert sorted(won) == [False, True]
        winner = ("beta", "gamma")[won.index(True)]
        assert storage.index_row(sid).host == winner  # type: ignore[union-attr]
        assert {s.host for s in storage.replica_sources(sid)} == {winner}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_migration_6_leaves_earlier_rows_without_a_host_and_lists_them_as_the_local_hosts(
        backend: str, request: pytest.FixtureRequest, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    module, open_it = _backend_opener(backend, request, tmp_path)
    with monkeypatch.context() as patch:
        patch.setattr(module, "MIGRATIONS", getattr(module, "MIGRATIONS")[:5])
        old = open_it()
        try:
            assert old.schema_version() == 5
            placeholder = "?" if backend == "sqlite" else "%s"
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
