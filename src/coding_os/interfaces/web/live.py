"""Live updates of `cos web` as Server-Sent Events (DESIGN.md §10): each protocol event is one
SSE message whose `id` is its `seq`, so a browser that reconnects sends `Last-Event-ID` and gets
every event after it, none twice. A job's events come through its runner's connection (stored,
then live: the protocol's `resume`); a session the engine runs without a job is followed by
reading its events log after the last seq sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import anyio
import anyio.to_thread

from coding_os import api

__all__ = ["resume_point", "sse_message", "job_stream", "log_stream", "POLL_S", "RETRY_MS"]

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


async def job_stream(feed: api.JobFeed) -> AsyncIterator[str]:
    """The SSE body of a job's feed: its events, then `end` when its runner has ended (the
    browser then stops reconnecting). One thread reads the feed and hands the events over as
    they come; each wake-up sends every event handed over by then in one write. A client that
    goes away closes the feed, which ends the read blocked in the thread."""
    import asyncio
    import threading

    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[list[tuple[int, str]] | None] = asyncio.Queue()

    def read() -> None:
        try:
            for batch in feed.raw():  # relayed as the runner sent it: no parse, no dump
                loop.call_soon_threadsafe(queue.put_nowait, batch)
        except (OSError, ValueError):
            pass  # the feed was closed under the read: the client went away
        finally:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, None)
            except RuntimeError:
                pass  # the loop is gone already

    threading.Thread(target=read, name="cos-web-feed", daemon=True).start()
    try:
        yield f"retry: {RETRY_MS}\n\n"
        ended = False
        while not ended:
            batch = [await queue.get()]
            while not queue.empty():
                batch.append(queue.get_nowait())
            ended = batch[-1] is None
            chunk = "".join(f"id: {seq}\nevent: protocol\ndata: {data}\n\n"
                            for events in batch if events is not None
                            for seq, data in events)
            if chunk:
                yield chunk
        row = await anyio.to_thread.run_sync(api.session_job, str(feed.job.get("cos_session")))
        yield _end((row or feed.job).get("state"))
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
