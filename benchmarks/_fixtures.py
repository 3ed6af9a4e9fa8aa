"""Replicated native-log trees for the benchmarks, made from the fixtures in `../shared/fixtures`.

Each copy of a fixture is a distinct session: the ids the importers key on (Claude Code `uuid`,
`parentUuid`, `sessionId`, `leafUuid`, `logicalParentUuid` and the file name; the Codex thread id
in `session_meta` and in the file name) get a suffix unique to the copy, so no two copies share
history (which would make the Claude importer pair them as forks) or a thread id (which would make
the Codex importer keep only one). Everything else is byte for byte the fixture's. A template per
fixture is built once; a copy is one `bytes.replace`, so generating a gigabyte takes seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FIXTURES", "Tree", "claude_tree", "codex_tree", "project", "jsonl_files",
           "bench_env"]

FIXTURES = Path(os.environ.get("BENCH_FIXTURES",
                               Path(__file__).resolve().parents[2] / "shared" / "fixtures"))
# Stands for the copy's 12 hex digits in a template; never in a fixture (checked).
_MARKER = b"QZXQZXQZXQZX"
_NAMESPACE = uuid.UUID("6f0c4a3e-9d1b-4b8e-a7c2-5e3f1d2a9b40")
_CLAUDE_ID_KEYS = ("uuid", "parentUuid", "sessionId", "leafUuid", "logicalParentUuid")
_CLAUDE_SESSIONS = ("claude-code-log__89488521-e2e7-4d97-bc02-38197efdddc8.jsonl",
                    "claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
                    "agent-sessions__small.jsonl")
# The 2.0.x sibling subagent; its parent session is not among the fixtures, so each copy is
# attached to the copy of the claude-code-log session instead.
_CLAUDE_SUBAGENT = "claude-code-log__agent-3be551df.jsonl"
_SUBAGENT_PARENT = "58edcfae"


@dataclass
class Tree:
    """What a generator wrote: files, bytes, sessions (copies of session files)."""

    files: int = 0
    bytes: int = 0
    sessions: int = 0


def _templated(value: str) -> bytes:
    """The copy-independent part of an id's replacement: a uuid's first 24 characters (a
    non-uuid id gets a uuid derived from it), then the marker."""
    if len(value) == 36 and value.count("-") == 4:
        head = value[:24]
    else:
        head = str(uuid.uuid5(_NAMESPACE, value))[:24]
    return head.encode() + _MARKER


def _template(raw: bytes, ids: dict[str, bytes]) -> bytes:
    if _MARKER in raw:
        raise SystemExit(f"the copy marker {_MARKER!r} occurs in a fixture")
    for old in sorted(ids, key=len, reverse=True):
        raw = raw.replace(b'"' + old.encode() + b'"', b'"' + ids[old] + b'"')
    return raw


def _claude_templates() -> tuple[list[tuple[bytes, bytes]], bytes, bytes]:
    """[(file name template, content template)] of the sessions, and the subagent's."""
    ids: dict[str, bytes] = {}
    raws = []
    for name in (*_CLAUDE_SESSIONS, _CLAUDE_SUBAGENT):
        raw = (FIXTURES / "claude" / name).read_bytes()
        raws.append((name, raw))
        for line in raw.splitlines():
            entry = json.loads(line)
            for key in _CLAUDE_ID_KEYS:
                value = entry.get(key)
                if isinstance(value, str) and value:
                    ids.setdefault(value, _templated(value))
    parent_of_subagent = next(v for v in ids if v.startswith("89488521"))
    for value in list(ids):
        if value.startswith(_SUBAGENT_PARENT):
            ids[value] = ids[parent_of_subagent]
    sessions = []
    for name, raw in raws[:-1]:
        stem = name.partition("__")[2][: -len(".jsonl")]
        file_name = (ids.get(stem) or _templated(stem)) + b".jsonl"
        sessions.append((file_name, _template(raw, ids)))
    return sessions, b"agent-3be551df.jsonl", _template(raws[-1][1], ids)


def claude_tree(claude_dir: Path, target_bytes: int) -> Tree:
    """Copies of the Claude Code fixtures under `claude_dir/projects`, one project folder per
    copy, until they hold at least `target_bytes`."""
    sessions, agent_name, agent_template = _claude_templates()
    tree = Tree()
    copy = 0
    while tree.bytes < target_bytes:
        suffix = f"{copy:012x}".encode()
        folder = claude_dir / "projects" / f"-bench-project-{copy:05d}"
        folder.mkdir(parents=True)
        for file_name, template in sessions:
            tree.bytes += _write(folder / file_name.replace(_MARKER, suffix).decode(),
                                 template.replace(_MARKER, suffix))
            tree.files += 1
            tree.sessions += 1
        tree.bytes += _write(folder / agent_name.decode(), agent_template.replace(_MARKER, suffix))
        tree.files += 1
        copy += 1
    return tree


