"""Re-importing Codex rollouts that did not change, against importing them the first time.

Figure: median time of `coding_os.api.import_sessions` when nothing changed since the last import
(each file costs a stat; the import state's stat record is read, no kept aggregate; no row is
written) divided by the
median time of the first import of the same tree (no import state, an empty index: every rollout
read in full, every row written, the state saved). The tree is about 1 GB of Codex rollouts made
by replicating the fixtures of `../shared/fixtures` into a private `~/.codex/sessions`, each copy
a distinct thread (see `_fixtures.py`); the files are in the page cache for both. Each round
deletes the database and the import state, imports once (first) and then re-imports (unchanged);
medians over the rounds. Target: ratio <= 0.02.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
REIMPORTS = 3  # per round, after the first import
CODEX_MB = int(os.environ.get("BENCH_CODEX_MB", "1000"))
TARGET = 0.02
MB = 1_000_000


def import_once(env: dict[str, str], cwd: Path) -> tuple[float, dict[str, object]]:
    """Seconds of one `api.import_sessions`, and its report."""
    from coding_os import api

    start = time.perf_counter()
    report = api.import_sessions(env=env, cwd=str(cwd))
    return time.perf_counter() - start, report.to_dict()


def forget(state_dir: Path) -> None:
    """Delete the database and the import state: the next import is a first import."""
    for name in ("coding-os.db", "coding-os.db-wal", "coding-os.db-shm", "coding-os.db.lock",
                 ".import-state.json"):
        (state_dir / name).unlink(missing_ok=True)
    for pack in state_dir.glob(".import-state.*.pack"):
        pack.unlink()


def state_sizes(state_dir: Path) -> tuple[int, int]:
    """Bytes of the import state's stat record and of its kept aggregates (the pack)."""
    return ((state_dir / ".import-state.json").stat().st_size,
            sum(pack.stat().st_size for pack in state_dir.glob(".import-state.*.pack")))


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-reimport-"))
    try:
        home = scratch / "home"
        home.mkdir()
        env = _fixtures.bench_env(home)
        cwd = _fixtures.project(scratch, env)
        state_dir = cwd / ".coding-os"
        start = time.perf_counter()
        codex = _fixtures.codex_tree(home / ".codex", CODEX_MB * MB)
        generated = time.perf_counter() - start

        first_times: list[float] = []
        again_times: list[float] = []
        for _ in range(ROUNDS):
            forget(state_dir)
            elapsed, report = import_once(env, cwd)
            if (report["files_read"] != codex.files or report["bytes_read"] != codex.bytes
                    or report["sessions_added"] != codex.sessions):
                raise SystemExit(f"the first import did not read the whole tree: {report}")
            first_times.append(elapsed)
            for _ in range(REIMPORTS):
                elapsed, report = import_once(env, cwd)
                if (report["files_read"] or report["files_unchanged"] != codex.files
                        or report["sessions_added"] or report["sessions_updated"]
                        or report["aggregates_loaded"]):
                    raise SystemExit(f"the re-import read or wrote something: {report}")
                again_times.append(elapsed)
        first = statistics.median(first_times)
        again = statistics.median(again_times)
        ratio = again / first
        record, pack = state_sizes(state_dir)
        print(f"tree: {codex.bytes / MB:.0f} MB of Codex rollouts, {codex.files} files "
              f"({codex.sessions} threads), generated in {generated:.1f} s")
        print(f"import state: stat record {record / MB:.2f} MB (read by a re-import), "
              f"kept aggregates {pack / MB:.1f} MB (not read)")
        print(f"runs: {ROUNDS} rounds of one first import and {REIMPORTS} re-imports")
        print(f"first import           median {first:7.2f} s   "
              f"({codex.bytes / MB / first:.1f} MB/s)")
        print(f"re-import, unchanged   median {again * 1000:7.1f} ms")
        print(f"ratio (medians)        {ratio:.4f}   (target <= {TARGET})")
        print(f"RESULT reimport ratio={ratio:.4f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
