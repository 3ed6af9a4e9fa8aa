"""The `cos resume` picker as a user sees it: `cos resume` runs in a detached tmux session on the
fixture layout of test_sessions_cli, keys go in with `send-keys` and the screen comes back with
`capture-pane`. Handovers run only through the fake agents of test_resume_cli."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import (
    COS,
    HERE,
    LATER,
    NATIVE_IDS,
    WORKTREE,
    claude_session,
    conversation,
    fake_agents,
    git,
    write_jsonl,
)


TIMEOUT_S = 15.0
Project = tuple[Path, dict[str, str]]

if shutil.which("tmux") is None:
    if os.environ.get("CI") == "true":
        pytest.fail("tmux is required in CI for the picker tests", pytrace=False)
    pytest.skip("tmux is not installed", allow_module_level=True)


class Pane:
    """`cos resume …` running in a detached tmux session of its own server."""

    def __init__(self, socket: str, exit_file: Path) -> None:
        self.socket = socket
        self.exit_file = exit_file

    def tmux(self, *args: str) -> str:
        return subprocess.run(["tmux", "-S", self.socket, *args], check=True,
                              capture_output=True, text=True, timeout=10).stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "pick")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "pick", *(["-l"] if literal else []), *keys)

    def wait(self, condition: Callable[[str], bool], what: str) -> str:
        """The screen once `condition` holds for it; fails after TIMEOUT_S."""
        deadline = time.monotonic() + TIMEOUT_S
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if condition(screen):
                return screen
            time.sleep(0.05)  # a poll interval, not a wait for something
        raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")

    def exit_code(self) -> int:
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.exit_file.read_text(encoding="utf-8") if self.exit_file.exists() else ""
            if text.endswith("\n"):
                return int(text)
            time.sleep(0.05)
        raise AssertionError(f"cos resume did not exit; the screen:\n{self.screen()}")


@pytest.fixture
def picker(checkout: Project, tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    """Start `cos resume [ARGS]` in tmux (160x40) in the project with the fake agents on PATH."""
    # A server of its own, its socket in a short private directory (sockets have a path limit).
    socket_dir = tempfile.mkdtemp(prefix="cos-tmux-")
    socket = os.path.join(socket_dir, "sock")
    path_env, _ = fake_agents(tmp_path)

    def start(*args: str, env: dict[str, str] | None = None) -> Pane:
        full = {**os.environ, **checkout[1], **path_env, **(env or {}), "TERM": "xterm-256color"}
        full.pop("TMUX", None)
        exit_file = tmp_path / "exit-code.txt"
        exit_file.unlink(missing_ok=True)
        command = (f"{shlex.join([COS, 'resume', *args])}; "
                   f"echo $? > {shlex.quote(str(exit_file))}; sleep 60")
        pane = Pane(socket, exit_file)
        subprocess.run(["tmux", "-S", socket, "-f", "/dev/null", "new-session", "-d", "-x", "160",
                        "-y", "40", "-s", "pick", "-c", str(checkout[0]), command],
                       check=True, env=full, timeout=10)
        return pane

    try:
        yield start
    finally:
        subprocess.run(["tmux", "-S", socket, "kill-server"], capture_output=True, timeout=10)
        shutil.rmtree(socket_dir, ignore_errors=True)


def _repo_sessions(checkout: Project, home: Path) -> Path:
    """HERE and LATER in the checkout (branch main), WORKTREE in a linked worktree (branch wt);
    the linked worktree."""
    repo = checkout[0]
    worktree = repo.parent / "wt"
    git(repo, "worktree", "add", "-q", str(worktree))
    claude_session(home, HERE, repo)
    claude_session(home, LATER, repo, second=100)
    entries = conversation(WORKTREE, 1, start=200)
    for entry in entries:
        entry["cwd"], entry["gitBranch"] = str(worktree.resolve()), "wt"
    key = "".join(c if c.isalnum() else "-" for c in str(worktree.resolve()))
    write_jsonl(home / ".claude" / "projects" / key / f"{WORKTREE}.jsonl", entries)
    return worktree.resolve()


def test_the_picker_lists_this_worktree_narrows_as_you_type_widens_filters_and_esc_exits_130(
        checkout: Project, isolated_env: Path, picker: Callable[..., Pane]) -> None:
    _repo_sessions(checkout, isolated_env)
    pane = picker()
    screen = pane.wait(lambda s: HERE in s and LATER in s, "the first screen")
    assert WORKTREE not in screen and "this worktree" in screen
    assert screen.index(LATER) < screen.index(HERE)  # most recent first
    pane.keys("0004", literal=True)
    pane.wait(lambda s: HERE not in s and LATER in s, "the search to narrow the list")
    pane.keys("BSpace", "BSpace", "BSpace", "BSpace")
    pane.wait(lambda s: HERE in s and LATER in s, "the list to come back")
    pane.keys("C-w")
    screen = pane.wait(lambda s: WORKTREE in s, "the repository scope")
    assert "this repository's worktrees" in screen
    pane.keys("C-b")
    screen = pane.wait(lambda s: "this branch only" in s and WORKTREE not in s, "main only")
    assert HERE in screen and LATER in screen
    pane.keys("C-b")
    pane.wait(lambda s: "this branch only" not in s and WORKTREE in s, "every branch again")
    pane.keys("C-w")
    pane.wait(lambda s: "all projects" in s and any(n in s for n in NATIVE_IDS),
              "sessions of other projects")
    pane.keys("Escape")
    assert pane.exit_code() == 130
    screen = pane.wait(lambda s: "cos: aborted" in s, "the cancel message")
    assert "Traceback" not in screen


def test_enter_hands_over_to_the_selected_session_in_its_directory_and_never_lists_the_own(
        checkout: Project, isolated_env: Path, picker: Callable[..., Pane],
        tmp_path: Path) -> None:
    worktree = _repo_sessions(checkout, isolated_env)
    own = {"CLAUDE_CODE_SESSION_ID": LATER, "COS_AGENT": "claude"}
    pane = picker(env=own)
    screen = pane.wait(lambda s: HERE in s, "the first screen")
    assert LATER not in screen  # the caller's own session
    pane.keys("C-w")
    screen = pane.wait(lambda s: WORKTREE in s, "the repository scope")
    assert screen.index(WORKTREE) < screen.index(HERE) and LATER not in screen
    pane.keys("Down")
    pane.wait(lambda s: f"id          {HERE}" in s, "the preview of the second row")
    pane.keys("Up", "Enter")
    assert pane.exit_code() == 0
    record = (tmp_path / "record.txt").read_text(encoding="utf-8").splitlines()
    assert record == [str(worktree), "claude", "--resume", WORKTREE]


def test_a_name_several_sessions_have_opens_the_picker_with_the_name_searched(
        checkout: Project, isolated_env: Path, picker: Callable[..., Pane],
        tmp_path: Path) -> None:
    _repo_sessions(checkout, isolated_env)
    for session in (HERE, LATER):
        subprocess.run([COS, "sessions", "rename", session, "big refactor"], cwd=checkout[0],
                       env={**os.environ, **checkout[1]}, check=True, capture_output=True)
    pane = picker("big refactor")
    screen = pane.wait(lambda s: s.count("big refactor") >= 3, "the pre-filled picker")
    assert "search> big refactor" in screen and WORKTREE not in screen
    pane.keys("Enter")
    assert pane.exit_code() == 0
    record = (tmp_path / "record.txt").read_text(encoding="utf-8").splitlines()
    assert record == [str(checkout[0]), "claude", "--resume", LATER]


def test_the_all_projects_scope_shows_each_rows_project(
        checkout: Project, isolated_env: Path, picker: Callable[..., Pane]) -> None:
    _repo_sessions(checkout, isolated_env)
    project = f"  {checkout[0].name:<20} "
    pane = picker()
    screen = pane.wait(lambda s: HERE in s, "the first screen")
    assert project not in next(line for line in screen.splitlines() if HERE in line)
    pane.keys("C-w", "C-w")
    screen = pane.wait(lambda s: "all projects" in s and any(n in s for n in NATIVE_IDS),
                       "sessions of other projects")
    assert project in next(line for line in screen.splitlines() if HERE in line)
    others = [line for line in screen.splitlines() if any(n in line for n in NATIVE_IDS)]
    assert others and all(project not in line for line in others)
    pane.keys("Escape")
    assert pane.exit_code() == 130
