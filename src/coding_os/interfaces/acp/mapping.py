"""The §7 events as ACP `session/update` objects (DESIGN.md §12.1): pure functions over one
session's events, in seq order; every update made from a stored event carries its seq in
`_meta` (`{"cos/seq": N}`)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from acp.schema import ToolCallStart

from coding_os.runtime import wire

__all__ = ["SEQ", "TOOL_CALL_START", "Updates", "tool_kind", "tool_title", "tool_locations", "stop_reason",
           "prompt_text", "permission_options", "decision", "open_approvals",
           "ALLOW_ONCE", "ALLOW_ALWAYS", "REJECT"]

SEQ = "cos/seq"
# ACP's kind of update that starts a tool call, as the SDK's schema spells it (the §7 event
# shares its name, which is written in runtime/wire.py only).
TOOL_CALL_START: str = get_args(ToolCallStart.model_fields["session_update"].annotation)[0]
ALLOW_ONCE = "allow_once"
ALLOW_ALWAYS = "allow_always"
REJECT = "reject_once"

# Tool names (Claude Code's, Codex's items, the common lower-case ones) → ACP tool kinds.
_KINDS = {
    "read": "read", "notebookread": "read", "view": "read",
    "edit": "edit", "multiedit": "edit", "write": "edit", "notebookedit": "edit",
    "filechange": "edit", "apply_patch": "edit", "patch": "edit",
    "bash": "execute", "shell": "execute", "commandexecution": "execute", "exec": "execute",
    "killshell": "execute", "bashoutput": "execute",
    "grep": "search", "glob": "search", "ls": "search", "search": "search",
    "websearch": "fetch", "webfetch": "fetch", "fetch": "fetch",
    "todowrite": "think", "think": "think", "task": "think", "exitplanmode": "think",
    "delete": "delete", "move": "move",
}
_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath")


def tool_kind(tool: str) -> str:
    """The ACP kind (read, edit, delete, move, search, execute, fetch, think, other) of a tool
    named `tool`."""
    name = tool.rsplit("__", 1)[-1].lower()  # an MCP tool, mcp__server__name
    return _KINDS.get(name, "other")


def _input(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def tool_locations(tool_input: object) -> list[dict[str, Any]]:
    """The files a tool call touches, as ACP locations (`path`, and `line` when given)."""
    given = _input(tool_input)
    out: list[dict[str, Any]] = []
    for key in _PATH_KEYS:
        path = given.get(key)
        if isinstance(path, str) and path:
            location: dict[str, Any] = {"path": path}
            line = given.get("offset") if key == "file_path" else None
            if isinstance(line, int) and line > 0:
                location["line"] = line
            out.append(location)
            break
    changes = given.get("changes")  # Codex's file changes: a list of {path, ...}
    if isinstance(changes, list):
        out += [{"path": change["path"]} for change in changes
                if isinstance(change, Mapping) and isinstance(change.get("path"), str)]
    return out


def tool_title(tool: str, tool_input: object) -> str:
    """One line saying what the call does: the tool and its command, path or pattern."""
    given = _input(tool_input)
    for key in ("command", *_PATH_KEYS, "pattern", "url", "query", "description"):
        value = given.get(key)
        if isinstance(value, list):
            value = " ".join(str(part) for part in value)
        if isinstance(value, str) and value.strip():
            line = value.strip().splitlines()[0]
            return f"{tool}: {line[:200]}"
    return tool


def _text(output: object) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(isinstance(part, Mapping) for part in output):
        texts = [part.get("text") for part in output]
        if all(isinstance(text, str) for text in texts):
            return "\n".join(str(text) for text in texts)
    return json.dumps(output, ensure_ascii=False, indent=2)


def _edit_diffs(tool: str, tool_input: object) -> list[dict[str, Any]]:
    """An edit call's changes as ACP `diff` contents (path, oldText, newText)."""
    given = _input(tool_input)
    path = next((given[key] for key in _PATH_KEYS if isinstance(given.get(key), str)), None)
    name = tool.lower()
    if path is None:
        return []
    if name in ("edit",) and isinstance(given.get("new_string"), str):
        return [{"type": "diff", "path": path, "oldText": given.get("old_string"),
                 "newText": given["new_string"]}]
    if name == "multiedit" and isinstance(given.get("edits"), list):
        return [{"type": "diff", "path": path, "oldText": edit.get("old_string"),
                 "newText": edit.get("new_string", "")}
                for edit in given["edits"] if isinstance(edit, Mapping)]
    if name == "write" and isinstance(given.get("content"), str):
        return [{"type": "diff", "path": path, "oldText": None, "newText": given["content"]}]
    return []


def _with_seq(update: dict[str, Any], seq: object) -> dict[str, Any]:
    if isinstance(seq, int):
        update["_meta"] = {SEQ: seq}
    return update


def _chunk(kind: str, text: str, seq: object) -> dict[str, Any]:
    return _with_seq({"sessionUpdate": kind, "content": {"type": "text", "text": text}}, seq)


def _thoughts(raw: object) -> list[str]:
    """The reasoning in a Claude Code assistant message (its own wire, a `native` event)."""
    message = _input(raw).get("message")
    content = _input(message).get("content")
    if _input(raw).get("type") != "assistant" or not isinstance(content, list):
        return []
    return [block["thinking"] for block in content if isinstance(block, Mapping)
            and block.get("type") == "thinking" and isinstance(block.get("thinking"), str)
            and block["thinking"]]


