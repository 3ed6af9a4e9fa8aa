"""The protocol of DESIGN.md §7, typed once: every op a UI sends and every event the core sends.

On the wire and in the events log an op or an event stays a plain JSON object; the TypedDicts
below say what each one holds, and the rest of the protocol comes from them, once, at import:

- the names: constants to compare with and to write (`msg["type"] == wire.TOOL_CALL`), and the
  tuples EVENT_TYPES, OP_TYPES, BACKEND_EVENT_TYPES, TASK_ENDS, ABORT_REASONS and DECISIONS;
- the field tables EVENT_FIELDS and OP_FIELDS (one `Field` per key beside `type`), and the
  checks made from them: `event_problem` (what the events log writes and reads back) and
  `op_problem` (what `cos protocol` and a job's socket accept);
- the JSON Schema docs/protocol-v1.schema.json (`json_schema`; `python -m
  coding_os.runtime.wire` prints it), which tests/runtime/test_wire.py holds equal to the file.

The fields of an event that §7 names are checked; a field an event type declares `NotRequired`
is one cos itself writes beside them (the settings of `session_configured`, exec's `stream`,
Codex's `status`): typed here for cos's own code, described in the schema, never checked —
readers keep and ignore what they do not know. An op's optional fields are checked when present
and not null. No event or op name is written as a string anywhere else in cos but in the
adapters that parse an agent's own wire (tests/test_imports.py holds this).

This module imports nothing of cos's; the hook's path never imports it.
"""

# No `from __future__ import annotations`: the checks and the schema are read off the classes'
# annotations, which must be the typing objects themselves.

import types
from collections.abc import Callable
from typing import (Annotated, Any, Final, Literal, NamedTuple, NotRequired, TypedDict,
                    TypeGuard, Union, get_args, get_origin)

__all__ = [
    # names
    "SESSION_CONFIGURED", "TASK_STARTED", "AGENT_MESSAGE", "AGENT_MESSAGE_DELTA", "TOOL_CALL",
    "TOOL_RESULT", "APPROVAL_REQUEST", "TASK_COMPLETE", "TURN_ABORTED", "ERROR", "NATIVE",
    "CONFIGURE", "USER_INPUT", "INTERRUPT", "APPROVAL", "RESUME", "FORK", "SHUTDOWN",
    "ABORT_INTERRUPTED", "ABORT_REPLACED", "ABORT_BACKEND_EXIT", "ABORT_SHUTDOWN",
    "ALLOW", "DENY",
    "EVENT_TYPES", "OP_TYPES", "BACKEND_EVENT_TYPES", "TASK_ENDS", "ABORT_REASONS", "DECISIONS",
    "FORMAT_VERSION", "SESSION_ID_PATTERN",
    # types
    "EventType", "OpType", "BackendEventType", "AbortReason", "Decision", "Ref", "Minimum",
    "Pattern", "SessionConfigured", "TaskStarted", "AgentMessage", "AgentMessageDelta",
    "ToolCall", "ToolResult", "ApprovalRequest", "TaskComplete", "TurnAborted", "Error",
    "Native", "Msg", "Configure", "UserInput", "Interrupt", "Approval", "Resume", "Fork",
    "Shutdown", "Op", "StoredEvent", "ClientError", "Submission", "EVENTS", "OPS",
    # what comes from them
    "Field", "EVENT_FIELDS", "OP_FIELDS", "event_problem", "op_problem",
    "is_backend_event_type", "json_schema", "schema_text",
]

# ---------------------------------------------------------------------------------------------
# Names

SESSION_CONFIGURED: Final = "session_configured"
TASK_STARTED: Final = "task_started"
AGENT_MESSAGE: Final = "agent_message"
AGENT_MESSAGE_DELTA: Final = "agent_message_delta"
TOOL_CALL: Final = "tool_call"
TOOL_RESULT: Final = "tool_result"
APPROVAL_REQUEST: Final = "approval_request"
TASK_COMPLETE: Final = "task_complete"
TURN_ABORTED: Final = "turn_aborted"
ERROR: Final = "error"
NATIVE: Final = "native"

CONFIGURE: Final = "configure"
USER_INPUT: Final = "user_input"
INTERRUPT: Final = "interrupt"
APPROVAL: Final = "approval"
RESUME: Final = "resume"
FORK: Final = "fork"
SHUTDOWN: Final = "shutdown"

