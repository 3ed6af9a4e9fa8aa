"""Checkpoints and rewind driven by the real Claude Code and Codex CLIs, through `cos init`'s hooks.

Each client runs a scripted session of two prompts in a scratch git repository where `cos init
--agent <client>` installed the hooks. First prompt: it deletes files (a committed one, an
untracked one, a symlink) with a shell command, edits a file with its own edit tool (Claude
Code's Edit, Codex's apply_patch), then moves a binary file and clears a script's executable bit
with another shell command. Between
the turns the user edits a file. Second prompt (the session resumed): it creates a file in a new
directory with its edit tool. The hooks took checkpoints on the way; the tests read them with
`cos checkpoints`, preview and apply `cos rewind` to the session's first prompt, and undo it,
comparing the whole tree (bytes, symlink targets, modes, directories) with copies taken before
and after the session.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.harness import Tree, run_claude, run_codex, tree_differences, tree_state
from tests.e2e.model_server import ModelServer, Step, Text, ToolCall, codex_patch, when_prompted
from tests.helpers import CosProject, add_file_patch, require_clients, succeeded


pytestmark = pytest.mark.e2e

PROMPT = "Tidy the project: edit, delete and move some files"
SECOND_PROMPT = "Now add a notes file"
NEW_FILE = "notes/new.txt"
NEW_TEXT = "notes written in the second turn\n"
OUTSIDE_TEXT = "written by the user between the turns\n"
EDIT_OLD = "bravo"
EDIT_NEW = "BRAVO (edited by the agent)"
DELETE_COMMAND = "rm delete.txt scratch.txt latest"
MOVE_COMMAND = "mv data.bin docs/data.bin && chmod -x tool.sh"
BINARY = bytes(range(256)) * 8 + b"\0tail"

def write_project(project: Path, home: Path) -> None:
    """A git repository with committed files to edit, delete and move, a symlink, an
    executable script, a binary file, and one untracked file."""
    (project / "edit.txt").write_text(f"alpha\n{EDIT_OLD}\ncharlie\n", encoding="utf-8")
    (project / "delete.txt").write_text("to be deleted by rm\n", encoding="utf-8")
    (project / "data.bin").write_bytes(BINARY)
    (project / "tool.sh").write_text("#!/bin/sh\necho tool\n", encoding="utf-8")
    (project / "tool.sh").chmod(0o755)
    (project / "empty.txt").write_bytes(b"")
    (project / "docs").mkdir()
    (project / "docs" / "readme.md").write_text("# docs\n", encoding="utf-8")
    (project / "latest").symlink_to("edit.txt")
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
    for argv in (["git", "add", "-A"], ["git", "commit", "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=project, env=env, check=True, capture_output=True)
    # Untracked and not ignored: a worktree checkpoint covers it too.
    (project / "scratch.txt").write_text("untracked notes\n", encoding="utf-8")


def claude_script(project: Path) -> list[Step]:
    edit = str(project / "edit.txt")
    return [
        ToolCall("Read", {"file_path": edit}),  # Edit wants a Read of the file first
        ToolCall("Bash", {"command": DELETE_COMMAND, "description": "Delete files"}),
        ToolCall("Edit", {"file_path": edit, "old_string": EDIT_OLD, "new_string": EDIT_NEW}),
        ToolCall("Bash", {"command": MOVE_COMMAND, "description": "Move a file, chmod a script"}),
        when_prompted(SECOND_PROMPT,
                      ToolCall("Write", {"file_path": str(project / NEW_FILE),
                                         "content": NEW_TEXT}),
                      Text("All done.")),
        Text("Notes added."),
    ]


def codex_script(project: Path) -> list[Step]:
    return [
        ToolCall("exec_command", {"cmd": DELETE_COMMAND}),
        ToolCall("apply_patch", {"input": codex_patch(str(project / "edit.txt"), EDIT_OLD,
                                                      EDIT_NEW)}, freeform=True),
        ToolCall("exec_command", {"cmd": MOVE_COMMAND}),
        when_prompted(SECOND_PROMPT,
                      ToolCall("apply_patch", {"input": add_file_patch(project / NEW_FILE,
                                                                       NEW_TEXT)},
                               freeform=True),
                      Text("All done.")),
        Text("Notes added."),
    ]


@dataclass
class RewoundSession:
    """One client's session, what cos recorded of it, and the previews and rewinds done after."""

    cp: CosProject
    session: str = ""
    before_session: Tree = field(default_factory=dict)
    after_first_turn: Tree = field(default_factory=dict)
    after_session: Tree = field(default_factory=dict)
    checkpoints: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    hooks_log: list[dict[str, Any]] = field(default_factory=list)
    preview: dict[str, Any] = field(default_factory=dict)
    after_preview: Tree = field(default_factory=dict)
    rewind: dict[str, Any] = field(default_factory=dict)
    after_rewind: Tree = field(default_factory=dict)
    undo: dict[str, Any] = field(default_factory=dict)
    after_undo: Tree = field(default_factory=dict)
    verify: dict[str, Any] = field(default_factory=dict)
    watched: dict[str, Any] | None = None  # with `cos daemon`: its status and a last checkpoint

    @property
    def first_prompt(self) -> dict[str, Any]:
        return next(row for row in self.checkpoints if row["trigger"] == "prompt")

    def cos_json(self, *args: str) -> Any:
        proc = self.cp.cos(*args, "--json")
        assert proc.returncode == 0, f"cos {' '.join(args)}: {proc.stderr}"
        return json.loads(proc.stdout)