def _codex_templates() -> list[tuple[bytes, bytes]]:
    """[(file name template, content template)] of the four whole rollouts."""
    templates = []
    for path in sorted((FIXTURES / "codex").glob("*rollout-*.jsonl")):
        raw = path.read_bytes()
        meta = json.loads(raw.split(b"\n", 1)[0])
        thread = meta["payload"]["id"]
        new = _templated(thread)
        content = _template(raw, {thread: new})
        file_name = "rollout-" + path.name.partition("rollout-")[2]
        templates.append((file_name.encode().replace(thread.encode(), new), content))
    return templates


def codex_tree(codex_home: Path, target_bytes: int) -> Tree:
    """Copies of the Codex rollouts under `codex_home/sessions/YYYY/MM/DD`, until they hold at
    least `target_bytes`."""
    templates = _codex_templates()
    tree = Tree()
    copy = 0
    while tree.bytes < target_bytes:
        suffix = f"{copy:012x}".encode()
        folder = (codex_home / "sessions" / "2026" / f"{copy // 28 % 12 + 1:02d}"
                  / f"{copy % 28 + 1:02d}")
        folder.mkdir(parents=True, exist_ok=True)
        for file_name, template in templates:
            tree.bytes += _write(folder / file_name.replace(_MARKER, suffix).decode(),
                                 template.replace(_MARKER, suffix))
            tree.files += 1
            tree.sessions += 1
        copy += 1
    return tree


def _write(path: Path, data: bytes) -> int:
    with open(path, "xb") as handle:
        handle.write(data)
    return len(data)


def jsonl_files(*roots: Path) -> list[Path]:
    """Every `*.jsonl` below the roots, sorted."""
    found: list[Path] = []
    for root in roots:
        found.extend(root.rglob("*.jsonl"))
    return sorted(found)


def project(root: Path, env: dict[str, str]) -> Path:
    """A git checkout with a `.coding-os` state dir: where the benchmarked `cos` runs."""
    path = root / "project"
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=path, env=env, check=True)
    (path / ".coding-os").mkdir()
    return path.resolve()


def bench_env(home: Path) -> dict[str, str]:
    """A scrubbed environment with a private HOME (so ~/.claude and ~/.codex are ours)."""
    keep = {key: os.environ[key] for key in ("PATH", "LANG", "LC_ALL", "TMPDIR")
            if key in os.environ}
    return {**keep, "HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"),
            "GIT_CONFIG_NOSYSTEM": "1"}


def sdk_record(i: int, session: str) -> dict[str, object]:
    """The i-th record of a Claude Agent SDK session: a prompt, an answer with a tool call, a
    tool result, in turn."""
    head = {"uuid": f"e{i}", "parentUuid": f"e{i - 1}" if i else None,
            "sessionId": session, "timestamp": "2026-12-01T10:00:00.000Z"}
    if i % 3 == 0:
        return {"type": "user", **head,
                "message": {"role": "user", "content": f"step {i}: read the module and fix it"}}
    if i % 3 == 1:
        return {"type": "assistant", **head, "message": {
            "role": "assistant", "model": "claude", "usage": {"input_tokens": 900,
                                                               "output_tokens": 40},
            "content": [{"type": "text", "text": f"Reading the module for step {i}."},
                        {"type": "tool_use", "id": f"toolu_{i}", "name": "Read",
                         "input": {"file_path": "/work/project/src/module.py"}}]}}
    return {"type": "user", **head, "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{i - 1}",
         "content": "a line of the file\n" * 8}]}}


def plain_parse(paths: list[Path]) -> float:
    """Seconds to `json.loads` every line of the files."""
    loads = json.loads
    start = time.perf_counter()
    for path in paths:
        with open(path, "rb") as handle:
            for line in handle:
                loads(line)
    return time.perf_counter() - start


def rebuild(env: dict[str, str], cwd: Path) -> tuple[float, dict[str, object]]:
    """Seconds of one `api.rebuild_index`, and its report."""
    from coding_os import api

    start = time.perf_counter()
    report = api.rebuild_index(env=env, cwd=str(cwd))
    return time.perf_counter() - start, report.to_dict()


def rebuild_against_parse(env: dict[str, str], cwd: Path, paths: list[Path], total: int,
                          sessions: int, rounds: int) -> tuple[dict[str, object], list[float],
                                                               list[float]]:
    """After a warm-up of each (page cache, imports, the database and its migrations) whose
    rebuild must read all `total` bytes of `paths` cleanly and find `sessions` sessions, `rounds`
    rebuilds and plain parses interleaved: the warm-up's report, the rebuild times and the
    parse times."""
    plain_parse(paths)
    _, report = rebuild(env, cwd)
    if report["bytes_read"] != total or report["unreadable"] or report["malformed_lines"]:
        raise SystemExit(f"the rebuild did not read the tree cleanly: {report}")
    if report["sessions"] != sessions or report["sessions_added"] != sessions:
        raise SystemExit(f"expected {sessions} sessions, the rebuild reports "
                         f"{report['sessions']} ({report['sessions_added']} added)")
    rebuild_times: list[float] = []
    plain_times: list[float] = []
    for _ in range(rounds):
        rebuild_times.append(rebuild(env, cwd)[0])
        plain_times.append(plain_parse(paths))
    return report, rebuild_times, plain_times
