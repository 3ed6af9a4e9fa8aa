"""jsonbulk, the importers' JSON reader on msgspec, gives what jsonwire gives for every text: the
same value (of the same types, big integers and floats to the bit), or a ValueError."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_os import jsonbulk, jsonwire
from tests.test_jsonwire import JSON, JSONISH, TEXT, same


def answer(loads: object, text: str | bytes) -> tuple[str, object]:
    try:
        return "value", loads(text)  # type: ignore[operator]
    except ValueError:
        return "error", None


def agree(text: str | bytes) -> None:
    kind, value = answer(jsonbulk.loads, text)
    expected_kind, expected = answer(jsonwire.loads, text)
    assert kind == expected_kind, text
    assert same(value, expected), text


@given(JSON, st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 2},
                              {"separators": (",", ":")}]), st.booleans())
def test_loads_reads_back_whatever_json_dumps_writes(value: object, options: dict[str, object],
                                                      as_bytes: bool) -> None:
    text = json.dumps(value, **options)  # type: ignore[arg-type]
    assert same(jsonbulk.loads(text.encode() if as_bytes else text), value)


@given(st.one_of(TEXT, JSONISH, JSON.map(json.dumps).flatmap(
    lambda doc: st.tuples(st.just(doc), JSONISH).map("".join))), st.booleans())
def test_loads_answers_any_text_as_jsonwire_does(text: str, as_bytes: bool) -> None:
    agree(text.encode("utf-8", "surrogatepass") if as_bytes else text)


@given(st.binary(max_size=60))
def test_loads_answers_any_bytes_as_jsonwire_does(data: bytes) -> None:
    agree(data)


@pytest.mark.parametrize("text", [
    "NaN", "[Infinity, -Infinity]", '{"n": NaN}', "1e400", "-1e400", "1e-400",
    "123456789012345678901234567890", "-99999999999999999999", str(2 ** 64), str(-2 ** 63 - 1),
    "19446744073709551617",
    "9223372036854775807", "0.1", "-0", "-0.0", "1E5", "2.5e-3", "5e-324", "1.7976931348623157e308",
    '"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"', '"\\u0000"', '"a\u0001b"', '"tab\there"',
    "\ufeff{}", '{"a":1,"a":2}', "01", "[1,]", '{"a":1,}', "[1 2]", " \t\n{}\r\n", "{} {}",
    "true", "null", "tru", '"\\x"', '"é"', "[" * 256 + "]" * 256, "[" * 257 + "]" * 257,
    '{"a":' * 257 + "1" + "}" * 257, "[" * 300, "", "[" * 100_000 + "]" * 100_000,
    '{"a":' * 5000 + "1" + "}" * 5000, "[" * 100_000,
])
def test_loads_answers_the_corners_as_jsonwire_does(text: str) -> None:
    agree(text)
    agree(text.encode("utf-8", "surrogatepass"))


def test_loads_object_is_the_object_or_none() -> None:
    assert jsonbulk.loads_object(b'{"a": [1]}') == {"a": [1]}
    for text in (b"[1]", b"{", b"\xff", b"1", b"[" * 300 + b"]" * 300):
        assert jsonbulk.loads_object(text) is None
