"""What `cos acp` answers of a project's history (DESIGN.md §12.1): `session/list`, the one
list of every agent's sessions paged by an opaque cursor, and `session/load`, the lossless
replay of one session as ACP `session/update` payloads, streamed from its log.

A Claude Code transcript is a tree (§5): its live chain is chosen first from a skeleton of each
line (its uuid, parent, type: a byte scan, with `json.loads` only for a line of another shape),
then the chain's lines alone are parsed, one at a time, as they are replayed.
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import re

from coding_os.errors import InvalidInput, NotFound
from coding_os.runtime import wire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any

__all__ = ["PAGE_SIZE", "TOOL_CALL", "list_page", "load_updates", "tool_kind", "tool_call_update",
           "tool_call_start"]

PAGE_SIZE = 50
# ACP's update that starts a tool call; the §7 event and the transcript's entry share its name.
TOOL_CALL = wire.TOOL_CALL

# -- session/list ----------------------------------------------------------------------------


def _cursor(updated: str, session: str) -> str:
    raw = json.dumps([updated, session], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def _after(cursor: str) -> tuple[str, str]:
    """The (updatedAt, sessionId) of the last row of the page a cursor ends.

    Raises:
        InvalidInput: a cursor `list_page` did not make.
    """
    try:
        decoded = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (ValueError, UnicodeError):
        decoded = None
    if not (isinstance(decoded, list) and len(decoded) == 2
            and all(isinstance(part, str) for part in decoded)):
        raise InvalidInput("cursor: not a cursor session/list gave")
    return decoded[0], decoded[1]


def _listed(row: Mapping[str, object]) -> dict[str, Any]:
    updated = str(row.get("last_active") or row.get("created") or "")
    return {"sessionId": str(row["id"]), "cwd": row.get("cwd") or row.get("worktree"),
            "title": row.get("name") or row.get("title"), "updatedAt": updated,
            "_meta": {"cos/agent": row.get("agent"), "cos/native_id": row.get("native_id"),
                      "cos/branch": row.get("branch")}}


def list_page(cwd: str, cursor: str | None = None, env: Mapping[str, str] | None = None
              ) -> dict[str, Any]:
    """The ACP `session/list` result for the project of `cwd`: its sessions of every agent,
    newest first, PAGE_SIZE a page; `nextCursor` when there are more. A cursor names the last
    row it ends after ((updatedAt, sessionId), the order's key), so sessions that arrive
    between two pages do not shift the next.

    Raises:
        InvalidInput: a cursor this function did not make.
        Misroute, StorageError, StateIOError: as `api.list_sessions`.
    """
    from coding_os import api

    after = _after(cursor) if cursor is not None else None
    rows = [_listed(row) for row in api.list_sessions("repo", env=env, cwd=cwd)
            if not row.get("parent")]
    rows.sort(key=lambda r: (r["updatedAt"], r["sessionId"]), reverse=True)
    if after is not None:
        rows = [r for r in rows if (r["updatedAt"], r["sessionId"]) < after]
    page: dict[str, Any] = {"sessions": rows[:PAGE_SIZE]}
    if len(rows) > PAGE_SIZE:
        last = rows[PAGE_SIZE - 1]
        page["nextCursor"] = _cursor(last["updatedAt"], last["sessionId"])
    return page


# -- the updates of one conversation -----------------------------------------------------------

_KINDS = {"read": ("Read", "NotebookRead", "read_file", "view_image"),
          "edit": ("Edit", "MultiEdit", "Write", "NotebookEdit", "apply_patch", "write_file",
                   "replace"),
          "search": ("Grep", "Glob", "LS", "grep", "glob", "list_directory", "search_file_content"),
          "execute": ("Bash", "BashOutput", "KillShell", "shell", "exec_command", "local_shell",
                      "run_shell_command", "write_stdin"),
          "fetch": ("WebFetch", "WebSearch", "web_fetch", "google_web_search", "web_search"),
          "think": ("Task", "Agent", "TodoWrite", "update_plan", "ExitPlanMode")}
_KIND_OF = {tool: kind for kind, tools in _KINDS.items() for tool in tools}


def tool_kind(tool: str) -> str:
    """The ACP `kind` of a tool of any agent (read|edit|search|execute|fetch|think|other)."""
    return _KIND_OF.get(tool, "other")


def _decoded(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _locations(raw: object) -> list[dict[str, Any]]:
    if not isinstance(raw, dict):
        return []
    for key in ("file_path", "notebook_path", "path", "absolute_path"):
        value = raw.get(key)
        if isinstance(value, str) and value:
            return [{"path": value}]
    return []


def _diffs(tool: str, raw: object) -> list[dict[str, Any]]:
    """An edit's `diff` contents (path, oldText, newText) when its input says them."""
    if not isinstance(raw, dict) or not isinstance(raw.get("file_path"), str):
        return []
    path = raw["file_path"]
    if tool == "Write" and isinstance(raw.get("content"), str):
        return [{"type": "diff", "path": path, "oldText": None, "newText": raw["content"]}]
    edits = raw.get("edits") if tool == "MultiEdit" else [raw] if tool == "Edit" else []
    if not isinstance(edits, list):
        return []
    return [{"type": "diff", "path": path, "oldText": edit.get("old_string"),
             "newText": edit.get("new_string")}
            for edit in edits if isinstance(edit, dict) and isinstance(edit.get("new_string"), str)]


def tool_call_start(call_id: str, tool: str, raw_input: object) -> dict[str, Any]:
    """The `tool_call` update of one tool call of any agent."""
    from coding_os.adapters.tool_calls import summarize

    raw = _decoded(raw_input)
    return {"sessionUpdate": TOOL_CALL, "toolCallId": call_id,
            "title": summarize(tool, raw) or tool, "kind": tool_kind(tool),
            "status": "in_progress", "rawInput": raw, "locations": _locations(raw),
            "_meta": {"cos/tool": tool}}


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(str(part.get("text", "")) for part in value
                         if isinstance(part, dict) and part.get("type", "text") == "text")
    return json.dumps(value, ensure_ascii=False)


def tool_call_update(call_id: str, output: object, failed: bool,
                     diffs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The `tool_call_update` that ends a tool call: its status and result (and an edit's diff
    contents first)."""
    content: list[dict[str, Any]] = list(diffs or [])
    content.append({"type": "content", "content": {"type": "text", "text": _text(output)}})
    return {"sessionUpdate": "tool_call_update", "toolCallId": call_id,
            "status": "failed" if failed else "completed", "content": content}


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


class _Calls:
    """The tool calls a replay opened, so a result can say its call's diff."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[str, object]] = {}

    def start(self, call_id: str, tool: str, raw: object) -> dict[str, Any]:
        update = tool_call_start(call_id, tool, raw)
        self.open[call_id] = (tool, update["rawInput"])
        return update

    def end(self, call_id: str, output: object, failed: bool) -> dict[str, Any]:
        tool, raw = self.open.pop(call_id, ("", None))
        return tool_call_update(call_id, output, failed, None if failed else _diffs(tool, raw))


# -- Claude Code -------------------------------------------------------------------------------

# The opening of a line in Claude Code's usual shape: its parent, sidechain flag and the scalar
# fields before its type or its message. A line of another shape is read as JSON.
_CLAUDE_HEAD = re.compile(rb'\{"parentUuid":(null|"[^"\\]*"),"isSidechain":(true|false),'
                          rb'(?:"[A-Za-z]+":(?:"[^"\\]*"|true|false|null|-?[0-9]+),){0,12}?'
                          rb'"(?:type":"([a-z_-]+)"|message":)')
_UUID = b'"uuid":"'
_TYPE = b'"type":"'
_MESSAGE_TYPES = {b"user": "user", b"assistant": "assistant"}


def _skeleton(data: mmap.mmap | bytes, start: int, end: int) -> dict[str, Any] | None:
    """What the tree needs of the line data[start:end] (uuid, parentUuid, type, isSidechain),
    read from its bytes when it has Claude Code's usual shape (one `"uuid":"` in it, not a
    system entry, which a compact boundary may be), else from its JSON; None for a line that
    is not a JSON object."""
    head = _CLAUDE_HEAD.match(data, start, end)
    if head is not None and head.group(3) != b"system":
        at = data.find(_UUID, head.end(), end) + len(_UUID)
        close = data.find(b'"', at, end)
        kind = head.group(3)
        if kind is None and at > len(_UUID):
            # The message came first: the type is the last field before the uuid (after the
            # message, only scalars are written, a few), a message's.
            typed = data.rfind(_TYPE, max(head.end(), at - 256), at) + len(_TYPE)
            kind = data[typed:data.find(b'"', typed, at)] if typed > len(_TYPE) else None
            kind = kind if kind in _MESSAGE_TYPES else None
        if (kind is not None and at > len(_UUID) and close > at
                and data.find(_UUID, close, end) < 0):
            parent = head.group(1)
            return {"uuid": data[at:close].decode("utf-8", "replace"),
                    "parentUuid": None if parent == b"null" else parent[1:-1].decode(),
                    "type": kind.decode(), "isSidechain": head.group(2) == b"true"}
    try:
        entry = json.loads(data[start:end])
    except ValueError:
        return None
    if not isinstance(entry, dict):
        return None
    return {key: entry.get(key) for key in ("uuid", "parentUuid", "type", "subtype",
                                            "logicalParentUuid", "isSidechain")}


def _claude_lines(data: mmap.mmap | bytes) -> Iterator[tuple[int, int]]:
    """(start, end) of each non-empty line of a file's bytes; a torn last line is left out."""
    size, start = len(data), 0
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            return  # torn: a writer mid-append
        if end > start:
            yield start, end
        start = end + 1


def _claude_entry_updates(entry: Mapping[str, Any], calls: _Calls) -> Iterator[dict[str, Any]]:
    kind = entry.get("type")
    if kind not in ("user", "assistant"):
        return
    message = entry.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        if content:
            yield _chunk("user_message_chunk" if kind == "user" else "agent_message_chunk",
                         content)
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        part = block.get("type")
        if part == "text" and isinstance(block.get("text"), str) and block["text"]:
            yield _chunk("user_message_chunk" if kind == "user" else "agent_message_chunk",
                         block["text"])
        elif part == "thinking" and isinstance(block.get("thinking"), str):
            yield _chunk("agent_thought_chunk", block["thinking"])
        elif part == "tool_use":
            yield calls.start(str(block.get("id")), str(block.get("name")), block.get("input"))
        elif part == wire.TOOL_RESULT:  # Claude Code's block, named as the §7 event
            yield calls.end(str(block.get("tool_use_id")), block.get("content"),
                            block.get("is_error") is True)


def _sidechain_updates(number: int, entries: list[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """One subagent's conversation as a tool call: its prompt as input, what it said and did
    as the call's content."""
    prompt = ""
    texts: list[str] = []
    for entry in entries:
        for update in _claude_entry_updates(entry, _Calls()):
            if update["sessionUpdate"] == "user_message_chunk" and not prompt:
                prompt = update["content"]["text"]
            elif update["sessionUpdate"] in ("agent_message_chunk", "user_message_chunk"):
                texts.append(update["content"]["text"])
            elif update["sessionUpdate"] == TOOL_CALL:
                texts.append(f"[{update['_meta']['cos/tool']}] {update['title']}")
    call_id = f"sidechain-{number}"
    start = tool_call_start(call_id, "Task", {"prompt": prompt})
    start["title"] = "Subagent: " + (prompt.splitlines()[0][:80] if prompt else "(no prompt)")
    start["_meta"]["cos/sidechain"] = True
    yield start
    yield tool_call_update(call_id, "\n\n".join(texts), False)


def _claude_updates(path: str) -> Iterator[dict[str, Any]]:
    from coding_os.adapters.claude.tree import read_tree

    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        data: mmap.mmap | bytes = (mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                                   if size else b"")
        skeletons: list[dict[str, Any]] = []
        sidechain_lines: list[int] = []
        spans = list(_claude_lines(data))
        for number, (start, end) in enumerate(spans):
            skeleton = _skeleton(data, start, end)
            if skeleton is None:
                continue
            skeleton["line"] = number
            if skeleton.get("isSidechain") is True:
                sidechain_lines.append(number)
            skeletons.append(skeleton)
        live = read_tree(skeletons).live or [s for s in skeletons if not s.get("isSidechain")]
        sidechains: dict[str, list[Mapping[str, Any]]] = {}
        pending = iter(sidechain_lines)
        next_sidechain = next(pending, None)
        calls, told = _Calls(), 0
        for node in live:
            line = int(node["line"])
            # Subagents written before this line join the replay as tool calls when their
            # conversation is complete: at the main conversation's next step.
            while next_sidechain is not None and next_sidechain < line:
                entry = json.loads(data[slice(*spans[next_sidechain])])
                root = _sidechain_root(entry, sidechains)
                sidechains.setdefault(root, []).append(entry)
                next_sidechain = next(pending, None)
            if sidechains and node.get("type") == "user":
                for entries in sidechains.values():
                    told += 1
                    yield from _sidechain_updates(told, entries)
                sidechains.clear()
            entry = json.loads(data[slice(*spans[line])])
            yield from _claude_entry_updates(entry, calls)
        for number in ([] if next_sidechain is None else [next_sidechain, *pending]):
            entry = json.loads(data[slice(*spans[number])])
            sidechains.setdefault(_sidechain_root(entry, sidechains), []).append(entry)
        for entries in sidechains.values():
            told += 1
            yield from _sidechain_updates(told, entries)


def _sidechain_root(entry: Mapping[str, Any], open_: Mapping[str, list[Mapping[str, Any]]]
                    ) -> str:
    """The sidechain an entry belongs to: its agentId, or the root its parents lead to."""
    agent = entry.get("agentId")
    if isinstance(agent, str) and agent:
        return agent
    parent = entry.get("parentUuid")
    for root, entries in open_.items():
        if any(e.get("uuid") == parent for e in entries):
            return root
    return str(entry.get("uuid"))


# -- Codex and cos ---------------------------------------------------------------------------


def _codex_updates(path: str) -> Iterator[dict[str, Any]]:
    from coding_os.adapters.codex.rollouts import read_history

    try:
        history = read_history(path)
    except FileNotFoundError:
        raise NotFound(f"no session log at {path}") from None
    calls = _Calls()
    for line in history.live:
        payload = line.get("payload")
        if line.get("type") != "response_item" or not isinstance(payload, dict):
            continue
        kind = payload.get("type")
        if kind == "message" and payload.get("role") in ("user", "assistant"):
            text = "\n".join(str(part.get("text", "")) for part in payload.get("content") or []
                             if isinstance(part, dict) and isinstance(part.get("text"), str))
            if text and not text.lstrip().startswith(("<environment_context",
                                                      "<user_instructions", "# AGENTS.md")):
                yield _chunk("user_message_chunk" if payload["role"] == "user"
                             else "agent_message_chunk", text)
        elif kind == "reasoning":
            for part in payload.get("summary") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    yield _chunk("agent_thought_chunk", part["text"])
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            yield calls.start(str(payload.get("call_id")), str(payload.get("name") or kind),
                              payload.get("arguments", payload.get("input",
                                                                   payload.get("action"))))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = payload.get("output")
            failed = False
            if isinstance(output, dict):
                failed = output.get("success") is False
                output = output.get("content", output)
            yield calls.end(str(payload.get("call_id")), output, failed)


def _gemini_updates(path: str) -> Iterator[dict[str, Any]]:
    from coding_os.adapters.gemini.sessions import read_conversation

    calls = _Calls()
    for entry in read_conversation(path).entries:
        if entry.kind == "prompt" and entry.text:
            yield _chunk("user_message_chunk", entry.text)
        elif entry.kind == "assistant" and entry.text:
            yield _chunk("agent_message_chunk", entry.text)
        elif entry.kind == "thought":
            yield _chunk("agent_thought_chunk", "\n".join(
                part for part in (entry.subject, entry.text) if part))
        elif entry.kind == wire.TOOL_CALL:
            call_id = entry.call_id or f"{entry.message_id}-{entry.tool}"
            yield calls.start(call_id, str(entry.tool), dict(entry.args or {}))
            yield calls.end(call_id, entry.output or "", entry.ok is False)


def _engine_updates(path: str, events: list[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """A session the engine ran: its stored events as the updates it sent live (mapping.py,
    each with its seq in `_meta`, so a client attached after the replay gets no duplicate),
    each task opened by its prompt, the transcript's user entry."""
    from coding_os.interfaces.acp.mapping import SEQ, Updates
    from coding_os.sessions import transcript

    prompts = (str(entry.get("text") or "") for entry in transcript.iter_visible(path)
               if entry.get("type") == "user")
    updates = Updates()
    for event in events:
        msg = event.get("msg")
        if isinstance(msg, dict) and msg.get("type") == wire.TASK_STARTED:
            prompt = next(prompts, None)
            if prompt is not None:
                update = _chunk("user_message_chunk", prompt)
                update["_meta"] = {SEQ: event.get("seq")}
                yield update
        yield from updates.update(event)


def _cos_updates(path: str) -> Iterator[dict[str, Any]]:
    from coding_os.sessions import transcript

    calls = _Calls()
    for entry in transcript.iter_visible(path):
        kind = entry.get("type")
        if kind == "user":
            yield _chunk("user_message_chunk", str(entry.get("text") or ""))
        elif kind == "assistant":
            yield _chunk("agent_message_chunk", str(entry.get("text") or ""))
        elif kind == wire.TOOL_CALL:
            yield calls.start(str(entry.get("call_id")), str(entry.get("tool")),
                              entry.get("input"))
        elif kind == wire.TOOL_RESULT:
            yield calls.end(str(entry.get("call_id")), entry.get("output"),
                            entry.get("ok") is False)
        elif kind in ("compact", "summary"):
            yield _chunk("agent_message_chunk", f"[{kind}] {entry.get('text') or ''}")


_READERS = {"claude": _claude_updates, "codex": _codex_updates, "gemini": _gemini_updates,
            "cos": _cos_updates}


# The agents whose sessions made outside cos a job goes on in (the engine's backends resume them).
RESUMABLE = ("claude", "codex")


def native_session(session_id: str, cwd: str, env: Mapping[str, str] | None = None
                   ) -> tuple[str, str] | None:
    """(agent, native id) of a Claude Code or Codex session made outside cos, which a job
    can go on in; None for any other session.

    Raises:
        InvalidId: a malformed session id. NotFound: no such session in the project of `cwd`.
    """
    from coding_os import api

    row = api.show_session(session_id, env=env, cwd=cwd)
    kind, native = str(row.get("kind")), row.get("native_id")
    if kind in RESUMABLE and isinstance(native, str) and native:
        return kind, native
    return None


def load_updates(session_id: str, cwd: str, env: Mapping[str, str] | None = None
                 ) -> Iterator[dict[str, Any]]:
    """The `session/update` payloads (`update` objects, without `sessionId`) that replay a
    session `session/list` shows, in order: its live chain's user turns, agent text and
    thoughts, every tool call (`tool_call` then its `tool_call_update`), subagents as tool
    calls. A generator over the log: the first update comes before the rest is read. A
    session the engine ran is replayed from its stored events, each update with its seq in
    `_meta` (`{"cos/seq": N}`), as `cos acp` sent them live.

    Raises:
        InvalidId: a malformed session id.
        NotFound: no such session in the project of `cwd`, or its log is gone.
    """
    from coding_os import api

    row = api.show_session(session_id, env=env, cwd=cwd)
    source, kind = row.get("source_path"), str(row.get("kind"))
    if not isinstance(source, str) or not source or kind not in _READERS:
        raise NotFound(f"session {session_id} has no log to replay")
    if kind == "cos":
        stored = api.session_events(str(row["id"]), env=env, cwd=cwd)
        if stored.get("engine") and stored.get("events"):
            return _engine_updates(source, stored["events"])
    return _READERS[kind](source)
