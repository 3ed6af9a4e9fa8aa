"""What a checkpoint covers, as a user would take and rewind one (`cos checkpoint create`,
`cos rewind --code`): worktree mode (tracked and untracked-not-ignored files, every ignore
source respected, `.git` and `.coding-os` never), symlinks, modes, empty and binary files, files
over the limit, plain directories, nested repositories, and tracked mode."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from coding_os.checkpoints.store import ObjectStore
from tests.helpers import commit_all, cos, create, git, raw_bytes, rewind, rewind_ok, tree


def manifest(root: Path, record: dict[str, object]) -> dict[str, object]:
    store = ObjectStore(str(root / ".coding-os" / "checkpoints"))
    return json.loads(store.get(str(record["manifest"])))


def covered(root: Path, record: dict[str, object]) -> set[str]:
    """Every path the manifest's overlays hold the bytes of (not absent, not skipped)."""
    paths = set()
    for layer in manifest(root, record)["layers"]:  # type: ignore[index]
        prefix = layer["dir"]
        paths.update(f"{prefix}/{p}" if prefix else p
                     for p, entry in layer["overlay"].items()
                     if entry is not None and entry[0] != "s")
    return paths


def scramble(root: Path) -> None:
    """What an agent's shell does: edits, deletes, moves, new files, modes, symlinks retargeted."""
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).parts
        if rel[0] in (".git", ".coding-os") or ".git" in rel:
            continue
        if path.is_symlink():
            path.unlink()
            path.symlink_to("elsewhere")
        elif path.is_file():
            if path.name.endswith("2"):
                path.unlink()
            else:
                os.chmod(path, 0o644)
                path.write_bytes(b"scrambled " + path.name.encode())
    (root / "brand-new.txt").write_text("new\n", encoding="utf-8")


def test_worktree_covers_tracked_and_untracked_files_and_restores_them_exactly(
        project: Path) -> None:
    (project / "src").mkdir()
    (project / "src" / "tracked.py").write_text("print(1)\n", encoding="utf-8")
    (project / "src" / "tracked2.py").write_text("print(2)\n", encoding="utf-8")
    commit_all(project)
    (project / "src" / "tracked.py").write_text("print('edited')\n", encoding="utf-8")
    (project / "untracked.txt").write_text("not yet added\n", encoding="utf-8")
    (project / "deep" / "er").mkdir(parents=True)
    (project / "deep" / "er" / "note2.md").write_text("deep\n", encoding="utf-8")
    expected = tree(project)
    record = create(project)
    scramble(project)
    shutil.rmtree(project / "deep")
    assert tree(project) != expected
    report = rewind_ok(project, str(record["id"]), "--code")
    assert report["code"]["applied"] is True  # type: ignore[index]
    assert tree(project) == expected


