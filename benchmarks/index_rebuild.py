"""Throughput of an index rebuild against a plain `json.loads` of every line of the same files.

Figure: bytes of native logs per second through `coding_os.api.rebuild_index` (empty the index,
read every Claude Code transcript and Codex rollout in full, write every row and the import
state) divided by bytes per second through the anchor: open each of the same files and
`json.loads` every line, nothing else. The logs are the fixtures of `../shared/fixtures`
replicated into a private HOME (`~/.claude/projects`, `~/.codex/sessions`), each copy a distinct
session (see `_fixtures.py`); the files are in the page cache for both, so the figure is the
importers' parsing and bookkeeping, not the disk. The two run interleaved (A B A B ...), medians.
Target: ratio (rebuild / plain) >= 0.5.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
CODEX_MB = int(os.environ.get("BENCH_CODEX_MB", "200"))
CLAUDE_MB = int(os.environ.get("BENCH_CLAUDE_MB", "60"))
TARGET = 0.5
MB = 1_000_000


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-rebuild-"))
    try:
        home = scratch / "home"
        home.mkdir()
        env = _fixtures.bench_env(home)
        cwd = _fixtures.project(scratch, env)
        claude = _fixtures.claude_tree(home / ".claude", CLAUDE_MB * MB)
        codex = _fixtures.codex_tree(home / ".codex", CODEX_MB * MB)
        paths = _fixtures.jsonl_files(home / ".claude", home / ".codex")
        total = sum(path.stat().st_size for path in paths)
        assert total == claude.bytes + codex.bytes

        report, rebuild_times, plain_times = _fixtures.rebuild_against_parse(
            env, cwd, paths, total, claude.sessions + codex.sessions, ROUNDS)
        rebuild_median = statistics.median(rebuild_times)
        plain_median = statistics.median(plain_times)
        rebuild_rate = total / MB / rebuild_median
        plain_rate = total / MB / plain_median
        ratio = rebuild_rate / plain_rate
        pair_ratios = sorted(p / r for r, p in zip(rebuild_times, plain_times))
        state_dir = cwd / ".coding-os"
        record = (state_dir / ".import-state.json").stat().st_size
        pack = sum(p.stat().st_size for p in state_dir.glob(".import-state.*.pack"))
        print(f"tree: {total / MB:.0f} MB in {len(paths)} files: Claude Code {claude.bytes / MB:.0f} MB "
              f"({claude.files} files, {claude.sessions} sessions), Codex {codex.bytes / MB:.0f} MB "
              f"({codex.files} rollouts)")
        print(f"index: {report['sessions']} sessions, {report['subagents']} subagents not listed; "
              f"import state {record / MB:.2f} MB stat record + {pack / MB:.1f} MB aggregates")
        print(f"runs: {ROUNDS} each, interleaved, after 1 warm-up each")
        print(f"api.rebuild_index         median {rebuild_median:6.2f} s   {rebuild_rate:6.1f} MB/s")
        print(f"json.loads of every line  median {plain_median:6.2f} s   {plain_rate:6.1f} MB/s")
        print(f"ratio (rebuild/plain throughput) {ratio:.2f}   (pairwise median "
              f"{statistics.median(pair_ratios):.2f}; target >= {TARGET})")
        print(f"RESULT index_rebuild ratio={ratio:.2f} target>={TARGET} "
              f"{'OK' if ratio >= TARGET else 'OVER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
