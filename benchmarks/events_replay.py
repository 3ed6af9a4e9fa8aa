"""Catch-up from an events log: replay from K = 99,000 of 100,000 stored events against reading
the whole file.

Figure: seconds of `coding_os.runtime.events.read_since(path, 99_000)` (the last 1,000 events,
parsed and checked) divided by seconds of the anchor: open the same file and `json.loads` every
line, nothing else. Replay from K = 0 (every event, parsed and checked) is timed too and printed
against the same anchor. The log is 100,000 events as a session writes them (messages, deltas,
tool calls, tool results of up to 2 KB), about 40 MB, written once through `EventLog`; the file is
in the page cache for every run, so the figure is the work of the reader, not the disk. The
three run interleaved, medians.
Target: ratio (replay from 99,000 / reading the file) <= 0.05 — catch-up costs what was missed,
not the whole log.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import tempfile
import time

from coding_os.runtime.events import EventLog, read_since
from coding_os.state.identity import mint_session_id

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
EVENTS = 100_000
AFTER = 99_000
TARGET = 0.05
MB = 1_000_000


def write_log(directory: str) -> str:
    """A log of EVENTS events; its path."""
    rng = random.Random(15)
    session = mint_session_id("claude")
    path = os.path.join(directory, f"{session}.jsonl")
    with EventLog(path, session, durability="none") as log:
        task = 0
        while log.last_seq < EVENTS:
            kind = rng.random()
            if kind < 0.4:
                log.append("agent_message_delta", {"text": "some words " * rng.randint(1, 8)})
            elif kind < 0.6:
                log.append("tool_call", {"call_id": f"c{log.last_seq}", "tool": "Bash",
                                         "input": {"command": "ls -la src/coding_os"}})
            elif kind < 0.8:
                log.append("tool_result", {"call_id": f"c{log.last_seq}", "ok": True,
                                           "output": "x" * rng.randint(10, 2000)})
            elif kind < 0.95:
                log.append("agent_message", {"text": "done. " * rng.randint(1, 40)})
            else:
                log.append("task_complete", {"task": task, "usage": {"input": 10, "output": 5}})
                task += 1
    return path


def read_file(path: str) -> float:
    """Seconds to `json.loads` every line of the file."""
    loads = json.loads
    start = time.perf_counter()
    with open(path, "rb") as handle:
        for line in handle:
            loads(line)
    return time.perf_counter() - start


def replay(path: str, after: int) -> float:
    """Seconds of one replay after seq `after`."""
    start = time.perf_counter()
    replayed = read_since(path, after)
    elapsed = time.perf_counter() - start
    if len(replayed.events) != EVENTS - after or not replayed.report.ok:
        raise SystemExit(f"replay after {after} gave {len(replayed.events)} events: "
                         f"{replayed.report.as_dict()}")
    return elapsed


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="cos-bench-events-replay-")
    try:
        path = write_log(scratch)
        size = os.path.getsize(path)
        read_file(path)  # warm-up: the page cache, imports
        replay(path, 0)
        replay(path, AFTER)
        plain_times, all_times, tail_times = [], [], []
        for _ in range(ROUNDS):
            plain_times.append(read_file(path))
            all_times.append(replay(path, 0))
            tail_times.append(replay(path, AFTER))
        plain = statistics.median(plain_times)
        everything = statistics.median(all_times)
        tail = statistics.median(tail_times)
        ratio = tail / plain
        print(f"log: {EVENTS} events, {size / MB:.1f} MB; {ROUNDS} rounds, interleaved, after "
              "1 warm-up each")
        print(f"json.loads of every line        median {plain * 1000:8.2f} ms")
        print(f"read_since(path, 0)             median {everything * 1000:8.2f} ms   "
              f"({everything / plain:.2f} of reading the file)")
        print(f"read_since(path, {AFTER})         median {tail * 1000:8.2f} ms   "
              f"({tail / everything:.4f} of replay from 0)")
        print(f"ratio (replay from {AFTER} / reading the file) {ratio:.4f}   "
              f"(target <= {TARGET})")
        print(f"RESULT events_replay ratio={ratio:.4f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'MISS'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
