"""The hook's hot path stays small: this fails when `cos hook` starts importing more."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cos, fire, replicator_stopped, until


# Everything `cos hook PostToolUse` may import beyond what a bare interpreter already has.
ALLOWED = {
    "__future__", "_json", "errno", "fcntl", "gc",  # gc is built in: nothing is loaded
    "coding_os", "coding_os.adapters", "coding_os.clock", "coding_os.config",
    "coding_os.durable", "coding_os.errors", "coding_os.jsonwire", "coding_os.redact",
    "coding_os.git", "coding_os.git.command", "coding_os.git.repo", "coding_os.hooks",
    "coding_os.hooks.checkpoint", "coding_os.hooks.context", "coding_os.hooks.events",
    "coding_os.hooks.sessions",
    "coding_os.interfaces", "coding_os.interfaces.entry", "coding_os.interfaces.hook",
    "coding_os.state", "coding_os.state.caller", "coding_os.state.hookslog",
    "coding_os.state.identity", "coding_os.state.observations", "coding_os.state.registry",
    "coding_os.state.presence", "coding_os.state.root", "coding_os.state.statefile",
    "coding_os.state.tiers",
}
# What a hook that takes a checkpoint (UserPromptSubmit, PreToolUse of a writing tool) may add:
# the checkpoint modules, and the digests when a file changed (or changed less than a second
# before the last checkpoint, so its cached hash is not trusted) must be hashed: the
# interpreter's own sha1 and sha256, or hashlib (OpenSSL) once much was hashed (coding_os.digest).
CHECKPOINT_ALLOWED = {
    "coding_os.checkpoints", "coding_os.checkpoints.auto", "coding_os.checkpoints.take",
    "coding_os.adapters.claude", "coding_os.adapters.claude.leaf",
    "coding_os.checkpoints.heads",
    "coding_os.checkpoints.lock", "coding_os.checkpoints.points", "coding_os.checkpoints.settings",
    "coding_os.checkpoints.manifest", "coding_os.checkpoints.snapshot", "coding_os.checkpoints.store",
    "coding_os.digest", "_sha1", "_sha256", "_sha2", "hashlib", "_hashlib", "_blake2",
}
# `cos hook` ends its process with os._exit (no teardown): the probe reports just before.
PROBE = """
import os, sys
base = set(sys.modules)
sys.argv = ["cos", "hook", sys.argv[1]]
real_exit = os._exit
def _exit(code):
    sys.stderr.write("\\nMODULES " + " ".join(sorted(set(sys.modules) - base)) + "\\n")
    sys.stderr.flush()
    real_exit(code)
