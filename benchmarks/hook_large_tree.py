"""The hook that checkpoints a large tree, as a user who never heard of the daemon gets it,
against a shadow git repository's snapshot, in one run.

The tree: `BENCH_FILES` (10,000) committed text files of ~5 KB in nested directories, `cos init
--agent claude` run from a regular install of this checkout (its wheel, installed by a current
pip into a scratch venv), a SessionStart fired through the installed command. No `cos daemon
start`: the hooks start the daemon's file watcher themselves once they find the tree large.

Each round, 5 random files are edited; then, interleaved (the order alternating per round), the
installed PreToolUse command for a Bash call (which takes the checkpoint of DESIGN.md §5) and the
anchor, a shadow git repository outside the tree as Cline, Gemini CLI and opencode keep one
(`git --git-dir=<shadow> --work-tree=<tree> add -A`, then `... write-tree`: two processes). The
first `BENCH_WARMUP` (5) rounds are not timed: the first hook scans the tree and starts the
daemon, the next one it answers starts its watch. Figure: median hook / median anchor over
`BENCH_RUNS` (20) rounds. Target <= 1.0. Every timed hook must have logged a checkpoint fed by
the watcher (`checkpoint_scan=watcher`).

Shown beside it, the same rounds with `checkpoints.start_daemon: false` in the project (no daemon
starts, every checkpoint scans): what the hook costs without the watcher.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _installs import Install, installed_command, make_installs, run, timed  # noqa: E402
from _worktree import edit, make_tree  # noqa: E402

FILES = int(os.environ.get("BENCH_FILES", "10000"))
RUNS = int(os.environ.get("BENCH_RUNS", "20"))
WARMUP = int(os.environ.get("BENCH_WARMUP", "5"))
EDITED = 5
TARGET = 1.0
SESSION_ID = "0b6c2c47-5a43-4f0e-9d2a-3f1e3c5f9a10"


def shadow(shadow_dir: Path, tree: Path, *args: str) -> list[str]:
    return ["git", f"--git-dir={shadow_dir}", f"--work-tree={tree}", *args]


def scans_since(log: Path, before: int) -> list[str]:
    """How each PreToolUse checkpoint logged after byte `before` looked at the tree."""
    found = []
    for line in log.read_text(encoding="utf-8")[before:].splitlines():
        if " event=PreToolUse " not in line:
            continue
        if "checkpoint_error=" in line or " checkpoint=cp-" not in line:
            raise SystemExit(f"a hook took no checkpoint: {line[:300]}")
        found.append(line.split(" checkpoint_scan=", 1)[1].split(" ", 1)[0]
                     if " checkpoint_scan=" in line else "?")
    return found


def rounds(install: Install, tree: Path, shadow_dir: Path, env: dict[str, str],
           rng: random.Random, label: str) -> tuple[float, float, list[str]]:
    """Warm-up and timed rounds; the medians of the hook and the anchor (ms), and the scans."""
    hook_env, hook_argv = installed_command(tree, "PreToolUse")
    hook_env = {**env, **hook_env}
    payload = json.dumps({
        "session_id": SESSION_ID, "hook_event_name": "PreToolUse", "cwd": str(tree),
        "transcript_path": f"/home/dev/.claude/projects/-tmp-tree/{SESSION_ID}.jsonl",
        "permission_mode": "acceptEdits", "tool_name": "Bash",
        "tool_input": {"command": "make test", "description": "Run the tests"},
        "tool_use_id": "toolu_01ABCDEFGHIJKLMNOPQRSTUV"}).encode()
    log = tree / ".coding-os" / ".hooks.log"
    hooks: list[float] = []
    anchors: list[float] = []
    timed_from = 0
    for number in range(WARMUP + RUNS):
        if number == WARMUP:
            timed_from = log.stat().st_size
        edit(tree, rng, number, FILES, EDITED)
        pair = [lambda: timed(hook_argv, hook_env, tree, payload),
                lambda: timed(shadow(shadow_dir, tree, "add", "-A"), env, tree)
                + timed(shadow(shadow_dir, tree, "write-tree"), env, tree)]
        first, second = (pair if number % 2 == 0 else pair[::-1])
        a, b = first(), second()
        hook, anchor = (a, b) if number % 2 == 0 else (b, a)
        if number >= WARMUP:
            hooks.append(hook)
            anchors.append(anchor)
    hook_ms, anchor_ms = statistics.median(hooks) * 1000, statistics.median(anchors) * 1000
    scans = scans_since(log, timed_from)
    print(f"{label}: cos hook PreToolUse {hook_ms:6.1f} ms, shadow add -A + write-tree "
          f"{anchor_ms:6.1f} ms, ratio {hook_ms / anchor_ms:.2f}; scans of the timed rounds: "
          + ", ".join(f"{scans.count(s)} {s}" for s in sorted(set(scans))))
    return hook_ms, anchor_ms, scans


def project(install: Install, scratch: Path, name: str, config: str | None
            ) -> tuple[Path, Path, dict[str, str]]:
    """A fresh HOME and a committed tree of FILES files, initialised and started as a user
    does; the shadow repository beside it, holding its first snapshot."""
    home = scratch / f"home-{name}"
    home.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
           "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    tree = scratch / f"tree-{name}"
    tree.mkdir()
    make_tree(tree, env, random.Random(7), FILES)
    if config is not None:
        (tree / ".coding-os.yaml").write_text(config, encoding="utf-8")
    run([install.cos, "init", "--agent", "claude"], "cos init", cwd=tree, env=env)
    start_env, start_argv = installed_command(tree, "SessionStart")
    run(start_argv, "SessionStart", env={**env, **start_env}, cwd=tree,
        input=json.dumps({"session_id": SESSION_ID, "source": "startup",
                          "hook_event_name": "SessionStart", "cwd": str(tree)}))
    shadow_dir = scratch / f"shadow-{name}"
    run(shadow(shadow_dir, tree, "init", "-q"), "shadow init", cwd=tree, env=env)
    run(shadow(shadow_dir, tree, "add", "-A"), "shadow add", cwd=tree, env=env)
    return tree, shadow_dir, env


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cos-large-tree-") as scratch_dir:
        scratch = Path(scratch_dir)
        install = make_installs(scratch, ("current-pip",))[0]
        print(f"a regular install ({install.name}); a committed tree of {FILES} files, "
              f"{EDITED} edited before each round; {RUNS} timed rounds after {WARMUP}")
        tree, shadow_dir, env = project(install, scratch, "default", None)
        try:
            hook_ms, anchor_ms, scans = rounds(install, tree, shadow_dir, env,
                                               random.Random(1), "as installed")
        finally:
            subprocess.run([install.cos, "daemon", "stop"], cwd=tree, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if set(scans) != {"watcher"}:
            raise SystemExit(f"the timed hooks were not all fed by the watcher: {scans}")
        off, shadow_off, env_off = project(install, scratch, "off",
                                           "checkpoints:\n  start_daemon: false\n")
        off_ms, off_anchor_ms, _ = rounds(install, off, shadow_off, env_off, random.Random(1),
                                          "start_daemon: false")
        ratio = hook_ms / anchor_ms
        print(f"RESULT hook_large_tree ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'} "
              f"without_the_watcher={off_ms / off_anchor_ms:.2f}")


if __name__ == "__main__":
    main()
