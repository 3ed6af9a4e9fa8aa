"""`cos agents --all-hosts` (DESIGN.md §8): each host publishes the rows of its background jobs
to the shared PostgreSQL storage, every host lists them with their host, and a command of a job
only another host has is refused with the command to run there. Two hosts are two HOMEs, two
checkouts of one repository and two COS_HOSTs on one PostgreSQL schema, each `cos` a
subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import cos, git, stop_runners_of, until


class Host:
    """One host: its HOME, its checkout of the repository and its environment."""

    def __init__(self, name: str, home: Path, checkout: Path, url: str | None) -> None:
        self.name, self.home, self.checkout = name, home, checkout
        self.env = {"HOME": str(home), "COS_HOST": name,
                    "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
        if url is not None:
            self.env["COS_DATABASE_URL"] = url

    def cos(self, *args: str, cwd: Path | None = None) -> Any:
        return cos(*args, cwd=cwd or self.checkout, env=self.env)

    def rows(self, *args: str, cwd: Path | None = None) -> list[dict[str, Any]]:
        done = self.cos("agents", "--json", *args, cwd=cwd)
        assert done.returncode == 0, done.stderr
        rows: list[dict[str, Any]] = json.loads(done.stdout)
        return rows

    def bg(self, command: str, name: str) -> str:
        done = self.cos("bg", "--json", "--isolation", "none", "--name", name, "--exec", command)
        assert done.returncode == 0, done.stderr
        job: str = json.loads(done.stdout)["id"]
        return job

    def stop_all(self) -> None:
        stop_runners_of(self.home)
        self.cos("daemon", "stop")


def _clone(repo: Path, into: Path) -> Path:
    git(into.parent, "clone", "-q", str(repo), str(into))
    with open(into / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("/.coding-os/\n")
    return into


def _hosts(isolated_env: Path, project: Path, tmp_path: Path,
           url: str | None) -> Iterator[tuple[Host, Host]]:
    home_b = tmp_path / "home-b"
    home_b.mkdir()
    a = Host("a", isolated_env, project, url)
    b = Host("b", home_b, _clone(project, tmp_path / "checkout-b"), url)
    try:
        yield a, b
    finally:
        a.stop_all()
        b.stop_all()


@pytest.fixture
def hosts(isolated_env: Path, project: Path, tmp_path: Path,
          pg_url: str) -> Iterator[tuple[Host, Host]]:
    """Host a (this test's HOME, the `project` checkout) and host b (another HOME, a clone of
    it), sharing one fresh PostgreSQL schema."""
    yield from _hosts(isolated_env, project, tmp_path, pg_url)


@pytest.mark.slow
def test_every_hosts_jobs_are_listed_with_their_host_this_hosts_live(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    on_a = a.bg("sleep 60", "sleeper-a")
    on_b = b.bg("sleep 60", "sleeper-b")

    # Host a's daemon publishes the new job on its sweep; nobody on host a lists it.
    def with_a() -> dict[str, dict[str, Any]] | None:
        rows = {row["id"]: row for row in b.rows("--all-hosts")}
        return rows if on_a in rows else None

    listed = until(with_a, "host a's daemon to publish")
    assert set(listed) == {on_a, on_b}
    assert listed[on_a]["host"] == "a" and listed[on_b]["host"] == "b"
    assert listed[on_a]["name"] == "sleeper-a" and listed[on_a]["cwd"] == str(a.checkout)
    assert isinstance(listed[on_a]["publishedAt"], int) and "publishedAt" not in listed[on_b]
    assert [row["id"] for row in b.rows()] == [on_b]  # without --all-hosts: this host's only

    text = b.cos("agents", "--all-hosts")
    assert text.returncode == 0, text.stderr
    line_a = next(line for line in text.stdout.splitlines() if on_a in line)
    assert line_a.startswith("a ") and "as published" in line_a

    # Host a sees b's job the same way; b's row as b published it when it listed.
    listed = {row["id"]: row for row in a.rows("--all-hosts")}
    assert listed[on_b]["host"] == "b" and listed[on_a]["host"] == "a"


@pytest.mark.slow
def test_a_job_that_ends_on_its_host_is_published_by_that_hosts_daemon(
        hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    job = a.bg("sleep 1; echo done", "short")  # nobody on host a lists it after this
    state = a.home / ".coding-os" / "jobs" / job / "state.json"

    def published_as_it_ended() -> bool:
        ended = json.loads(state.read_text())["state"]
        return ended in ("done", "failed") and any(
            row["id"] == job and row["state"] == ended for row in b.rows("--all-hosts"))

    until(published_as_it_ended, "host a's daemon to publish the job's end")


@pytest.mark.slow
def test_another_project_does_not_list_the_repositorys_jobs_unless_all(
        hosts: tuple[Host, Host], tmp_path: Path) -> None:
    a, b = hosts
    job = a.bg("sleep 60", "here")
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    git(other, "commit", "-q", "--allow-empty", "-m", "another repository")
    until(lambda: [row["id"] for row in b.rows("--all-hosts", "--all", cwd=other)] == [job],
          "host a's daemon to publish")
    assert b.rows("--all-hosts", cwd=other) == []


@pytest.mark.slow
def test_a_command_for_a_job_of_another_host_is_refused_naming_the_command_to_run_there(
        hosts: tuple[Host, Host]) -> None:
    # One job serves every command: each is refused, and the job is checked untouched after each.
    a, b = hosts
    job = a.bg("sleep 60", "remote")
    assert a.rows()  # host a listed (and published) its jobs

    for command in (("attach",), ("reply", "hello"), ("approve",), ("stop",), ("logs",),
                    ("respawn",), ("rm",)):
        for key in (job, "remote", job[:6]):
            done = b.cos(command[0], key, *command[1:])
            assert done.returncode == 4, (command, done.stdout, done.stderr)
            assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, command
            assert f"on host a: cos {command[0]} {job}" in done.stderr
        # The job is untouched on its own host.
        [row] = a.rows()
        assert row["id"] == job and row["state"] != "stopped", command


def test_a_job_no_host_has_is_still_not_found(hosts: tuple[Host, Host]) -> None:
    _, b = hosts
    done = b.cos("attach", "no-such-job")
    assert done.returncode == 1 and "no job 'no-such-job'" in done.stderr


@pytest.mark.slow
def test_on_sqlite_all_hosts_lists_this_hosts_jobs_with_their_host(
        isolated_env: Path, project: Path, tmp_path: Path) -> None:
    for a, _ in _hosts(isolated_env, project, tmp_path, None):
        job = a.bg("sleep 60", "local")
        [row] = a.rows("--all-hosts")
        assert row["id"] == job and row["host"] == "a" and "publishedAt" not in row
        done = a.cos("attach", "missing")
        assert done.returncode == 1
