"""`cos bg`'s plain form (interfaces/entry.py) runs without the click CLI or the engine, and says
and does what the full CLI says and does: the same row, the same line, the same errors and exit
codes. The full CLI is reached by a spelling the plain form leaves to it (`--isolation=none`,
`--cwd P`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import cos

# Fields of a job's row that differ from one job to the next.
VARYING = {"id", "startedAt", "pid", "state", "status", "sessionId", "cos_session", "last_seq"}


@pytest.fixture
def fake_claude(tmp_path: Path) -> dict[str, str]:
    """A `claude` on PATH that ends at once (the job then fails; its start is what is looked
    at)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    program = folder / "claude"
    program.write_text("#!/bin/sh\nexit 1\n", encoding="utf-8")
    program.chmod(0o755)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def row_of(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    row: dict[str, object] = json.loads(done.stdout)
    return {key: value for key, value in row.items() if key not in VARYING}


def test_the_plain_form_gives_the_row_and_line_the_full_cli_gives(
        project: Path, fake_claude: dict[str, str]) -> None:
    plain = cos("bg", "--json", "--isolation", "none", "--name", "same", "--model", "m1",
                "fix it", cwd=project, env=fake_claude)
    full = cos("bg", "--json", "--isolation=none", "--name", "same", "--model", "m1",
               "fix it", cwd=project, env=fake_claude)
    assert row_of(plain) == row_of(full)
    assert row_of(plain)["cwd"] == str(project) and row_of(plain)["name"] == "same"

    line = cos("bg", "--isolation", "none", "say hello there", cwd=project, env=fake_claude)
    assert line.returncode == 0, line.stderr
    words = line.stdout.rstrip("\n").split(" · ")
    assert words[0] == "backgrounded" and words[2] == "say-hello-there"
    assert len(words[1]) == 8 and line.stdout.count("\n") == 1


def test_the_plain_form_loads_neither_click_nor_the_engine(
        project: Path, fake_claude: dict[str, str]) -> None:
    probe = ("import sys; from coding_os.interfaces.entry import main; sys.argv = ['cos', 'bg', "
             "'--isolation', 'none', '--json', 'fix it']; code = main(); "
             "print(sorted(m for m in ('click', 'asyncio', 'coding_os.api', "
             "'coding_os.runtime.core') if m in sys.modules), file=sys.stderr); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=project, capture_output=True,
                          text=True, env={**os.environ, **fake_claude}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert json.loads(done.stdout)["agent"] == "claude"


@pytest.mark.parametrize("args", [
    ("--agent", "codex"),  # not on PATH
    ("--name", "bad\x01name"),
    ("--permission-mode", "plan", "--agent", "codex"),
])
def test_the_plain_form_refuses_as_the_full_cli_does(
        project: Path, args: tuple[str, ...]) -> None:
    env = {"PATH": "/usr/bin:/bin"}  # no claude, no codex
    plain = cos("bg", "--isolation", "none", *args, "do it", cwd=project, env=env)
    full = cos("bg", "--isolation=none", *args, "do it", cwd=project, env=env)
    assert plain.returncode == full.returncode != 0
    assert plain.stderr == full.stderr and plain.stderr.count("\n") == 1
    assert plain.stdout == full.stdout == ""


def test_outside_any_project_the_plain_form_says_what_the_full_cli_says(
        tmp_path: Path, fake_claude: dict[str, str]) -> None:
    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()
    plain = cos("bg", "--isolation", "none", "do it", cwd=elsewhere, env=fake_claude)
    full = cos("bg", "--cwd", str(elsewhere), "--isolation", "none", "do it", cwd=elsewhere,
               env=fake_claude)
    assert plain.returncode == full.returncode != 0
    assert plain.stderr == full.stderr and "is in no project" in plain.stderr
