"""Helpers shared by the checkpoint tests: a project as `cos install` leaves it, the state of a
tree as the user sees it (paths, bytes, symlink targets, exec bits), and one-line failures."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import cos, git

ALWAYS_OUT = (".git", ".coding-os")


@pytest.fixture
def project(repo: Path) -> Path:
    """The `repo` fixture with the state dir kept out of git, as `cos install` does it."""
    with open(repo / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return repo


def tree(root: Path | str, *, skip_nested_git: bool = True) -> dict[str, tuple[object, ...]]:
    """Every file and symlink under `root` (never `.git` or `.coding-os` at the top, nor a nested
    `.git`): ("f", bytes, executable) or ("l", target). Empty directories are not part of it."""
    found: dict[str, tuple[object, ...]] = {}
    root = str(root)
    for top, dirs, files in os.walk(root):
        rel_top = os.path.relpath(top, root)
        keep = []
        for name in dirs:
            full = os.path.join(top, name)
            if (rel_top == "." and name in ALWAYS_OUT) or (skip_nested_git and name == ".git"):
                continue
            if os.path.islink(full):
                files.append(name)
                continue
            keep.append(name)
        dirs[:] = keep
        for name in files:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("l", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("f", Path(full).read_bytes(), bool(st.st_mode & stat.S_IXUSR))
    return found


def raw_bytes(root: Path | str) -> dict[str, bytes]:
    """Every file's bytes (and symlink target) under `root`, `.git` included: to prove that
    nothing at all changed."""
    found: dict[str, bytes] = {}
    for top, dirs, files in os.walk(str(root)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, str(root))
            if os.path.islink(full):
                found[rel] = b"->" + os.fsencode(os.readlink(full))
            else:
                found[rel] = Path(full).read_bytes()
    return found


def create(cwd: Path, *args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    """`cos checkpoint create ARGS --json`, which must succeed."""
    proc = cos("checkpoint", "create", *args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def rewind(cwd: Path, checkpoint: str, *args: str,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cos("rewind", checkpoint, *args, cwd=cwd, env=env)


def rewind_ok(cwd: Path, checkpoint: str, *args: str,
              env: dict[str, str] | None = None) -> dict[str, object]:
    proc = rewind(cwd, checkpoint, *args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def one_line_failure(proc: subprocess.CompletedProcess[str], code: int) -> str:
    """The documented failure: exit `code`, one line on stderr starting `cos:`, no traceback."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert lines[0].startswith("cos"), lines[0]
    return lines[0]


def commit_all(repo: Path, message: str = "more") -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def nothing_staged(folder: Path) -> bool:
    """Whether the checkpoint store `folder` holds no staged file (its staging directory stays
    between restores) and no temporary journal."""
    staging = folder / "staging"
    return (not (staging.exists() and any(staging.iterdir()))
            and not (folder / "journal.json.tmp").exists())
