"""Live updates of `cos web` as Server-Sent Events (DESIGN.md §10): each protocol event is one
SSE message whose `id` is its `seq`, so a browser that reconnects sends `Last-Event-ID` and gets
every event after it, none twice. A job's events come through its runner's connection (stored,
then live: the protocol's `resume`); a session the engine runs without a job is followed by
reading its events log after the last seq sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from itertools import repeat
from typing import Any

import anyio
import anyio.to_thread

from coding_os import api, jsonwire

__all__ = ["resume_point", "sse_message", "sse_messages", "job_stream", "log_stream", "POLL_S", "RETRY_MS"]

POLL_S = 0.5  # how often the events log of a session without a job is read again
RETRY_MS = 1000  # how soon a browser reconnects


def resume_point(headers: Mapping[str, str], query: Mapping[str, str]) -> int:
    """The seq to resume after: `Last-Event-ID` (a reconnect), else `?since=`, else 0.

    Raises:
        InvalidInput: it is not an integer >= 0.
    """
    from coding_os.errors import InvalidInput

    raw = headers.get("last-event-id") or query.get("since") or "0"
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise InvalidInput(f"not a seq: {raw[:40]!r} (an integer, 0 or more)")
    return int(raw)


def sse_message(event: Mapping[str, Any]) -> str:
    """One protocol event as an SSE message: `id` its seq, `data` the event's JSON (one line:
    JSON escapes newlines)."""
    data = json.dumps(event, ensure_ascii=True, separators=(",", ":"))
    return f"id: {event['seq']}\nevent: protocol\ndata: {data}\n\n"


def _end(state: object) -> str:
    return f"event: end\ndata: {json.dumps({'state': state})}\n\n"


# A stored or live event as the runner sends it starts with the events log's head (events.py),
# so its seq is read without parsing the line. A line of another shape is parsed (`_parsed`).
_HEAD = b'{"v":1,"seq":'
_HEAD_SEQ = re.compile(rb'\{"v":1,"seq":(\d+),')
GATHER_S = 0.005
READ_BYTES = 1 << 18  # at most this much of the runner's output is relayed in one write


def sse_messages(lines: bytes) -> bytes:
    """The SSE messages of whole JSON lines from a job's runner (each ending in a newline), the
    line itself the `data` (no parse, no dump) and its seq the `id`; a line with no seq (an
    error for this client only) or no JSON object is left out."""
    whole = lines.split(b"\n")
    if whole and not whole[-1]:
        whole.pop()
    seqs = _HEAD_SEQ.findall(lines)
    # The common case: every line starts with the head and holds no other, so the heads found
    # in the whole read pair with the lines in order.
    if len(seqs) == len(whole) and all(map(bytes.startswith, whole, repeat(_HEAD))):
        return b"".join([b"id: %s\nevent: protocol\ndata: %s\n\n" % pair
                         for pair in zip(seqs, whole)])
    return b"".join(_parsed(line) for line in whole)


def _parsed(line: bytes) -> bytes:
    match = _HEAD_SEQ.match(line)
    if match is not None:
        return b"id: %s\nevent: protocol\ndata: %s\n\n" % (match[1], line)
    event = jsonwire.loads_object(line) if line.strip() else None
    if event is None or not isinstance(event.get("seq"), int) or isinstance(event["seq"], bool):
        return b""
    return sse_message(event).encode("ascii")


async def job_stream(feed: api.JobFeed) -> AsyncIterator[bytes]:
    """The SSE body of a job's feed: its events, then `end` when its runner has ended (the
    browser then stops reconnecting). The runner's socket is read in the event loop (no
    thread): each read relays every whole line it brought in one write. A client that goes
    away cancels the read; the feed is closed either way."""
    import asyncio

    try:
        yield f"retry: {RETRY_MS}\n\n".encode("ascii")
        sock = feed.runner_socket()
        if sock is None:  # the runner has ended: the stored events
            stored = "".join(sse_message(event) for event in feed)
            if stored:
                yield stored.encode("ascii")
        else:
            sock.setblocking(False)
            loop = asyncio.get_running_loop()
            pending = b""
            while True:
                try:
                    chunk = await loop.sock_recv(sock, READ_BYTES)
                except OSError:
                    break  # the runner went away
                if not chunk:
                    break
                pending += chunk
                whole = pending.rfind(b"\n") + 1
                if whole:
                    messages = sse_messages(pending[:whole])
                    pending = pending[whole:]
                    if messages:
                        yield messages
                if len(chunk) < READ_BYTES:
                    await asyncio.sleep(GATHER_S)
        row = await anyio.to_thread.run_sync(api.session_job, str(feed.job.get("cos_session")))
        yield _end((row or feed.job).get("state")).encode("ascii")
    finally:
        feed.close()


async def log_stream(session: str, since: int, cwd: str) -> AsyncIterator[str]:
    """The SSE body of a session the engine runs without a job: its stored events after
    `since`, then each one as the log grows, for as long as the client stays."""
    yield f"retry: {RETRY_MS}\n\n"
    while True:
        read = await anyio.to_thread.run_sync(
            lambda: api.session_events(session, since, cwd=cwd))
        for event in read["events"]:
            if isinstance(event.get("seq"), int) and event["seq"] > since:
                since = event["seq"]
                yield sse_message(event)
        await anyio.sleep(POLL_S)
