"""storage/postgres.py: what the shared backend adds to the specs every backend passes (the
conformance files beside this one): the schema named in the URL, concurrent first openers, its
migrations, errors without the password, a lost connection, and `open_storage` selecting it.

The tests run in a fresh schema of database `test` (COS_TEST_PG_URL, default
postgresql://postgres@127.0.0.1:5432/test) that is dropped afterwards. When the server cannot be
reached they are skipped, or fail under CI=true.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from coding_os.storage.base import StorageError
from coding_os.storage.migrations.postgres import MIGRATIONS as PG_MIGRATIONS
from coding_os.storage.migrations.sqlite import MIGRATIONS
from tests.helpers import PG_URL, session_record


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


@pytest.mark.slow
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
        storage.upsert_session(session_record("ses-claude-20261129-100000-aaaa"))
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

