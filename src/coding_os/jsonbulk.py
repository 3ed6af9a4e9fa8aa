"""JSON read in bulk: every line of every agent log an import reads (Claude Code transcripts,
Codex rollouts, Gemini CLI sessions, the Gemini files an import keeps). Off the hook's path.

`loads` gives what `jsonwire.loads` gives, for every text: the same value, or a ValueError.
msgspec's decoder reads a line in a third of the time of the standard library's C scanner
(benchmarks/gemini_import.py: the parse is most of an import; STYLE.md: "msgspec or orjson
elsewhere if a benchmark says so"). What it refuses and the standard parser reads (NaN and
Infinity, a number past a float's range, an escaped lone surrogate, a byte order mark) is read by
`jsonwire.loads`, and what nests deeper than `jsonwire.MAX_DEPTH` is refused as jsonwire refuses
it (msgspec itself raises RecursionError past about a thousand levels). tests/test_jsonbulk.py
holds the two to the same answers.
"""

from __future__ import annotations

from typing import Any

import msgspec

from coding_os import jsonwire

__all__ = ["loads", "loads_object"]

_decode = msgspec.json.Decoder().decode


def loads(text: str | bytes) -> object:
    """Parse one JSON document (bytes are read as UTF-8), as `jsonwire.loads` does.

    Raises:
        ValueError: the text is not exactly one JSON document, is not UTF-8, or nests arrays
            and objects deeper than jsonwire.MAX_DEPTH.
    """
    try:
        value = _decode(text)
    except (msgspec.DecodeError, RecursionError):
        # Not JSON to msgspec, or nested past its own limit: the standard parser's answer (for
        # the deep, the nesting limit's ValueError).
        return jsonwire.loads(text)
    jsonwire.check_depth(text, value)
    return value


def loads_object(text: str | bytes) -> dict[str, Any] | None:
    """The JSON object `text` holds, or None when it holds none (see `jsonwire.loads_object`)."""
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
