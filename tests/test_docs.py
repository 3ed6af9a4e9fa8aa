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


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_every_command_is_documented(path: tuple[str, ...]) -> None:
    assert f"cos {' '.join(path)}" in DOCS


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
