"""Live updates of `cos web` as Server-Sent Events (DESIGN.md §10): each protocol event is one
SSE message whose `id` is its `seq`, so a browser that reconnects sends `Last-Event-ID` and gets
every event after it, none twice. A job's events come through its runner's connection (stored,
then live: the protocol's `resume`); a session the engine runs without a job is followed by
reading its events log after the last seq sent.

What a stream costs is bounded: at most `LIVE_MAX` streams are open at once (one more is
answered 503), a log is read and sent `BATCH` events at a time (a stream from seq 0 of a long
log never holds it whole; the next batch is read once the client took the last), and a stream
caught up with its log looks at it again after a wait that grows from `POLL_S[0]` to
`POLL_S[1]` while nothing comes.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncGenerator, Callable, Mapping
from itertools import islice, repeat
from typing import Any

import anyio
import anyio.to_thread
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from coding_os import api, jsonwire

__all__ = ["resume_point", "sse_message", "sse_messages", "job_stream", "log_stream", "Streams",
           "POLL_S", "RETRY_MS", "LIVE_MAX", "BATCH"]

POLL_S = (0.1, 1.0)  # the wait before an events log is read again: after news, and longest
RETRY_MS = 1000  # how soon a browser reconnects
LIVE_MAX = 64  # live streams open at once (a browser keeps at most 6 connections to a server)
BATCH = 500  # events read from a log and sent at once


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


async def job_stream(feed: api.JobFeed) -> AsyncGenerator[bytes, None]:
    """The SSE body of a job's feed: its events, then `end` when its runner has ended (the
    browser then stops reconnecting). The runner's socket is read in the event loop (no
    thread): each read relays every whole line it brought in one write. A client that goes
    away cancels the read; the feed is closed either way."""
    import asyncio

    try:
        yield f"retry: {RETRY_MS}\n\n".encode("ascii")
        sock = feed.runner_socket()
        if sock is None:  # the runner has ended: the stored events
            events = iter(feed)
            while batch := list(islice(events, BATCH)):
                yield "".join(sse_message(event) for event in batch).encode("ascii")
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


async def log_stream(session: str, since: int, cwd: str,
                     env: Mapping[str, str] | None = None) -> AsyncGenerator[str, None]:
    """The SSE body of a session the engine runs without a job: its stored events after
    `since`, `BATCH` at a time, then each one as the log grows, for as long as the client
    stays."""
    from coding_os.errors import CosError

    yield f"retry: {RETRY_MS}\n\n"
    wait = POLL_S[0]
    while True:
        after = since
        try:
            read = await anyio.to_thread.run_sync(
                lambda: api.session_events(session, after, cwd=cwd, env=env, limit=BATCH))
        except CosError:
            return  # the log went away or was cut: the browser reconnects and is told why
        sent = [event for event in read["events"]
                if isinstance(event.get("seq"), int) and event["seq"] > since]
        if sent:
            since = sent[-1]["seq"]
            yield "".join(sse_message(event) for event in sent)
            wait = POLL_S[0]
        if len(read["events"]) < BATCH:  # caught up: wait, longer while nothing comes
            await anyio.sleep(wait)
            wait = min(wait * 2, POLL_S[1])


Body = AsyncGenerator[bytes, None] | AsyncGenerator[str, None]


class Streams:
    """The live streams of one server, at most `limit` open at once."""

    def __init__(self, limit: int = LIVE_MAX) -> None:
        self.limit = limit
        self.open = 0

    def take(self) -> bool:
        """Count one more open stream; False when `limit` are open already."""
        if self.open >= self.limit:
            return False
        self.open += 1
        return True

    def give_back(self) -> None:
        """Count one open stream less."""
        self.open -= 1

    def response(self, body: Body,
                 closing: Callable[[], None] | None = None) -> Response:
        """The SSE response of `body`, for a stream taken with `take`: when it ends (the body
        done, the client gone), the body is closed, then `closing` called, and the stream
        counted no more."""
        return _Live(body, self, closing)

    def busy(self) -> Response:
        """The answer to one stream too many."""
        return PlainTextResponse(f"cos web: {self.limit} live streams are open, the most it "
                                 "serves: close one and reload\n", status_code=503,
                                 headers={"retry-after": "5"})


class _Live(StreamingResponse):
    def __init__(self, body: Body, streams: Streams,
                 closing: Callable[[], None] | None) -> None:
        super().__init__(body, media_type="text/event-stream",
                         headers={"x-accel-buffering": "no"})
        self.streams = streams
        self.closing = closing
        self.stream = body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.streams.give_back()
            try:
                await self.stream.aclose()
            finally:
                if self.closing is not None:
                    self.closing()
