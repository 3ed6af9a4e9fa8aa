"""Lines read from a stream with a bound (DESIGN.md §11, bounded input): what an agent's
process writes, and what a protocol client sends."""

from __future__ import annotations

import asyncio

__all__ = ["read_line"]


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
