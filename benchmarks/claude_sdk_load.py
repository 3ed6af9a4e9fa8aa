"""`CosSessionStore.load` of a 10,000-entry Claude Agent SDK session.

Figure: seconds for `CosSessionStore.load` (coding_os.integrations.claude_agent_sdk) of one
session holding 10,000 records (a third user prompts, a third assistant replies with a tool call,
a third tool results; appended in batches of 100, as the SDK mirrors them) divided by seconds for
the anchor: a plain read of the rows the store wrote — the transcript file read whole, each line
`json.loads`-ed and its `item` taken, nothing else (no lock, no validation, no seq check). The
store keeps a session in its transcript file, so that file is what a plain `SELECT` of the rows
is for it. The SDK's `InMemorySessionStore.load` after the same appends is printed too (a copy of
a list in memory: a floor, not a target). Each round loads a few times, interleaved
(A B A B ...), medians; the loaded records are checked equal to the in-memory store's.
Target: ratio (load / plain read) <= 1.5.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Any

from claude_agent_sdk import InMemorySessionStore

from coding_os.integrations.claude_agent_sdk import CosSessionStore
from coding_os.sessions import transcript

from _fixtures import sdk_record  # noqa: E402 (benchmarks/, the script's own folder)

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
ENTRIES = int(os.environ.get("BENCH_ENTRIES", "10000"))
BATCH = 100
TARGET = 1.5
KEY: Any = {"project_key": "bench", "session_id": "5d9a3c1e-bench"}


def plain(path: str) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    with open(path, "rb") as f:
        rows = [row["item"] for row in map(json.loads, f) if "item" in row]
    return time.perf_counter() - start, rows


async def run(project: str) -> None:
    records = [sdk_record(i, KEY["session_id"]) for i in range(ENTRIES)]
    store, memory = CosSessionStore(project=project), InMemorySessionStore()
    start = time.perf_counter()
    for at in range(0, ENTRIES, BATCH):
        await store.append(KEY, records[at:at + BATCH])
    appended = time.perf_counter() - start
    for at in range(0, ENTRIES, BATCH):
        await memory.append(KEY, records[at:at + BATCH])
    [session] = [name[:-len(".jsonl")] for name in
                 os.listdir(os.path.join(project, ".coding-os", "claude-sdk", "transcripts"))]
    path = transcript.transcript_path(store.tiers, session)

    ours, anchor, floor = [], [], []
    await store.load(KEY)  # warm-up: imports, page cache
    for _ in range(ROUNDS):
        start = time.perf_counter()
        loaded = await store.load(KEY)
        ours.append(time.perf_counter() - start)
        seconds, rows = plain(path)
        anchor.append(seconds)
        start = time.perf_counter()
        remembered = await memory.load(KEY)
        floor.append(time.perf_counter() - start)
        assert loaded == remembered == rows and len(rows) == ENTRIES
    load, read, memory_load = (statistics.median(t) for t in (ours, anchor, floor))
    ratio = load / read
    print(f"session: {ENTRIES} records appended in batches of {BATCH} in {appended:.2f} s; "
          f"transcript {os.path.getsize(path) / 1e6:.1f} MB; {ROUNDS} rounds, medians")
    print(f"CosSessionStore.load          {load:8.4f} s")
    print(f"plain read + json.loads       {read:8.4f} s")
    print(f"InMemorySessionStore.load     {memory_load:8.6f} s   (load / in-memory: "
          f"{load / memory_load:.0f}x)")
    print(f"ratio (load / plain read) {ratio:.2f}   (target <= {TARGET})")
    print(f"RESULT claude_sdk_load ratio={ratio:.2f} target<={TARGET} "
          f"{'OK' if ratio <= TARGET else 'MISS'}")


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="cos-bench-claude-sdk-load-")
    try:
        subprocess.run(["git", "init", "-q", scratch], check=True)
        asyncio.run(run(scratch))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
