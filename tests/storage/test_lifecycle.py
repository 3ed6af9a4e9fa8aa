"""storage/lifecycle.py on every backend: a database opened, migrated and closed, and the text
it can store. One spec per operation, each run against SQLite and PostgreSQL (a fresh schema of
database `test`, COS_TEST_PG_URL; skipped when the server cannot be reached, failed under
CI=true)."""

from __future__ import annotations

import pytest

from coding_os.storage.base import SessionSummary, Storage, StorageError
from coding_os.storage.migrations.sqlite import MIGRATIONS
from coding_os.state.tiers import Tiers
from tests.helpers import PG_URL, each_backend, observation, session_record

pytestmark = each_backend


def test_a_fresh_database_is_migrated_to_the_latest_version(storage: Storage) -> None:
    assert storage.schema_version() == len(MIGRATIONS)
    assert storage.migrate() == len(MIGRATIONS)  # idempotent


def test_a_storage_used_as_a_context_manager_is_closed_on_the_way_out(storage: Storage) -> None:
    with storage as same:
        assert same is storage
        storage.upsert_session(session_record("s1"))
    with pytest.raises(StorageError):
        storage.session("s1")


def test_a_closed_storage_refuses_every_call_with_a_storage_error(storage: Storage) -> None:
    storage.close()
    with pytest.raises(StorageError):
        storage.sessions()
    storage.close()  # closing again is harmless


def test_a_storage_says_which_database_it_is_and_whether_several_hosts_share_it(
        storage: Storage, storage_backend: str, tiers: Tiers) -> None:
    if storage_backend == "sqlite":
        assert (storage.location, storage.shared) == (tiers.database, False)
    else:  # the URL without its schema option, and never a password
        from coding_os.storage.postgres import redact

        assert (storage.location, storage.shared) == (redact(PG_URL), True)


# Text every backend can store


def test_text_with_lone_surrogates_is_stored_with_replacement_characters(storage: Storage) -> None:
    assert storage.add_observations([observation("o1", "s1", text="bad \ud800 text")]) == 1
    assert storage.observations()[0].text == "bad \ufffd text"
    storage.upsert_session(session_record("ses-claude-20261129-100000-aaaa", cwd="/odd/\udfff"))
    found = storage.session("ses-claude-20261129-100000-aaaa")
    assert found is not None and found.cwd == "/odd/\ufffd"


def test_a_nul_character_in_a_text_never_makes_the_batch_fail(storage: Storage) -> None:
    # A NUL in a prompt must not leave the spool unstorable. SQLite keeps it; PostgreSQL's TEXT
    # cannot hold one, so that backend stores U+FFFD in its place.
    assert storage.add_observations([observation("o1", "s1", text="a\x00b",
                                                 data={"k": "v\x00"})]) == 1
    assert storage.write_summary(SessionSummary(session="s1", agent="claude", panel="p1",
                                                reason="orphan", last_prompt="x\x00"))
    stored = storage.observations()[0]
    assert stored.text in ("a\x00b", "a\ufffdb") and stored.data == {"k": "v\x00"}
    summary = storage.summary("s1")
    assert summary is not None and summary.last_prompt in ("x\x00", "x\ufffd")