# Why a task ended without completing (`turn_aborted` `reason`).
ABORT_INTERRUPTED: Final = "interrupted"
ABORT_REPLACED: Final = "replaced"
ABORT_BACKEND_EXIT: Final = "backend_exit"
ABORT_SHUTDOWN: Final = "shutdown"

# The answers to an approval request (`approval` `decision`).
ALLOW: Final = "allow"
DENY: Final = "deny"

FORMAT_VERSION: Final = 1
SESSION_ID_PATTERN: Final = "^ses-[a-z][a-z0-9_-]{0,31}-[0-9]{8}-[0-9]{6}-[0-9a-f]{4}$"

EventType = Literal["session_configured", "task_started", "agent_message",
                    "agent_message_delta", "tool_call", "tool_result", "approval_request",
                    "task_complete", "turn_aborted", "error", "native"]
OpType = Literal["configure", "user_input", "interrupt", "approval", "resume", "fork",
                 "shutdown"]
# What a backend yields: every event but the two the core adds itself (DESIGN.md §6).
BackendEventType = Literal["agent_message", "agent_message_delta", "tool_call", "tool_result",
                           "approval_request", "error", "native", "task_complete",
                           "turn_aborted"]
AbortReason = Literal["interrupted", "replaced", "backend_exit", "shutdown"]
Decision = Literal["allow", "deny"]

# ---------------------------------------------------------------------------------------------
# Field types

Ref = Union[str, int]
"""A task or request id: a string or an integer (never true or false)."""


class Minimum:
    """`Annotated[int, Minimum(n)]`: an integer n or more."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class Pattern:
    """`Annotated[str, Pattern(p)]`: a string the regular expression p matches."""

    __slots__ = ("regex",)

    def __init__(self, regex: str) -> None:
        self.regex = regex


# `object` is any JSON value.

# ---------------------------------------------------------------------------------------------
# Events (core -> UI): the `msg` of an event line


class SessionConfigured(TypedDict):
    """A backend started (or resumed) the session's native session; also what a rewind
    repoints it to. Its settings are what the next serving process starts the backend with."""

    type: Literal["session_configured"]
    native_id: Annotated[str | None, "The agent's own session id (Claude Code's session, "
                                     "Codex's thread); null until the agent says it."]
    agent: Annotated[str, "The agent: claude, codex, python, exec."]
    cwd: Annotated[str, "The agent's directory."]
    model: NotRequired[Annotated[str | None, "The model asked for (null: the agent's own)."]]
    permission_mode: NotRequired[Annotated[str | None, "The permission mode asked for."]]
    options: NotRequired[Annotated[dict[str, object], "The backend's own settings."]]
    project: NotRequired[Annotated[str | None, "The project root the session belongs to."]]


class TaskStarted(TypedDict):
    """A user input started a task; every event of the task carries the input's id."""

    type: Literal["task_started"]
    task: Annotated[Ref, "The task's id."]


class AgentMessage(TypedDict):
    """What the agent said, whole."""

    type: Literal["agent_message"]
    text: Annotated[str, "The message."]
    stream: NotRequired[Annotated[str, "exec: stdout or stderr, the stream the line came "
                                       "from."]]


class AgentMessageDelta(TypedDict):
    """A piece of a message the agent is still writing (its agent_message follows)."""

    type: Literal["agent_message_delta"]
    text: Annotated[str, "The piece."]


class ToolCall(TypedDict):
    """The agent calls a tool."""

    type: Literal["tool_call"]
    call_id: Annotated[str, "The call's id; its tool_result names it."]
    tool: Annotated[str, "The tool's name."]
    input: Annotated[object, "The tool's input, as the agent gave it."]


class ToolResult(TypedDict):
    """A tool call ended."""

    type: Literal["tool_result"]
    call_id: Annotated[str, "The id of the tool_call."]
    ok: Annotated[bool, "Whether the tool succeeded."]
    output: Annotated[object, "What the tool gave back."]
    exit_code: NotRequired[Annotated[int | None, "Codex: the command's exit status."]]
    status: NotRequired[Annotated[str, "Codex: the item's status."]]


