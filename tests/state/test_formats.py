"""Round trips of the state layer's formats (DESIGN.md §3.3–3.5), as hypothesis properties:
state files, hooks-log lines, session and panel ids, and the hook payload parser."""

from __future__ import annotations

import io
import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coding_os.errors import InvalidInput
from coding_os.interfaces.hook import read_payload
from coding_os.state.hookslog import HEAD_KEYS, MAX_VALUE, format_line, parse_line
from coding_os.state.identity import is_session_id, mint_session_id, sanitize_panel_id
from coding_os.state.statefile import MAX_VALUE as STATE_MAX_VALUE
from coding_os.state.statefile import format_state, parse_state

SESSION_RE = r"ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}"
PANEL_RE = r"[A-Za-z0-9._-]{1,64}"
# The payload fields identity and routing read, which must be strings when present.
# Only the identity field is strict; other fields of a drifted type are logged and ignored.
IDENTITY_FIELDS = ("session_id",)

AGENTS = st.from_regex(r"\A[a-z][a-z0-9_-]{0,31}\Z")
SESSIONS = st.from_regex(rf"\A{SESSION_RE}\Z")
ONE_LINE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\n\r\x00"),
                   max_size=300)
# Field values that stress the bare/quoted split of the log format.
TRICKY = st.sampled_from(["-", "--", "-x", " ", "a b", 'say "hi"', "k=v", "a=b c=d", "é", "∑",
                          "ts=1 event=x", '"', "\\", "\t", "\n", "\u2028", "x\n", "null", "1"])
ALL_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)  # surrogates included
LOG_VALUES = st.one_of(st.none(), st.just(""), TRICKY, ALL_TEXT, st.integers())
EXTRA_KEYS = st.from_regex(r"\A[a-z][a-z0-9_]{0,15}\Z").filter(lambda k: k not in HEAD_KEYS)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | ALL_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ALL_TEXT, children,
                                                                     max_size=4),
    max_leaves=20,
)
NOT_STRINGS = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(),
                        st.lists(JSON, max_size=3), st.dictionaries(ALL_TEXT, JSON, max_size=3))


# State files: `<session-id> <value>\n`.

@given(SESSIONS, ONE_LINE)
def test_a_state_file_reads_back_the_owner_and_value_it_was_written_with(
        session: str, value: str) -> None:
    data = format_state(session, value)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert parse_state(data) == (session, value)


