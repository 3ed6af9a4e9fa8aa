"""A Gemini CLI session file as a scan read it (`sessions.KnownFile`), as one line: what the
index keeps between imports so that a file that did not change is not read again.

A line is the CRC-32 of the rest (8 hex digits), a space, and a JSON array: the file's path, its
key, project and parent, then the GeminiSession's fields in their order (`FORMAT` names that
order and the fields' types: a line of another is never read as this one). `line` makes one
(its texts redacted when asked: the titles, prompts, summary and metadata a session holds),
`from_line` reads one back, or gives None for a line that is not whole (cut short, changed):
that file is then read again.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import zlib
from typing import Any

from coding_os import frozen, jsonbulk, redact
from coding_os.adapters.gemini.messages import GeminiTokens
from coding_os.adapters.gemini.sessions import GeminiSession, KnownFile

__all__ = ["FORMAT", "line", "from_line"]

_FIELDS = dataclasses.fields(GeminiSession)
_NAMES = tuple(item.name for item in _FIELDS)
FORMAT = "gemini-kept/1:" + format(zlib.crc32(
    ",".join(f"{item.name}:{item.type}" for item in _FIELDS).encode()), "08x")
"""The version of the line's form, with the session's fields and their types: a kept line of
another (an older cos, a field added) is not read; that file is read again."""

# What each field's value is in the JSON array, where it is not the JSON value itself.
_TOKENS = tuple(i for i, item in enumerate(_FIELDS) if item.type == "GeminiTokens")
_TUPLES = tuple(i for i, item in enumerate(_FIELDS) if item.type == "tuple[str, ...]")
_PAIRS = _NAMES.index("delegations")
_SUBAGENTS = _NAMES.index("subagents")  # a file's own session has none: the scan attaches them
_TOKENS_BY_ID = _NAMES.index("message_tokens")
_KNOWN_TYPES = frozenset({"str", "str | None", "int", "bool", "tuple[str, ...]",
                          "tuple[tuple[str, str], ...]", "tuple[GeminiSession, ...]",
                          "GeminiTokens", "Mapping[str, int]", "Mapping[str, Any]",
                          "Mapping[str, GeminiTokens]"})
if not _KNOWN_TYPES.issuperset(str(item.type) for item in _FIELDS):
    raise TypeError("a GeminiSession field of a type coding_os.adapters.gemini.kept does not keep")
# The fields that hold what a person or the model wrote (redacted when kept redacted).
_TEXTS = tuple(_NAMES.index(name) for name in ("title", "summary", "first_prompt",
                                                "last_prompt", "agent_name", "metadata"))
_new_session = frozen.maker(GeminiSession)
_encode = json.JSONEncoder(separators=(",", ":")).encode
_fields_of = operator.attrgetter(*_NAMES)
_counts_of = operator.attrgetter(*(item.name for item in dataclasses.fields(GeminiTokens)))


def line(known: KnownFile, path: str, redacting: bool) -> bytes:
    """The line that keeps `known`, the file at `path`, its texts redacted when `redacting`."""
    session = known.session
    if session.subagents:
        raise ValueError("a session with its subagents attached is not a file's own")
    values = list(_fields_of(session))
    for index in _TOKENS:
        values[index] = _counts_of(values[index])
    values[_TOKENS_BY_ID] = {message: _counts_of(tokens)
                             for message, tokens in session.message_tokens.items()}
    if redacting:
        for index in _TEXTS:
            values[index] = redact.redact_value(values[index])
    # ASCII: a text with a lone surrogate (a log may escape one) is kept as it is.
    body = _encode([path, known.key, known.project, known.parent, values]).encode("ascii")
    return b"%08x %s" % (zlib.crc32(body), body)


def from_line(data: bytes) -> tuple[str, KnownFile] | None:
    """The path and KnownFile a `line` keeps, or None when `data` is not a whole one."""
    if len(data) < 10 or data[8:9] != b" ":
        return None
    body = data[9:]
    try:
        if int(data[:8], 16) != zlib.crc32(body):
            return None
    except ValueError:
        return None
    try:
        kept: Any = jsonbulk.loads(body)
        path, key, project, parent, values = kept  # as `line` wrote it
        for index in _TOKENS:
            values[index] = GeminiTokens(*values[index])
        for index in _TUPLES:
            values[index] = tuple(values[index])
        values[_PAIRS] = tuple(map(tuple, values[_PAIRS]))
        values[_SUBAGENTS] = ()
        values[_TOKENS_BY_ID] = {message: GeminiTokens(*tokens)
                                 for message, tokens in values[_TOKENS_BY_ID].items()}
        session = _new_session(**dict(zip(_NAMES, values, strict=True)))
    except (ValueError, TypeError, IndexError, AttributeError):
        return None  # the right sum of what no `line` of this FORMAT wrote
    return path, KnownFile(tuple(key), project, parent, session)
