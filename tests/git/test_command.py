"""git as cos runs it (git/command.py): nothing a repository's configuration names is run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from coding_os.git.command import GitError, git
from tests.helpers import git as plain_git


def marker_script(tmp_path: Path) -> tuple[Path, Path]:
    """A program that notes each run in a marker file outside the repository (and passes its
    input through, as a filter would): (the program, the marker)."""
    marker = tmp_path / "outside" / "ran"
    marker.parent.mkdir()
    script = tmp_path / "outside" / "program.sh"
    script.write_text(f'#!/bin/sh\necho "$0 $*" >> {marker}\n'
                      'if [ "$1" = filter ]; then exec cat; fi\n', encoding="utf-8")
    script.chmod(0o755)
    return script, marker


def nested_repository(tmp_path: Path, program: Path) -> Path:
    """A repository nested in a project, with a tracked file its configuration filters through
    `program`, `program` as its fsmonitor and hooks, as an attacker's archive could hold it;
    the file's stat is stale, so git compares its bytes again."""
    project = tmp_path / "project"
    inner = project / "vendor" / "lib"
    inner.mkdir(parents=True)
    plain_git(project, "init", "-q")
    plain_git(inner, "init", "-q")
    (inner / "lib.py").write_text("x = 1\n", encoding="utf-8")
    (inner / ".gitattributes").write_text("* filter=evil diff=evil\n", encoding="utf-8")
    plain_git(inner, "add", ".")
    plain_git(inner, "commit", "-q", "-m", "lib")
    hooks = inner / "hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-checkout", "post-commit", "reference-transaction"):
        os.symlink(program, hooks / name)
    for key, value in (("core.fsmonitor", str(program)), ("core.hooksPath", str(hooks)),
                       ("filter.evil.clean", f"{program} filter"),
                       ("filter.evil.smudge", f"{program} filter"),
                       ("filter.evil.required", "true"), ("diff.external", str(program)),
                       ("diff.evil.textconv", str(program)), ("protocol.allow", "always"),
                       ("log.showSignature", "true"), ("gpg.program", str(program))):
        plain_git(inner, "config", key, value)
    os.utime(inner / "lib.py", (1_000_000_000, 1_000_000_000))
    return inner


def test_the_repository_as_set_up_runs_its_programs_under_a_plain_git(tmp_path: Path) -> None:
    # The control: what the other tests show cos never runs does run under git as is.
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    subprocess.run(["git", "status", "--porcelain"], cwd=inner, check=True,
                   capture_output=True, stdin=subprocess.DEVNULL)
    assert marker.exists()


def test_git_status_never_runs_a_repositorys_fsmonitor(tmp_path: Path) -> None:
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    plain_git(inner, "config", "--remove-section", "filter.evil")  # the fsmonitor alone
    git(str(inner), "status", "--porcelain=v2", "-z", "--untracked-files=all")
    git(str(inner), "ls-files", "-z", "--modified")
    assert not marker.exists()


def test_a_nested_repositorys_filters_never_run(tmp_path: Path) -> None:
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    out = git(str(inner), "status", "--porcelain=v2", "-z", "--untracked-files=all",
              nested=True)
    git(str(inner), "ls-files", "-z", "--modified", nested=True)
    assert not marker.exists()
    assert b"lib.py" not in out  # its bytes are the commit's


def test_a_filter_named_with_an_equals_sign_is_turned_off_too(tmp_path: Path) -> None:
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    (inner / ".gitattributes").write_text("* filter=a=b\n", encoding="utf-8")
    plain_git(inner, "config", "filter.a=b.clean", f"{program} filter")
    plain_git(inner, "config", "--unset", "filter.evil.required")
    os.utime(inner / ".gitattributes", (1_000_000_000, 1_000_000_000))
    git(str(inner), "status", "--porcelain=v2", "-z", nested=True)
    assert not marker.exists()


def test_the_projects_own_filters_still_run(tmp_path: Path) -> None:
    # The project's repository is the user's: its configuration (git-lfs, git-crypt) is kept.
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    plain_git(inner, "config", "--unset", "core.fsmonitor")
    git(str(inner), "status", "--porcelain=v2", "-z")
    assert marker.exists()


def test_git_runs_no_hook(tmp_path: Path) -> None:
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    plain_git(inner, "config", "--remove-section", "filter.evil")
    git(str(inner), "commit", "-q", "--allow-empty", "-m", "x")
    git(str(inner), "checkout", "-q", "-b", "other")
    assert not marker.exists()


def test_diffs_run_no_external_diff_nor_text_conversion(tmp_path: Path) -> None:
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    plain_git(inner, "config", "--remove-section", "filter.evil")
    (inner / "lib.py").write_text("x = 2\n", encoding="utf-8")
    for args in (("diff",), ("diff", "HEAD"), ("-c", "color.ui=never", "diff", "--stat"),
                 ("log", "-p"), ("show",), ("log", "--format=%G?")):
        git(str(inner), *args, nested=True)
    assert not marker.exists()


def test_git_reaches_no_remote(tmp_path: Path) -> None:
    # A lazy fetch of a partial clone, or a remote's `ext::` URL, would run a program.
    program, marker = marker_script(tmp_path)
    inner = nested_repository(tmp_path, program)
    with pytest.raises(GitError):
        git(str(inner), "ls-remote", f"ext::{program}")
    with pytest.raises(GitError):
        git(str(inner), "ls-remote", str(tmp_path / "project"))
    assert not marker.exists()
