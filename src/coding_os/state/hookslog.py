"""The hooks log (DESIGN.md §3.5): `.coding-os/.hooks.log`, one line per hook fire.

Each line is `key=value` pairs, space separated, always starting
`ts=… agent=… panel=… session=… task=… event=…`. A value made only of safe characters is
written bare, anything else as a JSON string; a missing value is `-`. Lines are appended whole
under an exclusive lock (durable.locked_append), so they never interleave whatever their length.
Secrets of known shapes in the values are redacted before the line is written (redact.py).
"""

from __future__ import annotations

import os

from coding_os import durable, redact as redaction

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

__all__ = ["format_line", "parse_line", "append", "read", "HEAD_KEYS", "MAX_VALUE"]

HEAD_KEYS = ("ts", "agent", "panel", "session", "task", "event")
MAX_VALUE = 8192  # longer values are cut, and end with "…"
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:/@+,-")


def _quote(value: str) -> str:
    from coding_os.jsonwire import dumps

    return dumps(value)


def format_line(fields: Mapping[str, object]) -> str:
    """One log line (with its newline) from `fields`; head keys first, then the rest in order."""
    parts = []
    for key in HEAD_KEYS:
        parts.append(f"{key}={_value(fields.get(key))}")
    for key, value in fields.items():
        if key not in HEAD_KEYS and value is not None:
            parts.append(f"{key}={_value(value)}")
    return " ".join(parts) + "\n"


def _value(value: object) -> str:
    if value is None or value == "":
        return "-"
    text = value if isinstance(value, str) else str(value)
    if len(text) > MAX_VALUE:
        text = text[: MAX_VALUE - 1] + "…"
    if set(text) <= _BARE and text != "-":
        return text
    return _quote(text)


def parse_line(line: str) -> dict[str, str | None] | None:
    """The fields of one log line, or None when it is not one."""
    import json

    fields: dict[str, str | None] = {}
    i = 0
    n = len(line)
    while i < n:
        while i < n and line[i] == " ":
            i += 1
        if i >= n or line[i] == "\n":
            break
        eq = line.find("=", i)
        if eq < 0:
            return None
        key = line[i:eq]
        i = eq + 1
        if i < n and line[i] == '"':
            try:
                value, i = json.JSONDecoder().raw_decode(line, i)
            except ValueError:
                return None
            fields[key] = value
        else:
            end = line.find(" ", i)
            end = n if end < 0 else end
            value = line[i:end].rstrip("\n")
            i = end
            fields[key] = None if value == "-" else value
    if "ts" not in fields or "event" not in fields:
        return None
    return fields


def append(log_path: str, fields: dict[str, object], redact: bool = True) -> None:
    """Append one line for `fields` to the log at `log_path`, the secrets in its values
    redacted (unless `redact` is false: the caller did it, or the project turned it off).

    Raises:
        StateIOError: the log cannot be written; it keeps its previous lines whole.
    """
    if redact:
        fields = redaction.redact_value(fields)  # type: ignore[assignment]
    durable.locked_append(log_path, format_line(fields).encode("utf-8", "surrogateescape"))


def _reversed_lines(path: str, block: int = 1 << 16) -> Iterator[str]:
    """The lines of `path`, last first, reading from the end in blocks."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        pos = f.tell()
        tail = b""
        while pos > 0:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            chunk = f.read(step) + tail
            lines = chunk.split(b"\n")
            tail = lines[0]
            for raw in reversed(lines[1:]):
                if raw:
                    yield raw.decode("utf-8", "replace")
        if tail:
            yield tail.decode("utf-8", "replace")


def read(log_path: str, *, agent: str | None = None, session: str | None = None,
         event: str | None = None, limit: int | None = None) -> list[dict[str, str | None]]:
    """Parsed lines matching the filters, oldest first; at most the last `limit` of them."""
    if not os.path.exists(log_path) or limit == 0:
        return []
    matched: list[dict[str, str | None]] = []
    for raw in _reversed_lines(log_path):
        fields = parse_line(raw)
        if fields is None:
            continue
        if agent and fields.get("agent") != agent:
            continue
        if session and fields.get("session") != session and fields.get("native") != session:
            continue
        if event and fields.get("event") != event:
            continue
        matched.append(fields)
        if limit is not None and len(matched) >= limit:
            break
    matched.reverse()
    return matched
