"""`cos web`'s Server-Sent Events against the protocol alone: events per second.

Figure: the events per second a client reads from `GET /jobs/ID/events` of a running `cos web
--json --port 0` (a new connection under the token's path; every SSE message split out, its `id` and
its `data` JSON read, as the page does), divided by the events per second read from the job's
runner socket directly (`control.attach`, what `cos attach` and the web view both use: the
protocol's `resume`, then its events, in this process). Both read the same events from seq 0 to
the last: an exec job (`cos bg --exec "seq 1 N; sleep 600"`) that printed N lines (one
`agent_message` each) and still runs, so both go through its runner (its stored events, then the
live feed, none in between). Each side is timed from the request to the last event; the sides
run interleaved, rounds after a warm-up, medians. Target: ratio >= 0.8. Also printed, with no
target: `cos attach --json` (a process of its own, so with its start-up) reading the same events,
and the rate the runner stored them at as the job printed them (the live rate, from the events'
own stamps).

Both sides parse each event's JSON with the same reader (`jsonwire.loads`, the protocol
client's); the SSE side splits each message into its fields first, as an EventSource does.

`BENCH_EVENTS` (default 10,000) sets N; `BENCH_RUNS` (default 9) the timed rounds.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
from _jobs import cos, stop_jobs  # noqa: E402
from web_sessions_page import COS, WebServer, byte_compile  # noqa: E402

LINES = int(os.environ.get("BENCH_EVENTS", "10000"))
RUNS = int(os.environ.get("BENCH_RUNS", "9"))
WARMUP = 1
TARGET = 0.8
WAIT = 120.0


def wait_printed(job: str, env: dict[str, str], last: int) -> str:
    """The job's events log once it holds `last` events; a job that ends first ends the run."""
    from coding_os.runtime.events import last_seq

    state_path = Path(env["HOME"]) / ".coding-os" / "jobs" / job / "state.json"
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        if state.get("state") in ("done", "failed", "stopped"):
            raise SystemExit(f"job {job} ended ({state.get('state')}) before printing")
        events = state.get("events")
        if isinstance(events, str) and os.path.exists(events) and last_seq(events) >= last:
            return events
        time.sleep(0.1)
    raise SystemExit(f"job {job} did not print {LINES} lines in {WAIT:.0f} s")


def check(seqs: list[int], last: int, side: str) -> None:
    if seqs != list(range(1, last + 1)):
        raise SystemExit(f"{side}: read {len(seqs)} events, not seqs 1..{last} once each in "
                         "order")


def read_protocol(job: str, env: dict[str, str], last: int) -> float:
    """Seconds to read the job's events 1..`last` from its runner socket."""
    from coding_os.jobs import control

    start = time.perf_counter()
    _, connection, _ = control.attach(job, 0, env)
    if connection is None:
        raise SystemExit(f"job {job}: its runner is not running")
    seqs = []
    try:
        for event in connection.events():
            seq = event.get("seq")
            if isinstance(seq, int):
                seqs.append(seq)
                if seq >= last:
                    break
    finally:
        connection.close()
    elapsed = time.perf_counter() - start
    check(seqs, last, "the runner socket")
    return elapsed


def read_sse(server: WebServer, job: str, last: int) -> float:
    """Seconds to read the job's events 1..`last` from cos web's SSE, parsed as a page
    does (each message's fields, as an EventSource does: its id, its type, its data lines
    joined; the data as JSON, by the reader the protocol's side uses)."""
    from coding_os import jsonwire

    start = time.perf_counter()
    connection = server.connect()
    seqs: list[int] = []
    try:
        connection.request("GET", f"{server.root}/jobs/{job}/events",
                           headers=server.headers(Accept="text/event-stream"))
        answer = connection.getresponse()
        if answer.status != 200:
            raise SystemExit(f"GET /jobs/{job}/events: {answer.status} {answer.read()[:2000]!r}")
        pending = b""
        while not seqs or seqs[-1] < last:
            chunk = answer.read1(1 << 16)
            if not chunk:
                break
            *messages, pending = (pending + chunk).split(b"\n\n")
            for message in messages:
                event_id = kind = None
                data = []
                for field in message.split(b"\n"):
                    name, _, value = field.partition(b": ")
                    if name == b"data":
                        data.append(value)
                    elif name == b"id":
                        event_id = value
                    elif name == b"event":
                        kind = value
                if kind != b"protocol":
                    continue
                event = jsonwire.loads(b"\n".join(data))
                assert isinstance(event, dict)
                if event_id is None or event["seq"] != int(event_id):
                    raise SystemExit(f"SSE: id {event_id!r} is not the seq {event['seq']}")
                seqs.append(event["seq"])
    finally:
        connection.close()
    elapsed = time.perf_counter() - start
    check(seqs, last, "cos web's SSE")
    return elapsed


