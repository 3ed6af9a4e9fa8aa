"""git/objects.py against git itself: every object of real repositories — loose,
packed with deep delta chains, in several packs, reached through alternates, from a linked
worktree — reads as `git cat-file` gives it, and `tree_entry` as `git ls-tree` does; what it
cannot read (a SHA-256 repository, an object it does not have, a damaged one) it says so."""

from __future__ import annotations

import os
import random
import subprocess
import zlib
from pathlib import Path

import pytest

from coding_os.git import repo
from coding_os.git.objects import Objects, Unreadable, objects_of
from tests.helpers import commit_all, git


def git_bytes(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, check=True,
                          capture_output=True).stdout


def history(repo: Path, commits: int, seed: int = 1) -> None:
    """Commits that edit files a little each time (so a repack makes long delta chains), with
    binary and empty files, odd names, and a file over 64 KiB."""
    rng = random.Random(seed)
    lines = [f"line {n} {rng.random()}\n".encode() for n in range(400)]
    (repo / "dir with space").mkdir(exist_ok=True)
    for number in range(commits):
        at = rng.randrange(len(lines))
        lines[at] = f"edited {number} {rng.random()}\n".encode()
        (repo / "a.txt").write_bytes(b"".join(lines))
        (repo / "a.txt.orig").write_bytes(b"".join(reversed(lines)))
        (repo / "dir with space" / "b").write_bytes(b"".join(lines[:number + 1]))
        (repo / "bin.dat").write_bytes(os.urandom(70_000) if number % 5 == 0
                                       else (repo / "bin.dat").read_bytes()[:-10] + b"x" * 10)
        (repo / "empty").write_bytes(b"")
        (repo / os.fsdecode(b"caf\xe9.txt")).write_bytes(f"{number}\n".encode())
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", f"commit {number}")


def every_object(repo: Path) -> list[str]:
    out = git_bytes(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return out.decode().split()


def assert_reads_as_git(repo: Path, objects: Objects) -> int:
    shas = every_object(repo)
    assert shas
    for sha in shas:
        kind = git_bytes(repo, "cat-file", "-t", sha).decode().strip()
        content = git_bytes(repo, "cat-file", kind, sha)
        assert objects.read(sha) == (kind, content), sha
    return len(shas)


@pytest.fixture
def repo_with_history(repo: Path) -> Path:
    """The `repo` fixture with 30 commits of history."""
    history(repo, 30)
    return repo


@pytest.mark.slow
def test_loose_objects_read_as_git_gives_them(repo_with_history: Path) -> None:
    assert not list((repo_with_history / ".git" / "objects" / "pack").glob("*.pack"))
    objects = objects_of(str(repo_with_history))
    assert objects is not None
    assert assert_reads_as_git(repo_with_history, objects) > 100


@pytest.mark.slow
def test_packed_objects_with_deep_delta_chains_read_as_git_gives_them(
        repo_with_history: Path) -> None:
    git(repo_with_history, "repack", "-adfq", "--depth=60", "--window=50")
    assert not any(p.name != "info" and p.name != "pack"
                   for p in (repo_with_history / ".git" / "objects").iterdir())
    verify = git(repo_with_history, "verify-pack", "-v",
                 str(next((repo_with_history / ".git" / "objects" / "pack").glob("*.idx"))))
    assert "chain length = 10" in verify or "chain length = 20" in verify, verify[-500:]
    assert assert_reads_as_git(repo_with_history,
                               Objects(str(repo_with_history / ".git" / "objects"))) > 100


@pytest.mark.slow
def test_objects_spread_over_several_packs_and_loose_ones_are_all_found(
        repo_with_history: Path) -> None:
    git(repo_with_history, "repack", "-dq")
    history(repo_with_history, 10, seed=2)
    git(repo_with_history, "repack", "-dq")  # a second pack, of the new objects
    history(repo_with_history, 3, seed=3)  # and some loose ones
    assert len(list((repo_with_history / ".git" / "objects" / "pack").glob("*.pack"))) == 2
    assert_reads_as_git(repo_with_history, Objects(str(repo_with_history / ".git" / "objects")))


@pytest.mark.slow
def test_ref_deltas_of_a_thin_pack_made_whole_are_read(tmp_path: Path,
                                                       repo_with_history: Path) -> None:
    """Without `--delta-base-offset`, pack-objects writes REF_DELTA entries; `index-pack
    --fix-thin` keeps them and appends their bases."""
    git(repo_with_history, "repack", "-adq")
    old = git(repo_with_history, "rev-parse", "HEAD")
    history(repo_with_history, 5, seed=4)
    new = git(repo_with_history, "rev-parse", "HEAD")
    thin = git_bytes(repo_with_history, "pack-objects", "--thin", "--stdout", "--revs", "-q",
                     stdin=f"{new}\n^{old}\n".encode())
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--no-local", str(repo_with_history), str(clone))
    git(clone, "reset", "-q", "--hard", old)
    git(clone, "repack", "-adq")
    subprocess.run(["git", "index-pack", "--stdin", "--fix-thin"], cwd=clone, input=thin,
                   check=True, capture_output=True)
    packs = sorted((clone / ".git" / "objects" / "pack").glob("*.idx"), key=os.path.getmtime)
    assert b"delta" in git_bytes(clone, "verify-pack", "-v", str(packs[-1]))
    objects = Objects(str(clone / ".git" / "objects"))
    listed = git_bytes(repo_with_history, "rev-list", "--objects", f"{old}..{new}").splitlines()
    for sha in (line.split(b" ")[0].decode() for line in listed):
        if len(sha) == 40:
            kind = git_bytes(clone, "cat-file", "-t", sha).decode().strip()
            assert objects.read(sha) == (kind, git_bytes(clone, "cat-file", kind, sha))


@pytest.mark.slow
def test_alternates_and_linked_worktrees_read_the_shared_objects(tmp_path: Path,
                                                                 repo_with_history: Path) -> None:
    git(repo_with_history, "repack", "-adq")
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repo_with_history), str(shared))
    assert (shared / ".git" / "objects" / "info" / "alternates").exists()
    objects = objects_of(str(shared))
    assert objects is not None
    assert_reads_as_git(shared, objects)
    linked = tmp_path / "linked"
    git(repo_with_history, "worktree", "add", "-q", str(linked))
    objects = objects_of(str(linked))
    assert objects is not None
    head = git(linked, "rev-parse", "HEAD")
    assert objects.tree_entry(head, "a.txt") == (
        0o100644, git(linked, "rev-parse", "HEAD:a.txt"))


