"""storage/base.py: `Storage` is every concern's interface in one object, each backend
implements all of them, and each concern has its conformance file with a spec of every one of
its operations (tests/storage/test_<module>.py, run against every backend)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding_os.storage.base import Storage
from coding_os.storage.sqlite import SQLiteStorage

CONCERNS = Storage.__bases__


def test_storage_is_the_union_of_the_concerns_and_adds_no_operation_of_its_own() -> None:
    assert len(CONCERNS) == 9
    assert Storage.__abstractmethods__ == frozenset().union(
        *(concern.__abstractmethods__ for concern in CONCERNS))
    assert [name for name, value in vars(Storage).items() if callable(value)] == []


def test_each_backend_implements_every_operation_of_every_concern() -> None:
    pytest.importorskip("psycopg")
    from coding_os.storage.postgres import PostgresStorage

    for backend in (SQLiteStorage, PostgresStorage):
        assert all(issubclass(backend, concern) for concern in CONCERNS)
        assert backend.__abstractmethods__ == frozenset(), backend


@pytest.mark.parametrize("concern", CONCERNS, ids=lambda concern: concern.__name__)
def test_every_operation_of_a_concern_has_a_spec_in_its_conformance_file(concern: type) -> None:
    module = concern.__module__.rpartition(".")[2]
    spec = Path(__file__).with_name(f"test_{module}.py").read_text(encoding="utf-8")
    assert "pytestmark = each_backend" in spec
    assert sorted(name for name in concern.__abstractmethods__ if f".{name}(" not in spec) == []
