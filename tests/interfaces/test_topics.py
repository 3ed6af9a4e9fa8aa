"""`cos --help` by topic (interfaces/topics.py): every command under one of the six topics with
one whole line, 80 columns at most, and docs/cli.md carries the output as it is."""

from __future__ import annotations

from pathlib import Path

from coding_os.interfaces.cli import cli
from coding_os.interfaces.topics import TOPICS
from tests.helpers import cos

ROOT = Path(__file__).resolve().parents[2]


def test_help_lists_every_command_once_under_its_topic_in_80_columns(tmp_path: Path) -> None:
    shown = cos("--help", cwd=tmp_path, env={"COLUMNS": "200"})
    assert shown.returncode == 0
    lines = shown.stdout.splitlines()
    sections = [line[:-1] for line in lines if line.endswith(":") and not line.startswith(" ")]
    assert sections == ["Options", "Setup", "Sessions", "Checkpoints", "Jobs", "Brain",
                        "Servers"]
    listed = [line.split()[0] for line in lines[lines.index("Setup:"):]
              if line.startswith("  ") and line.strip()]
    assert sorted(listed) == sorted(cli.commands)
    assert all(len(line) <= 80 for line in lines)
    for lines_of_topic in TOPICS.values():  # whole: no line cut short, none wrapped
        for name, text in lines_of_topic.items():
            assert f"  {name.ljust(12)}  {text}" in shown.stdout


def test_the_cli_docs_carry_the_help_output_as_it_is(tmp_path: Path) -> None:
    shown = cos("--help", cwd=tmp_path).stdout
    docs = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert f"```\n$ cos --help\n{shown}```" in docs
