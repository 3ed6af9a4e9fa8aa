"""An index refresh after one of 1,000 Gemini CLI sessions went on, against a rebuild of the same
tree.

Figure: median time of `coding_os.api.import_sessions` after one session's file grew by a turn
(a user prompt and a model response appended, as Gemini CLI appends them) divided by the median
time of `coding_os.api.rebuild_index` of the same tree (every file read). The refresh reads the
grown file again and the other 1,332 from what the last import kept of them
(`<state_dir>/.import-state.gemini.jsonl`), then links and writes every Gemini session. The tree
is that of benchmarks/gemini_import.py (copies of the session files the real Gemini CLI 0.61.0
wrote), in the page cache; the two run interleaved, medians. Target: ratio <= 0.7 (a refresh
costs the kept sessions' reading and every row's writing; the parse of the files is what it
saves).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gemini_import import gemini_project  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
SESSIONS = int(os.environ.get("BENCH_GEMINI_SESSIONS", "1000"))
TARGET = 0.7


def turn(i: int) -> bytes:
    """The records Gemini CLI appends for one more turn (ids unique to `i`)."""
    stamp = "2026-12-06T09:00:00.000Z"
    records = [
        {"id": f"bench-prompt-{i}", "timestamp": stamp, "type": "user",
         "content": [{"text": f"and once more, step {i}"}]},
        {"$set": {"lastUpdated": stamp}},
        {"id": f"bench-answer-{i}", "timestamp": stamp, "type": "gemini",
         "content": f"Step {i} done.", "model": "gemini-3.8-flash",
         "tokens": {"input": 900, "output": 12, "cached": 0, "thoughts": 0, "tool": 0,
                    "total": 912}},
        {"$set": {"lastUpdated": stamp}},
    ]
    return "".join(json.dumps(record, separators=(",", ":")) + "\n" for record in records).encode()


def main() -> None:
    from coding_os import api

    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-gemini-refresh-"))
    try:
        env, cwd, files, total = gemini_project(scratch, SESSIONS)
        sessions = SESSIONS
        chats = Path(env["HOME"]) / ".gemini" / "tmp" / "project" / "chats"
        grown = sorted(chats.glob("session-*.jsonl"))[0]
        api.rebuild_index(env=env, cwd=str(cwd))  # warm-up: imports, page cache, database
        api.import_sessions(env=env, cwd=str(cwd))  # keeps every file (a rebuild keeps none)
        refresh_times: list[float] = []
        rebuild_times: list[float] = []
        for i in range(ROUNDS):
            with open(grown, "ab") as f:
                f.write(turn(i))
            start = time.perf_counter()
            report = api.import_sessions(env=env, cwd=str(cwd)).to_dict()
            refresh_times.append(time.perf_counter() - start)
            if report["files_read"] != 1 or report["sessions"] != sessions:
                raise SystemExit(f"the refresh read {report['files_read']} files (expected 1): "
                                 f"{report}")
            start = time.perf_counter()
            api.rebuild_index(env=env, cwd=str(cwd))
            rebuild_times.append(time.perf_counter() - start)
        refresh = statistics.median(refresh_times)
        rebuild = statistics.median(rebuild_times)
        ratio = refresh / rebuild
        print(f"tree: {total / 1e6:.1f} MB in {files} files: {sessions} Gemini CLI sessions; "
              f"one grows by a turn each round")
        print(f"runs: {ROUNDS} each, interleaved, after 1 warm-up")
        print(f"refresh (one file read)   median {refresh * 1000:7.1f} ms")
        print(f"rebuild (every file read) median {rebuild * 1000:7.1f} ms")
        print(f"ratio (refresh/rebuild) {ratio:.2f}   (target <= {TARGET})")
        print(f"RESULT gemini_refresh ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
