"""What a message of a Gemini CLI session says: its text, its kind, its tool calls and their
results, its thoughts and tokens, as ordered conversation entries (for export and replay).

A message (checked with Gemini CLI 0.61.0 and 0.38.2) has `id`, `timestamp`, `type` and
`content`: a string, or Gemini API parts (`text`, `thought`, `functionCall`,
`functionResponse`, `inlineData`, `fileData`). A `user` message is a typed prompt, the injected
`<session_context>` (or `<hook_context>`), a `/command`, or (0.61) a tool's function response.
A `gemini` message is one model response: `thoughts` (`subject`, `description`), `tokens`,
`model` and `toolCalls` (`id`, `name`, `args`, `result` as functionResponse parts, `status`,
`resultDisplay`, `description`, `displayName`, `agentId` for a subagent's call); when a resumed or
rewound conversation is written back, the same response may carry its thoughts and calls as
content parts instead. `info`, `error` and `warning` messages are the CLI's notices.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_os import jsonwire

__all__ = [
    "KNOWN_MESSAGE_TYPES",
    "GeminiEntry",
    "GeminiTokens",
    "add_tokens",
    "conversation_entries",
    "message_parts",
    "message_tokens",
    "prompt_text",
    "response_counts",
    "user_kind",
]

KNOWN_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "error", "warning"})
NOTICE_TYPES = ("info", "error", "warning")
_INJECTED_PREFIXES = ("<session_context>", "<hook_context>")
_COMMAND_PREFIXES = ("/", "?")  # what Gemini CLI itself never resumes as a prompt
_THOUGHT_SUBJECT = re.compile(r"\*\*(.+?)\*\*", re.S)


@dataclass(frozen=True)
class GeminiTokens:
    """Token use as Gemini CLI records it per model response (`usageMetadata`): `input` is the
    prompt (cached tokens are part of it), `output` the answer, `thoughts` the reasoning and
    `tool` the tool-use prompt, each apart; `total` is all of them."""

    input: int = 0
    output: int = 0
    cached: int = 0
    thoughts: int = 0
    tool: int = 0
    total: int = 0

    # Field by field: dataclasses.astuple deep-copies, and a scan adds once per response.
    def __add__(self, other: GeminiTokens) -> GeminiTokens:
        return GeminiTokens(self.input + other.input, self.output + other.output,
                            self.cached + other.cached, self.thoughts + other.thoughts,
                            self.tool + other.tool, self.total + other.total)

    def __sub__(self, other: GeminiTokens) -> GeminiTokens:
        return GeminiTokens(max(0, self.input - other.input), max(0, self.output - other.output),
                            max(0, self.cached - other.cached),
                            max(0, self.thoughts - other.thoughts),
                            max(0, self.tool - other.tool), max(0, self.total - other.total))

    def to_dict(self) -> dict[str, int]:
        """The totals as JSON."""
        return dataclasses.asdict(self)


_TOKEN_FIELDS = ("input", "output", "cached", "thoughts", "tool", "total")


def add_tokens(totals: list[int], value: object) -> bool:
    """Add the `tokens` a model response recorded (`value`) to `totals`, six counts in the
    order of GeminiTokens' fields; whether it recorded any (`message_tokens` is not None). A
    scan adds every response's tokens this way, without a GeminiTokens for each."""
    if not isinstance(value, dict):
        return False
    for index, name in enumerate(_TOKEN_FIELDS):
        number = value.get(name)
        if number.__class__ is int and number > 0:
            totals[index] += number
    return True


def message_tokens(value: object) -> GeminiTokens | None:
    """The `tokens` a model response recorded, or None when it has none."""
    if not isinstance(value, dict):
        return None
    # A count is a positive int (a bool is not one); anything else counts 0.
    return GeminiTokens(*[number if number.__class__ is int and number > 0 else 0
                          for number in map(value.get, _TOKEN_FIELDS)])


@dataclass(frozen=True)
class GeminiEntry:
    """One step of a Gemini conversation, in order, for export and replay.

    `kind` is `prompt` (typed by the user), `context` (injected by the CLI), `command` (a
    `/command` the CLI kept), `assistant` (the model's text), `thought` (`subject`, `text`),
    `tool_call` (`tool`, `call_id`, `args`, `output`, `status`, `ok`; `agent_id` names the
    subagent an `invoke_agent` call ran), `tool_result` (a function response no call of the
    live conversation claims), `notice` (an `info`, `error` or `warning` message: `subject`) or
    `other` (a message type this module does not know: `subject`). The first entry of a model
    response carries its `model` and `tokens`.
    """

    kind: str
    message_id: str
    timestamp: str | None = None
    text: str | None = None
    subject: str | None = None
    tool: str | None = None
    call_id: str | None = None
    args: Mapping[str, Any] | None = None
    output: str | None = None
    status: str | None = None
    ok: bool | None = None
    agent_id: str | None = None
    model: str | None = None
    tokens: GeminiTokens | None = None