@pytest.mark.slow
def test_tree_entries_are_those_git_ls_tree_lists(repo_with_history: Path) -> None:
    git(repo_with_history, "repack", "-adq")
    history(repo_with_history, 2, seed=5)
    (repo_with_history / "run.sh").write_text("#!/bin/sh\n")
    (repo_with_history / "run.sh").chmod(0o755)
    (repo_with_history / "link").symlink_to("a.txt")
    git(repo_with_history, "add", "-A")
    git(repo_with_history, "commit", "-q", "-m", "modes")
    objects = Objects(str(repo_with_history / ".git" / "objects"))
    head = git(repo_with_history, "rev-parse", "HEAD")
    listed = git_bytes(repo_with_history, "ls-tree", "-r", "-t", "-z", head).split(b"\0")
    for record in filter(None, listed):
        meta, _, path = record.partition(b"\t")
        mode, _, sha = meta.split(b" ")
        name = path.decode("utf-8", "surrogateescape")
        assert objects.tree_entry(head, name) == (int(mode, 8), sha.decode()), name
    for absent in ("nope", "a.txt/below", "dir with space/nope", "a.tx", "a.txt.orig.x"):
        assert objects.tree_entry(head, absent) is None


@pytest.mark.slow
def test_a_repack_in_the_same_process_is_followed(repo_with_history: Path) -> None:
    first = objects_of(str(repo_with_history))
    assert first is not None
    head = git(repo_with_history, "rev-parse", "HEAD")
    assert first.tree_entry(head, "a.txt") is not None
    git(repo_with_history, "repack", "-adq")  # the loose objects are gone, now in a new pack
    git(repo_with_history, "prune-packed")
    again = objects_of(str(repo_with_history))
    assert again is not None and again is not first
    assert_reads_as_git(repo_with_history, again)