def run_session(root: Path, agent: str, daemon: bool = False) -> RewoundSession:
    """Run one scripted prompt of `agent`, then list, preview, rewind and undo; with `daemon`,
    under `cos daemon`, whose watcher then feeds the hooks' checkpoints."""
    project = (root / "project").resolve()
    project.mkdir(parents=True)
    home = root / "home"
    home.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True, capture_output=True)
    write_project(project, home)
    cp = CosProject(agent=agent, project=project, home=home)
    installed = cp.cos("init", "--agent", agent)
    assert installed.returncode == 0, installed.stderr
    if daemon:
        started = cp.cos("daemon", "start")
        assert started.returncode == 0, started.stderr
    try:
        return _run_session(cp, agent, daemon)
    finally:
        if daemon:
            cp.cos("daemon", "stop")


def _run_session(cp: CosProject, agent: str, daemon: bool) -> RewoundSession:
    project = cp.project
    home = cp.home
    run = RewoundSession(cp=cp, before_session=tree_state(project))
    script = claude_script(project) if agent == "claude" else codex_script(project)
    active = cp.state / agent / ".active-session"
    with ModelServer(script) as server:
        if agent == "claude":
            cp.results.append(succeeded(run_claude(project, PROMPT, server, home)))
        else:
            cp.results.append(succeeded(run_codex(project, PROMPT, server, home)))
        run.session, cp.native_id = active.read_text(encoding="utf-8").split()
        run.after_first_turn = tree_state(project)
        # The user, not the agent, changes a file while the session is idle.
        (project / "empty.txt").write_text(OUTSIDE_TEXT, encoding="utf-8")
        if agent == "claude":
            cp.results.append(succeeded(run_claude(project, SECOND_PROMPT, server, home,
                                                   extra_args=("--resume", cp.native_id))))
        else:
            cp.results.append(succeeded(run_codex(project, SECOND_PROMPT, server, home,
                                                  extra_args=("resume", cp.native_id))))
    assert active.read_text(encoding="utf-8").split() == [run.session, cp.native_id]
    run.after_session = tree_state(project)
    run.hooks_log = cp.log()
    run.checkpoints = list(reversed(run.cos_json("checkpoints", "--session", run.session)))
    if not any(row["trigger"] == "prompt" for row in run.checkpoints):
        return run  # the tests report what is missing; there is nothing to rewind to
    target = run.first_prompt["id"]
    run.preview = run.cos_json("rewind", target, "--code", "--dry-run")
    run.after_preview = tree_state(project)
    run.rewind = run.cos_json("rewind", target, "--code")
    run.after_rewind = tree_state(project)
    run.undo = run.cos_json("rewind", "--undo")
    run.after_undo = tree_state(project)
    run.verify = run.cos_json("checkpoints", "verify")
    if daemon:
        (project / "after-undo.txt").write_text("x\n", encoding="utf-8")
        run.watched = {"status": run.cos_json("daemon", "status"),
                       "scan": run.cos_json("checkpoint", "create")["scan"]}
    return run