def test_a_state_value_of_the_largest_allowed_size_reads_back_whole() -> None:
    session = "ses-claude-20261129-100000-abcd"
    value = "é ∑" * (STATE_MAX_VALUE // 6)  # 6 bytes of UTF-8 each: the limit is in bytes
    value += "x" * (STATE_MAX_VALUE - len(value.encode()))
    assert len(value.encode()) == STATE_MAX_VALUE
    assert parse_state(format_state(session, value)) == (session, value)
    with pytest.raises(InvalidInput):
        format_state(session, "x" * (STATE_MAX_VALUE + 1))
    with pytest.raises(InvalidInput):
        format_state(session, "é" * (STATE_MAX_VALUE // 2 + 1))  # few characters, many bytes


@given(SESSIONS, ONE_LINE, st.sampled_from("\n\r\x00"), ONE_LINE)
def test_a_state_value_that_is_not_one_line_is_refused(
        session: str, head: str, bad: str, tail: str) -> None:
    with pytest.raises(InvalidInput):
        format_state(session, head + bad + tail)


@given(ALL_TEXT.filter(lambda s: not re.fullmatch(SESSION_RE, s)), ONE_LINE)
def test_a_state_file_owner_that_is_not_a_session_id_is_refused(owner: str, value: str) -> None:
    with pytest.raises(InvalidInput):
        format_state(owner, value)


@pytest.mark.parametrize("value", ["\ud800", "task \udfff", "\udbff\udc00"])
def test_a_state_value_that_cannot_be_encoded_is_refused_as_invalid_input(value: str) -> None:
    with pytest.raises(InvalidInput):
        format_state("ses-claude-20261129-100000-abcd", value)


@given(st.binary(max_size=200) | SESSIONS.flatmap(
    lambda s: st.binary(max_size=60).map(lambda b: s.encode() + b)))
def test_parsing_arbitrary_bytes_as_a_state_file_never_raises(data: bytes) -> None:
    parsed = parse_state(data)
    if parsed is not None:
        owner, value = parsed
        assert re.fullmatch(SESSION_RE, owner)
        assert "\n" not in value


# Hooks-log lines: `ts=… agent=… panel=… session=… task=… event=… key=value…`.

def expected_field(value: object) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


@given(st.fixed_dictionaries({key: LOG_VALUES for key in HEAD_KEYS}),
       st.dictionaries(EXTRA_KEYS, LOG_VALUES, max_size=6))
def test_a_hooks_log_line_reads_back_every_field_it_was_written_with(
        head: dict[str, object], extra: dict[str, object]) -> None:
    fields = {**head, **extra}
    line = format_line(fields)
    assert line.endswith("\n") and line.count("\n") == 1
    expected = {key: expected_field(head[key]) for key in HEAD_KEYS}
    expected.update({key: expected_field(value) for key, value in extra.items()
                     if value is not None})
    assert parse_line(line) == expected
    assert list(parse_line(line) or {})[:len(HEAD_KEYS)] == list(HEAD_KEYS)


@pytest.mark.parametrize("value", ["-", '"-"'])
def test_a_hooks_log_field_whose_value_is_a_dash_reads_back_as_the_dash(value: str) -> None:
    fields = {"ts": "2026-11-29T16:20:00.123Z", "event": "PostToolUse", "input": value}
    parsed = parse_line(format_line(fields))
    assert parsed is not None and parsed["input"] == value


@given(st.tuples(st.text(min_size=1, max_size=20), st.integers(1, 300)).map(
    lambda t: (t[0] * (MAX_VALUE // len(t[0]) + 1))[: MAX_VALUE + t[1]]))
def test_a_hooks_log_value_over_the_limit_reads_back_cut_with_an_ellipsis(value: str) -> None:
    parsed = parse_line(format_line({"ts": "t", "event": "e", "input": value}))
    assert parsed is not None and parsed["input"] == value[: MAX_VALUE - 1] + "…"


@given(st.text(alphabet=' ="\\-=abcé\n\t{}', max_size=80) | ALL_TEXT)
def test_parsing_arbitrary_text_as_a_hooks_log_line_never_raises(line: str) -> None:
    fields = parse_line(line)
    assert fields is None or ("ts" in fields and "event" in fields)


# Identity formats.

@given(AGENTS.filter(lambda a: a not in ("checkpoints", "worktrees", "sessions", "panels",
                                         "transcripts", "trash")),
       st.floats(min_value=0, max_value=4e9))
def test_a_minted_session_id_matches_the_documented_regex(agent: str, now: float) -> None:
    session = mint_session_id(agent, now)
    assert re.fullmatch(SESSION_RE, session)
    assert is_session_id(session)


@given(ALL_TEXT | SESSIONS | SESSIONS.flatmap(
    lambda s: st.integers(0, len(s)).flatmap(
        lambda i: st.sampled_from(["", "-", "A", "0", "\n", "é", "_"]).map(
            lambda c: s[:i] + c + s[i + 1:]))))
def test_is_session_id_agrees_with_the_documented_regex(value: str) -> None:
    assert is_session_id(value) == bool(re.fullmatch(SESSION_RE, value))


@given(ALL_TEXT | st.text(alphabet="./-_\x00aZ9", max_size=80) | st.text(min_size=60,
                                                                         max_size=10_000))
def test_a_sanitised_panel_id_is_a_safe_directory_name_and_sanitising_it_again_keeps_it(
        raw: str) -> None:
    panel = sanitize_panel_id(raw)
    assert re.fullmatch(PANEL_RE, panel)
    assert panel not in (".", "..") and not panel.startswith((".", "-"))
    assert sanitize_panel_id(panel) == panel


# The hook payload parser.

# A native session id is stored as it is (session-id file, presence, index), so the parser
# also refuses one that cannot be: NUL, CR, LF, lone surrogates, over 1024 characters.
STORABLE_ID = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00\r\n"),
                      max_size=60)
UNSTORABLE_IDS = ["a\x00b", "a\nb", "a\rb", "\ud800", "x" * 1025]


@given(st.fixed_dictionaries({}, optional={key: STORABLE_ID if key == "session_id" else ALL_TEXT
                                           for key in IDENTITY_FIELDS}),
       st.dictionaries(ALL_TEXT.filter(lambda k: k not in IDENTITY_FIELDS), JSON, max_size=5),
       st.booleans())
def test_the_payload_parser_accepts_every_object_whose_identity_fields_are_strings(
        identity: dict[str, str], rest: dict[str, object], ascii_only: bool) -> None:
    payload = {**rest, **identity}
    try:
        data = json.dumps(payload, ensure_ascii=ascii_only).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates travel only as escapes
        data = json.dumps(payload).encode("ascii")
    assert read_payload(io.BytesIO(data)) == payload


@pytest.mark.parametrize("native", UNSTORABLE_IDS)
def test_the_payload_parser_refuses_a_session_id_that_cannot_be_stored(native: str) -> None:
    with pytest.raises(InvalidInput):
        read_payload(io.BytesIO(json.dumps({"session_id": native}).encode()))
    assert read_payload(io.BytesIO(json.dumps({"session_id": "x" * 1024}).encode()))


@given(st.sampled_from(IDENTITY_FIELDS), NOT_STRINGS,
       st.dictionaries(ALL_TEXT, JSON, max_size=4))
def test_the_payload_parser_refuses_a_session_id_that_is_not_a_string(
        field: str, value: object, rest: dict[str, object]) -> None:
    payload = {**rest, field: value}
    with pytest.raises(InvalidInput):
        read_payload(io.BytesIO(json.dumps(payload).encode()))


@given(st.one_of(
    st.binary(max_size=300),
    st.text(alphabet='{}[],:" \t\n0123456789.eE+-truefalsnNI\\u', max_size=60).map(str.encode),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.tuples(JSON.map(lambda v: json.dumps(v).encode()), st.binary(max_size=8)).map(
        lambda t: t[0] + t[1]),
    st.just(b"[" * 100_000), st.just(b"1" * 10_000), st.just(b"\xef\xbb\xbf{}"),
))
def test_the_payload_parser_refuses_anything_else_with_invalid_input_and_nothing_else(
        data: bytes) -> None:
    try:
        payload = read_payload(io.BytesIO(data))
    except InvalidInput:
        return
    assert isinstance(payload, dict)
    assert payload == json.loads(data)
    assert all(isinstance(payload[k], str) or payload[k] is None
               for k in IDENTITY_FIELDS if k in payload)
