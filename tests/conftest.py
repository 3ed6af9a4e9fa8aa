"""Shared fixtures: every test gets its own HOME and a scrubbed environment; a git repository,
and the same with its state dir kept out of git; a checkout whose HOME holds the native logs of
the shared fixtures; the daemon; PostgreSQL schemas; the storage (one backend, or each in turn).
The helpers to run `cos` as an agent's hook or a user's shell does are in tests/helpers.py."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from coding_os.state.tiers import Tiers
from coding_os.storage.base import Storage
from tests.helpers import (PG_URL, Host, copy_claude_fixtures, copy_codex_fixtures, git,
                           make_host, new_origin, pg_unreachable, replicator_stopped,
                           stop_daemons_of, stop_runners_of, with_schema)


# Variables from the developer's shell that would change who `cos` thinks it is.
_SCRUB_PREFIXES = ("COS_", "CLAUDE", "CODEX_", "ANTHROPIC_", "OPENAI_")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private HOME and no agent variables from the outside."""
    for key in list(os.environ):
        if key.startswith(_SCRUB_PREFIXES):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    yield home
    if (home / ".coding-os" / "jobs").exists():
        stop_runners_of(home)
    if (home / ".coding-os" / "daemon").exists():
        stop_daemons_of(home)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, outside HOME (like /tmp checkouts)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path.resolve()


@pytest.fixture
def project(repo: Path) -> Path:
    """The `repo` fixture with the state dir kept out of git, as `cos install` does it."""
    with open(repo / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return repo


@pytest.fixture
def checkout(isolated_env: Path, repo: Path) -> tuple[Path, dict[str, str]]:
    """An initialised checkout, and the environment pointing at fixture-filled native dirs: this
    test's HOME holds copies of the shared fixtures where Claude Code and Codex keep their logs."""
    (repo / ".coding-os").mkdir(mode=0o700)  # as cos makes it
    copy_claude_fixtures(isolated_env / ".claude")
    codex_home = isolated_env / "codex-home"
    copy_codex_fixtures(codex_home)
    return repo, {"CODEX_HOME": str(codex_home)}


@pytest.fixture
def running(isolated_env: Path) -> Iterator[dict[str, object]]:
    """`cos daemon` for this test's HOME, stopped afterwards."""
    from coding_os.daemon import server

    report = server.start()
    try:
        yield report
    finally:
        server.stop()


@pytest.fixture
def pg_schemas() -> Iterator[Callable[[bool], str]]:
    """Make URLs of fresh `cos_test_<random>` schemas (created, or left for the backend to
    create); every one is dropped afterwards."""
    try:
        import psycopg
        from psycopg import sql
    except ImportError as exc:
        pg_unreachable(f"psycopg is not installed ({exc})")
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        pg_unreachable(str(exc).splitlines()[0])
    names: list[str] = []

    def fresh(create: bool = True) -> str:
        name = f"cos_test_{secrets.token_hex(6)}"
        names.append(name)
        if create:
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        return with_schema(PG_URL, name)

    yield fresh
    with admin:
        for name in names:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def pg_url(pg_schemas: Callable[[bool], str]) -> str:
    """A fresh, empty schema of the test database, as a URL selecting it."""
    return pg_schemas(True)


@pytest.fixture
def two_hosts(tmp_path: Path, pg_url: str) -> Iterator[tuple[Host, Host]]:
    """Host A and host B (DESIGN.md §8): clones of one repository at different paths, each with
    its HOME and `cos init` for Claude Code and Codex, one PostgreSQL schema; the background
    replicators their agents' hooks started are stopped before the schema is dropped."""
    origin = new_origin(tmp_path / "origin")
    a = make_host(tmp_path, "a", origin, "host-a/src/proj", pg_url)
    b = make_host(tmp_path, "b", origin, "host-b/work/deeper/proj", pg_url)
    yield a, b
    for host in (a, b):
        replicator_stopped(host.checkout / ".coding-os")


@pytest.fixture
def tiers(tmp_path: Path) -> Tiers:
    """The tiers of a fresh state dir."""
    return Tiers(str(tmp_path / ".coding-os"))


@pytest.fixture
def session(tiers: Tiers) -> str:
    """A claude session with only its session_meta."""
    from coding_os.sessions import transcript

    return transcript.create(tiers, "claude", project="/abs/root", worktree="/abs/root",
                             branch="main")


@pytest.fixture
def storage_backend(request: pytest.FixtureRequest) -> str:
    """The backend of this test's `storage` and `open_database`: "sqlite", or each of
    STORAGE_BACKENDS in turn for a test marked `@each_backend` (tests/helpers.py)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def open_database(storage_backend: str, tiers: Tiers,
                  request: pytest.FixtureRequest) -> Iterator[Callable[[], Storage]]:
    """What opens (and migrates) a new connection to this test's one database: SQLite at the
    tiers' path, or a fresh PostgreSQL schema. Every connection it opened is closed afterwards."""
    from coding_os.storage.sqlite import SQLiteStorage

    url = request.getfixturevalue("pg_url") if storage_backend == "postgres" else None
    opened: list[Storage] = []

    def connect() -> Storage:
        if url is None:
            database: Storage = SQLiteStorage(tiers.database)
        else:
            from coding_os.storage.postgres import PostgresStorage

            database = PostgresStorage(url)
        opened.append(database)
        return database

    yield connect
    for database in opened:
        database.close()


@pytest.fixture
def storage(open_database: Callable[[], Storage]) -> Storage:
    """This test's database, opened and migrated (closed afterwards): SQLite, or under
    `@each_backend` each backend in turn."""
    return open_database()