class ApprovalRequest(TypedDict):
    """The agent asks whether a tool may run; an approval op answers it."""

    type: Literal["approval_request"]
    request: Annotated[Ref, "The request's id, which the approval op names."]
    tool: Annotated[str, "The tool's name."]
    input: Annotated[object, "The tool's input."]
    call_id: NotRequired[Annotated[str | None, "Codex: the id of the item asking."]]


class TaskComplete(TypedDict):
    """The task ended: the agent finished its turn."""

    type: Literal["task_complete"]
    task: Annotated[Ref, "The task's id."]
    usage: Annotated[object, "What the turn used, as the backend reports it (tokens: input, "
                             "output, cached_input...; exec: exit_code), or null."]
    status: NotRequired[Annotated[str | None, "Codex: the turn's status."]]


class TurnAborted(TypedDict):
    """The task ended before the agent finished its turn."""

    type: Literal["turn_aborted"]
    task: Annotated[Ref, "The task's id."]
    reason: Annotated[AbortReason, "interrupted (an interrupt op or the reply watchdog), "
                                   "replaced (a new user_input), backend_exit (the agent's "
                                   "process ended), shutdown."]


class Error(TypedDict):
    """Something failed. Stored with a seq when it is the session's; sent to one client only,
    with seq null, when it is about that client's input."""

    type: Literal["error"]
    message: Annotated[str, "One line saying what failed."]
    fatal: Annotated[bool, "Whether the session's backend (or the session) stopped."]


class Native(TypedDict):
    """One event of the agent's own wire, as it came, for UIs that want it."""

    type: Literal["native"]
    raw: Annotated[object, "The backend's own event (a line it could not parse: the text)."]


Msg = Union[SessionConfigured, TaskStarted, AgentMessage, AgentMessageDelta, ToolCall,
            ToolResult, ApprovalRequest, TaskComplete, TurnAborted, Error, Native]
EVENTS: Final = (SessionConfigured, TaskStarted, AgentMessage, AgentMessageDelta, ToolCall,
                 ToolResult, ApprovalRequest, TaskComplete, TurnAborted, Error, Native)

# ---------------------------------------------------------------------------------------------
# Ops (UI -> core): the `op` of a submission


class Configure(TypedDict):
    """Start a session's backend: with no session open, a new session; with one open (after
    resume or --session), its backend with these settings. Every field may be left out when
    --agent or the open session says it."""

    type: Literal["configure"]
    agent: NotRequired[Annotated[str | None, "The agent: claude, codex, python, exec."]]
    cwd: NotRequired[Annotated[str | None, "The agent's directory."]]
    options: NotRequired[Annotated[dict[str, object] | None, "The backend's own settings."]]
    command: NotRequired[Annotated[str | None, "exec: the command (also in options)."]]
    target: NotRequired[Annotated[str | None, "python: the agent, module:attr (also in "
                                              "options)."]]
    model: NotRequired[Annotated[str | None, "The model."]]
    permission_mode: NotRequired[Annotated[str | None, "The permission mode."]]


class UserInput(TypedDict):
    """Start a task (a running one ends turn_aborted replaced)."""

    type: Literal["user_input"]
    text: Annotated[str, "What the user says."]


class Interrupt(TypedDict):
    """End the running task (turn_aborted interrupted)."""

    type: Literal["interrupt"]


class Approval(TypedDict):
    """Answer an approval_request; the tool runs only when allowed."""

    type: Literal["approval"]
    request: Annotated[Ref, "The id of the approval_request."]
    decision: Annotated[Decision, "allow or deny."]


class Resume(TypedDict):
    """Send every stored event of a session after last_seq, then the live ones."""

    type: Literal["resume"]
    session: Annotated[str, "The cos session id."]
    last_seq: Annotated[int, Minimum(0), "The seq of the last event the client has (0: "
                                         "none)."]


class Fork(TypedDict):
    """Fork a session into a new one and start its backend."""

    type: Literal["fork"]
    session: Annotated[str, "The cos session id of the source."]
    at: NotRequired[Annotated[int | None, "python sessions: the seq of the source's "
                                          "transcript to fork at."]]


class Shutdown(TypedDict):
    """End the running task (turn_aborted shutdown), the backend and the process."""

    type: Literal["shutdown"]


Op = Union[Configure, UserInput, Interrupt, Approval, Resume, Fork, Shutdown]
OPS: Final = (Configure, UserInput, Interrupt, Approval, Resume, Fork, Shutdown)