@pytest.fixture(scope="module")
def claude(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RewoundSession]:
    """Claude Code: Read and Edit a file, `rm` three entries and `mv`/`chmod` with Bash."""
    require_clients()
    yield run_session(tmp_path_factory.mktemp("cp-claude"), "claude")


@pytest.fixture(scope="module")
def codex(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RewoundSession]:
    """Codex: apply_patch a file, `rm` three entries and `mv`/`chmod` with exec_command."""
    require_clients()
    yield run_session(tmp_path_factory.mktemp("cp-codex"), "codex")


@pytest.fixture(scope="module")
def claude_watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RewoundSession]:
    """The Claude Code session again, under `cos daemon`."""
    require_clients()
    yield run_session(tmp_path_factory.mktemp("cp-claude-w"), "claude", daemon=True)


@pytest.fixture(scope="module")
def codex_watched(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RewoundSession]:
    """The Codex session again, under `cos daemon`."""
    require_clients()
    yield run_session(tmp_path_factory.mktemp("cp-codex-w"), "codex", daemon=True)


@pytest.fixture(params=["claude", "codex", "claude_watched", "codex_watched"])
def run(request: pytest.FixtureRequest) -> RewoundSession:
    result: RewoundSession = request.getfixturevalue(request.param)
    return result


EDIT_TOOL = {"claude": "Edit", "codex": "apply_patch"}
WRITE_TOOL = {"claude": "Write", "codex": "apply_patch"}
# Codex reports its exec_command to hooks as Bash.
SHELL_TOOL = {"claude": "Bash", "codex": "Bash"}
REWIND_ACTIONS = {
    "edit.txt": "restore", "tool.sh": "restore", "empty.txt": "restore",
    "delete.txt": "create", "scratch.txt": "create", "latest": "create", "data.bin": "create",
    "docs/data.bin": "delete", NEW_FILE: "delete",
}
REWIND_SUMMARY = {"restore": 3, "create": 4, "delete": 2}


def test_the_client_did_both_turns_with_the_hooks_installed(run: RewoundSession) -> None:
    project = run.cp.project
    assert (project / "edit.txt").read_text(encoding="utf-8") == f"alpha\n{EDIT_NEW}\ncharlie\n"
    for gone in ("delete.txt", "scratch.txt", "latest", "data.bin"):
        assert not os.path.lexists(project / gone), gone
    assert (project / "docs" / "data.bin").read_bytes() == BINARY
    assert stat.S_IMODE((project / "tool.sh").stat().st_mode) == 0o644
    assert (project / NEW_FILE).read_text(encoding="utf-8") == NEW_TEXT
    assert not any("cos hook" in result.stderr for result in run.cp.results)


def test_each_turn_has_a_prompt_checkpoint_one_per_tool_that_changed_the_tree_and_a_turn_end(
        run: RewoundSession) -> None:
    agent = run.cp.agent
    # The first writing tool of each turn finds the tree as the prompt's checkpoint left it: it
    # reuses that checkpoint rather than recording a new one (see the hooks-log test).
    assert [(row["turn"], row["trigger"]) for row in run.checkpoints] == [
        (1, "prompt"), (1, f"tool:{EDIT_TOOL[agent]}"), (1, f"tool:{SHELL_TOOL[agent]}"),
        (1, "turn-end"),
        (2, "prompt"), (2, "turn-end"),
    ]
    for row in run.checkpoints:
        assert (row["session"], row["agent"], row["mode"], row["root"]) == \
            (run.session, agent, "worktree", str(run.cp.project)), row
        assert row["prompt"] == (PROMPT if row["turn"] == 1 else SECOND_PROMPT), row
        assert not row["skipped"], row