def message_parts(content: object) -> list[dict[str, Any]]:
    """A message's content as Gemini API parts (a string is one text part). A content of one
    part (most messages) is given as it is, not copied: the parts are read, never changed."""
    if isinstance(content, str):
        return [{"text": content}]
    if isinstance(content, list):
        if len(content) == 1 and isinstance(content[0], dict):
            return content
        return [{"text": part} if isinstance(part, str) else part
                for part in content if isinstance(part, (str, dict))]
    if isinstance(content, dict):
        return [content]
    return []


def _text(parts: Sequence[Mapping[str, Any]]) -> str:
    if len(parts) == 1:  # most messages: one part
        text = parts[0].get("text")
        return text if isinstance(text, str) and not parts[0].get("thought") else ""
    return "".join(str(part["text"]) for part in parts
                   if isinstance(part.get("text"), str) and not part.get("thought"))


def prompt_text(message: Mapping[str, Any]) -> str | None:
    """The text a person typed in a `user` message, or None when it is none: the injected
    `<session_context>` or `<hook_context>`, a `/command`, or only function responses."""
    if message.get("type") != "user":
        return None
    what, text = user_kind(message_parts(message.get("content")))
    return text if what == "prompt" else None


def user_kind(parts: list[dict[str, Any]]) -> tuple[str, str]:
    """`prompt`, `context`, `command`, `tool_result` or `empty`, and the message's text."""
    text = _text(parts)
    stripped = text.lstrip()  # all a prefix and emptiness need
    if stripped:
        if stripped.startswith(_INJECTED_PREFIXES):
            return "context", text
        if stripped.startswith(_COMMAND_PREFIXES):
            return "command", text
        return "prompt", text
    for part in parts:
        if "functionResponse" in part:
            return "tool_result", ""
    if any("inlineData" in part or "fileData" in part for part in parts):
        return "prompt", "[attachment]"
    return "empty", ""


def _output(result: object) -> str | None:
    """The text of a tool's result: function responses' `output` (or `error`), text parts, or
    the value as JSON."""
    if result is None:
        return None
    if isinstance(result, str):
        return result
    texts: list[str] = []
    for part in message_parts(result):
        response = part.get("functionResponse")
        if isinstance(response, dict):
            value = response.get("response")
            if isinstance(value, dict):
                for key in ("output", "error"):
                    if isinstance(value.get(key), str):
                        texts.append(value[key])
                        break
                else:
                    texts.append(_as_json(value))
            elif value is not None:
                texts.append(str(value))
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            texts.append(_as_json(part))
    return "\n".join(texts)


def _as_json(value: object) -> str:
    try:
        return jsonwire.dumps(value)
    except (TypeError, ValueError):  # NaN and the like, which the reader accepts
        return repr(value)


