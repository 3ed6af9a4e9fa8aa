"""The `cos resume` picker as a user sees it: `cos resume` runs in a detached tmux session on the
fixture layout of test_sessions_cli, keys go in with `send-keys` and the screen comes back with
`capture-pane`. Handovers run only through the fake agents of test_resume_cli."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import (
    COS,
    HERE,
    LATER,
    NATIVE_IDS,
    WORKTREE,
    Pane,
    claude_session,
    conversation,
    fake_agents,
    git,
    require_tmux,
    tmux_panes,
    write_jsonl,
)


Project = tuple[Path, dict[str, str]]

require_tmux("the picker tests")


@pytest.fixture
def picker(checkout: Project, tmp_path: Path) -> Iterator[Callable[..., Pane]]:
    """Start `cos resume [ARGS]` in tmux (160x40) in the project with the fake agents on PATH."""
    path_env, _ = fake_agents(tmp_path)

    with tmux_panes(tmp_path) as start_pane:
        def start(*args: str, env: dict[str, str] | None = None) -> Pane:
            return start_pane([COS, "resume", *args], cwd=checkout[0],
                              env={**checkout[1], **path_env, **(env or {})})

        yield start


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
