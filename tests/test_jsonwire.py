"""jsonwire, the hook's JSON on the C accelerator alone, agrees with the standard `json` module."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_os import jsonwire


# Text that JSON carries faithfully both ways: no lone surrogates.
TEXT = st.text(st.characters(exclude_categories=("Cs",)))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(TEXT, children, max_size=6),
    max_leaves=40,
)
# Text that looks like JSON often enough to reach the scanner's corners.
JSONISH = st.text(alphabet='{}[],:" \t\n\r0123456789.eE+-truefalsnNIiyu\\/x\x00é', max_size=40)


def same(a: object, b: object) -> bool:
    """Equality that also holds for NaN (which json.loads accepts)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b


@given(JSON, st.sampled_from([{}, {"ensure_ascii": False}, {"indent": 2},
                              {"separators": (",", ":")}]))
def test_loads_reads_back_whatever_json_dumps_writes(value: object,
                                                      options: dict[str, object]) -> None:
    assert same(jsonwire.loads(json.dumps(value, **options)), value)  # type: ignore[arg-type]


@given(JSON)
def test_json_loads_reads_back_whatever_dumps_writes(value: object) -> None:
    assert same(json.loads(jsonwire.dumps(value)), value)


@given(JSON)
def test_dumps_writes_compact_ascii_exactly_as_json_dumps_does(value: object) -> None:
    text = jsonwire.dumps(value)
    assert text.isascii()
    assert text == json.dumps(value, separators=(",", ":"))


@given(st.one_of(TEXT, JSONISH, JSON.map(json.dumps).flatmap(
    lambda doc: st.tuples(st.just(doc), JSONISH).map("".join))))
def test_loads_accepts_exactly_what_json_loads_accepts(text: str) -> None:
    try:
        expected = json.loads(text)
    except ValueError:
        with pytest.raises(ValueError):
            jsonwire.loads(text)
        return
    assert same(jsonwire.loads(text), expected)


@pytest.mark.parametrize("text", ["", "   ", "\n", "{} x", "[1] [2]", "1 2", '{"a": 1}}',
                                  "[", '{"a"', "nul", "\ufeff{}", '"\x00"', "01", "[1,]"])
def test_loads_rejects_what_is_not_exactly_one_json_document(text: str) -> None:
    with pytest.raises(ValueError):
        json.loads(text)
    with pytest.raises(ValueError):
        jsonwire.loads(text)


def test_loads_reports_a_nesting_too_deep_for_the_stack_as_a_value_error() -> None:
    with pytest.raises(ValueError):
        jsonwire.loads("[" * 200_000 + "]" * 200_000)


def test_loads_reads_surrounding_whitespace_and_the_nan_constants_as_json_does() -> None:
    assert jsonwire.loads(' \t\n\r{"a": [1, 2.5, null]} \r\n') == {"a": [1, 2.5, None]}
    value = jsonwire.loads("[NaN, Infinity, -Infinity]")
    assert isinstance(value, list) and math.isnan(value[0])
    assert value[1:] == [math.inf, -math.inf]


@pytest.mark.parametrize("value", [math.nan, math.inf, [-math.inf], {"a": math.nan}])
def test_dumps_refuses_floats_json_cannot_hold(value: object) -> None:
    with pytest.raises(ValueError):
        jsonwire.dumps(value)


@pytest.mark.parametrize("value", [{1: "a"}, {("a",): 1}, b"bytes", {1, 2}, object(),
                                   [complex(1, 2)], {"a": [{"b": {None: 1}}]},
                                   {"1": "a", 1: "b"}, [{"x": ({True: 1},)}]])
def test_dumps_refuses_values_and_keys_of_other_types_with_type_error(value: object) -> None:
    with pytest.raises(TypeError):
        jsonwire.dumps(value)


def test_dumps_refuses_nesting_too_deep_and_cycles() -> None:
    deep: list[object] = []
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(RecursionError):
        jsonwire.dumps(deep)
    loop: dict[str, object] = {}
    loop["self"] = loop
    with pytest.raises((RecursionError, ValueError)):
        jsonwire.dumps(loop)


def test_dumps_writes_tuples_as_arrays_and_escapes_lone_surrogates() -> None:
    assert jsonwire.dumps(("a", 1)) == '["a",1]'
    assert jsonwire.dumps("\ud800") == '"\\ud800"'
    assert jsonwire.loads(jsonwire.dumps("\ud800x")) == "\ud800x"


