"""storage/replicas.py (ReplicaStore) on every backend: replicated session files (DESIGN.md
§8), their lines by seq, and one host owning a session id. One spec per operation, each run
against SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest

from coding_os.storage.base import Storage, StorageError
from tests.helpers import each_backend, replica_source

pytestmark = each_backend


LINES = [b'{"a": 1}', b"", b"caf\xc3\xa9 \xff\xfe not utf-8", b"nul \x00 and cr \r",
         b"\t  spaces  "]


def test_replicated_lines_are_stored_exactly_once_and_in_order(storage: Storage) -> None:
    numbered = list(enumerate(LINES, 1))
    assert storage.add_replica_lines(replica_source(), numbered[:3]) == 3
    assert storage.add_replica_lines(replica_source(), numbered[:3]) == 0  # a second run adds nothing
    assert storage.add_replica_lines(replica_source(), numbered[2:]) == 2
    assert storage.replica_lines("s1", "transcript") == numbered
    assert storage.replica_lines("s1", "transcript", after=3) == numbered[3:]
    assert storage.replica_lines("s1", "transcript", after=1, limit=2) == numbered[1:3]
    stored = storage.replica_source("s1", "transcript")
    assert stored is not None
    assert (stored.lines, stored.host, stored.agent, stored.project_key, stored.root) == \
        (5, "alpha", "worker", "git:abc", "/home/u/repo")
    assert stored.updated
    assert storage.add_replica_lines(replica_source(), []) == 0
    assert storage.replica_source("s1", "transcript").lines == 5  # type: ignore[union-attr]


def test_a_line_already_stored_under_its_seq_is_kept(storage: Storage) -> None:
    storage.add_replica_lines(replica_source(), [(1, b"first")])
    assert storage.add_replica_lines(replica_source(), [(1, b"other"), (2, b"second")]) == 1
    assert storage.replica_lines("s1", "transcript") == [(1, b"first"), (2, b"second")]


def test_the_replicated_count_is_the_highest_seq_without_a_gap_below(storage: Storage) -> None:
    storage.add_replica_lines(replica_source(), [(1, b"a"), (3, b"c"), (4, b"d")])
    assert storage.replica_source("s1", "transcript").lines == 1  # type: ignore[union-attr]
    storage.add_replica_lines(replica_source(), [(2, b"b")])
    assert storage.replica_source("s1", "transcript").lines == 4  # type: ignore[union-attr]
    assert [seq for seq, _ in storage.replica_lines("s1", "transcript")] == [1, 2, 3, 4]


def test_lines_of_the_same_session_id_from_another_host_are_refused(storage: Storage) -> None:
    storage.add_replica_lines(replica_source(), [(1, b"alpha's line")])
    with pytest.raises(StorageError, match="host alpha"):
        storage.add_replica_lines(replica_source(host="beta"), [(1, b"beta's"), (2, b"more")])
    with pytest.raises(StorageError, match="host alpha"):
        storage.add_replica_lines(replica_source(host="beta", stream="native"), [(1, b"beta's")])
    assert storage.replica_lines("s1", "transcript") == [(1, b"alpha's line")]
    assert [s.stream for s in storage.replica_sources("s1")] == ["transcript"]
    assert storage.replica_source("s1", "transcript").host == "alpha"  # type: ignore[union-attr]


def test_bad_replicated_lines_are_refused_and_nothing_is_stored(storage: Storage) -> None:
    for bad in ([(0, b"x")], [(1, b"a\nb")], [(1, "text")]):
        with pytest.raises(StorageError):
            storage.add_replica_lines(replica_source(), bad)  # type: ignore[arg-type]
    assert storage.replica_source("s1", "transcript") is None
    assert storage.replica_lines("s1", "transcript") == []


def test_a_session_has_one_source_per_stream_and_removing_one_keeps_the_others(
        storage: Storage) -> None:
    storage.add_replica_lines(replica_source(stream="transcript"), [(1, b"t1"), (2, b"t2")])
    storage.add_replica_lines(replica_source(stream="events"), [(1, b"e1")])
    storage.add_replica_lines(replica_source("s2", stream="native"), [(1, b"n1")])
    assert [s.stream for s in storage.replica_sources("s1")] == ["events", "transcript"]
    assert storage.remove_replica("s1", "transcript") == 2
    assert storage.replica_source("s1", "transcript") is None
    assert storage.replica_lines("s1", "transcript") == []
    assert storage.replica_lines("s1", "events") == [(1, b"e1")]
    assert storage.remove_replica("s1", "transcript") == 0
    # started over after a removal, from 1
    assert storage.add_replica_lines(replica_source(stream="transcript"), [(1, b"new")]) == 1
    assert storage.replica_source("s1", "transcript").lines == 1  # type: ignore[union-attr]


@pytest.mark.slow
def test_two_hosts_replicating_one_session_id_at_once_never_mix_lines(
        storage: Storage, open_database: Callable[[], Storage]) -> None:
    stores = [storage, open_database()]
    try:
        def push(index: int) -> str:
            host = ("alpha", "beta")[index]
            try:
                for seq in range(1, 31):
                    stores[index].add_replica_lines(replica_source(host=host, stream=f"st{seq % 2}"),
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