def test_gitignore_info_exclude_and_the_global_excludes_file_are_respected(
        project: Path, isolated_env: Path) -> None:
    (project / ".gitignore").write_text("*.log\nbuild/\n", encoding="utf-8")
    with open(project / ".git" / "info" / "exclude", "a", encoding="utf-8") as f:
        f.write("secret.env\n")
    (isolated_env / "global-ignore").write_text("*.swp\n", encoding="utf-8")
    git(project, "config", "--global", "core.excludesFile", str(isolated_env / "global-ignore"))
    for name in ("app.log", "build/out.bin", "secret.env", ".notes.swp", "kept.txt"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(name, encoding="utf-8")
    record = create(project)
    assert covered(project, record) == {".gitignore", "kept.txt"}
    # A rewind never touches what is ignored, even when it changed.
    (project / "app.log").write_text("later\n", encoding="utf-8")
    (project / "kept.txt").write_text("later\n", encoding="utf-8")
    rewind_ok(project, str(record["id"]), "--code")
    assert (project / "kept.txt").read_text(encoding="utf-8") == "kept.txt"
    assert (project / "app.log").read_text(encoding="utf-8") == "later\n"


def test_the_state_dir_and_git_dir_are_never_captured_even_when_git_does_not_ignore_them(
        repo: Path) -> None:
    # Without `cos install` nothing keeps .coding-os out of git status; it must stay out anyway.
    (repo / "work.txt").write_text("work\n", encoding="utf-8")
    first = create(repo)
    second = create(repo)
    for record in (first, second):
        assert not any(p.startswith((".coding-os", ".git/")) for p in covered(repo, record))


def test_a_rewind_in_a_repository_without_the_exclude_line_restores_the_tree(repo: Path) -> None:
    record = create(repo)
    (repo / "README.md").write_text("changed\n", encoding="utf-8")
    (repo / "new.txt").write_text("new\n", encoding="utf-8")
    proc = rewind(repo, str(record["id"]), "--code")
    assert proc.returncode == 0, proc.stderr
    assert tree(repo) == {"README.md": ("f", b"hello\n", False)}
    assert (repo / ".coding-os" / "checkpoints" / "points").is_dir()


def test_a_first_checkpoint_of_a_clean_repository_without_the_exclude_line_writes_one_object(
        repo: Path) -> None:
    assert create(repo)["objects_written"] <= 1


def test_a_file_over_the_limit_is_listed_in_skipped_never_silently(project: Path) -> None:
    (project / ".coding-os.yaml").write_text("checkpoints: {max_file_bytes: 1000}\n",
                                             encoding="utf-8")
    (project / "big.bin").write_bytes(b"x" * 5000)
    (project / "small.txt").write_bytes(b"y" * 999)
    record = create(project)
    assert [item[0] for item in record["skipped"]] == ["big.bin"]  # type: ignore[union-attr]
    assert record["skipped"][0][2] == 5000  # type: ignore[index]
    assert "big.bin" not in covered(project, record) and "small.txt" in covered(project, record)
    proc = cos("checkpoint", "create", cwd=project)
    assert proc.returncode == 0 and "skipped big.bin" in proc.stderr
    listed = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    assert listed[0]["skipped"][0][0] == "big.bin"


def test_symlinks_exec_bits_empty_and_binary_files_are_restored_as_they_were(
        project: Path) -> None:
    (project / "bin").mkdir()
    (project / "bin" / "run.sh").write_text("#!/bin/sh\necho hi\n", encoding="utf-8")
    os.chmod(project / "bin" / "run.sh", 0o755)
    (project / "empty").write_bytes(b"")
    (project / "blob.bin").write_bytes(bytes(range(256)) * 8 + b"\0\0\xff")
    (project / "link-to-readme").symlink_to("README.md")
    (project / "dangling").symlink_to("../nowhere/at/all")
    (project / "bin" / "abs-link").symlink_to("/etc/hostname")
    commit_all(project, "some committed")
    (project / "untracked-exec").write_text("#!/bin/sh\n", encoding="utf-8")
    os.chmod(project / "untracked-exec", 0o700)
    (project / "untracked-empty").write_bytes(b"")
    (project / "untracked-link").symlink_to("bin")
    expected = tree(project)
    record = create(project)
    scramble(project)
    os.chmod(project / "bin" / "run.sh", 0o644)
    (project / "empty").write_bytes(b"no longer empty")
    (project / "link-to-readme").unlink()
    (project / "link-to-readme").write_text("a file now\n", encoding="utf-8")
    rewind_ok(project, str(record["id"]), "--code")
    assert tree(project) == expected
    assert (project / "link-to-readme").is_symlink()
    assert os.readlink(project / "dangling") == "../nowhere/at/all"
    assert os.stat(project / "untracked-exec").st_mode & 0o777 == 0o700
    assert os.stat(project / "bin" / "run.sh").st_mode & 0o111


def test_a_directory_without_git_is_covered_with_its_cosignore(tmp_path: Path) -> None:
    plain = (tmp_path / "plain").resolve()
    (plain / "sub" / "deeper").mkdir(parents=True)
    (plain / ".cosignore").write_text("*.tmp\ncache/\n/top-only.txt\n", encoding="utf-8")
    (plain / "sub" / "a.txt").write_text("a\n", encoding="utf-8")
    (plain / "sub" / "deeper" / "b.bin").write_bytes(b"\0\1\2")
    (plain / "sub" / "x.tmp").write_text("ignored\n", encoding="utf-8")
    (plain / "cache").mkdir()
    (plain / "cache" / "c.txt").write_text("ignored\n", encoding="utf-8")
    (plain / "top-only.txt").write_text("ignored\n", encoding="utf-8")
    (plain / "sub" / "top-only.txt").write_text("kept: the pattern is anchored\n",
                                                encoding="utf-8")
    (plain / "link").symlink_to("sub/a.txt")
    os.chmod(plain / "sub" / "a.txt", 0o755)
    record = create(plain)
    assert covered(plain, record) == {".cosignore", "sub/a.txt", "sub/deeper/b.bin",
                                      "sub/top-only.txt", "link"}
    expected = tree(plain)
    (plain / "sub" / "a.txt").write_text("changed\n", encoding="utf-8")
    os.chmod(plain / "sub" / "a.txt", 0o644)
    (plain / "sub" / "deeper" / "b.bin").unlink()
    (plain / "new.txt").write_text("new\n", encoding="utf-8")
    (plain / "sub" / "x.tmp").write_text("changed but ignored\n", encoding="utf-8")
    rewind_ok(plain, str(record["id"]), "--code")
    after = tree(plain)
    assert after.pop("sub/x.tmp") == ("f", b"changed but ignored\n", False)
    expected.pop("sub/x.tmp")
    assert after == expected


def test_a_nested_clone_is_restored_and_its_git_dir_is_untouched(project: Path,
                                                                  tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "main")
    (upstream / "lib.py").write_text("v = 1\n", encoding="utf-8")
    (upstream / "other.py").write_text("w = 1\n", encoding="utf-8")
    commit_all(upstream, "lib")
    git(project, "clone", "-q", str(upstream), "vendor/lib")
    (project / "vendor" / "lib" / "lib.py").write_text("v = 2  # local edit\n", encoding="utf-8")
    (project / "vendor" / "lib" / "scratch.txt").write_text("untracked in the clone\n",
                                                            encoding="utf-8")
    expected = tree(project)
    names_before = sorted(p.name for p in (project / "vendor" / "lib").iterdir())
    record = create(project)
    assert {"vendor/lib/lib.py", "vendor/lib/scratch.txt"} <= covered(project, record)
    layers = [layer["dir"] for layer in manifest(project, record)["layers"]]  # type: ignore[index]
    assert layers == ["", "vendor/lib"]
    nested_git = raw_bytes(project / "vendor" / "lib" / ".git")
    (project / "vendor" / "lib" / "lib.py").write_text("v = 3\n", encoding="utf-8")
    (project / "vendor" / "lib" / "other.py").unlink()
    (project / "vendor" / "lib" / "scratch.txt").unlink()
    (project / "vendor" / "lib" / "junk.txt").write_text("junk\n", encoding="utf-8")
    rewind_ok(project, str(record["id"]), "--code")
    assert tree(project) == expected
    assert raw_bytes(project / "vendor" / "lib" / ".git") == nested_git
    assert sorted(p.name for p in (project / "vendor" / "lib").iterdir()) == names_before
    assert (project / "vendor" / "lib" / ".git").is_dir()


def test_a_first_checkpoint_of_a_clean_repository_writes_only_its_manifest(
        project: Path) -> None:
    for number in range(50):
        (project / f"f{number}.txt").write_text(f"content {number}\n" * 20, encoding="utf-8")
    commit_all(project)
    record = create(project)
    assert record["objects_written"] <= 1  # type: ignore[operator]
    assert covered(project, record) == set()


def test_a_second_checkpoint_with_nothing_changed_writes_no_object(project: Path) -> None:
    (project / "a.txt").write_text("a\n", encoding="utf-8")
    (project / "b.bin").write_bytes(b"\0b")
    first = create(project)
    assert first["objects_written"] >= 2  # type: ignore[operator]
    second = create(project)
    assert (second["objects_written"], second["bytes_written"]) == (0, 0)
    assert second["manifest"] == first["manifest"]


def test_a_checkpoint_after_one_edit_writes_the_new_content_and_a_manifest_only(
        project: Path) -> None:
    for number in range(30):
        (project / f"u{number}.txt").write_text(f"{number}\n", encoding="utf-8")
    create(project)
    (project / "u7.txt").write_text("edited\n", encoding="utf-8")
    assert create(project)["objects_written"] == 2


def test_tracked_mode_restores_only_the_paths_given(project: Path) -> None:
    (project / "a.txt").write_text("a1\n", encoding="utf-8")
    (project / "b.txt").write_text("b1\n", encoding="utf-8")
    (project / "dir").mkdir()
    (project / "dir" / "c.txt").write_text("c1\n", encoding="utf-8")
    record = create(project, "--mode", "tracked", "--paths", "a.txt", str(project / "dir/c.txt"),
                    "gone.txt")
    assert record["mode"] == "tracked"
    assert covered(project, record) == {"a.txt", "dir/c.txt"}
    (project / "a.txt").write_text("a2\n", encoding="utf-8")
    (project / "b.txt").write_text("b2\n", encoding="utf-8")
    (project / "dir" / "c.txt").unlink()
    (project / "gone.txt").write_text("created after\n", encoding="utf-8")
    report = rewind_ok(project, str(record["id"]), "--code")
    actions = {f["path"]: f["action"] for f in report["code"]["files"]}  # type: ignore[index]
    assert actions == {"a.txt": "restore", "dir/c.txt": "create", "gone.txt": "delete"}
    assert report["code"]["mode"] == "tracked"  # type: ignore[index]
    assert (project / "a.txt").read_text(encoding="utf-8") == "a1\n"
    assert (project / "dir" / "c.txt").read_text(encoding="utf-8") == "c1\n"
    assert (project / "b.txt").read_text(encoding="utf-8") == "b2\n"  # not covered: kept
    assert not (project / "gone.txt").exists()


def test_a_tracked_checkpoint_without_paths_is_refused(project: Path) -> None:
    proc = cos("checkpoint", "create", "--mode", "tracked", cwd=project)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_the_dry_run_preview_lists_restore_create_delete_with_a_diffstat_and_changes_nothing(
        project: Path) -> None:
    (project / "a.txt").write_text("1\n2\n3\n", encoding="utf-8")
    (project / "gone.txt").write_text("bye\n", encoding="utf-8")
    record = create(project)
    (project / "a.txt").write_text("1\nTWO\n3\n4\n", encoding="utf-8")
    (project / "gone.txt").unlink()
    (project / "extra.bin").write_bytes(b"\0\1")
    def unchanged() -> dict[str, bytes]:  # the stat cache is a cache: it may learn
        return {k: v for k, v in raw_bytes(project).items() if not k.endswith("stat-cache.json")}

    before = unchanged()
    report = rewind_ok(project, str(record["id"]), "--code", "--dry-run")
    assert unchanged() == before
    files = {f["path"]: f for f in report["code"]["files"]}  # type: ignore[index]
    assert files["a.txt"]["action"] == "restore"
    assert (files["a.txt"]["added"], files["a.txt"]["removed"]) == (1, 2)
    assert files["gone.txt"]["action"] == "create"
    assert files["extra.bin"]["action"] == "delete" and files["extra.bin"]["binary"] is True
    assert report["code"]["summary"] == {"restore": 1, "create": 1, "delete": 1}  # type: ignore[index]
    text = rewind(project, str(record["id"]), "--code", "--dry-run")
    assert text.returncode == 0 and "would restore: 1 restored, 1 created, 1 deleted" in text.stdout


def test_rewind_undo_brings_back_the_tree_as_it_was_before_the_rewind(project: Path) -> None:
    (project / "a.txt").write_text("checkpointed\n", encoding="utf-8")
    record = create(project)
    (project / "a.txt").write_text("later work\n", encoding="utf-8")
    (project / "b.txt").write_text("later file\n", encoding="utf-8")
    os.chmod(project / "b.txt", 0o755)
    later = tree(project)
    at_checkpoint = rewind_ok(project, str(record["id"]), "--code")
    assert at_checkpoint["code"]["before"]  # type: ignore[index]
    assert not (project / "b.txt").exists()
    proc = cos("rewind", "--undo", "--json", cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert tree(project) == later
    # The undo is itself undoable.
    assert cos("rewind", "--undo", cwd=project).returncode == 0
    assert (project / "a.txt").read_text(encoding="utf-8") == "checkpointed\n"
    assert stat.S_ISREG(os.lstat(project / "a.txt").st_mode)


def test_a_state_dir_below_the_top_of_the_repository_is_never_captured_nor_rewound(
        repo: Path) -> None:
    (repo / "top.txt").write_text("top\n")
    commit_all(repo, "top")
    package = repo / "pkg"
    (package / ".coding-os").mkdir(parents=True)
    (package / "code.py").write_text("v1\n")
    first = create(package)
    second = create(package)
    assert second["objects_written"] == 0  # the store did not snapshot itself
    (package / "code.py").write_text("v2\n")
    state_before = {p.relative_to(package) for p in (package / ".coding-os").rglob("*")
                    if "checkpoints" in p.parts and "objects" in p.parts}
    rewind_ok(package, str(first["id"]), "--code")
    assert (package / "code.py").read_text() == "v1\n"
    state_after = {p.relative_to(package) for p in (package / ".coding-os").rglob("*")
                   if "checkpoints" in p.parts and "objects" in p.parts}
    assert state_before <= state_after
    assert cos("rewind", "--undo", cwd=package).returncode == 0
    assert (package / "code.py").read_text() == "v2\n"