class Updates:
    """One session's events → its ACP updates; keeps what a later event needs (the calls
    whose results are due, the message being streamed)."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[str, object]] = {}  # call id → (tool, input), open
        self.streamed = ""  # the deltas of the message being written

    def update(self, event: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The updates event `event` (a §7 event line: seq, msg) makes; none for most
        bookkeeping events (task_started, session_configured, approval_request: that one
        is a permission request, see `permission`)."""
        msg = _input(event.get("msg"))
        seq = event.get("seq")
        kind = msg.get("type")
        if kind == wire.AGENT_MESSAGE_DELTA:
            text = str(msg.get("text") or "")
            self.streamed += text
            return [_chunk("agent_message_chunk", text, seq)] if text else []
        if kind == wire.AGENT_MESSAGE:
            text = str(msg.get("text") or "")
            if "stream" in msg:  # an exec line
                text += "\n"
            streamed, self.streamed = self.streamed, ""
            if streamed and text.startswith(streamed):
                text = text[len(streamed):]  # the rest of what the deltas said
            return [_chunk("agent_message_chunk", text, seq)] if text else []
        if kind == wire.TOOL_CALL:
            call_id, tool = str(msg.get("call_id")), str(msg.get("tool"))
            self.calls[call_id] = (tool, msg.get("input"))
            return [_with_seq({
                "sessionUpdate": TOOL_CALL_START, "toolCallId": call_id,
                "title": tool_title(tool, msg.get("input")), "kind": tool_kind(tool),
                "status": "pending", "rawInput": msg.get("input"),
                "locations": tool_locations(msg.get("input"))}, seq)]
        if kind == wire.TOOL_RESULT:
            call_id = str(msg.get("call_id"))
            tool, tool_input = self.calls.pop(call_id, ("", None))
            ok = bool(msg.get("ok"))
            content = _edit_diffs(tool, tool_input) if ok else []
            output = msg.get("output")
            if output not in (None, "", []) and not content:
                content = [{"type": "content",
                            "content": {"type": "text", "text": _text(output)}}]
            return [_with_seq({
                "sessionUpdate": "tool_call_update", "toolCallId": call_id,
                "status": "completed" if ok else "failed", "content": content,
                "rawOutput": output}, seq)]
        if kind == wire.ERROR:
            return [_chunk("agent_message_chunk", f"\n[cos] error: {msg.get('message')}\n",
                           seq)]
        if kind == wire.NATIVE:
            return [_chunk("agent_thought_chunk", text, seq) for text in _thoughts(msg.get("raw"))]
        if kind in wire.TASK_ENDS:
            self.calls.clear()
            self.streamed = ""
        return []

    def permission(self, session_id: str, event: Mapping[str, Any]) -> dict[str, Any]:
        """The params of the `session/request_permission` an `approval_request` event makes:
        its tool call (the open call of that tool and input, when the agent named it first),
        the three options, the seq and the engine's request id in `_meta`."""
        msg = _input(event.get("msg"))
        tool, tool_input = str(msg.get("tool")), msg.get("input")
        call_id = msg.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            same = [key for key, (name, given) in self.calls.items()
                    if name == tool and given == tool_input]
            call_id = same[-1] if same else f"approval-{msg.get('request')}"
        meta: dict[str, Any] = {"cos/request": msg.get("request")}
        if isinstance(event.get("seq"), int):
            meta[SEQ] = event["seq"]
        return {"sessionId": session_id,
                "toolCall": {"toolCallId": call_id, "title": tool_title(tool, tool_input),
                             "kind": tool_kind(tool), "status": "pending",
                             "rawInput": tool_input, "locations": tool_locations(tool_input)},
                "options": permission_options(), "_meta": meta}


def permission_options() -> list[dict[str, str]]:
    """The options of every permission request: allow once, allow always, reject."""
    return [{"optionId": ALLOW_ONCE, "name": "Allow once", "kind": "allow_once"},
            {"optionId": ALLOW_ALWAYS, "name": "Allow always", "kind": "allow_always"},
            {"optionId": REJECT, "name": "Reject", "kind": "reject_once"}]


def decision(outcome: object) -> str | None:
    """The engine's decision (allow, deny) a `session/request_permission` answer's outcome
    says; None when the client cancelled it."""
    given = _input(outcome)
    if given.get("outcome") != "selected":
        return None
    return wire.ALLOW if given.get("optionId") in (ALLOW_ONCE, ALLOW_ALWAYS) else wire.DENY


def stop_reason(msg: Mapping[str, Any]) -> str:
    """The `stopReason` of the prompt a task-ending event ends: end_turn, or cancelled when
    it was interrupted or replaced."""
    if msg.get("type") == wire.TURN_ABORTED and msg.get("reason") in (
            wire.ABORT_INTERRUPTED, wire.ABORT_REPLACED, wire.ABORT_SHUTDOWN):
        return "cancelled"
    return "end_turn"


def prompt_text(blocks: Iterable[Mapping[str, Any]]) -> str:
    """A prompt's content blocks as the engine's one user input: the texts, an embedded
    resource as its uri and text, a link as its uri."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text") or ""))
        elif kind == "resource":
            resource = _input(block.get("resource"))
            text = resource.get("text")
            parts.append(f"<{resource.get('uri')}>\n{text}" if isinstance(text, str)
                         else f"<{resource.get('uri')}>")
        elif kind == "resource_link":
            parts.append(f"<{block.get('uri')}>")
    return "\n".join(part for part in parts if part)


def open_approvals(events: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The `approval_request` events still unanswered at the end of `events` (the agent went
    on after none of them: no tool call, result, message or end of task since)."""
    asked: list[Mapping[str, Any]] = []
    for event in events:
        kind = _input(event.get("msg")).get("type")
        if kind == wire.APPROVAL_REQUEST:
            asked.append(event)
        elif kind in (wire.TASK_STARTED, *wire.TASK_ENDS, wire.TOOL_CALL, wire.TOOL_RESULT,
                      wire.AGENT_MESSAGE):
            asked.clear()
    return asked
