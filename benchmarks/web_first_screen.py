"""`cos web`'s first screen of a session whose transcript is 200 MB, against one of 1 MB.

Figure: the median time of `GET /sessions/ID` (the session's page: its facts, branches, and the
first page of its conversation, 100 turns; the rest is fetched as the reader scrolls) from a
running `cos web --json --port 0`, from opening the connection to the last byte of the page, for
a cos session whose transcript is 200 MB, divided by the same for a cos session of 1 MB in the
same project. Both transcripts are written as the engine's writer writes them (dense seqs, v1
lines: a prompt, then an answer of 2,000 characters, turn after turn) and indexed by `cos
import`; the two pages are asked interleaved (A B A B ...), the first round untimed (it warms
the page cache, and cos web's scan of each file for rewinds, which later requests repeat only
for what was appended; its times are printed too), medians. Target: ratio <= 2 (the first
screen does not read the whole transcript).

`BENCH_TRANSCRIPT_MB` (default 200) sets the large transcript's size; `BENCH_RUNS` (default 4)
the timed rounds.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
from web_sessions_page import COS, WebServer, byte_compile  # noqa: E402

LARGE_MB = int(os.environ.get("BENCH_TRANSCRIPT_MB", "200"))
SMALL_MB = 1
RUNS = int(os.environ.get("BENCH_RUNS", "4"))
TARGET = 2.0
TURNS_PAGE = 100  # TURNS_PAGE of interfaces/web/app.py
ANSWER = "x" * 2000
_TURN = re.compile(rb'data-testid="turn"')


def write_transcript(path: Path, megabytes: int) -> int:
    """A long conversation at `path`, as the writer writes it, of at least `megabytes` MiB;
    the number of entries."""
    seq = 1
    with open(path, "ab") as handle:
        while handle.tell() < megabytes << 20:
            turn = (seq + 1) // 2
            kind, text = ("user", f"prompt {turn}") if seq % 2 else ("assistant", ANSWER)
            handle.write(json.dumps({"v": 1, "seq": seq, "ts": "2026-11-29T10:00:00.000Z",
                                     "type": kind, "text": text, "turn": turn},
                                    separators=(",", ":")).encode() + b"\n")
            seq += 1
    return seq - 1


def make_session(project: Path, env: dict[str, str], megabytes: int) -> tuple[str, int, int]:
    """A cos session in `project` with a transcript of `megabytes` MiB: id, bytes, entries."""
    from coding_os import api
    from coding_os.sessions import transcript
    from coding_os.state.tiers import Tiers

    session = api.create_session("myagent", title=f"A session of {megabytes} MB", env=env,
                                 cwd=str(project), durability="none")
    path = Path(transcript.transcript_path(Tiers(str(project / ".coding-os")), session))
    entries = write_transcript(path, megabytes)
    return session, path.stat().st_size, entries


def _peak_rss_mb(pid: int) -> float | None:
    """The peak resident memory of process `pid` (Linux: VmHWM), or None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def main() -> None:
    byte_compile()
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-web-screen-"))
    server = None
    try:
        home = scratch / "home"
        home.mkdir()
        env = {**_fixtures.bench_env(home), "CODEX_HOME": str(home / ".codex"),
               "COS_AGENT": "myagent"}
        project = _fixtures.project(scratch, env)
        start = time.perf_counter()
        sessions = {size: make_session(project, env, size) for size in (SMALL_MB, LARGE_MB)}
        made = time.perf_counter() - start
        subprocess.run([COS, "import"], cwd=project, env=env, check=True,
                       stdout=subprocess.DEVNULL, timeout=600)
        server = WebServer(project, env)
        times: dict[int, list[float]] = {SMALL_MB: [], LARGE_MB: []}
        sizes: dict[int, int] = {}
        first: dict[int, float] = {}
        for index in range(RUNS + 1):
            for size in (SMALL_MB, LARGE_MB):
                session = sessions[size][0]
                elapsed, body = server.get(f"/sessions/{session}")
                turns = len(_TURN.findall(body))
                if turns != TURNS_PAGE or b"turns-more" not in body or session.encode() \
                        not in body:
                    raise SystemExit(f"{size} MB: expected the first {TURNS_PAGE} turns and "
                                     f"more to load, got {turns} turns")
                sizes[size] = len(body)
                if index:  # the first round warms the page cache
                    times[size].append(elapsed)
                else:
                    first[size] = elapsed
        peak = _peak_rss_mb(server.process.pid)
        small = statistics.median(times[SMALL_MB])
        large = statistics.median(times[LARGE_MB])
        ratio = large / small
        print(f"request: GET /sessions/ID to cos web, new connection under the token's path, "
              f"until the page's last byte; the page holds the first {TURNS_PAGE} turns")
        print(f"transcripts written in {made:.1f} s; {RUNS} runs each, interleaved, after a "
              f"warm-up round")
        for size in (SMALL_MB, LARGE_MB):
            _, nbytes, entries = sessions[size]
            print(f"{nbytes / (1 << 20):6.0f} MB transcript ({entries:>7,} entries, page "
                  f"{sizes[size] / 1e3:5.0f} kB)  median {statistics.median(times[size]) * 1000:9.1f}"
                  f" ms  min {min(times[size]) * 1000:9.1f} ms")
        print(f"the warm-up round (cos web's first look at each file: its scan for rewinds): "
              f"{first[SMALL_MB] * 1000:.1f} ms for {SMALL_MB} MB, {first[LARGE_MB] * 1000:.1f} ms "
              f"for {LARGE_MB} MB")
        if peak is not None:
            print(f"cos web's peak resident memory over the runs: {peak:.0f} MB")
        print(f"ratio (medians) {ratio:.2f} (target <= {TARGET})")
        print(f"RESULT web_first_screen ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
