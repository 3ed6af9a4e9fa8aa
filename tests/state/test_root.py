"""Project root resolution (DESIGN.md §3.1): every rule, worktree routing, misroutes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from coding_os.errors import Misroute
from coding_os.state.root import linked_worktree_main, resolve
from tests.helpers import cos, fire, git


def env_for(home: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(home), **extra}


def test_explicit_state_dir_is_used_verbatim(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "state"
    r = resolve(str(repo), env_for(isolated_env, COS_STATE_DIR=str(target)))
    assert (r.state_dir, r.rule) == (str(target), "explicit")


def test_bare_default_state_dir_value_does_not_count_as_explicit(repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    r = resolve(str(repo / ""), env_for(isolated_env, COS_STATE_DIR=".coding-os"))
    assert r.rule == "marker_walk"
    assert r.state_dir == str(repo / ".coding-os")


def test_claude_project_dir_wins_over_the_walk(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (repo / ".coding-os").mkdir()
    r = resolve(str(repo), env_for(isolated_env, CLAUDE_PROJECT_DIR=str(other)))
    assert (r.state_dir, r.rule) == (str(other / ".coding-os"), "claude_project_dir")


def test_cos_project_root_is_used_when_claude_project_dir_is_unset(repo: Path, isolated_env: Path) -> None:
    sub = repo / "pkg"
    sub.mkdir()
    r = resolve(str(repo), env_for(isolated_env, COS_PROJECT_ROOT=str(sub)))
    assert (r.state_dir, r.rule) == (str(sub / ".coding-os"), "cos_project_root")


def test_walk_from_a_subdirectory_finds_the_marked_root(repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    deep = repo / "src" / "backend"
    deep.mkdir(parents=True)
    r = resolve(str(deep), env_for(isolated_env))
    assert (r.project_root, r.rule) == (str(repo), "marker_walk")


def test_stray_nested_state_dir_without_a_marker_is_skipped(repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    deep = repo / "src" / "backend"
    (deep / ".coding-os").mkdir(parents=True)
    r = resolve(str(deep), env_for(isolated_env))
    assert r.project_root == str(repo)


@pytest.mark.parametrize("marker", [".coding-os.yaml", "pyproject.toml", "package.json", "go.mod",
                                    "AGENTS.md", ".git"])
def test_each_root_marker_anchors_a_state_dir(tmp_path: Path, isolated_env: Path, marker: str) -> None:
    root = tmp_path / "proj"
    (root / ".coding-os").mkdir(parents=True)
    (root / marker).mkdir() if marker == ".git" else (root / marker).write_text("", encoding="utf-8")
    (root / "a" / ".coding-os").mkdir(parents=True)  # bare, inner: loses to the marked one
    r = resolve(str(root / "a"), env_for(isolated_env))
    assert (r.project_root, r.rule) == (str(root), "marker_walk")


def test_git_alone_never_anchors(tmp_path: Path, isolated_env: Path) -> None:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    sub = root / "sub"
    sub.mkdir()
    r = resolve(str(sub), env_for(isolated_env))
    assert (r.project_root, r.rule) == (str(sub), "default")


def test_innermost_bare_state_dir_is_taken_when_no_marker_exists(tmp_path: Path, isolated_env: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "inner"
    (outer / ".coding-os").mkdir(parents=True)
    (inner / ".coding-os").mkdir(parents=True)
    (inner / "deeper").mkdir()
    r = resolve(str(inner / "deeper"), env_for(isolated_env))
    assert (r.project_root, r.rule) == (str(inner), "bare_walk")


def test_symlinked_cwd_resolves_physically(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    (repo / ".coding-os").mkdir()
    link = tmp_path / "link"
    link.symlink_to(repo)
    r = resolve(str(link), env_for(isolated_env))
    assert r.project_root == str(repo)


def test_home_state_dir_is_the_hub_and_never_a_project_root(isolated_env: Path) -> None:
    (isolated_env / ".coding-os").mkdir()
    (isolated_env / ".git").mkdir()
    project = isolated_env / "code" / "proj"
    project.mkdir(parents=True)
    r = resolve(str(project), env_for(isolated_env))
    assert r.hub == str(isolated_env / ".coding-os")
    assert r.state_dir != r.hub
    assert r.rule == "default"


def test_resolving_in_home_itself_is_a_misroute(isolated_env: Path) -> None:
    with pytest.raises(Misroute, match="COS_STATE_MISROUTE"):
        resolve(str(isolated_env), env_for(isolated_env))


def test_explicit_state_dir_pointing_at_the_hub_is_a_misroute(repo: Path, isolated_env: Path) -> None:
    with pytest.raises(Misroute):
        resolve(str(repo), env_for(isolated_env, COS_STATE_DIR=str(isolated_env / ".coding-os")))


def test_symlinked_state_dir_is_refused(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    target = tmp_path / "shared-state"
    target.mkdir()
    (repo / ".coding-os").symlink_to(target)
    with pytest.raises(Misroute, match="symlink"):
        resolve(str(repo), env_for(isolated_env))


def test_linked_worktree_routes_to_the_main_repository(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "feature")
    (wt / "src").mkdir()
    r = resolve(str(wt / "src"), env_for(isolated_env))
    assert (r.state_dir, r.rule, r.worktree) == (str(repo / ".coding-os"), "worktree", str(wt.resolve()))
    # What git itself says the common dir is.
    common = git(wt, "rev-parse", "--path-format=absolute", "--git-common-dir")
    assert linked_worktree_main(str(wt.resolve())) == (str(wt.resolve()), str(Path(common).parent))


def test_claude_project_dir_in_a_worktree_routes_to_the_main_repository(
        repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "feature")
    r = resolve(str(wt), env_for(isolated_env, CLAUDE_PROJECT_DIR=str(wt)))
    assert (r.state_dir, r.rule) == (str(repo / ".coding-os"), "worktree")


def test_worktree_under_cos_worktree_root_routes_even_from_a_nested_repo(
        repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    root = tmp_path / "worktrees"
    wt = root / "job1"
    git(repo, "worktree", "add", "-q", str(wt), "-b", "job1")
    nested = wt / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    r = resolve(str(nested), env_for(isolated_env, COS_WORKTREE_ROOT=str(root)))
    assert (r.project_root, r.rule) == (str(repo), "worktree")


def test_submodule_is_its_own_project_not_a_worktree(repo: Path, isolated_env: Path, tmp_path: Path) -> None:
    lib = tmp_path / "lib"
    lib.mkdir()
    git(lib, "init", "-q", "-b", "main")
    (lib / "x").write_text("x", encoding="utf-8")
    git(lib, "add", ".")
    git(lib, "commit", "-q", "-m", "x")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    assert (repo / "lib" / ".git").is_file()
    assert linked_worktree_main(str(repo / "lib")) is None


def test_cos_where_json_reports_every_field(repo: Path) -> None:
    (repo / ".coding-os").mkdir()
    proc = cos("where", "--json", cwd=repo / ".coding-os")
    data = json.loads(proc.stdout)
    assert {"state_dir", "project_root", "rule", "hub"} <= set(data)
    assert data["rule"] in ("explicit", "claude_project_dir", "cos_project_root", "marker_walk",
                            "bare_walk", "worktree", "default")


def test_misroute_exits_3_with_one_line_and_writes_nothing(isolated_env: Path) -> None:
    before = sorted(os.listdir(isolated_env))
    proc = fire("SessionStart", {"session_id": "abc", "source": "startup"}, cwd=isolated_env)
    assert proc.returncode == 3
    assert "COS_STATE_MISROUTE" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert sorted(os.listdir(isolated_env)) == before
    where = cos("where", cwd=isolated_env)
    assert where.returncode == 3 and "COS_STATE_MISROUTE" in where.stderr


def test_hook_fired_from_subdirectory_creates_no_nested_state_dir(repo: Path) -> None:
    assert cos("init", "--agent", "codex", cwd=repo).returncode == 0
    deep = repo / "src" / "backend"
    deep.mkdir(parents=True)
    proc = fire("SessionStart", {"session_id": "s1", "source": "startup"}, cwd=deep, agent="codex")
    assert proc.returncode == 0, proc.stderr
    assert not (deep / ".coding-os").exists()
    assert not (repo / "src" / ".coding-os").exists()
    assert (repo / ".coding-os" / "codex" / "panels" / "s1" / "session-id").is_file()


def test_a_symlinked_hub_cannot_be_reached_through_its_link(isolated_env: Path, tmp_path: Path,
                                                            repo: Path) -> None:
    real_hub = tmp_path / "hub-target"
    real_hub.mkdir()
    (isolated_env / ".coding-os").symlink_to(real_hub)
    for target in (isolated_env / ".coding-os", real_hub):
        with pytest.raises(Misroute):
            resolve(str(repo), env_for(isolated_env, COS_STATE_DIR=str(target)))


def test_claude_started_in_a_subdirectory_uses_the_projects_state_dir(
        repo: Path, isolated_env: Path) -> None:
    (repo / ".coding-os").mkdir()
    sub = repo / "src" / "backend"
    sub.mkdir(parents=True)
    r = resolve(str(sub), env_for(isolated_env, CLAUDE_PROJECT_DIR=str(sub)))
    assert (r.state_dir, r.rule) == (str(repo / ".coding-os"), "marker_walk")
    # Its Bash tool has no CLAUDE_PROJECT_DIR and resolves to the same place.
    assert resolve(str(sub), env_for(isolated_env)).state_dir == r.state_dir
