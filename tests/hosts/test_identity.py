"""hosts/identity.py: the name of this host and the identity of a project across hosts."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from coding_os.errors import InvalidInput
from coding_os.hosts.identity import (
    host_roots,
    normalise_origin,
    project_key,
    project_keys,
    register_project,
    this_host,
)
from coding_os.storage.sqlite import SQLiteStorage
from tests.helpers import git


def test_cos_host_names_this_host_when_it_is_valid() -> None:
    assert this_host({"COS_HOST": "build-01.lab_2"}) == "build-01.lab_2"
    assert this_host({"COS_HOST": "x" * 64}) == "x" * 64


@pytest.mark.parametrize("bad", ["", "has space", "slash/y", "x" * 65, "ünï", "a\nb"])
def test_an_invalid_cos_host_is_refused_with_a_one_line_message(bad: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        this_host({"COS_HOST": bad})
    assert "\n" not in str(caught.value) and "host name" in str(caught.value)


def test_without_cos_host_the_hostname_is_used_made_valid() -> None:
    name = this_host({})
    assert 1 <= len(name) <= 64
    assert this_host({"COS_HOST": name}) == name
    if all(c.isalnum() or c in "._-" for c in socket.gethostname()):
        assert name == socket.gethostname()[:64]


@pytest.mark.parametrize("url", ["https://github.com/Org/Repo.git", "git@GitHub.com:Org/Repo.git",
                                 "ssh://git@github.com:22/Org/Repo/",
                                 "https://user:secret@github.com/Org/Repo"])
def test_origin_urls_of_one_repository_normalise_alike(url: str) -> None:
    assert normalise_origin(url) == "github.com/Org/Repo"


def test_a_local_origin_stays_a_path() -> None:
    assert normalise_origin("/srv/git/repo.git") == "/srv/git/repo"
    assert normalise_origin("file:///srv/git/repo.git/") == "/srv/git/repo"


def test_a_repository_is_known_by_its_root_commit_then_its_origin(repo: Path) -> None:
    root_commit = git(repo, "rev-list", "--max-parents=0", "HEAD").strip()
    assert project_key(str(repo)) == f"git:{root_commit}"
    git(repo, "remote", "add", "origin", "git@example.com:team/app.git")
    (repo / "more.txt").write_text("x\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "more")
    assert project_keys(str(repo)) == [f"git:{root_commit}", "origin:example.com/team/app"]


def test_the_lowest_root_commit_names_a_history_with_several_roots(repo: Path) -> None:
    git(repo, "checkout", "-q", "--orphan", "other")
    (repo / "other.txt").write_text("o\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "other root")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--allow-unrelated-histories", "-m", "join", "other")
    roots = git(repo, "rev-list", "--max-parents=0", "HEAD").split()
    assert len(roots) == 2
    assert project_key(str(repo)) == f"git:{min(roots)}"


def test_a_directory_without_a_repository_has_no_project_key(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert project_key(str(plain)) is None
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    assert project_key(str(empty)) is None
    git(empty, "remote", "add", "origin", "https://example.com/x.git")
    assert project_key(str(empty)) == "origin:example.com/x"


def test_a_shallow_clone_is_known_by_its_origin_and_meets_the_full_clone_there(
        repo: Path, tmp_path: Path) -> None:
    for n in range(3):
        (repo / f"f{n}.txt").write_text(f"{n}\n", encoding="utf-8")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"c{n}")
    full = tmp_path / "host-a" / "app"
    shallow = tmp_path / "host-b" / "checkout"
    git(tmp_path, "clone", "-q", f"file://{repo}", str(full))
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    assert project_key(str(full)) == project_key(str(repo))
    assert project_key(str(shallow)) == f"origin:{repo}"
    assert project_keys(str(full))[1] == f"origin:{repo}"
    with SQLiteStorage(str(tmp_path / "db" / "coding-os.db")) as storage:
        register_project(storage, str(full), "alpha")
        register_project(storage, str(shallow), "beta")
        expected = {"alpha": str(full), "beta": str(shallow)}
        assert host_roots(storage, str(shallow)) == expected
        assert host_roots(storage, str(full)) == expected
