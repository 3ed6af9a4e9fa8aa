"""The protocol typed once (runtime/wire.py): the committed JSON Schema is the one its types
generate, every event of a recorded engine session validates against it, and the checks the
engine makes (`event_problem`, `op_problem`) accept and refuse what the schema does."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coding_os.runtime import events, wire
from coding_os.state.identity import is_session_id
from coding_os.state.tiers import Tiers
from tests.sessions.jsonschema_subset import ANNOTATING, ASSERTING, errors, keywords

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "docs" / "protocol-v1.schema.json"
SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
Start = Any  # the `protocol` fixture: starts a cos protocol process


def problems(instance: Any, definition: str) -> list[str]:
    """Every way `instance` fails the schema's `$defs/<definition>`."""
    return errors(instance, SCHEMA["$defs"][definition], SCHEMA)


# --- the schema -------------------------------------------------------------------------------


def test_the_committed_schema_is_the_one_the_wire_generates() -> None:
    # To write it again: python -m coding_os.runtime.wire > docs/protocol-v1.schema.json
    assert SCHEMA_PATH.read_text(encoding="utf-8") == wire.schema_text()


def test_the_subset_validator_knows_every_keyword_the_schema_uses() -> None:
    assert keywords(SCHEMA) <= ASSERTING | ANNOTATING


def test_the_schema_has_one_definition_per_event_and_op_with_its_required_fields() -> None:
    assert SCHEMA["$defs"]["msg"]["properties"]["type"]["enum"] == list(wire.EVENT_TYPES)
    assert SCHEMA["$defs"]["op"]["properties"]["type"]["enum"] == list(wire.OP_TYPES)
    for table in (wire.EVENT_FIELDS, wire.OP_FIELDS):
        for name, fields in table.items():
            definition = SCHEMA["$defs"][name]
            assert definition["required"] == ["type", *(f.name for f in fields if f.required)]
            assert list(definition["properties"]) == ["type", *(f.name for f in fields)]


# --- the names and the tables -----------------------------------------------------------------


def test_the_events_and_their_checked_fields_are_those_of_design_section_7() -> None:
    # The table events.py kept by hand before the wire was typed: the same checks, from it.
    contract = {
        "session_configured": [("native_id", "a string", True), ("agent", "a string", False),
                               ("cwd", "a string", False)],
        "task_started": [("task", "a string or an integer", False)],
        "agent_message": [("text", "a string", False)],
        "agent_message_delta": [("text", "a string", False)],
        "tool_call": [("call_id", "a string", False), ("tool", "a string", False),
                      ("input", "any JSON value", False)],
        "tool_result": [("call_id", "a string", False), ("ok", "true or false", False),
                        ("output", "any JSON value", False)],
        "approval_request": [("request", "a string or an integer", False),
                             ("tool", "a string", False), ("input", "any JSON value", False)],
        "task_complete": [("task", "a string or an integer", False),
                          ("usage", "any JSON value", False)],
        "turn_aborted": [("task", "a string or an integer", False),
                         ("reason", "one of interrupted, replaced, backend_exit, shutdown",
                          False)],
        "error": [("message", "a string", False), ("fatal", "true or false", False)],
        "native": [("raw", "any JSON value", False)],
    }
    assert {name: [(f.name, f.kind, f.nullable) for f in fields if f.required]
            for name, fields in wire.EVENT_FIELDS.items()} == contract


def test_the_name_constants_name_the_types_once() -> None:
    assert wire.EVENT_TYPES == (
        wire.SESSION_CONFIGURED, wire.TASK_STARTED, wire.AGENT_MESSAGE, wire.AGENT_MESSAGE_DELTA,
        wire.TOOL_CALL, wire.TOOL_RESULT, wire.APPROVAL_REQUEST, wire.TASK_COMPLETE,
        wire.TURN_ABORTED, wire.ERROR, wire.NATIVE)
    assert wire.OP_TYPES == (wire.CONFIGURE, wire.USER_INPUT, wire.INTERRUPT, wire.APPROVAL,
                             wire.RESUME, wire.FORK, wire.SHUTDOWN)
    # A backend yields every event but the two the core adds itself.
    assert set(wire.BACKEND_EVENT_TYPES) == set(wire.EVENT_TYPES) - {wire.SESSION_CONFIGURED,
                                                                      wire.TASK_STARTED}
    assert wire.ABORT_REASONS == (wire.ABORT_INTERRUPTED, wire.ABORT_REPLACED,
                                  wire.ABORT_BACKEND_EXIT, wire.ABORT_SHUTDOWN)
    assert wire.DECISIONS == (wire.ALLOW, wire.DENY)