def read_attach(job: str, env: dict[str, str], cwd: Path, last: int) -> float:
    """Seconds from starting `cos attach --json JOB` to its line of event `last`."""
    start = time.perf_counter()
    proc = subprocess.Popen([COS, "attach", "--json", job], env=env, cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    seqs = []
    try:
        for line in proc.stdout:
            seq = json.loads(line).get("seq")
            if isinstance(seq, int):
                seqs.append(seq)
                if seq >= last:
                    break
        elapsed = time.perf_counter() - start
    finally:
        proc.terminate()  # it follows the job until the job ends: detach
        proc.wait(timeout=30)
        proc.stdout.close()
    check(seqs, last, "cos attach --json")
    return elapsed


def live_rate(events: str, last: int) -> float:
    """Events per second the runner stored as the job printed, from the events' stamps."""
    from coding_os.runtime.events import read_since

    stamps = [datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).timestamp()
              for event in read_since(events, 0).events if event["seq"] in (3, last)]
    return (last - 3) / max(stamps[-1] - stamps[0], 1e-3)


def main() -> None:
    byte_compile()
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-web-sse-"))
    home = scratch / "home"
    home.mkdir()
    env = _fixtures.bench_env(home)
    project = _fixtures.project(scratch, env)
    jobs: list[str] = []
    server = None
    try:
        row = json.loads(cos(["bg", "--json", "--exec", f"seq 1 {LINES}; sleep 600",
                              "--isolation", "none", "--name", "lines"], env, project))
        job = str(row["id"])
        jobs.append(job)
        last = LINES + 2  # session_configured, task_started, then a line an event
        start = time.perf_counter()
        events = wait_printed(job, env, last)
        printed = time.perf_counter() - start
        server = WebServer(project, env)
        times: dict[str, list[float]] = {"protocol": [], "sse": [], "attach": []}
        for index in range(WARMUP + RUNS):
            round_times = {"protocol": read_protocol(job, env, last),
                           "sse": read_sse(server, job, last),
                           "attach": read_attach(job, env, project, last)}
            if index >= WARMUP:
                for side, elapsed in round_times.items():
                    times[side].append(elapsed)
        rate = {side: last / statistics.median(values) for side, values in times.items()}
        ratio = rate["sse"] / rate["protocol"]
        print(f"job: cos bg --exec 'seq 1 {LINES}; sleep 600' ({last:,} events, stored in "
              f"{printed:.1f} s; the runner stored them at {live_rate(events, last):,.0f} "
              f"events/s as it printed)")
        print(f"runs: {RUNS} each, interleaved, after {WARMUP} warm-up; each reads seq 1..{last}")
        for side, label in (("protocol", "runner socket (the protocol alone)"),
                            ("sse", "cos web GET /jobs/ID/events (SSE)"),
                            ("attach", "cos attach --json (with its start-up)")):
            print(f"{label:<40} median {statistics.median(times[side]) * 1000:8.1f} ms  "
                  f"{rate[side]:9,.0f} events/s")
        print(f"ratio (SSE / protocol events per second) {ratio:.2f} (target >= {TARGET}); "
              f"cos attach / protocol {rate['attach'] / rate['protocol']:.2f}")
        print(f"RESULT web_sse ratio={ratio:.2f} target>={TARGET} "
              f"{'OK' if ratio >= TARGET else 'UNDER'}")
    finally:
        if server is not None:
            server.stop()
        stop_jobs(env, project, jobs)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
