"""What coding-os knows of each agent, as data (adapters/__init__.py): which values can be an
agent's own session id, the one check of every place that names a file after one or hands one
to the agent's command."""

from __future__ import annotations

import pytest

from coding_os.adapters import NATIVE_ID_MAX, is_native_id


@pytest.mark.parametrize("value", [
    "0456292b-6ccc-424b-8356-a37725bc09d9", "rollout_1", "a", "A" * NATIVE_ID_MAX])
def test_an_id_of_letters_digits_underscores_and_dashes_is_a_native_id(value: str) -> None:
    assert is_native_id(value)


@pytest.mark.parametrize("value", [
    "", "-x", "_x", "--resume", "a/b", "..", "a b", "id\n", "é", "A" * (NATIVE_ID_MAX + 1),
    None, 7])
def test_an_option_a_path_a_newline_or_no_string_is_no_native_id(value: object) -> None:
    assert not is_native_id(value)
