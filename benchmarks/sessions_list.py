"""`cos sessions --json --limit 50` over an index of 100,000 sessions against one of 1,000.

Figure: median wall time of the real `cos sessions --json --limit 50` (a subprocess, as a user
runs it, default scope: this worktree) in a project whose index holds 100,000 sessions, divided by
the same command in a project whose index holds 1,000. Both indexes are filled directly through
the storage API (`Storage.upsert_index_rows`) with synthetic rows of all three agents, half of
them in the project's checkout and half in another directory, so the scope filter keeps the same
share in both; the Claude Code and Codex log directories of the private HOME are empty, so the
import `cos sessions` runs first finds nothing to read, and nothing changes between runs. The two
run interleaved (A B A B ...), medians. Target: ratio <= 1.5 (the cost follows the page, not the
store).
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402

if TYPE_CHECKING:
    from coding_os.storage.base import IndexRow

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
WARMUP = 2
SMALL, LARGE = 1_000, 100_000
PAGE = 50
TARGET = 1.5
AGENTS = (("claude", "claude"), ("codex", "codex"), ("claude", "cos"), ("codex", "cos"))


def synthetic_rows(count: int, checkout: Path, elsewhere: Path) -> list[IndexRow]:
    """`count` index rows, one session every ~5 minutes back from 2026-11-01, half of them in
    `checkout` (or a directory inside it), half in `elsewhere`."""
    from coding_os.storage.base import IndexRow

    rows = []
    base = 1_793_491_200  # 2026-11-01T00:00:00Z
    for number in range(count):
        agent, kind = AGENTS[number % len(AGENTS)]
        ours = number % 2 == 0
        cwd = (checkout if number % 4 == 0 else checkout / "src") if ours else elsewhere
        seconds = base - number * 300 - number % 7
        last = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{number % 1000:03d}Z"
        created = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(seconds - 1800))
        session = str(uuid.UUID(int=(0x5E55 << 112) | number))
        rows.append(IndexRow(
            id=session,
            native_id=None if kind == "cos" else str(uuid.UUID(int=(0xA7 << 120) | number)),
            agent=agent,
            kind=kind,
            title=f"Session {number}: fix the flaky test in module_{number % 97}.py and refactor",
            project=str(checkout if ours else elsewhere),
            worktree=str(checkout if ours else elsewhere),
            cwd=str(cwd),
            branch=f"feature/{number % 13}",
            created=created,
            last_active=last,
            messages=number % 211,
            tokens=(number * 7919) % 2_000_000,
            status="closed" if kind == "cos" else None,
            source_path=f"/nonexistent/{session}.jsonl",
        ))
    return rows


def fill(cwd: Path, env: dict[str, str], count: int, elsewhere: Path) -> int:
    """Write `count` rows into the index of the project at `cwd`; return the index's size."""
    from coding_os.state.caller import Caller
    from coding_os.storage import open_storage

    storage = open_storage(Caller(env, str(cwd)).tiers.database, env=env)
    try:
        storage.upsert_index_rows(synthetic_rows(count, cwd, elsewhere))
        return storage.index_count()
    finally:
        storage.close()


def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed, proc.stdout


def main() -> None:
    cos = str(Path(sys.executable).parent / "cos")
    import coding_os

    # As hook_latency.py: an editable install byte-compiled like a regular one, so start-up does
    # not depend on PYTHONDONTWRITEBYTECODE in the caller's environment.
    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-sessions-"))
    try:
        home = scratch / "home"
        (home / ".claude" / "projects").mkdir(parents=True)
        (home / ".codex" / "sessions").mkdir(parents=True)
        env = _fixtures.bench_env(home)
        elsewhere = scratch / "elsewhere"
        elsewhere.mkdir()
        projects = {}
        fill_seconds = {}
        for count in (SMALL, LARGE):
            root = scratch / f"with-{count}"
            root.mkdir()
            projects[count] = _fixtures.project(root, env)
            start = time.perf_counter()
            indexed = fill(projects[count], env, count, elsewhere)
            fill_seconds[count] = time.perf_counter() - start
            if indexed != count:
                raise SystemExit(f"the index holds {indexed} rows, not {count}")
            _, out = timed([cos, "import", "--json"], env, projects[count])
            report = json.loads(out)
            if report["files_seen"] or report["sessions_added"] or report["sessions_updated"]:
                raise SystemExit(f"the import before the runs found something: {report}")

        argv = [cos, "sessions", "--json", "--limit", str(PAGE)]
        times: dict[int, list[float]] = {SMALL: [], LARGE: []}
        for index in range(WARMUP + RUNS):
            for count in (SMALL, LARGE):
                elapsed, out = timed(argv, env, projects[count])
                rows = json.loads(out)
                if len(rows) != PAGE or rows[0]["id"] != str(uuid.UUID(int=(0x5E55 << 112))):
                    raise SystemExit(f"{count}: expected the {PAGE} newest sessions, got "
                                     f"{len(rows)} starting at {rows[:1]}")
                if index >= WARMUP:
                    times[count].append(elapsed)
        small = statistics.median(times[SMALL])
        large = statistics.median(times[LARGE])
        ratio = large / small
        pair_ratios = sorted(b / a for a, b in zip(times[SMALL], times[LARGE]))
        database = Path(_database(projects[LARGE], env))
        print(f"command: cos sessions --json --limit {PAGE} (scope worktree; half the rows in it)")
        print(f"index filled through Storage.upsert_index_rows: {SMALL:,} rows in "
              f"{fill_seconds[SMALL]:.2f} s, {LARGE:,} rows in {fill_seconds[LARGE]:.2f} s "
              f"(database {database.stat().st_size / 1e6:.0f} MB)")
        print(f"runs: {RUNS} each, interleaved, after {WARMUP} warm-ups")
        print(f"{SMALL:>7,} sessions   median {small * 1000:7.1f} ms")
        print(f"{LARGE:>7,} sessions   median {large * 1000:7.1f} ms")
        print(f"ratio (medians)        {ratio:.2f}   (pairwise median "
              f"{statistics.median(pair_ratios):.2f}; target <= {TARGET})")
        print(f"RESULT sessions_list ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _database(cwd: Path, env: dict[str, str]) -> str:
    from coding_os.state.caller import Caller

    return Caller(env, str(cwd)).tiers.database


if __name__ == "__main__":
    main()
