"""What a tool call did, in one line: the command of a shell call, the path of an edit, a read or
a write, the files of a patch, the pattern of a search, the address of a fetch.

The agents name their tools and inputs each their own way (Claude Code's `Bash` with `command`,
`Edit` with `file_path`; Codex's `shell` with a command list, `apply_patch` with a patch,
`commandExecution` and `fileChange` items; Gemini CLI's `run_shell_command`, `read_file` with
`absolute_path`); the line is read from the input's fields, whatever the tool's name, so a tool
of a newer version with the same fields reads the same. The web view folds each call under this
line; the HTML export does the same.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence

from coding_os.adapters import PATCH_FILE_PREFIXES, patch_files

__all__ = ["LINE_MAX", "summarize", "first_line", "shown_input"]

LINE_MAX = 160  # characters of a summary line; a longer one ends in "…"
_INPUT_MAX = 1_000_000  # a tool input given as JSON text longer than this is not parsed

# Input fields, in the order they are preferred.
_COMMAND_KEYS = ("command", "cmd")
_PATH_KEYS = ("file_path", "notebook_path", "absolute_path", "filePath", "path", "file",
              "dir_path", "directory")
_SEARCH_KEYS = ("pattern", "query", "regex")
_OTHER_KEYS = ("url", "description", "prompt", "subject", "title", "name")
_SHELL_FLAGS = ("-c", "-lc", "-ic", "/c")


def summarize(tool: str | None, tool_input: object) -> str:
    """The one line that says what a call of `tool` with `tool_input` did ("" when its input
    says nothing readable). A JSON text is read as the object it holds."""
    data = _decoded(tool_input)
    if isinstance(data, str):
        line = _patch_line(data) or _first_line(data)
    elif isinstance(data, Mapping):
        line = _mapping_line(data)
    elif isinstance(data, list):
        line = _command_text(data)
    else:
        line = "" if data is None else str(data)
    return _clip(line)


def first_line(text: str) -> str:
    """The first line of `text` that is not blank, its spaces collapsed, cut to LINE_MAX (a
    tool's result is summarised so)."""
    return _clip(_first_line(text))


def shown_input(text: str) -> str:
    """A tool's input as a person reads it whole: JSON indented, other text as it is (a JSON
    text cut short by the export's limit stays as it was)."""
    data = _decoded(text)
    if data is text or not isinstance(data, (dict, list)):
        return text
    return json.dumps(data, ensure_ascii=False, indent=2)


def _decoded(value: object) -> object:
    if isinstance(value, str) and value[:1] in ("{", "[") and len(value) <= _INPUT_MAX:
        try:
            return json.loads(value)
        except (ValueError, RecursionError):
            return value
    return value


def _mapping_line(data: Mapping[str, object]) -> str:
    for key in _COMMAND_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return _patch_line(value) or "$ " + _first_line(value)
        if isinstance(value, list) and value:
            return "$ " + _command_text(value)
    for key in ("input", "patch"):  # a patch tool's whole input
        value = data.get(key)
        if isinstance(value, str) and _patch_line(value):
            return _patch_line(value)
    changes = data.get("changes")
    if changes:
        paths = _change_paths(changes)
        if paths:
            return ", ".join(paths)
    path = _first_string(data, _PATH_KEYS)
    search = _first_string(data, _SEARCH_KEYS)
    if search is not None:
        return search + (f" in {path}" if path else "")
    if path is not None:
        return path
    listed = data.get("paths") or data.get("file_paths")
    if isinstance(listed, list) and listed and all(isinstance(p, str) for p in listed):
        return ", ".join(str(p) for p in listed)
    other = _first_string(data, _OTHER_KEYS)
    if other is not None:
        return _first_line(other)
    todos = data.get("todos")
    if isinstance(todos, list):
        return f"{len(todos)} to-do{'' if len(todos) == 1 else 's'}"
    for value in data.values():
        if isinstance(value, str) and value.strip():
            return _first_line(value)
    return ""


def _first_string(data: Mapping[str, object], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _command_text(parts: Sequence[object]) -> str:
    words = [str(part) for part in parts]
    # `bash -lc "npm test"` (Codex's shell calls) reads as the script it runs.
    if len(words) >= 3 and words[-2] in _SHELL_FLAGS:
        return _first_line(words[-1])
    return _first_line(shlex.join(words))


def _change_paths(changes: object) -> list[str]:
    if isinstance(changes, Mapping):
        return [str(path) for path in changes]
    paths: list[str] = []
    if isinstance(changes, list):
        for change in changes:
            if isinstance(change, Mapping) and isinstance(change.get("path"), str):
                paths.append(str(change["path"]))
    return paths


def _patch_line(text: str) -> str:
    if not any(prefix in text for prefix in PATCH_FILE_PREFIXES):
        return ""
    return ", ".join(patch_files(text))


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def _clip(line: str) -> str:
    line = " ".join(line.split())
    if len(line) <= LINE_MAX:
        return line
    head = line[:LINE_MAX - 1]
    # Never end in part of a word (a secret cut in two would escape its redaction), unless
    # the line is one word (a long path).
    whole = head.rpartition(" ")[0] if line[LINE_MAX - 1] != " " else head
    return (whole or head) + "…"