def _responses(messages: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The function responses of the user messages, by call id."""
    found: dict[str, Any] = {}
    for message in messages:
        if message.get("type") != "user":
            continue
        for part in message_parts(message.get("content")):
            response = part.get("functionResponse")
            if isinstance(response, dict) and isinstance(response.get("id"), str):
                found.setdefault(response["id"], [part])
    return found


def _thought_entries(message: Mapping[str, Any], parts: list[dict[str, Any]],
                     base: dict[str, Any]) -> list[GeminiEntry]:
    entries = []
    thoughts = message.get("thoughts")
    if isinstance(thoughts, list) and thoughts:
        for thought in thoughts:
            if isinstance(thought, dict):
                subject = thought.get("subject")
                description = thought.get("description")
                entries.append(GeminiEntry(
                    "thought", **base, subject=subject if isinstance(subject, str) else None,
                    text=description if isinstance(description, str) else None))
        return entries
    for part in parts:
        if part.get("thought") and isinstance(part.get("text"), str):
            match = _THOUGHT_SUBJECT.search(part["text"])
            subject = match.group(1).strip() if match else None
            text = (part["text"][:match.start()] + part["text"][match.end():]).strip() \
                if match else part["text"].strip()
            entries.append(GeminiEntry("thought", **base, subject=subject, text=text))
    return entries


def _call_entries(message: Mapping[str, Any], parts: list[dict[str, Any]],
                  base: dict[str, Any], responses: Mapping[str, Any]) -> list[GeminiEntry]:
    calls = message.get("toolCalls")
    entries = []
    if isinstance(calls, list) and calls:
        for call in calls:
            if not isinstance(call, dict):
                continue
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            result = call.get("result")
            if result is None and call_id is not None:
                result = responses.get(call_id)
            status = call.get("status") if isinstance(call.get("status"), str) else None
            args = call.get("args")
            entries.append(GeminiEntry(
                "tool_call", **base, tool=str(call.get("name") or "") or None, call_id=call_id,
                args=args if isinstance(args, dict) else None, output=_output(result),
                status=status, ok=None if status is None else status == "success",
                agent_id=call.get("agentId") if isinstance(call.get("agentId"), str) else None))
        return entries
    for part in parts:
        function_call = part.get("functionCall")
        if isinstance(function_call, dict):
            call_id = function_call.get("id") if isinstance(function_call.get("id"), str) \
                else None
            args = function_call.get("args")
            entries.append(GeminiEntry(
                "tool_call", **base, tool=str(function_call.get("name") or "") or None,
                call_id=call_id, args=args if isinstance(args, dict) else None,
                output=_output(responses.get(call_id)) if call_id else None))
    return entries


def conversation_entries(messages: Sequence[Mapping[str, Any]]) -> list[GeminiEntry]:
    """The conversation entries of the live messages, in order (see GeminiEntry). A function
    response that a call before it already holds is not an entry of its own."""
    responses = _responses(messages)
    claimed: set[str] = set()
    entries: list[GeminiEntry] = []
    for message in messages:
        message_id = str(message.get("id"))
        timestamp = message.get("timestamp") if isinstance(message.get("timestamp"), str) \
            else None
        base: dict[str, Any] = {"message_id": message_id, "timestamp": timestamp}
        kind = message.get("type")
        parts = message_parts(message.get("content"))
        if kind == "user":
            what, text = user_kind(parts)
            if what in ("prompt", "context", "command"):
                entries.append(GeminiEntry(what, **base, text=text))
            for part in parts:
                response = part.get("functionResponse")
                if not isinstance(response, dict):
                    continue
                call_id = response.get("id") if isinstance(response.get("id"), str) else None
                if call_id is not None and call_id in claimed:
                    continue
                entries.append(GeminiEntry("tool_result", **base,
                                           tool=str(response.get("name") or "") or None,
                                           call_id=call_id, output=_output([part])))
                if call_id is not None:
                    claimed.add(call_id)
        elif kind == "gemini":
            made = _thought_entries(message, parts, base)
            text = _text(parts)
            if text.strip():
                made.append(GeminiEntry("assistant", **base, text=text))
            calls = _call_entries(message, parts, base, responses)
            claimed.update(call.call_id for call in calls if call.call_id)
            made.extend(calls)
            if made:
                model = message.get("model") if isinstance(message.get("model"), str) else None
                made[0] = dataclasses.replace(made[0], model=model,
                                              tokens=message_tokens(message.get("tokens")))
            entries.extend(made)
        elif kind in NOTICE_TYPES:
            entries.append(GeminiEntry("notice", **base, subject=str(kind),
                                       text=_text(parts) or None))
        else:
            entries.append(GeminiEntry("other", **base, subject=str(kind),
                                       text=_text(parts) or None))
    return entries


def response_counts(message: Mapping[str, Any]) -> tuple[int, int, tuple[tuple[str, str], ...]]:
    """The tool calls and thoughts `conversation_entries` gives for one `gemini` message, and
    the (agent id, agent name) of each of its calls that ran a subagent, without making the
    entries (a scan of every session needs only these)."""
    recorded = message.get("thoughts")
    recorded = recorded if isinstance(recorded, list) and recorded else None
    tool_calls = message.get("toolCalls")
    tool_calls = tool_calls if isinstance(tool_calls, list) and tool_calls else None
    # The parts are read where the message's own lists are empty; a text (what most responses
    # hold) is one part, neither a thought nor a call.
    parts: list[dict[str, Any]] = []
    if recorded is None or tool_calls is None:
        content = message.get("content")
        if not isinstance(content, str):
            parts = message_parts(content)
    if recorded is not None:
        thoughts = sum(1 for thought in recorded if isinstance(thought, dict))
    else:
        thoughts = sum(1 for part in parts
                       if part.get("thought") and isinstance(part.get("text"), str)) \
            if parts else 0
    if tool_calls is None:
        calls = sum(1 for part in parts if isinstance(part.get("functionCall"), dict)) \
            if parts else 0
        return calls, thoughts, ()
    calls = 0
    delegations: list[tuple[str, str]] = []
    for call in tool_calls:
        if not isinstance(call, dict):
            continue
        calls += 1
        agent_id, args = call.get("agentId"), call.get("args")
        if isinstance(agent_id, str) and agent_id and isinstance(args, dict):
            delegations.append((agent_id, str(args.get("agent_name", ""))))
    return calls, thoughts, tuple(delegations)
