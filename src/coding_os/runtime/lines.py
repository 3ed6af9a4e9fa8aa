"""Lines read from a stream with a bound (DESIGN.md §11, bounded input): what an agent's
process writes, and what a protocol client sends; and the check that what a line decoded to is
text (JSON's `"\\ud800"` decodes to a lone surrogate, which no UTF-8 writer takes: not a
program's arguments, not a file, not a terminal)."""

from __future__ import annotations

import asyncio

__all__ = ["read_line", "lone_surrogate"]


async def read_line(stream: asyncio.StreamReader) -> tuple[bytes | None, bool]:
    """The next line of `stream`, its newline included (a last line may have none), and False;
    (None, False) at the end of the stream; (None, True) for a line longer than the stream's
    limit, which is read to its end and dropped, so the caller can say so at once."""
    too_long = False
    while True:
        try:
            line = await stream.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            return (None, True) if too_long else (end.partial or None, False)
        except asyncio.LimitOverrunError as over:
            too_long = True
            await stream.readexactly(max(over.consumed, 1))
            continue
        return (None, True) if too_long else (line, False)


def lone_surrogate(value: object) -> str | None:
    """A lone surrogate (a code point of U+D800..U+DFFF, which JSON's `\\u` escapes
    can give and UTF-8 cannot encode) in the strings of `value`, the keys of its objects
    included, as its escape (`\\ud800`); None when there is none. A pair of surrogates in
    JSON decodes to one character and is no lone surrogate."""
    stack: list[object] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError as exc:
                    return f"\\u{ord(item[exc.start]):04x}"
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return None
