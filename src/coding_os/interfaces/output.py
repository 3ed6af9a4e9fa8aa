"""How cos prints what it has to say, for every interface: an error as one line on stderr with
its exit code, JSON as the `--json` forms print it, and text from transcripts and the store with
its control characters made visible (DESIGN.md §11)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["EXIT_INTERNAL", "error_exit", "dump_json", "escape_json_controls", "visible",
           "table"]

EXIT_INTERNAL = 70

# Control characters as `cat -v` shows them: C0 as ^@..^_, DEL as ^?, C1 as M-^@..M-^_. A
# transcript can hold anything a tool printed (an OSC title, a clear screen); a terminal would
# act on it. Newline and tab are layout, not commands, and stay.
_VISIBLE = {code: f"^{chr(code + 64)}" for code in range(0x20) if code not in (0x09, 0x0A)}
_VISIBLE[0x7F] = "^?"
_VISIBLE.update({code: f"M-^{chr(code - 0x80 + 64)}" for code in range(0x80, 0xA0)})
# JSON escapes C0 but leaves DEL and C1 raw; in JSON text they can only be inside strings.
_JSON_CONTROLS = {code: f"\\u{code:04x}" for code in range(0x7F, 0xA0)}


def visible(text: str) -> str:
    """`text` with its control characters (C0 but newline and tab, DEL, C1) shown as `cat -v`
    shows them: ESC as `^[`, BEL as `^G`, U+009B as `M-^[`; a lone surrogate as its escape
    (`\\ud800`)."""
    shown = text.translate(_VISIBLE)
    if not shown.isascii():
        try:
            shown.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate ("\ud800" is valid JSON) has no UTF-8
            shown = shown.encode("utf-8", "backslashreplace").decode("utf-8")
    return shown


def table(header: Sequence[str], rows: Sequence[Sequence[str]],
          right: frozenset[int] = frozenset()) -> list[str]:
    """`rows` under their `header` as aligned lines, each column as wide as its widest cell (the
    last one not padded); the columns numbered in `right` are aligned right (numbers)."""
    widths = [max(len(line[column]) for line in (header, *rows))
              for column in range(len(header))]
    last = len(header) - 1
    return ["  ".join(cell.rjust(widths[column]) if column in right
                      else cell if column == last else cell.ljust(widths[column])
                      for column, cell in enumerate(line)).rstrip()
            for line in (header, *rows)]


def escape_json_controls(text: str) -> str:
    """JSON `text` with DEL and the C1 controls escaped (`\\u009b`): the same data once parsed,
    and nothing a terminal acts on."""
    return text.translate(_JSON_CONTROLS)


def error_exit(exc: BaseException) -> int:
    """Print `exc` as the one line cos prints for it on stderr (an ambiguous id: that line,
    then the candidates, one a line); return its exit code."""
    from coding_os.errors import Ambiguous, CosError, NotTrusted

    if isinstance(exc, NotTrusted):
        print(visible(exc.reason), file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, Ambiguous):  # the candidates follow the message, one a line
        first, *candidates = str(exc).split("\n")
        print("\n".join([f"cos: {visible(' '.join(first.split()))}",
                         *(f"  {visible(' '.join(line.split()))}" for line in candidates)]),
              file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, CosError):
        print(f"cos: {visible(' '.join(str(exc).split()))}", file=sys.stderr)
        return exc.exit_code
    print(f"cos: internal error: {type(exc).__name__}: {visible(' '.join(str(exc).split()))}",
          file=sys.stderr)
    return EXIT_INTERNAL


def dump_json(data: object) -> str:
    """`data` as cos prints JSON: indented, UTF-8 as is but for control characters (escaped);
    escaped to ASCII when it holds a string UTF-8 cannot encode (a file name that is not UTF-8),
    so the output stays UTF-8."""
    text = _rows(data)
    if text is None:
        text = _indented(data)
    text = escape_json_controls(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        import json

        return json.dumps(data, indent=2, ensure_ascii=True, default=str)
    return text


def _indented(data: object) -> str:
    """What `json.dumps(data, indent=2, ensure_ascii=False, default=str)` writes, without
    `import json` (its decoder compiles regular expressions: a quarter of a plain `cos rewind
    --json`'s start-up, see benchmarks/checkpoints.py). json's own indented encoder is this same
    Python over the same C string encoder."""
    from _json import encode_basestring as quote

    chunks: list[str] = []
    markers: dict[int, object] = {}

    def scalar(value: object) -> str | None:
        if isinstance(value, str):
            return quote(value)
        if value is None:
            return "null"
        if value is True:
            return "true"
        if value is False:
            return "false"
        if isinstance(value, int):
            return int.__repr__(value)
        if isinstance(value, float):
            return _float(value)
        return None

    def mark(value: object) -> int:
        marker = id(value)
        if marker in markers:
            raise ValueError("Circular reference detected")
        markers[marker] = value
        return marker

    def encode(value: object, level: int) -> None:
        text = scalar(value)
        if text is not None:
            chunks.append(text)
        elif isinstance(value, (list, tuple)):
            if not value:
                chunks.append("[]")
                return
            marker = mark(value)
            indent = "\n" + "  " * (level + 1)
            chunks.append("[" + indent)
            for number, item in enumerate(value):
                if number:
                    chunks.append("," + indent)
                encode(item, level + 1)
            chunks.append("\n" + "  " * level + "]")
            del markers[marker]
        elif isinstance(value, dict):
            if not value:
                chunks.append("{}")
                return
            marker = mark(value)
            indent = "\n" + "  " * (level + 1)
            chunks.append("{" + indent)
            for number, (key, item) in enumerate(value.items()):
                if isinstance(key, float):
                    key = _float(key)
                elif key is True or key is False or key is None:
                    key = scalar(key)
                elif isinstance(key, int):
                    key = int.__repr__(key)
                elif not isinstance(key, str):
                    raise TypeError("keys must be str, int, float, bool or None, "
                                    f"not {key.__class__.__name__}")
                chunks.append(("," + indent if number else "") + quote(key) + ": ")
                encode(item, level + 1)
            chunks.append("\n" + "  " * level + "}")
            del markers[marker]
        else:
            marker = mark(value)
            encode(str(value), level)
            del markers[marker]

    encode(data, 0)
    return "".join(chunks)


def _float(value: float) -> str:
    """A float as json writes it (allow_nan: NaN and the infinities as JavaScript names them)."""
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == float("-inf"):
        return "-Infinity"
    return float.__repr__(value)


_SCALARS = frozenset((str, int, float, bool, type(None)))


def _rows(data: object) -> str | None:
    """`data`, a list of flat objects (a listing: `cos agents`, `cos sessions`), as
    `json.dumps(data, indent=2)` writes it, through the C encoder, which json uses only without
    indent (a thousand rows: a tenth of the time); None for any other shape."""
    if not isinstance(data, list) or not data:
        return None
    for row in data:
        if type(row) is not dict or not row or not all(
                type(key) is str for key in row) or not _SCALARS.issuperset(
                    map(type, row.values())):
            return None
    # One call: the rows' members and the rows themselves both come apart by ",\n    "; as
    # JSON strings hold no raw newline, "},\n    {" is only ever where one row ends and the next
    # begins.
    from _json import encode_basestring, make_encoder

    # json.dumps's own C encoder, as it makes it: markers (cycles), default, the string encoder
    # (not ASCII), indent, separators, sort_keys, skipkeys, allow_nan.
    encoder = make_encoder({}, _not_json, encode_basestring, None, ": ", ",\n    ", False,
                           False, True)
    text = "".join(encoder(data, 0))
    return "[\n  {\n    " + text[2:-2].replace("},\n    {", "\n  },\n  {\n    ") + "\n  }\n]"


def _not_json(value: object) -> object:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
