"""`cos web`'s live events over Server-Sent Events (interfaces/web/live.py; docs/web.md "Live
events"): a job's events resumed after Last-Event-ID with none lost or shown twice, the runner's
lines as SSE messages, and what a stream may cost the server."""

from __future__ import annotations

import json
import socket
from pathlib import Path

from coding_os.interfaces.web.live import LIVE_MAX
from coding_os.runtime.events import EventLog
from tests.helpers import WEB_WAIT as WAIT
from tests.helpers import (ECHO_AGENT, Web, bg_job, job_session, page, python_session, read_sse,
                           until)

HELD_AT_MOST = 24 << 20  # bytes: less than the log the tests stream


def test_sse_resumes_after_last_event_id_with_no_event_lost_or_shown_twice(
        web: Web, project: Path) -> None:
    job = bg_job(project, "--agent", f"python:{ECHO_AGENT}", "--isolation", "none",
                 "first words")
    client = web.client()
    csrf = page(client, "/").csrf()
    url = f"/jobs/{job['id']}/events"
    with client.stream("GET", url, timeout=WAIT) as answer:
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/event-stream")
        first, _ = read_sse(answer, lambda got: any(
            e["msg"]["type"] == "task_complete" for e in got))
    last = first[-1]["seq"]
    # Meanwhile the job goes on: a reply sent while nobody follows.
    sent = client.post(f"/jobs/{job['id']}/reply", data={"text": "second words",
                                                         "csrf_token": csrf})
    assert sent.status_code == 303, sent.text
    with client.stream("GET", url, headers={"last-event-id": str(last)},
                       timeout=WAIT) as answer:
        second, _ = read_sse(answer, lambda got: any(
            e["msg"].get("text") == "echo: second words" for e in got))
    seqs = [e["seq"] for e in first + second]
    assert seqs == list(range(1, len(seqs) + 1))  # dense from 1: none lost, none twice
    # The session's page follows the same job, resumed with ?since=.
    session = job_session(project, job["id"])
    with client.stream("GET", f"/sessions/{session}/events?since={last}",
                       timeout=WAIT) as answer:
        again, _ = read_sse(answer, lambda got: got[-1]["seq"] >= seqs[-1])
    assert [e["seq"] for e in again] == seqs[len(first):]
    stopped = client.post(f"/jobs/{job['id']}/stop", headers={"x-csrf-token": csrf,
                                                              "hx-request": "true"})
    assert stopped.status_code == 200 and "stopped" in stopped.text
    # A job whose runner ended: its stored events after the seq, then the end.
    with client.stream("GET", url, headers={"last-event-id": str(seqs[-1])},
                       timeout=WAIT) as answer:
        rest, ended = read_sse(answer, lambda got: False)
    assert ended and all(e["seq"] > seqs[-1] for e in rest)
    page(client, f"{url}?since=999999", 400)



def test_runner_lines_become_sse_messages_with_their_seq_as_id_and_client_only_lines_left_out(
        ) -> None:
    from coding_os.interfaces.web.live import sse_messages

    stored = [{"v": 1, "seq": n, "ts": "2026-12-02T06:00:00.000Z", "session": "ses-a", "id": None,
               "msg": {"type": "agent_message", "message": f"line {n}\n\"quoted\" <b>"}}
              for n in (7, 8)]
    lines = b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in stored)
    fast = sse_messages(lines)
    # Another key order (parsed), a line for this client only, a blank line, a torn one.
    mixed = (b'{"seq":9,"v":1,"msg":{"type":"warning","message":"x"}}\n'
             b'{"id":"attach","seq":null,"msg":{"type":"error","message":"no"}}\n\n'
             b'{"v":1,"seq":\n' + lines)
    # As many heads as lines, but not one a line: a client-only line, and an event whose
    # message holds a head of its own (an object with the same keys).
    nested = {"v": 1, "seq": 10, "msg": {"type": "agent_message", "quoted": {"v": 1, "seq": 3}}}
    paired = (b'{"id":"x","seq":null,"msg":{"type":"error","message":"no"}}\n'
              + json.dumps(nested, separators=(",", ":")).encode() + b"\n")
    for body, seqs in ((fast, [7, 8]), (sse_messages(mixed), [9, 7, 8]),
                       (sse_messages(paired), [10])):
        messages = [m for m in body.decode().split("\n\n") if m]
        assert len(messages) == len(seqs)
        for message, seq in zip(messages, seqs):
            fields = dict(line.split(": ", 1) for line in message.split("\n"))
            assert fields["id"] == str(seq) and fields["event"] == "protocol"
            assert json.loads(fields["data"])["seq"] == seq
    assert [json.loads(m.split("data: ", 1)[1]) for m in fast.decode().split("\n\n") if m] \
        == stored



def peak_memory(web: Web) -> int:
    """The most memory the server's process has held so far (VmHWM), in bytes."""
    with open(f"/proc/{web.process.pid}/status", encoding="ascii") as status:
        [kb] = [line.split()[1] for line in status if line.startswith("VmHWM:")]
    return int(kb) << 10


def test_a_long_events_log_is_streamed_from_seq_0_without_being_held_whole(
        web: Web, project: Path) -> None:
    session = python_session(project, "hello")
    path = project / ".coding-os" / "python" / "events" / f"{session}.jsonl"
    with EventLog(str(path), session, durability="none") as log:
        for _ in range(20_000):  # about 23 MB
            log.append("agent_message", {"text": "y" * 1000})
        last = log.last_seq
    client = web.client()
    page(client, "/")  # the server's own start-up peak is behind it
    before = peak_memory(web)
    with client.stream("GET", f"/sessions/{session}/events?since=0", timeout=WAIT) as answer:
        events, _ = read_sse(answer, lambda got: got[-1]["seq"] >= last)
    assert [e["seq"] for e in events] == list(range(1, last + 1))
    assert peak_memory(web) - before < HELD_AT_MOST
    shown = page(client, f"/sessions/{session}")  # the page shows the last 200 events
    assert [int(str(e["data-seq"])) for e in shown.testid("live-event")] == list(
        range(last - 199, last + 1))
    assert shown.testid("live")[0]["data-since"] == str(last)


def test_live_streams_beyond_the_most_served_are_refused_503_until_one_closes(
        web: Web, project: Path) -> None:
    session = python_session(project, "hello")
    path = f"/{web.token}/sessions/{session}/events"
    held = []
    try:
        for _ in range(LIVE_MAX):  # each caught up, waiting for the log to grow
            sock = socket.create_connection(("127.0.0.1", web.port), timeout=WAIT)
            held.append(sock)
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{web.port}\r\n\r\n".encode())
            assert sock.recv(100).startswith(b"HTTP/1.1 200 ")
        client = web.client()
        refused = client.get(f"/sessions/{session}/events")
        assert refused.status_code == 503 and "live streams" in refused.text
        held.pop().close()
        until(lambda: client.get(f"/sessions/{session}/events?since=999999").status_code
              == 400, "the closed stream's place to be free")
    finally:
        for sock in held:
            sock.close()
