"""What cos prints (interfaces/output.py): text from transcripts and the store with its control
characters made visible, JSON that carries none raw, errors as one line."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_os.errors import NotFound
from coding_os.interfaces.output import dump_json, error_exit, escape_json_controls, visible


def test_visible_shows_control_characters_as_cat_v_does() -> None:
    assert visible("a\x1b]0;pwned\x07b") == "a^[]0;pwned^Gb"
    assert visible("\x1b[2J\x1b[H") == "^[[2J^[[H"
    assert visible("\x00\x7f\r\x9b31m\x85") == "^@^?^MM-^[31mM-^E"


def test_visible_keeps_newlines_tabs_and_ordinary_text() -> None:
    text = "line one\n\tline two: café, 日本語, → ✓ …\n"
    assert visible(text) == text


@given(st.text(st.characters(exclude_categories=())))
def test_visible_text_can_always_be_written_as_utf8_a_lone_surrogate_as_its_escape(
        text: str) -> None:
    visible(text).encode("utf-8")
    assert visible("caf\ud800e \udcff") == "caf\\ud800e \\udcff"


@given(st.text())
def test_visible_text_holds_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = visible(text)
    assert all(c in "\n\t" or not (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0) for c in shown)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
                    max_leaves=20))
def test_json_carries_no_raw_control_character_and_reads_back_the_same(data: object) -> None:
    text = dump_json(data)
    assert all(c == "\n" or not (ord(c) < 0x20 or 0x7f <= ord(c) < 0xa0) for c in text)
    assert json.loads(text) == data


_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()


@pytest.mark.slow
@given(st.lists(st.dictionaries(st.text(), _scalars, min_size=1), min_size=1)
       | st.lists(st.dictionaries(st.text(), _scalars | st.lists(_scalars))))
def test_a_listing_prints_as_the_indented_encoder_writes_it(rows: list[dict[str, object]]) -> None:
    expected = escape_json_controls(json.dumps(rows, indent=2, ensure_ascii=False))
    try:
        expected.encode("utf-8")
    except UnicodeEncodeError:
        expected = json.dumps(rows, indent=2, ensure_ascii=True)
    assert dump_json(rows) == expected


def test_an_error_message_is_one_line_with_its_control_characters_visible(capsys) -> None:  # type: ignore[no-untyped-def]
    code = error_exit(NotFound("no session \x1b]0;pwned\x07 here"))
    assert code == NotFound.exit_code
    assert capsys.readouterr().err == "cos: no session ^[]0;pwned^G here\n"


class _Named:
    """A value JSON has no form for: printed by its str()."""

    def __str__(self) -> str:
        return "named \x1b value"


_keys = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.builds(_Named),
    lambda inner: st.lists(inner) | st.tuples(inner, inner) | st.dictionaries(_keys, inner),
    max_leaves=30)


@given(_values)
def test_any_value_prints_as_the_indented_encoder_of_json_writes_it(data: object) -> None:
    expected = escape_json_controls(json.dumps(data, indent=2, ensure_ascii=False, default=str))
    try:
        expected.encode("utf-8")
    except UnicodeEncodeError:
        expected = json.dumps(data, indent=2, ensure_ascii=True, default=str)
    assert dump_json(data) == expected


def test_a_value_that_holds_itself_is_refused_as_json_refuses_it() -> None:
    loop: list[object] = [1]
    loop.append({"again": loop})
    with pytest.raises(ValueError, match="Circular reference detected"):
        dump_json(loop)
    with pytest.raises(TypeError, match="keys must be str, int, float, bool or None, not tuple"):
        dump_json({(1, 2): "x"})
