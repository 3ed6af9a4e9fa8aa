"""storage/hosts.py (HostStore) on every backend: a session moved from one host to another, and
where each host has a project checked out (DESIGN.md §8). One spec per operation, each run against
SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from coding_os.storage.base import Storage, StorageError
from tests.helpers import each_backend, index_row, replica_source

pytestmark = each_backend


def test_a_project_is_mapped_to_its_root_on_each_host(storage: Storage) -> None:
    assert storage.project_hosts("git:abc") == {}
    storage.set_project_host("git:abc", "alpha", "/home/a/repo")
    storage.set_project_host("git:abc", "beta", "/srv/b/checkout")
    storage.set_project_host("git:abc", "alpha", "/home/a/moved")
    storage.set_project_host("origin:example.com/x", "alpha", "/elsewhere")
    assert storage.project_hosts("git:abc") == {"alpha": "/home/a/moved",
                                                "beta": "/srv/b/checkout"}


def test_moving_a_session_gives_its_row_and_replicated_files_to_the_new_host(
        storage: Storage) -> None:
    storage.upsert_index_rows([index_row("ses-m", native_id="n-m", host="alpha"),
                               index_row("other", host="alpha")])
    storage.add_replica_lines(replica_source("ses-m"), [(1, b"one"), (2, b"two")])
    storage.add_replica_lines(replica_source("n-m", stream="native"), [(1, b"native")])
    storage.add_replica_lines(replica_source("other"), [(1, b"kept")])
    assert storage.move_session("ses-m", "alpha", "beta") is True
    assert storage.index_row("ses-m").host == "beta"  # type: ignore[union-attr]
    assert storage.index_row("other").host == "alpha"  # type: ignore[union-attr]
    assert {(s.session, s.host, s.lines) for s in
            storage.replica_sources("ses-m") + storage.replica_sources("n-m")} == {
        ("ses-m", "beta", 2), ("n-m", "beta", 1)}
    assert storage.replica_source("other", "transcript").host == "alpha"  # type: ignore[union-attr]
    # the new owner goes on from the lines stored; the old one is refused
    assert storage.add_replica_lines(replica_source("ses-m", host="beta", root="/b/repo"),
                                     [(3, b"three")]) == 1
    with pytest.raises(StorageError, match="host beta"):
        storage.add_replica_lines(replica_source("ses-m"), [(4, b"alpha's")])
    assert [line for _, line in storage.replica_lines("ses-m", "transcript")] == [
        b"one", b"two", b"three"]
    # compare-and-set: a stale owner, or a session that is not there, changes nothing
    assert storage.move_session("ses-m", "alpha", "gamma") is False
    assert storage.move_session("nothing", "alpha", "gamma") is False
    assert storage.index_row("ses-m").host == "beta"  # type: ignore[union-attr]
    assert storage.move_session("ses-m", "beta", "alpha") is True
    assert storage.replica_source("ses-m", "transcript").host == "alpha"  # type: ignore[union-attr]


def test_two_hosts_moving_one_session_at_once_exactly_one_wins(
        storage: Storage, open_database: Callable[[], Storage]) -> None:
    for round_ in range(5):
        sid = f"race-{round_}"
        storage.upsert_index_rows([index_row(sid, host="alpha")])
        storage.add_replica_lines(replica_source(sid), [(1, b"line")])
        stores = [storage, open_database()]
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

