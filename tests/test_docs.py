"""Docs stay true: every CLI command is documented and answers --help."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from coding_os.interfaces.cli import cli
from tests.helpers import cos


ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md").read_text(encoding="utf-8") + "".join(
    p.read_text(encoding="utf-8") for p in sorted((ROOT / "docs").glob("*.md")))


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths = []
    for name, command in sorted(group.commands.items()):
        paths.append(prefix + (name,))
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, prefix + (name,)))
    return paths


COMMANDS = command_paths(cli)


def test_readme_opens_with_the_two_commands() -> None:
    head = (ROOT / "README.md").read_text(encoding="utf-8")[:300]
    assert "make demo" in head and "make test" in head


def readme_first_screen() -> str:
    """The README up to its first section after the setup: what a new user reads first."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text[:text.index("## What it does")]


def test_readme_first_screen_says_how_to_install_and_each_agents_own_step() -> None:
    head = readme_first_screen()
    assert "uv tool install ./coding-os" in head and "pipx install ./coding-os" in head
    assert "cos init --agent claude" in head and "cos init --agent codex" in head
    assert "--local" in head and "commit it?" in head
    assert 'trust_level = "trusted"' in head and "~/.codex/config.toml" in head


def test_readme_first_screen_names_every_file_cos_init_writes(
        repo: Path, isolated_env: Path) -> None:
    for agent in ("claude", "codex"):
        done = cos("init", "--agent", agent, cwd=repo)
        assert done.returncode == 0, done.stderr
    local = cos("init", "--agent", "claude", "--local", cwd=repo)
    assert local.returncode == 0, local.stderr
    written = {str(path.relative_to(repo)) for path in repo.rglob("*")
               if path.is_file() and ".git" not in path.relative_to(repo).parts}
    assert written - {"README.md"}, written
    rows = [line for line in readme_first_screen().splitlines() if line.startswith("| `")]
    for name in written - {"README.md"}:
        top = name.split("/")[0] + "/" if name.startswith(".coding-os/") else name
        assert any(f"`{top}`" in row for row in rows), (name, rows)
    assert (isolated_env / ".codex" / "config.toml").is_file()
    assert any("`~/.codex/config.toml`" in row for row in rows)


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_is_documented(path: tuple[str, ...]) -> None:
    assert f"cos {' '.join(path)}" in DOCS


@pytest.mark.slow
@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_has_help(path: tuple[str, ...], tmp_path: Path) -> None:
    proc = cos(*path, "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "Usage: cos" in proc.stdout


def test_every_data_command_has_json() -> None:
    for name in ("where", "whoami", "hooks-log", "init", "uninstall", "gc", "observations"):
        assert "--json" in cos(name, "--help", cwd=ROOT).stdout
    assert "--json" in cos("state", "check", "--help", cwd=ROOT).stdout


def test_version(tmp_path: Path) -> None:
    from coding_os import __version__

    assert cos("--version", cwd=tmp_path).stdout.strip() == f"cos, version {__version__}"
