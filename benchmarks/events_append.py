"""Throughput of durable event appends against a plain append+flush loop of the same lines.

Figure: events per second through `coding_os.runtime.events.EventLog.append` in its default
durability ("turn": every line written before `append` returns, an fsync after each event that
ends a task) divided by events per second through the anchor: `os.write` of the very lines the
log stored, on a file opened for appending, with `os.fsync` after the same events — nothing else
(no numbering, no lock, no JSON). The workload is tasks of nine events each (task_started, four
agent_message_delta, tool_call, tool_result with a 1 KB output, agent_message, task_complete),
so one fsync per nine events on both sides. Each round writes a fresh file for each; the two run
interleaved (A B A B ...), medians. The same figure without any fsync ("none" against plain
writes) is printed too: the cost of the log itself, which the flushes hide.
Target: ratio (log / plain) >= 0.5.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time

from coding_os.runtime.events import EventLog
from coding_os.runtime.wire import TASK_ENDS
from coding_os.state.identity import mint_session_id

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
TASKS = int(os.environ.get("BENCH_TASKS", "300"))
TARGET = 0.5


def workload(tasks: int) -> list[tuple[str, dict[str, object]]]:
    """The events of `tasks` tasks of a session with a tool call each."""
    found: list[tuple[str, dict[str, object]]] = []
    for task in range(tasks):
        found.append(("task_started", {"task": task}))
        for part in range(4):
            found.append(("agent_message_delta", {"text": f"part {part} of the answer, "}))
        found.append(("tool_call", {"call_id": f"call-{task}", "tool": "Read",
                                    "input": {"file_path": "/work/project/src/module.py"}}))
        found.append(("tool_result", {"call_id": f"call-{task}", "ok": True,
                                      "output": "line of the file\n" * 60}))
        found.append(("agent_message", {"text": "The module reads its input and returns."}))
        found.append(("task_complete", {"task": task, "usage": {"input": 1200, "output": 80}}))
    return found


def through_log(directory: str, work: list[tuple[str, dict[str, object]]],
                durability: str) -> tuple[float, str]:
    """Seconds to append `work` to a fresh log, and the log's path."""
    session = mint_session_id("claude")
    path = os.path.join(directory, f"{session}.jsonl")
    log = EventLog(path, session, durability=durability)
    append = log.append
    start = time.perf_counter()
    for event_type, fields in work:
        append(event_type, fields)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed, path


def plain(directory: str, lines: list[bytes], syncs: list[bool]) -> float:
    """Seconds to append `lines` to a fresh file, an fsync after each line marked in `syncs`."""
    path = os.path.join(directory, f"plain-{os.urandom(4).hex()}.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
    write, fsync = os.write, os.fsync
    start = time.perf_counter()
    for line, sync in zip(lines, syncs):
        write(fd, line)
        if sync:
            fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return elapsed


def compare(directory: str, work: list[tuple[str, dict[str, object]]],
            durability: str) -> tuple[float, float]:
    """Median seconds of the log and of the plain loop, interleaved, after a warm-up each."""
    syncs = [durability == "event" or (durability == "turn" and event_type in TASK_ENDS)
             for event_type, _ in work]
    _, path = through_log(directory, work, durability)
    with open(path, "rb") as handle:
        lines = handle.readlines()
    assert len(lines) == len(work)
    plain(directory, lines, syncs)
    log_times, plain_times = [], []
    for _ in range(ROUNDS):
        elapsed, path = through_log(directory, work, durability)
        log_times.append(elapsed)
        os.unlink(path)
        plain_times.append(plain(directory, lines, syncs))
    return statistics.median(log_times), statistics.median(plain_times)


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="cos-bench-events-append-")
    try:
        work = workload(TASKS)
        count = len(work)
        log_turn, plain_turn = compare(scratch, work, "turn")
        log_none, plain_none = compare(scratch, work, "none")
        ratio = plain_turn / log_turn
        print(f"workload: {count} events ({TASKS} tasks of {count // TASKS}), {ROUNDS} rounds "
              f"each, interleaved, after 1 warm-up each; files in {scratch}")
        print(f"EventLog.append (turn)   median {log_turn:7.3f} s   {count / log_turn:9.0f} "
              "events/s")
        print(f"os.write + os.fsync      median {plain_turn:7.3f} s   {count / plain_turn:9.0f} "
              "events/s")
        print(f"EventLog.append (none)   median {log_none:7.3f} s   {count / log_none:9.0f} "
              f"events/s   (against plain os.write: {plain_none / log_none:.2f})")
        print(f"ratio (log / plain throughput, turn) {ratio:.2f}   (target >= {TARGET})")
        print(f"RESULT events_append ratio={ratio:.2f} target>={TARGET} "
              f"{'OK' if ratio >= TARGET else 'MISS'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
