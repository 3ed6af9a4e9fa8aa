"""runtime/lines.py: lines read with a bound; a line over it is dropped whole and said at once;
and the lone surrogates a decoded line may hold are found."""

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


def test_a_lone_surrogate_is_found_in_keys_and_values_and_a_pair_is_none() -> None:
    from coding_os.jsonwire import loads
    from coding_os.runtime.lines import lone_surrogate

    assert lone_surrogate(loads('{"op": {"text": ["ok", "a\\udc80"]}}')) == "\\udc80"
    assert lone_surrogate(loads('{"k\\ud800": 1}')) == "\\ud800"
    assert lone_surrogate(loads('{"t": "\\ud83d\\ude00 caf\\u00e9", "n": [1, null, true]}')) \
        is None