FRESH_PROCESS = r'''
import sys

from coding_os import jsonwire

assert "json.decoder" not in sys.modules
for text in sys.argv[1:]:
    try:
        jsonwire.loads(text)
    except ValueError:
        print("ValueError")
    except Exception as exc:
        print(type(exc).__name__)
    else:
        print("accepted")
'''


def test_loads_raises_value_error_for_malformed_json_in_a_process_that_never_imported_json(
        ) -> None:
    # The hook's own process: jsonwire alone, no `json` package loaded (the point of jsonwire).
    docs = ['{"session_id": "a"', '{"a" 1}', "[1 2]", "{", '"abc', '"\\x"', '"a\x01"', "tru",
            "[1,"]
    proc = subprocess.run([sys.executable, "-c", FRESH_PROCESS, *docs], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["ValueError"] * len(docs)


# -- the C encoder: what cos writes, and keys that are not strings -----------------------------


def test_dumps_keeps_what_the_python_encoder_wrote() -> None:
    """For everything cos writes (string keys), the C encoder gives the Python encoder's bytes:
    bool and IntEnum values, float reprs, lone surrogates, tuples, str subclasses."""
    import enum

    from coding_os import jsonwire

    class Level(enum.IntEnum):
        HIGH = 3

    class Name(str):
        pass

    value = {"b": [True, False, None], "e": Level.HIGH, "f": [0.1, 1e22, -0.0, 1.5e-7],
             "s": "\ud800x\u00e9\n", "t": ("a", 1), Name("k"): Name("v"), "big": 2 ** 70}
    assert jsonwire.dumps(value) == (
        '{"b":[true,false,null],"e":3,"f":[0.1,1e+22,-0.0,1.5e-07],'
        '"s":"\\ud800x\\u00e9\\n","t":["a",1],"k":"v","big":1180591620717411303424}')
    with pytest.raises(ValueError):
        jsonwire.dumps({"x": float("nan")})
    with pytest.raises(TypeError):
        jsonwire.dumps({"x": b"bytes"})


def test_dumps_never_writes_a_duplicate_key() -> None:
    import json

    from coding_os import jsonwire

    try:
        text = jsonwire.dumps({"1": "string key", 1: "number key"})
    except TypeError:
        return
    assert len(json.loads(text)) == 2


# -- the nesting limit: input from elsewhere (payloads, transcripts, settings) -----------------


def test_loads_refuses_json_nested_deeper_than_its_limit_with_a_value_error() -> None:
    deep = jsonwire.MAX_DEPTH + 1
    with pytest.raises(ValueError, match="nested"):
        jsonwire.loads("[" * deep + "]" * deep)
    with pytest.raises(ValueError, match="nested"):
        jsonwire.loads('{"a":' * deep + "1" + "}" * deep)
    at_limit = "[" * jsonwire.MAX_DEPTH + "]" * jsonwire.MAX_DEPTH
    assert jsonwire.loads(at_limit) == json.loads(at_limit)
    # Brackets inside strings are text, not nesting.
    assert jsonwire.loads(json.dumps(["[" * 10_000])) == ["[" * 10_000]


def test_loads_reads_utf8_bytes_as_the_text_they_encode() -> None:
    assert jsonwire.loads('{"a": "é"}'.encode()) == {"a": "é"}
    with pytest.raises(ValueError):
        jsonwire.loads(b'{"a": "\xff"}')
    with pytest.raises(ValueError, match="nested"):
        jsonwire.loads(b"[" * 100_000)


def test_objects_of_json_lines_skip_every_line_that_holds_no_json_object(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_bytes(b'{"a": 1}\n'                      # an object
                    b'[1, 2]\n"text"\n7\n\n'            # JSON, but not objects; a blank line
                    b'{"torn": \n'                      # cut off mid-write
                    b'{"bad": "\xff"}\n'                # not UTF-8
                    + b"[" * (jsonwire.MAX_DEPTH + 1) + b"\n"  # nested too deeply
                    + b'  {"b": {"c": [2]}}  \r\n'      # an object, with space around it
                    + b'{"last": true}')               # no newline at the end
    with open(log, "rb") as f:
        assert list(jsonwire.objects(f)) == [{"a": 1}, {"b": {"c": [2]}}, {"last": True}]
    assert list(jsonwire.objects(['{"x": "é"}', "nope"])) == [{"x": "é"}]


def test_loads_object_is_the_object_a_line_holds_or_none() -> None:
    assert jsonwire.loads_object(b'{"id": 1, "result": null}') == {"id": 1, "result": None}
    assert [jsonwire.loads_object(text) for text in ("[]", "null", "{", "", b"\xff")] == \
        [None] * 5