def test_what_it_cannot_read_it_says_so(tmp_path: Path, repo_with_history: Path) -> None:
    objects = Objects(str(repo_with_history / ".git" / "objects"))
    with pytest.raises(Unreadable):
        objects.read("0" * 40)
    with pytest.raises(Unreadable):
        objects.read("not hex at all, forty characters long..")
    # A damaged loose object.
    blob = git(repo_with_history, "rev-parse", "HEAD:empty")
    path = repo_with_history / ".git" / "objects" / blob[:2] / blob[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 5\0abc"))
    with pytest.raises(Unreadable):
        Objects(str(repo_with_history / ".git" / "objects")).read(blob)
    # A SHA-256 repository is left to git.
    other = tmp_path / "sha256"
    other.mkdir()
    git(other, "init", "-q", "--object-format=sha256")
    assert objects_of(str(other)) is None
    # Not a repository.
    assert objects_of(str(tmp_path)) is None
    assert repo.git_dirs(str(tmp_path)) is None


# -- alternates repacked, ref deltas, a pack without its index ---------------------------------


def _git_out(cwd: Path, *args: str) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True).stdout


def _revisions(repo: Path, count: int, name: str = "f.txt") -> None:
    """`count` commits each changing one line of a 300-line file (long delta chains)."""
    lines = [f"line {n}\n" for n in range(300)]
    for number in range(count):
        lines[number % 300] = f"edited {number}\n"
        (repo / name).write_text("".join(lines))
        git(repo, "add", name)
        git(repo, "commit", "-q", "-m", str(number))


def _reads_as_git(repo: Path, objects: Objects) -> None:
    out = _git_out(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
    for line in out.decode().splitlines():
        sha, kind = line.split()
        try:
            found = objects.read(sha)
        except Unreadable:
            continue  # left to git: allowed
        assert found == (kind, _git_out(repo, "cat-file", kind, sha)), sha


def test_an_alternate_repacked_after_the_first_read(tmp_path: Path, repo: Path) -> None:
    _revisions(repo, 5)
    (repo / "g.txt").write_text("in a second pack\n")
    commit_all(repo)
    git(repo, "repack", "-dq")  # one pack for the history
    (repo / "h.txt").write_text("a third\n")
    commit_all(repo)
    git(repo, "repack", "-dq")  # and a second one
    clone = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(clone))
    blob = git(repo, "rev-parse", "HEAD:h.txt")
    objects = objects_of(str(clone))
    assert objects is not None
    with pytest.raises(Unreadable):
        objects.read("0" * 40)  # the packs are listed, none of their data mapped yet
    git(repo, "repack", "-adq")  # the source repository packs anew: the old packs are gone
    again = objects_of(str(clone))
    assert again is not None
    try:
        assert again.read(blob) == ("blob", b"a third\n")
    except Unreadable:
        pass  # left to git: fine


@pytest.mark.slow
def test_a_repository_packed_with_ref_deltas_only_reads_as_git(repo: Path) -> None:
    _revisions(repo, 60)
    git(repo, "-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50",
        "--window=50")
    objects = objects_of(str(repo))
    assert objects is not None
    head = git(repo, "rev-parse", "HEAD")
    assert objects.tree_entry(head, "f.txt") is not None
    _reads_as_git(repo, objects)


def test_nested_alternates_and_a_pack_without_its_index(tmp_path: Path, repo: Path) -> None:
    """Objects only an alternate of an alternate has, or only a pack whose .idx is gone, are
    not found here (git is asked), never read wrong."""
    _revisions(repo, 3)
    middle = tmp_path / "middle"
    git(tmp_path, "clone", "-q", "--shared", str(repo), str(middle))
    last = tmp_path / "last"
    git(tmp_path, "clone", "-q", "--shared", str(middle), str(last))
    objects = objects_of(str(last))
    assert objects is not None
    head = git(last, "rev-parse", "HEAD")
    try:
        assert objects.tree_entry(head, "f.txt") == (
            0o100644, git(last, "rev-parse", "HEAD:f.txt"))
    except Unreadable:
        pass
    blob = git(repo, "rev-parse", "HEAD:f.txt")
    git(repo, "gc", "-q")
    pack_dir = repo / ".git" / "objects" / "pack"
    for idx in pack_dir.glob("*.idx"):
        idx.unlink()
    with pytest.raises(Unreadable):
        Objects(str(repo / ".git" / "objects")).read(blob)