# ---------------------------------------------------------------------------------------------
# The lines


class StoredEvent(TypedDict):
    """One event as the events log stores it and the core sends it (its head always first and
    in this order)."""

    v: Annotated[Literal[1], "The format version."]
    seq: Annotated[int, Minimum(1), "Dense and increasing per session, from 1."]
    ts: Annotated[str, "When it was stored: ISO-8601 UTC with milliseconds."]
    session: Annotated[str, Pattern(SESSION_ID_PATTERN), "The cos session id."]
    id: Annotated[str | None, "The submission the event answers, or null."]
    msg: Msg


class ClientError(TypedDict):
    """An error for one client only (its bad input; a session whose events can no longer be
    stored): never stored, so its seq is null."""

    v: NotRequired[Literal[1]]
    seq: None
    ts: NotRequired[None]
    session: Annotated[str | None, "The session the client is attached to, if any."]
    id: Annotated[str | int | None, "The id of the submission it answers, or null."]
    msg: Error


class Submission(TypedDict):
    """One line a UI sends: an op, with an id the events it causes carry back."""

    id: NotRequired[Annotated[str | int | None, "The client's id of the submission."]]
    op: Op


# ---------------------------------------------------------------------------------------------
# What comes from the types


class Field(NamedTuple):
    """One key of an op or event beside `type`, as its annotation says."""

    name: str
    required: bool
    types: tuple[type, ...]  # what a value may be (bool only when named); () is any JSON value
    nullable: bool  # null is allowed too
    values: tuple[object, ...]  # the only values allowed (a Literal); () is any of `types`
    minimum: int | None
    description: str

    @property
    def kind(self) -> str:
        """What a value must be, in words ("a string", "true or false", "one of a, b")."""
        if self.values:
            return "one of " + ", ".join(str(value) for value in self.values)
        if not self.types:
            return "any JSON value"
        return " or ".join(_TYPE_WORDS[t] for t in self.types)


_TYPE_WORDS: dict[type, str] = {str: "a string", int: "an integer", bool: "true or false",
                                dict: "an object", type(None): "null"}
_WIRE_TYPES = (str, int, bool, dict)


def _unwrap(annotation: Any) -> tuple[Any, list[object]]:
    """The annotation without NotRequired and Annotated, and the Annotated metadata."""
    metadata: list[object] = []
    while True:
        origin = get_origin(annotation)
        if origin is NotRequired:
            annotation = get_args(annotation)[0]
        elif origin is Annotated:
            metadata.extend(annotation.__metadata__)
            annotation = get_args(annotation)[0]
        else:
            return annotation, metadata


def _field(name: str, annotation: Any, required: bool) -> Field:
    """The Field of one annotation (a type of _WIRE_TYPES, `object`, a Literal of strings, or
    a union of those with None)."""
    base, metadata = _unwrap(annotation)
    members = get_args(base) if get_origin(base) in (Union, types.UnionType) else (base,)
    nullable = type(None) in members or None in members
    kinds: list[type] = []
    values: tuple[object, ...] = ()
    for member in members:
        member = _unwrap(member)[0]
        if member in (type(None), None):
            continue
        if get_origin(member) is Literal:
            values = get_args(member)
            kinds.append(type(values[0]))
        elif get_origin(member) is dict or member is dict:
            kinds.append(dict)
        elif member is object:
            kinds = []
            break
        elif member in _WIRE_TYPES:
            kinds.append(member)
        else:
            raise TypeError(f"{name}: no wire type for {member!r}")
    minimum = next((m.value for m in metadata if isinstance(m, Minimum)), None)
    description = " ".join(m for m in metadata if isinstance(m, str))
    return Field(name, required, tuple(kinds), bool(nullable), values, minimum, description)


def _fields(cls: Any) -> tuple[str, tuple[Field, ...]]:
    """The type name of an op or event class and its fields beside `type`, in order."""
    annotations = dict(cls.__annotations__)
    (name,) = get_args(annotations.pop("type"))
    required = cls.__required_keys__
    return name, tuple(_field(key, value, key in required) for key, value in annotations.items())


