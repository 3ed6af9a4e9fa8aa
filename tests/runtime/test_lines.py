"""runtime/lines.py: lines read with a bound; a line over it is dropped whole and said at once."""

from __future__ import annotations

import asyncio


def lines_of(data: bytes, limit: int) -> list[tuple[bytes | None, bool]]:
    from coding_os.runtime.lines import read_line

    async def scenario() -> list[tuple[bytes | None, bool]]:
        stream = asyncio.StreamReader(limit=limit)
        stream.feed_data(data)
        stream.feed_eof()
        got = []
        while True:
            line, too_long = await read_line(stream)
            got.append((line, too_long))
            if line is None and not too_long:
                return got

    return asyncio.run(scenario())


def test_lines_come_whole_and_a_last_line_without_newline_too() -> None:
    assert lines_of(b"one\ntwo\nthree", 64) == [(b"one\n", False), (b"two\n", False),
                                               (b"three", False), (None, False)]


def test_a_line_over_the_limit_is_dropped_whole_and_said_before_the_next_is_read() -> None:
    long = b"x" * 300
    assert lines_of(b"a\n" + long + b"\nb\n", 64) == [(b"a\n", False), (None, True),
                                                     (b"b\n", False), (None, False)]
    assert lines_of(b"a\n" + long, 64) == [(b"a\n", False), (None, True), (None, False)]
