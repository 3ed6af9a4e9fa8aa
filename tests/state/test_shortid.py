"""Ids as tables show them and as they are typed back (state/shortid.py)."""

from __future__ import annotations

import pytest

from coding_os.errors import Ambiguous
from coding_os.state.shortid import SHORT_MAX, SHORT_MIN, abbreviate, matches, pick

SESSIONS = ["ses-claude-20260101-120000-ab12", "ses-claude-20260101-120000-cd34",
            "ses-codex-20260102-090000-ab12"]


def test_a_table_shows_the_shortest_end_that_no_other_id_shares() -> None:
    shown = abbreviate(SESSIONS)
    assert shown["ses-claude-20260101-120000-cd34"] == "000-cd34"
    # Two ids share "000-ab12": the end grows until it tells them apart, never from a dash.
    assert shown["ses-claude-20260101-120000-ab12"] == "20000-ab12"
    assert shown["ses-codex-20260102-090000-ab12"] == "90000-ab12"
    assert all(SHORT_MIN <= len(short) <= SHORT_MAX and not short.startswith("-")
               for short in shown.values())


def test_an_id_no_short_end_tells_apart_is_shown_whole() -> None:
    twins = ["a-20260101-120000-ab12", "b-20260101-120000-ab12"]
    assert abbreviate(twins) == {value: value for value in twins}


def test_a_key_names_an_id_by_its_end_its_start_or_the_agents_own_ids_start() -> None:
    value, native = SESSIONS[1], "a6dc7b35-0000-4000-8000-000000000001"
    for key in ("000-cd34", value, "ses-claude-20260101-120000-c", "a6dc7b35", native):
        assert matches(key, value, native), key
    for key in ("cd3", "ses", "b35-0000", "zz-cd34"):
        assert not matches(key, value, native), key


def test_an_ambiguous_key_lists_every_candidate_on_its_own_line() -> None:
    known = [(value, None) for value in SESSIONS]
    assert pick("000-cd34", known, "session") == SESSIONS[1]
    assert pick("nothing", known, "session") is None
    with pytest.raises(Ambiguous) as raised:
        pick("ab12", known, "session")
    first, *candidates = str(raised.value).splitlines()
    assert "2 sessions" in first
    assert [line.strip() for line in candidates] == [SESSIONS[0], SESSIONS[2]]