EVENT_FIELDS: Final[dict[str, tuple[Field, ...]]] = dict(_fields(cls) for cls in EVENTS)
OP_FIELDS: Final[dict[str, tuple[Field, ...]]] = dict(_fields(cls) for cls in OPS)
EVENT_TYPES: Final[tuple[EventType, ...]] = get_args(EventType)
OP_TYPES: Final[tuple[OpType, ...]] = get_args(OpType)
BACKEND_EVENT_TYPES: Final[tuple[BackendEventType, ...]] = get_args(BackendEventType)
ABORT_REASONS: Final[tuple[AbortReason, ...]] = get_args(AbortReason)
DECISIONS: Final[tuple[Decision, ...]] = get_args(Decision)
# The events that end a task.
TASK_ENDS: Final[tuple[BackendEventType, ...]] = (TASK_COMPLETE, TURN_ABORTED)

if tuple(EVENT_FIELDS) != EVENT_TYPES or tuple(OP_FIELDS) != OP_TYPES:
    raise AssertionError("wire: the name tuples and the classes disagree")

_BACKEND_EVENT_SET = frozenset(BACKEND_EVENT_TYPES)


def is_backend_event_type(name: object) -> TypeGuard[BackendEventType]:
    """Whether `name` is an event type a backend may yield."""
    return isinstance(name, str) and name in _BACKEND_EVENT_SET


Check = Callable[[object], str | None]


def _check(field: Field) -> Check | None:
    """A check of one value of a field (None: any JSON value): None, or what is wrong with it
    ("must be a string")."""
    if field.values:
        allowed = field.values + ((None,) if field.nullable else ())
        message = f"must be {field.kind}"
        return lambda value: None if value in allowed else message
    if not field.types:
        return None
    kinds = field.types + ((type(None),) if field.nullable else ())
    message = f"must be {field.kind}"
    if bool in kinds or int not in kinds:
        return lambda value: None if isinstance(value, kinds) else message
    return lambda value: None if isinstance(value, kinds) and value is not True \
        and value is not False else message


# Per event type: each required field and its check. Fields cos adds beside them go unchecked.
_EVENT_CHECKS: dict[str, tuple[tuple[str, Check | None], ...]] = {
    name: tuple((f.name, _check(f)) for f in fields if f.required)
    for name, fields in EVENT_FIELDS.items()}


def event_problem(msg: object) -> str | None:
    """What keeps `msg` from being an event of §7 (its `type` and that type's fields), or None.
    Fields beside those of the type are allowed."""
    if not isinstance(msg, dict):
        return f"an event must be a JSON object, not {type(msg).__name__}"
    event_type = msg.get("type")
    checks = _EVENT_CHECKS.get(event_type) if isinstance(event_type, str) else None
    if checks is None:
        return f"unknown event type {str(event_type)[:40]!r}"
    for name, check in checks:
        if name not in msg:
            return f"{event_type}: missing field {name!r}"
        if check is not None:
            problem = check(msg[name])
            if problem:
                return f"{event_type}: {name} {problem}"
    return None


def op_problem(op: object) -> str | None:
    """What keeps `op` from being an op of §7, or None: an object with a known `type`, each
    required field present and not null, each field given (not null) of its type."""
    if not isinstance(op, dict) or not isinstance(op.get("type"), str):
        return "the line has no op (an object with a type)"
    op_type = op["type"]
    fields = OP_FIELDS.get(op_type)
    if fields is None:
        return f"unknown op {op_type[:40]!r}: expected one of {', '.join(OP_TYPES)}"
    for field in fields:
        value = op.get(field.name)
        if value is None:
            if field.required:
                return f"{op_type}: the field {field.name!r} is missing"
            continue
        if not isinstance(value, field.types) or (isinstance(value, bool)
                                                  and bool not in field.types):
            return f"{op_type}: the field {field.name!r} is of the wrong type"
        if field.values and value not in field.values:
            return f"{op_type}: the {field.name} must be {' or '.join(map(str, field.values))}"
        if field.minimum is not None and isinstance(value, int) and value < field.minimum:
            return f"{op_type}: {field.name} must be {field.minimum} or more"
    return None


# ---------------------------------------------------------------------------------------------
# The JSON Schema

_SCHEMA_TYPES = {str: "string", int: "integer", bool: "boolean", dict: "object",
                 type(None): "null"}
_LINES = (StoredEvent, ClientError, Submission)


