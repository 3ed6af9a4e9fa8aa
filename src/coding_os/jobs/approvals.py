"""The approval a job waits for (DESIGN.md §6): what its agent asks to do, as `cos agents`, the
web roster and `cos attach` show it.

A job's runner keeps the oldest request not answered yet in the job's state (`approval`):
its request id (what `cos approve --request` names), the tool, the one input field that says
what the call does (`command`, or `path`), and for a tool that edits or writes a file the
change as a unified diff of the text it replaces and the text it puts (the file itself is not
read: the request says what the agent means to write). Each is bounded, so that the state file
stays small whatever the agent sends.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["pending", "summary", "DIFF_MAX"]

DIFF_MAX = 16 << 10  # characters of a request's diff kept in the job's state
FIELD_MAX = 2000  # characters of a command or a path
SUMMARY_MAX = 160  # characters of a command or a path in a one-line summary
_PATH_FIELDS = ("file_path", "path", "notebook_path")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _diff(path: str, old: str, new: str) -> str:
    import difflib

    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 f"a/{path}", f"b/{path}")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _edit_diff(path: str, tool_input: dict[str, Any]) -> str | None:
    """The change an edit or a write asks for, as a diff; None for another tool."""
    if isinstance(tool_input.get("old_string"), str) and isinstance(
            tool_input.get("new_string"), str):
        return _diff(path, tool_input["old_string"], tool_input["new_string"])
    edits = tool_input.get("edits")
    if isinstance(edits, list):
        parts = [_diff(path, edit["old_string"], edit["new_string"]) for edit in edits
                 if isinstance(edit, dict) and isinstance(edit.get("old_string"), str)
                 and isinstance(edit.get("new_string"), str)]
        return "".join(parts) or None
    for field in ("content", "text"):
        if isinstance(tool_input.get(field), str):
            return _diff(path, "", tool_input[field])
    return None


def _changes(changes: object) -> list[tuple[str, str]]:
    """Each file a patch changes (Codex: a list of `{path, kind, diff}`, or a map of a path to
    its change) and its diff as far as the request gives it."""
    found: list[tuple[str, str]] = []
    items: list[tuple[object, object]] = (
        [(change.get("path"), change) for change in changes if isinstance(change, dict)]
        if isinstance(changes, list) else list(changes.items()) if isinstance(changes, dict)
        else [])
    for path, change in items:
        if not isinstance(path, str):
            continue
        text = ""
        if isinstance(change, dict):
            inner = [change, *(value for value in change.values() if isinstance(value, dict))]
            for part in inner:
                if isinstance(part.get("unified_diff"), str):
                    text = part["unified_diff"]
                elif isinstance(part.get("diff"), str):
                    text = part["diff"]
                elif isinstance(part.get("content"), str) and not text:
                    text = _diff(path, "", part["content"])
                if text:
                    break
        if text and not text.startswith(("---", "diff ")):
            text = f"--- a/{path}\n+++ b/{path}\n{text}"
        found.append((path, text if not text or text.endswith("\n") else text + "\n"))
    return found


def pending(msg: dict[str, Any]) -> dict[str, Any]:
    """The `approval` of a job's state for the `approval_request` message `msg`: `request`,
    `tool`, and `command`, `path` and `diff` where the request has them (else None)."""
    tool_input = msg.get("input")
    found: dict[str, Any] = {"request": msg.get("request"), "tool": str(msg.get("tool") or ""),
                             "command": None, "path": None, "diff": None}
    if isinstance(tool_input, dict):
        command = tool_input.get("command")
        if isinstance(command, list):
            command = " ".join(str(word) for word in command)
        if isinstance(command, str):
            found["command"] = _clip(command, FIELD_MAX)
        path = next((tool_input[field] for field in _PATH_FIELDS
                     if isinstance(tool_input.get(field), str)), None)
        if path is not None:
            found["path"] = _clip(path, FIELD_MAX)
            diff = _edit_diff(path, tool_input)
            found["diff"] = _clip(diff, DIFF_MAX) if diff else None
        elif tool_input.get("changes") is not None:
            changed = _changes(tool_input["changes"])
            if changed:
                paths = [path for path, _ in changed]
                found["path"] = _clip(paths[0] + (f" and {len(paths) - 1} more"
                                                  if len(paths) > 1 else ""), FIELD_MAX)
                diff = "".join(text for _, text in changed)
                found["diff"] = _clip(diff, DIFF_MAX) if diff else None
        if found["command"] is None and found["path"] is None and tool_input:
            found["command"] = _clip(json.dumps(tool_input, ensure_ascii=False, default=str),
                                     FIELD_MAX)
    elif tool_input is not None:
        found["command"] = _clip(str(tool_input), FIELD_MAX)
    return found


def summary(approval: dict[str, Any]) -> str:
    """One line: the tool and what it would run (its start) or change (its path's end), and
    the request's id."""
    command, path = approval.get("command"), approval.get("path")
    what = " ".join(str(command or path or "").split())
    if len(what) > SUMMARY_MAX:
        what = (what[:SUMMARY_MAX - 1] + "…" if command or not path
                else "…" + what[-(SUMMARY_MAX - 1):])
    tool = approval.get("tool") or "tool"
    return f"{tool} {what}".rstrip() + f" (request {approval.get('request')})"
