"""JSON for the hook's hot path, on the C accelerator `_json` alone.

`import json` pulls in `json.decoder`, `json.scanner` and `json.encoder` (about 2 ms of a hook
whose whole budget is a few ms; see benchmarks/hook_latency.py). The hook reads one payload and
writes a few small records, so it uses the same C scanner and string encoder directly. Output is
compact, ASCII-only JSON that `json.loads` reads back unchanged (tests/test_jsonwire.py proves the
round trip with hypothesis).

`loads` is also the one reader of JSON from elsewhere — hook payloads, transcripts, a
repository's `.claude/settings.json` and `.mcp.json`, install manifests (DESIGN.md §11, bounded
input): a document nested deeper than MAX_DEPTH is a ValueError, like any other malformed
document, never a RecursionError. The importers read their logs' lines with `jsonbulk.loads`,
which answers as `loads` does, faster. Writing JSON off the hot path uses the standard `json`
module.
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing and collections.abc stay off the hook's hot path
    from collections.abc import Iterable, Iterator
    from typing import Any

__all__ = ["MAX_DEPTH", "loads", "loads_object", "objects", "dumps", "object_problem",
           "check_depth"]

# Arrays and objects inside one another: far more than any agent, settings file or transcript
# writes, and few enough that whatever walks a parsed value recursively stays clear of the
# interpreter's recursion limit.
MAX_DEPTH = 256

_WHITESPACE = " \t\n\r"


class _ScannerContext:
    """The attributes `_json.make_scanner` reads from a decoder."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float  # NaN, Infinity, -Infinity, as json.loads accepts them
    memo: dict[str, str] = {}


# typeshed types the argument as a JSONDecoder; the scanner reads only the attributes above.
_scan_once = _json.make_scanner(_ScannerContext())  # type: ignore[arg-type]
_quote = _json.encode_basestring_ascii


def loads(text: str | bytes) -> object:
    """Parse one JSON document (bytes are read as UTF-8).

    Raises:
        ValueError: the text is not exactly one JSON document, is not UTF-8, or nests arrays
            and objects deeper than MAX_DEPTH.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")  # UnicodeDecodeError is a ValueError
    start = 0
    end = len(text)
    while start < end and text[start] in _WHITESPACE:
        start += 1
    try:
        value, stop = _scan_once(text, start)
    except (StopIteration, SystemError):
        # Invalid JSON. The C scanner builds its error from json.decoder, and only when that
        # module is already imported (else it fails with a SystemError): let the standard
        # parser, off the hot path, find and describe the error.
        value, stop = _standard_loads(text), end
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    while stop < end and text[stop] in _WHITESPACE:
        stop += 1
    if stop != end:
        raise ValueError(f"Extra data: char {stop}")
    check_depth(text, value)
    return value


def check_depth(text: str | bytes, value: object) -> None:
    """Refuse `value`, the document `text` holds, when it nests arrays and objects deeper than
    MAX_DEPTH (what a parser other than `loads` read must pass too).

    Raises:
        ValueError: it nests deeper.
    """
    # Nesting deeper than the limit takes more than the limit's opening brackets, and as many
    # closing ones: a shorter text, or one with fewer brackets (a pass in C), cannot.
    if len(text) > 2 * MAX_DEPTH:
        if isinstance(text, bytes):
            brackets = text.count(b"[") + text.count(b"{")
        else:
            brackets = text.count("[") + text.count("{")
        if brackets > MAX_DEPTH and _deeper_than(value, MAX_DEPTH):
            raise ValueError(_TOO_DEEP)


def loads_object(text: str | bytes) -> dict[str, Any] | None:
    """The JSON object `text` holds, or None when it holds none: not JSON (torn, not UTF-8,
    nested deeper than MAX_DEPTH) or another kind of value."""
    try:
        value = loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def objects(lines: Iterable[str | bytes]) -> Iterator[dict[str, Any]]:
    """The JSON objects of JSON lines (a JSONL file, a stream of messages), in order; a line
    that holds no JSON object (see `loads_object`) is skipped."""
    for line in lines:
        value = loads_object(line)
        if value is not None:
            yield value


_TOO_DEEP = f"JSON nested too deeply (more than {MAX_DEPTH} levels of arrays and objects)"


# The types of values that hold no other: an array or object made only of them ends its branch
# (the walks below look at a manifest's thousands of entries in C, a level at a time).
_SCALARS = frozenset((str, int, float, bool, type(None)))
_STRINGS = frozenset((str,))


def _deeper_than(value: object, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value`, a parsed document
    (no recursion)."""
    level: list[object] = [value] if type(value) is dict or type(value) is list else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        below: list[object] = []
        for item in level:
            inner: Iterable[object] = (item.values() if isinstance(item, dict)
                                       else item)  # type: ignore[assignment]
            if not _SCALARS.issuperset(map(type, inner)):
                below.extend(x for x in inner if type(x) is dict or type(x) is list)
        level = below
    return False


def _standard_loads(text: str) -> object:
    import json

    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None


def dumps(value: object) -> str:
    """Serialise dicts with string keys, lists, tuples, strings, numbers, booleans and None:
    what `json.dumps(value, separators=(",", ":"), allow_nan=False)` writes, on the same C
    encoder; keys must be strings (a reader gets back what was written, never a key `1` as
    `"1"`).

    Raises:
        TypeError: a value or key of another type.
        ValueError: a float that JSON cannot hold (NaN, infinity).
        RecursionError: nested too deeply.
    """
    text = "".join(_encoder(value, 0))  # first: it refuses cycles and depth
    _check_keys(value)
    return text


def _check_keys(value: object) -> None:
    stack = [value] if isinstance(value, (dict, list, tuple)) else []
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not _STRINGS.issuperset(map(type, item)):
                for key in item:
                    if not isinstance(key, str):
                        raise TypeError(
                            f"JSON object keys must be str, not {type(key).__name__}")
            inner: Iterable[object] = item.values()
        else:
            assert isinstance(item, (list, tuple))
            inner = item
        if not _SCALARS.issuperset(map(type, inner)):
            stack.extend(x for x in inner if isinstance(x, (dict, list, tuple)))


def _refuse(value: object) -> object:
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


# markers (no cycle check: cos never builds cyclic values), default, string encoder, indent,
# separators, sort_keys, skipkeys, allow_nan
_encoder = _json.make_encoder(None, _refuse, _quote, None, ":", ",", False, False, False)


def object_problem(value: object) -> str | None:
    """Why `value` cannot be stored as a JSON object (`dumps` of it would fail, or it is
    another kind of value), in a few words; None when it can."""
    if not isinstance(value, dict):
        return f"must be a JSON object, not {type(value).__name__}"
    try:
        dumps(value)
    except (TypeError, ValueError) as exc:
        return f"is not JSON ({exc})"
    return None