@given(st.one_of(st.text(max_size=70), st.from_regex(wire.SESSION_ID_PATTERN, fullmatch=True)))
def test_the_schemas_session_id_is_the_one_identity_checks(value: str) -> None:
    # As JSON Schema reads it (ECMA-262): `$` is the end of the text, never before a newline.
    whole = wire.SESSION_ID_PATTERN.removeprefix("^").removesuffix("$")
    assert bool(re.fullmatch(whole, value)) == is_session_id(value)


# --- the checks agree with the schema ----------------------------------------------------------

# Values of every JSON kind (and of the Literal fields), to give any field.
JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-3, max_value=3), st.just(1.5),
    st.sampled_from(["", "x", *wire.ABORT_REASONS, *wire.DECISIONS]),
    st.just([]), st.just({}), st.just({"input": 1}))


def of_kind(field: wire.Field, below: bool = False) -> st.SearchStrategy[Any]:
    """Values of the field's kind (with `below`, for a field with a minimum: the integer below
    it, or the minimum)."""
    if field.values:
        return st.sampled_from(field.values)
    if not field.types:
        return JSON_VALUES
    if below and field.minimum is not None:
        return st.sampled_from([field.minimum - 1, field.minimum])
    least = -3 if field.minimum is None else field.minimum
    kinds = {str: st.text(max_size=3), int: st.integers(min_value=least, max_value=3),
             bool: st.booleans(), dict: st.just({"k": 1})}
    return st.one_of(*(kinds[kind] for kind in field.types),
                     *([st.none()] if field.nullable else []))


@st.composite
def messages(draw: st.DrawFn, table: dict[str, tuple[wire.Field, ...]]) -> dict[str, Any]:
    """An object of a type of `table` (or another) whose fields are of their kinds, but for
    one, perhaps: left out, or given an integer below its minimum or any JSON value."""
    name = draw(st.sampled_from([*table, "bogus"]))
    fields = table.get(name, ())
    message: dict[str, Any] = {"type": name}
    for field in fields:
        if field.required or draw(st.booleans()):
            message[field.name] = draw(of_kind(field))
    if fields and draw(st.booleans()):
        field = draw(st.sampled_from(fields))
        if draw(st.integers(0, 3)) == 0:
            message.pop(field.name, None)
        else:
            message[field.name] = draw(st.one_of(of_kind(field, below=True), JSON_VALUES))
    return message


@settings(max_examples=1000)
@given(messages(wire.EVENT_FIELDS))
def test_an_event_the_engine_refuses_is_one_the_schema_refuses(msg: dict[str, Any]) -> None:
    assert (wire.event_problem(msg) is None) == (problems(msg, "msg") == [])


@pytest.mark.slow
@settings(max_examples=1000)
@given(messages(wire.OP_FIELDS))
def test_an_op_cos_protocol_refuses_is_one_the_schema_refuses(op: dict[str, Any]) -> None:
    assert (wire.op_problem(op) is None) == (problems(op, "op") == [])


@pytest.mark.parametrize("op, message", [
    ("not an object", "the line has no op (an object with a type)"),
    ({"text": "no type"}, "the line has no op (an object with a type)"),
    ({"type": "chat"}, "unknown op 'chat': expected one of configure, user_input, interrupt, "
                       "approval, resume, fork, shutdown"),
    ({"type": "user_input"}, "user_input: the field 'text' is missing"),
    ({"type": "user_input", "text": None}, "user_input: the field 'text' is missing"),
    ({"type": "user_input", "text": 3}, "user_input: the field 'text' is of the wrong type"),
    ({"type": "approval", "request": True, "decision": "allow"},
     "approval: the field 'request' is of the wrong type"),
    ({"type": "approval", "request": 1, "decision": "maybe"},
     "approval: the decision must be allow or deny"),
    ({"type": "resume", "session": "s", "last_seq": -1}, "resume: last_seq must be 0 or more"),
    ({"type": "resume", "session": "s", "last_seq": False},
     "resume: the field 'last_seq' is of the wrong type"),
    ({"type": "configure", "options": []}, "configure: the field 'options' is of the wrong type"),
    ({"type": "fork", "session": "s", "at": "3"}, "fork: the field 'at' is of the wrong type"),
])
def test_a_bad_op_gets_the_message_that_names_what_is_wrong(op: object, message: str) -> None:
    assert wire.op_problem(op) == message


# --- a recorded engine session ---------------------------------------------------------------

