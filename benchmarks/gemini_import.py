"""Throughput of an index refresh of 1,000 Gemini CLI sessions against a plain `json.loads` of
every line of the same files.

Figure: bytes of Gemini session files per second through `coding_os.api.rebuild_index` (empty
the index, read every session and subagent file under `~/.gemini/tmp/*/chats`, replay its records,
write every row and the import state) divided by bytes per second through the anchor: open each
of the same files and `json.loads` every line, nothing else. The sessions are copies of the
session files the real Gemini CLI 0.61.0 wrote for the importer's tests
(`tests/adapters/gemini/fixtures/gemini-home/tmp/project/chats`: a session with a tool call, a
resume and a summary; one with a `/rewind`; one that ran a subagent, with the subagent's file),
each copy a distinct session: its `sessionId` (in the file, the file name and a subagent's
folder) replaced by a uuid of its own, every other byte as Gemini wrote it. The files are in the
page cache for both. The two run interleaved (A B A B ...), medians. Target: ratio (refresh /
plain) >= 0.5, as for the other importers (benchmarks/index_rebuild.py).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SESSIONS = int(os.environ.get("BENCH_GEMINI_SESSIONS", "1000"))
TARGET = 0.5
MB = 1_000_000
CHATS = (Path(__file__).resolve().parents[1] / "tests" / "adapters" / "gemini" / "fixtures"
         / "gemini-home" / "tmp" / "project" / "chats")
# The fixture sessions copied, by the session id each file holds (not the fork, whose import
# names another file, nor its empty twin).
TEMPLATES = ("aa78fc04-dbe6-4180-b260-710d72261fc2",   # tool calls, resumed, summary
             "72a406ac-b866-4cc2-b23d-a76a2f95a6d8",   # /rewind
             "bc799a31-3bc5-47fe-81d0-7617d8169e3c")   # ran a subagent (its folder)
_NAMESPACE = uuid.UUID("0b6c3e52-2f1d-4f4a-9a51-7d0c1e8b6a21")


def gemini_tree(gemini_dir: Path, project: Path, sessions: int) -> tuple[int, int, int]:
    """Write `sessions` copies of the templates under `gemini_dir`, in the folder of `project`;
    (files, bytes, sessions) written."""
    chats = gemini_dir / "tmp" / "project" / "chats"
    chats.mkdir(parents=True)
    (gemini_dir / "projects.json").write_text(
        json.dumps({"projects": {str(project): "project"}}), encoding="utf-8")
    (gemini_dir / "tmp" / "project" / ".project_root").write_text(str(project), encoding="utf-8")
    templates = []
    for session_id in TEMPLATES:
        name = next(p.name for p in CHATS.glob(f"session-*-{session_id[:8]}.jsonl"))
        files = [(name, (CHATS / name).read_bytes())]
        folder = CHATS / session_id
        if folder.is_dir():
            files += [(f"{session_id}/{p.name}", p.read_bytes()) for p in folder.iterdir()]
        templates.append((session_id, files))
    written = size = 0
    for i in range(sessions):
        old, files = templates[i % len(templates)]
        new = str(uuid.uuid5(_NAMESPACE, str(i)))
        for name, data in files:
            path = chats / name.replace(old, new).replace(old[:8], new[:8])
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data.replace(old.encode(), new.encode()))
            written += 1
            size += path.stat().st_size
    return written, size, sessions


def gemini_project(scratch: Path, sessions: int) -> tuple[dict[str, str], Path, int, int]:
    """A scratch HOME under `scratch` whose Gemini dir holds `sessions` sessions (see
    `gemini_tree`) of a project there: (its environment, the project, files, bytes)."""
    home = scratch / "home"
    home.mkdir()
    env = _fixtures.bench_env(home)
    cwd = _fixtures.project(scratch, env)
    files, total, _ = gemini_tree(home / ".gemini", cwd, sessions)
    return env, cwd, files, total


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-gemini-"))
    try:
        env, cwd, files, total = gemini_project(scratch, SESSIONS)
        sessions = SESSIONS
        home = Path(env["HOME"])
        paths = sorted((home / ".gemini" / "tmp").rglob("*.jsonl"))
        assert len(paths) == files and sum(p.stat().st_size for p in paths) == total

        report, rebuild_times, plain_times = _fixtures.rebuild_against_parse(
            env, cwd, paths, total, sessions, ROUNDS)
        rebuild_median = statistics.median(rebuild_times)
        plain_median = statistics.median(plain_times)
        rebuild_rate = total / MB / rebuild_median
        plain_rate = total / MB / plain_median
        ratio = rebuild_rate / plain_rate
        pair_ratios = sorted(p / r for r, p in zip(rebuild_times, plain_times))
        print(f"tree: {total / MB:.1f} MB in {files} files: {sessions} Gemini CLI sessions "
              f"({report['subagents']} subagents)")
        print(f"runs: {ROUNDS} each, interleaved, after 1 warm-up each")
        print(f"api.rebuild_index         median {rebuild_median * 1000:7.1f} ms  "
              f"{rebuild_rate:6.1f} MB/s  {sessions / rebuild_median:7.0f} sessions/s")
        print(f"json.loads of every line  median {plain_median * 1000:7.1f} ms  "
              f"{plain_rate:6.1f} MB/s")
        print(f"ratio (refresh/plain throughput) {ratio:.2f}   (pairwise median "
              f"{statistics.median(pair_ratios):.2f}; target >= {TARGET})")
        print(f"RESULT gemini_import ratio={ratio:.2f} target>={TARGET} "
              f"{'OK' if ratio >= TARGET else 'UNDER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
