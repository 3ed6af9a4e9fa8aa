"""The hooks log's writer (state/hookslog.py): what it keeps of a line's values."""

from __future__ import annotations

from pathlib import Path

from coding_os.state import hookslog

TOKEN = "ghp" + "_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # made up, built at run time


def test_a_secret_in_a_value_is_redacted_before_the_line_is_written(tmp_path: Path) -> None:
    log = tmp_path / ".hooks.log"
    hookslog.append(str(log), {"ts": "t", "event": "PostToolUse",
                               "input": f"git push https://{TOKEN}@github.com/o/r"})
    text = log.read_text(encoding="utf-8")
    assert TOKEN[4:] not in text and "[REDACTED:github_token]" in text
    assert hookslog.read(str(log))[-1]["input"] == \
        "git push https://[REDACTED:github_token]@github.com/o/r"


def test_a_caller_that_redacted_already_or_turned_it_off_has_the_value_kept(
        tmp_path: Path) -> None:
    log = tmp_path / ".hooks.log"
    hookslog.append(str(log), {"ts": "t", "event": "PostToolUse", "input": TOKEN}, redact=False)
    assert hookslog.read(str(log))[-1]["input"] == TOKEN