def test_each_checkpoint_lists_the_files_changed_since_the_previous_one(
        run: RewoundSession) -> None:
    changed = [(row["changed_count"], row["changed"]) for row in run.checkpoints]
    assert changed == [
        (None, []),  # the session's first checkpoint has nothing to compare with
        (3, ["delete.txt", "latest", "scratch.txt"]),  # the rm, before the edit tool
        (1, ["edit.txt"]),  # the edit, before the mv and chmod
        (3, ["data.bin", "docs/data.bin", "tool.sh"]),
        (1, ["empty.txt"]),  # the user's edit between the turns
        (1, [NEW_FILE]),
    ]


def test_every_checkpointing_hook_logged_its_checkpoint_and_no_error(run: RewoundSession) -> None:
    taken = []
    for line in run.hooks_log:
        assert "checkpoint_error" not in line, line
        if line["event"] in ("UserPromptSubmit", "Stop") or (
                line["event"] == "PreToolUse" and line.get("tool") != "Read"):
            taken.append((line["event"], line.get("tool"), line.get("checkpoint")))
        else:
            assert "checkpoint" not in line, line
    ids = [row["id"] for row in run.checkpoints]
    shell, edit, write = SHELL_TOOL[run.cp.agent], EDIT_TOOL[run.cp.agent], \
        WRITE_TOOL[run.cp.agent]
    assert taken == [
        ("UserPromptSubmit", None, ids[0]),
        ("PreToolUse", shell, ids[0]),  # the rm: nothing changed since the prompt's checkpoint
        ("PreToolUse", edit, ids[1]),
        ("PreToolUse", shell, ids[2]),
        ("Stop", None, ids[3]),
        ("UserPromptSubmit", None, ids[4]),
        ("PreToolUse", write, ids[4]),  # nothing changed since the second prompt's checkpoint
        ("Stop", None, ids[5]),
    ]


def test_dry_run_lists_what_to_restore_create_and_delete_and_changes_nothing(
        run: RewoundSession) -> None:
    assert run.preview["dry_run"] is True
    code = run.preview["code"]
    assert code["checkpoint"]["id"] == run.first_prompt["id"]
    assert {item["path"]: item["action"] for item in code["files"]} == REWIND_ACTIONS
    assert code["summary"] == REWIND_SUMMARY
    assert not code["unprotected"]
    outside = {item["path"] for item in code["files"] if item["changed_outside"]}
    assert outside == {"empty.txt"}  # everything else was done by the agent in the session
    stats = {item["path"]: item for item in code["files"]}
    assert (stats["edit.txt"]["added"], stats["edit.txt"]["removed"]) == (1, 1)
    assert (stats["empty.txt"]["added"], stats["empty.txt"]["removed"]) == (0, 1)
    assert stats["data.bin"]["binary"] is True
    assert tree_differences(run.after_session, run.after_preview) == []


def test_rewind_to_the_first_prompt_restores_every_file_byte_for_byte_with_modes(
        run: RewoundSession) -> None:
    code = run.rewind["code"]
    assert code["applied"] is True and code["before"]
    assert code["summary"] == REWIND_SUMMARY
    assert tree_differences(run.before_session, run.after_rewind) == []


def test_undo_of_the_rewind_brings_back_the_tree_the_session_left(run: RewoundSession) -> None:
    code = run.undo["undo"]
    assert code["applied"] is True
    assert code["checkpoint"]["id"] == run.rewind["code"]["before"]
    assert tree_differences(run.after_session, run.after_undo) == []


def test_the_checkpoint_store_verifies_clean_after_rewind_and_undo(run: RewoundSession) -> None:
    assert run.verify["ok"] is True, run.verify
    assert run.verify["checkpoints"] >= len(run.checkpoints) + 2  # the two before-rewind ones


@pytest.mark.parametrize("name", ["claude_watched", "codex_watched"])
def test_under_the_daemon_the_hooks_checkpoints_armed_its_watch_of_the_tree(
        name: str, request: pytest.FixtureRequest) -> None:
    run: RewoundSession = request.getfixturevalue(name)
    assert run.watched is not None
    trees = run.watched["status"]["trees"]
    assert [tree["root"] for tree in trees] == [str(run.cp.project)]
    assert trees[0]["broken"] is None
    assert run.watched["scan"] == "watcher"
