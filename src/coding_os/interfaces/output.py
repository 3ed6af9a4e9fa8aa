"""How cos prints what it has to say, for every interface: an error as one line on stderr with
its exit code, JSON as the `--json` forms print it, and text from transcripts and the store with
its control characters made visible (DESIGN.md §11)."""

from __future__ import annotations

import sys

__all__ = ["EXIT_INTERNAL", "error_exit", "dump_json", "escape_json_controls", "visible"]

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
    shows them: ESC as `^[`, BEL as `^G`, U+009B as `M-^[`."""
    return text.translate(_VISIBLE)


def escape_json_controls(text: str) -> str:
    """JSON `text` with DEL and the C1 controls escaped (`\\u009b`): the same data once parsed,
    and nothing a terminal acts on."""
    return text.translate(_JSON_CONTROLS)


def error_exit(exc: BaseException) -> int:
    """Print `exc` as the one line cos prints for it on stderr; return its exit code."""
    from coding_os.errors import CosError, NotTrusted

    if isinstance(exc, NotTrusted):
        print(visible(exc.reason), file=sys.stderr)
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
    import json

    text = _rows(data)
    if text is None:
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    text = escape_json_controls(text)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=2, ensure_ascii=True, default=str)
    return text


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
    import json

    # One call: the rows' members and the rows themselves both come apart by ",\n    "; as
    # JSON strings hold no raw newline, "},\n    {" is only ever where one row ends and the next
    # begins.
    text = json.dumps(data, ensure_ascii=False, separators=(",\n    ", ": "))
    return "[\n  {\n    " + text[2:-2].replace("},\n    {", "\n  },\n  {\n    ") + "\n  }\n]"
