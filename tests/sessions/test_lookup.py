"""A session found by what a user types (sessions/lookup.py, sessions/resume.py): the id as
`cos sessions` shows it, the whole id, a start of it or of the agent's own id, from every
command that takes a session; an ambiguous key lists its candidates (exit 5); another
project's cos id gets the command to run there (exit 4), as its native id does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from coding_os import api
from tests.helpers import cos, git, one_line_failure

NATIVE = ("a6dc7b35-0000-4000-8000-000000000001", "a6dc7b99-0000-4000-8000-000000000002")


def two_sessions(repo: Path) -> list[str]:
    return [api.create_session("claude", native_id=native, title=f"session {number}",
                               cwd=str(repo))
            for number, native in enumerate(NATIVE)]


def table(repo: Path, *args: str) -> list[list[str]]:
    listed = cos(*args, cwd=repo)
    assert listed.returncode == 0, listed.stderr
    return [line.split() for line in listed.stdout.splitlines()]


@pytest.mark.slow
def test_the_sessions_table_has_a_header_and_short_ids_every_command_takes(repo: Path) -> None:
    ids = two_sessions(repo)
    header, *rows = table(repo, "sessions")
    assert header[:3] == ["ID", "AGENT", "LAST"]
    shown = {row[0] for row in rows}
    assert len(shown) == 2 and all(8 <= len(short) <= 12 for short in shown)
    for short in shown:
        full = next(value for value in ids if value.endswith(short))
        assert cos("sessions", "show", short, "--json", cwd=repo).returncode == 0
        assert f"id           {full}" in cos("sessions", "show", short, cwd=repo).stdout
        assert cos("export", short, cwd=repo).returncode == 0
        assert cos("sessions", "rename", short, f"named {short}", cwd=repo).returncode == 0
    assert {row[-1] for row in table(repo, "sessions")[1:]} == shown  # "named SHORT"


def test_a_start_of_the_agents_own_id_or_of_the_cos_id_names_the_session(repo: Path) -> None:
    ids = two_sessions(repo)
    assert f"id           {ids[0]}" in cos("sessions", "show", "a6dc7b35", cwd=repo).stdout
    assert f"id           {ids[1]}" in cos("sessions", "show", ids[1][:-2], cwd=repo).stdout


def test_an_ambiguous_key_lists_the_candidates_one_a_line_and_exits_5(repo: Path) -> None:
    ids = two_sessions(repo)
    for args in (("sessions", "show", "a6dc7b"), ("export", "a6dc7b"),
                 ("resume", "a6dc7b", "--dry-run"), ("checkpoints", "--session", "a6dc7b")):
        refused = cos(*args, cwd=repo)
        assert refused.returncode == 5, (args, refused.stderr)
        first, *candidates = refused.stderr.splitlines()
        assert first.startswith("cos: 'a6dc7b' names 2 sessions")
        assert sorted(line.strip() for line in candidates) == sorted(ids)
        assert "Traceback" not in refused.stderr


@pytest.mark.slow
def test_checkpoints_of_a_session_take_its_native_id_and_its_short_id(repo: Path) -> None:
    ids = two_sessions(repo)
    (repo / "a.txt").write_text("one\n", encoding="utf-8")
    taken = cos("checkpoint", "create", "--session", ids[0], cwd=repo)
    assert taken.returncode == 0, taken.stderr
    short = next(row[0] for row in table(repo, "sessions")[1:] if ids[0].endswith(row[0]))
    for key in (ids[0], NATIVE[0], "a6dc7b35", short):
        header, *rows = table(repo, "checkpoints", "--session", key)
        assert header[0] == "ID" and len(rows) == 1, key
    assert "no session" in one_line_failure(
        cos("checkpoints", "--session", "f00dfeed", cwd=repo), 1)


def test_another_projects_cos_id_gets_the_command_to_run_there(repo: Path,
                                                               tmp_path: Path) -> None:
    ids = two_sessions(repo)
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    there = one_line_failure(cos("resume", ids[0], "--dry-run", cwd=other), 4)
    assert there == f"cos: cd {repo} && cos resume {ids[0]}"
    assert not (other / ".coding-os" / "claude" / "transcripts" / f"{ids[0]}.jsonl").exists()


@pytest.mark.slow
def test_another_projects_short_id_as_its_table_shows_it_gets_the_command_to_run_there(
        repo: Path, tmp_path: Path) -> None:
    ids = two_sessions(repo)
    shown = {row[0]: next(full for full in ids if full.endswith(row[0]))
             for row in table(repo, "sessions")[1:]}
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    for short, full in shown.items():
        there = one_line_failure(cos("resume", short, "--dry-run", cwd=other), 4)
        assert there == f"cos: cd {repo} && cos resume {full}"
        assert f"id           {full}" in cos("sessions", "show", short, cwd=other).stdout
    common = os.path.commonprefix(ids)  # the start both ids share: ambiguous there as here
    refused = cos("resume", common, "--dry-run", cwd=other)
    assert refused.returncode == 5, refused.stderr
    assert sorted(line.strip() for line in refused.stderr.splitlines()[1:]) == sorted(ids)
    assert "no session" in one_line_failure(cos("resume", "f00dfeed", "--dry-run", cwd=other), 1)