def _value_schema(annotation: Any, checked: bool) -> dict[str, Any]:
    """The schema of one field's value; only its description when it is not `checked`."""
    base, metadata = _unwrap(annotation)
    schema: dict[str, Any] = {}
    description = " ".join(m for m in metadata if isinstance(m, str))
    if description:
        schema["description"] = description
    if not checked:
        field = _field("", annotation, False)
        kind = field.kind + (" or null" if field.nullable else "")
        schema["description"] = f"{description} Written by cos as {kind}; not checked.".lstrip()
        return schema
    if base is Msg:
        return {**schema, "$ref": "#/$defs/msg"}
    if base is Op:
        return {**schema, "$ref": "#/$defs/op"}
    if base in EVENTS:
        return {**schema, "$ref": f"#/$defs/{_fields(base)[0]}"}
    field = _field("", annotation, True)
    if field.values:
        values = [*field.values, *([None] if field.nullable else [])]
        schema.update({"const": values[0]} if len(values) == 1 else {"enum": values})
        return schema
    kinds = [_SCHEMA_TYPES[t] for t in field.types]
    if kinds and field.nullable:
        kinds.append("null")
    elif not kinds and field.nullable and base in (None, type(None)):
        kinds = ["null"]
    if kinds:
        schema["type"] = kinds[0] if len(kinds) == 1 else kinds
    if field.minimum is not None:
        schema["minimum"] = field.minimum
    pattern = next((m.regex for m in metadata if isinstance(m, Pattern)), None)
    if pattern is not None:
        schema["pattern"] = pattern
    return schema


def _object_schema(cls: Any, check_optional: bool) -> dict[str, Any]:
    """The schema of a class: its required keys, each key's value (the optional ones
    described only, unless `check_optional`)."""
    annotations = cls.__annotations__
    required = [key for key in annotations if key in cls.__required_keys__]
    properties = {key: _value_schema(value, key in cls.__required_keys__ or check_optional)
                  for key, value in annotations.items()}
    schema: dict[str, Any] = {"description": " ".join((cls.__doc__ or "").split()),
                              "type": "object", "required": required,
                              "properties": properties}
    return schema


def _tagged(classes: tuple[Any, ...], what: str) -> dict[str, Any]:
    """An object whose `type` names one of `classes`, checked against that class's schema."""
    names = [_fields(cls)[0] for cls in classes]
    return {"description": f"One {what}: its type, and that type's fields.",
            "type": "object", "required": ["type"],
            "properties": {"type": {"enum": names}},
            "allOf": [{"if": {"properties": {"type": {"const": name}}},
                       "then": {"$ref": f"#/$defs/{name}"}} for name in names]}


def json_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of one line of the protocol, either way (docs/protocol-v1.
    schema.json): `$defs/event` is a line the core sends (a line of an events log is a
    `stored_event`), `$defs/submission` a line a UI sends."""
    defs: dict[str, Any] = {
        "event": {"description": "One line the core sends: a stored event, or an error for "
                                 "that client only.",
                  "anyOf": [{"$ref": "#/$defs/stored_event"}, {"$ref": "#/$defs/client_error"}]},
        "stored_event": _object_schema(StoredEvent, True),
        "client_error": _object_schema(ClientError, True),
        "msg": _tagged(EVENTS, "event"),
    }
    defs.update((_fields(cls)[0], _object_schema(cls, False)) for cls in EVENTS)
    defs["submission"] = _object_schema(Submission, True)
    defs["op"] = _tagged(OPS, "op")
    defs.update((_fields(cls)[0], _object_schema(cls, True)) for cls in OPS)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:coding-os:protocol:v1",
        "title": "coding-os protocol v1: one line, either way",
        "description": "The protocol of DESIGN.md §7 (docs/protocol.md), generated from "
                       "src/coding_os/runtime/wire.py. A line the core sends is an event "
                       "($defs/event; each line of <agent>/events/<sid>.jsonl is a "
                       "stored_event), a line a UI sends a submission ($defs/submission). "
                       "Fields not listed are allowed; readers ignore them. Not expressible "
                       "here and checked by cos: seq is dense per session.",
        "anyOf": [{"$ref": "#/$defs/event"}, {"$ref": "#/$defs/submission"}],
        "$defs": defs,
    }


def schema_text() -> str:
    """docs/protocol-v1.schema.json as it must read: `json_schema()`, indented, one newline at
    the end."""
    import json

    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(schema_text())