os._exit = _exit
from coding_os.interfaces.entry import main
main()
"""


def hook_imports(event: str, payload: dict[str, object], cwd: Path,
                 env: dict[str, str] | None = None) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, event], cwd=cwd, input=json.dumps(payload),
                          capture_output=True, text=True, env={"COS_AGENT": "claude", "PATH": "/usr/bin:/bin",
                                                               "HOME": str(cwd.parent / "home"),
                                                               **(env or {})})
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stderr.splitlines() if ln.startswith("MODULES ")][-1]
    return set(line.split()[1:])


@pytest.mark.parametrize("event,payload", [
    ("PostToolUse", {"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "ls"},
                     "tool_response": {"stdout": "a\n"}}),
    ("PreToolUse", {"session_id": "s1", "tool_name": "Edit", "tool_input": {"file_path": "/x"}}),
    ("UserPromptSubmit", {"session_id": "s1", "prompt": "hello"}),
    # As Claude Code sends it: the checkpoint records the transcript's live leaf.
    ("UserPromptSubmit", {"session_id": "s1", "prompt": "hello", "transcript_path": "t.jsonl"}),
])
def test_tool_and_prompt_hooks_import_only_the_hot_path_modules(repo: Path, event: str,
                                                                payload: dict[str, object]) -> None:
    if "transcript_path" in payload:
        transcript = repo.parent / "t.jsonl"
        transcript.write_text(json.dumps({"type": "user", "uuid": "u1", "parentUuid": None,
                                          "message": {"role": "user", "content": "hi"}}) + "\n",
                              encoding="utf-8")
        payload = {**payload, "transcript_path": str(transcript)}
    (repo / ".coding-os").mkdir()
    (repo / ".coding-os.yaml").write_text("state:\n  horizons:\n    .task-current: 2h\n", encoding="utf-8")
    # A live panel with a task marker, so the hook reads the task and its configured horizon
    # (the first read parses the YAML and caches it; the probed fire must use the cache).
    assert fire("SessionStart", {"session_id": "s1", "source": "startup"}, cwd=repo).returncode == 0
    assert cos("state", "set", ".task-current", "TASK-1", cwd=repo,
               env={"COS_AGENT": "claude", "COS_PANEL_ID": "s1"}).returncode == 0
    assert fire(event, payload, cwd=repo).returncode == 0
    imported = hook_imports(event, payload, repo)
    allowed = ALLOWED | (CHECKPOINT_ALLOWED if event != "PostToolUse" else set())
    assert imported - allowed == set(), "the hook's import set grew"
    for heavy in ("click", "yaml", "sqlite3", "json", "dataclasses", "typing", "pathlib", "subprocess",
                  "contextlib", "collections", "shutil", "zlib"):
        assert heavy not in imported


@pytest.mark.slow
def test_a_tool_hook_on_postgresql_hands_over_to_the_replicator_importing_nothing_more(
        repo: Path, pg_url: str) -> None:
    env = {"COS_DATABASE_URL": pg_url, "COS_HOST": "alpha"}
    (repo / ".coding-os").mkdir()
    payload = {"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "ls"},
               "tool_response": {"stdout": "a\n"}}
    try:
        assert fire("SessionStart", {"session_id": "s1", "source": "startup"}, cwd=repo,
                    env=env).returncode == 0
        # The replicator SessionStart started has taken its lock (its pid written there) and
        # let it go: the probed fire starts the next one.
        lock = repo / ".coding-os" / ".replicate.lock"
        until(lambda: lock.exists() and lock.read_bytes().strip(),
              "the first replicator to take its lock")
        replicator_stopped(repo / ".coding-os")
        imported = hook_imports("PostToolUse", payload, repo, env)
    finally:
        replicator_stopped(repo / ".coding-os")
    assert imported - ALLOWED == set(), "the hook's import set grew"
    for heavy in ("psycopg", "subprocess", "coding_os.storage", "coding_os.sessions"):
        assert heavy not in imported
    last = (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").splitlines()[-1]
    assert " event=PostToolUse " in last and " replicator=started" in last


# What a checkpoint of a tree that changed may add besides: asking the daemon's watcher (its
# client, the C socket module, and the module that reaches a socket by a path of any length),
# storing new objects (compressed, flushed by a few threads of the
# low-level _thread module at once), reading the commit's objects where git covered a file, and
# keeping the store under its cap.
CHANGED_TREE_ALLOWED = {
    "coding_os.checkpoints.watch", "coding_os.checkpoints.upkeep", "coding_os.daemon",
    "coding_os.daemon.client", "coding_os.daemon.sockets", "coding_os.git.objects", "_socket", "zlib", "bisect", "_bisect",
}


@pytest.mark.parametrize("daemon", [False, True], ids=["no-daemon", "with-the-daemon"])
def test_a_pre_tool_use_that_checkpoints_a_changed_tree_imports_little_more(
        repo: Path, daemon: bool, request: pytest.FixtureRequest) -> None:
    (repo / ".coding-os").mkdir()
    assert fire("SessionStart", {"session_id": "s1", "source": "startup"}, cwd=repo).returncode == 0
    payload = {"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "make"}}
    if daemon:
        request.getfixturevalue("running")
        hook_imports("PreToolUse", payload, repo)  # its watch of the tree starts
    (repo / "README.md").write_text("changed by the tool call before\n", encoding="utf-8")
    (repo / "new.txt").write_text("a new file\n", encoding="utf-8")
    imported = hook_imports("PreToolUse", payload, repo)
    assert imported - (ALLOWED | CHECKPOINT_ALLOWED | CHANGED_TREE_ALLOWED) == set(), \
        "the hook's import set grew"
    for heavy in ("click", "yaml", "sqlite3", "json", "dataclasses", "typing", "pathlib",
                  "subprocess", "contextlib", "shutil", "socket", "selectors",
                  "coding_os.checkpoints.rewind", "coding_os.checkpoints.restore"):
        assert heavy not in imported
    line = [ln for ln in (repo / ".coding-os" / ".hooks.log").read_text(
        encoding="utf-8").splitlines() if " event=PreToolUse " in ln][-1]
    assert " checkpoint=cp-" in line
    assert f" checkpoint_scan={'watcher' if daemon else 'full'}" in line


# All a tool hook adds on a tree unchanged since the session's latest checkpoint: the policy
# gates' configuration, and the session's head with its fingerprint (heads.py) and the journal's
# presence (lock.py).
UNCHANGED_TREE_ADDS = {
    "coding_os.config", "coding_os.checkpoints", "coding_os.checkpoints.auto",
    "coding_os.checkpoints.heads", "coding_os.checkpoints.lock",
}


def test_a_pre_tool_use_on_an_unchanged_tree_imports_only_its_head_and_the_lock(
        repo: Path) -> None:
    (repo / ".coding-os").mkdir()
    assert fire("SessionStart", {"session_id": "s1", "source": "startup"}, cwd=repo).returncode == 0
    payload = {"session_id": "s1", "tool_name": "Bash", "tool_input": {"command": "make"}}
    log = repo / ".coding-os" / ".hooks.log"

    def reused() -> bool:
        """Fire once; whether the tree was known unchanged by its fingerprint (a checkpoint
        keeps one once the tree's files are older than its racy margin)."""
        assert fire("PreToolUse", payload, cwd=repo).returncode == 0
        line = log.read_text(encoding="utf-8").splitlines()[-1]
        return " checkpoint_scan=fingerprint " in line + " "

    until(reused, "a checkpoint that keeps a fingerprint", timeout=30)
    imported = hook_imports("PreToolUse", payload, repo)
    line = log.read_text(encoding="utf-8").splitlines()[-1]
    assert " checkpoint_reused=1" in line and " checkpoint_scan=fingerprint" in line
    post = hook_imports("PostToolUse", {**payload, "tool_response": {"stdout": ""}}, repo)
    assert imported - post == UNCHANGED_TREE_ADDS