EVERY_EVENT_AGENT = """
    import asyncio


    class EveryEvent:
        async def run_turn(self, session, text):
            if text == "wait":
                yield {"type": "agent_message", "text": "waiting"}
                await asyncio.sleep(60)
                return
            yield {"type": "agent_message_delta", "text": "he"}
            yield {"type": "agent_message", "text": "hello"}
            yield {"type": "native", "raw": {"kind": "the agent's own", "n": [1, None]}}
            allowed = await session.approve("Write", {"file_path": "notes.txt"})
            yield {"type": "tool_call", "call_id": "c1", "tool": "Write",
                   "input": {"file_path": "notes.txt"}}
            yield {"type": "tool_result", "call_id": "c1", "ok": allowed, "output": "written"}
            yield {"type": "error", "message": "a warning", "fatal": False}
            yield {"type": "task_complete", "usage": {"input": 3, "output": 2}}
"""


def test_every_event_of_a_recorded_engine_session_validates_against_the_schema(
        protocol: Start, project: Path) -> None:
    (project / "every_event.py").write_text(textwrap.dedent(EVERY_EVENT_AGENT), encoding="utf-8")
    client = protocol("--agent", "python")
    sent: list[dict[str, Any]] = []

    def send(op_type: str, **fields: Any) -> None:
        sent.append({"id": client.send(op_type, **fields), "op": {"type": op_type, **fields}})

    send(wire.CONFIGURE, target="every_event.py:EveryEvent", model=None)
    session = client.until_type(wire.SESSION_CONFIGURED)[-1]["session"]
    send(wire.USER_INPUT, text="go")
    asked = client.until_type(wire.APPROVAL_REQUEST)[-1]["msg"]
    send(wire.APPROVAL, request=asked["request"], decision=wire.ALLOW)
    client.until_type(wire.TASK_COMPLETE)
    send(wire.USER_INPUT, text="wait")
    client.until_says("waiting")
    send(wire.INTERRUPT)
    client.until_type(wire.TURN_ABORTED)
    last = client.seen[-1]["seq"]
    send(wire.RESUME, session=session, last_seq=0)  # the whole log again, then live
    replayed = client.until(lambda event: event["seq"] == last)
    assert [event["seq"] for event in replayed] == list(range(1, last + 1))
    send(wire.INTERRUPT)  # no task runs: an error for this client only
    refused = client.until(lambda event: event["seq"] is None)[-1]
    send(wire.SHUTDOWN)
    assert client.proc.wait(timeout=30) == 0

    stored = events.read_since(events.events_path(Tiers(str(project / ".coding-os")), session),
                               0)
    assert stored.report.ok and stored.events
    assert {event["msg"]["type"] for event in stored.events} == set(wire.EVENT_TYPES)
    assert [(e["seq"], problems(e, "stored_event")) for e in stored.events
            if problems(e, "stored_event")] == []
    assert [(e, problems(e, "event")) for e in client.seen if problems(e, "event")] == []
    assert refused["msg"]["type"] == wire.ERROR and problems(refused, "client_error") == []
    assert [(s, problems(s, "submission")) for s in sent if problems(s, "submission")] == []
    # The top of the schema takes a line either way.
    assert errors(sent[0], SCHEMA, SCHEMA) == [] and errors(stored.events[0], SCHEMA, SCHEMA) == []


@pytest.mark.parametrize("line", [
    {"v": 1, "seq": 0, "ts": "t", "session": "ses-exec-20261202-020113-fa38", "id": None,
     "msg": {"type": "error", "message": "m", "fatal": False}},
    {"v": 2, "seq": 1, "ts": "t", "session": "ses-exec-20261202-020113-fa38", "id": None,
     "msg": {"type": "error", "message": "m", "fatal": False}},
    {"v": 1, "seq": 1, "ts": "t", "session": "exec-20261202", "id": None,
     "msg": {"type": "error", "message": "m", "fatal": False}},
    {"v": 1, "seq": 1, "ts": "t", "session": "ses-exec-20261202-020113-fa38", "id": 7,
     "msg": {"type": "error", "message": "m", "fatal": False}},
    {"v": 1, "seq": 1, "ts": "t", "session": "ses-exec-20261202-020113-fa38", "id": None,
     "msg": {"type": "turn_aborted", "task": 1, "reason": "bored"}},
])
def test_the_schema_and_the_events_log_both_refuse_a_bad_line(line: dict[str, Any],
                                                              tmp_path: Path) -> None:
    assert problems(line, "stored_event") != []
    path = tmp_path / "ses-exec-20261202-020113-fa38.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    read = events.read_since(str(path), 0)
    assert read.events == [] and read.report.kinds() == [events.INVALID_EVENT]
