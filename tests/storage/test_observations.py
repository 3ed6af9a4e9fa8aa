"""storage/observations.py (ObservationStore) on every backend: what the hooks observed. One spec
per operation, each run against SQLite and PostgreSQL."""

from __future__ import annotations

import secrets

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from coding_os.storage.base import Storage
from tests.helpers import STORABLE_TEXTS, each_backend, observation

pytestmark = each_backend


def test_observations_are_stored_once_per_oid(storage: Storage) -> None:
    rows = [observation("o1", "s1", tool="Bash", data={"ok": True}), observation("o2", "s1"),
            observation("o3", "s2")]
    assert storage.add_observations(rows) == 3
    assert storage.add_observations(rows[:2]) == 0
    assert [o.oid for o in storage.observations()] == ["o1", "o2", "o3"]
    first = storage.observations(session="s1")[0]
    assert (first.tool, first.data) == ("Bash", {"ok": True})


def test_observations_of_one_session_come_in_order_and_up_to_the_limit(storage: Storage) -> None:
    storage.add_observations([observation(f"o{i}", "s1" if i % 2 else "s2") for i in range(1, 8)])
    assert [o.oid for o in storage.observations(session="s1")] == ["o1", "o3", "o5", "o7"]
    assert [o.oid for o in storage.observations(session="s1", limit=2)] == ["o1", "o3"]
    assert [o.oid for o in storage.observations(limit=3)] == ["o1", "o2", "o3"]
    assert storage.observations(session="s9") == []


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children, max_size=3),
    max_leaves=8,
)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tool=st.none() | STORABLE_TEXTS, text=st.none() | STORABLE_TEXTS,
       data=st.dictionaries(st.text(), JSON_VALUES, max_size=4))
def test_an_observation_round_trips_through_the_database(
        storage: Storage, tool: str | None, text: str | None, data: dict[str, object]) -> None:
    oid = secrets.token_hex(8)
    assert storage.add_observations([observation(oid, "s-" + oid, tool=tool, text=text,
                                                 data=data)]) == 1
    (stored,) = storage.observations(session="s-" + oid)
    assert (stored.oid, stored.tool, stored.text, stored.data) == (oid, tool, text, data)
