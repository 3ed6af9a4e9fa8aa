"""State files (DESIGN.md §3.4): ownership, horizons, atomicity, and `cos state`."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from coding_os.errors import InvalidInput
from coding_os.state.statefile import check_state, format_state, write_state
from tests.helpers import cos, cos_json, fire


SID = "ses-claude-20261129-100000-abcd"
OTHER = "ses-claude-20261129-100000-ef01"
PANEL_A = {"COS_AGENT": "claude", "COS_PANEL_ID": "panel-a"}
PANEL_B = {"COS_AGENT": "claude", "COS_PANEL_ID": "panel-b"}


def start(repo: Path, env: dict[str, str]) -> str:
    proc = fire("SessionStart", {"session_id": env["COS_PANEL_ID"], "source": "startup"},
                cwd=repo, env=env)
    assert proc.returncode == 0, proc.stderr
    whoami = cos_json("whoami", cwd=repo, env=env)
    assert isinstance(whoami, dict)
    return str(whoami["session_id"])


def test_check_state_reasons_in_order(tmp_path: Path) -> None:
    path = tmp_path / "p" / ".task-current"
    assert check_state(str(path), SID, 60).reason == "no_file"
    path.parent.mkdir()
    path.write_text("garbage\n", encoding="utf-8")
    assert check_state(str(path), SID, 60).reason == "malformed"
    write_state(str(path), OTHER, "TASK-1")
    verdict = check_state(str(path), SID, 60)
    assert (verdict.valid, verdict.reason, verdict.owner) == (False, "session_mismatch", OTHER)
    write_state(str(path), SID, "TASK-1")
    old = time.time() - 120
    os.utime(path, (old, old))
    assert check_state(str(path), SID, 60).reason == "stale"
    assert check_state(str(path), SID, None).valid  # no horizon: never stale
    fresh = check_state(str(path), SID, 600)
    assert (fresh.valid, fresh.value) == (True, "TASK-1")


def test_state_file_is_one_line_owner_then_value(tmp_path: Path) -> None:
    path = tmp_path / ".gate-tests"
    write_state(str(path), SID, "passed with spaces")
    assert path.read_text(encoding="utf-8") == f"{SID} passed with spaces\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert not [p for p in os.listdir(tmp_path) if ".tmp-" in p]


@pytest.mark.parametrize("value", ["two\nlines", "nul\x00byte", "x" * 70000])
def test_values_that_are_not_one_short_line_are_refused(value: str) -> None:
    with pytest.raises(InvalidInput):
        format_state(SID, value)


def test_a_symlinked_state_file_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text(f"{SID} stolen\n", encoding="utf-8")
    link = tmp_path / ".task-current"
    link.symlink_to(target)
    assert check_state(str(link), SID, None).reason == "no_file"


def test_cos_state_set_get_check_for_the_owning_panel(repo: Path) -> None:
    session = start(repo, PANEL_A)
    assert cos("state", "set", ".task-current", "TASK-7", cwd=repo, env=PANEL_A).returncode == 0
    got = cos("state", "get", ".task-current", cwd=repo, env=PANEL_A)
    assert (got.returncode, got.stdout) == (0, "TASK-7\n")
    check = cos_json("state", "check", ".task-current", cwd=repo, env=PANEL_A)
    assert isinstance(check, dict)
    assert check["valid"] is True and check["owner"] == session and check["reason"] is None
    assert check["path"] == str(repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".task-current")
    assert 0 <= check["age_s"] < 60


def test_another_panels_marker_is_refused_even_when_copied_into_place(repo: Path) -> None:
    start(repo, PANEL_A)
    start(repo, PANEL_B)
    assert cos("state", "set", ".gate-tests", "passed", cwd=repo, env=PANEL_A).returncode == 0
    panels = repo / ".coding-os" / "claude" / "panels"
    assert cos("state", "get", ".gate-tests", cwd=repo, env=PANEL_B).stderr.strip() == "no_file"
    shutil.copy(panels / "panel-a" / ".gate-tests", panels / "panel-b" / ".gate-tests")
    refused = cos("state", "get", ".gate-tests", cwd=repo, env=PANEL_B)
    assert (refused.returncode, refused.stdout, refused.stderr.strip()) == (1, "", "session_mismatch")


def test_a_new_session_of_the_same_panel_no_longer_trusts_the_old_marker(repo: Path) -> None:
    start(repo, PANEL_A)
    assert cos("state", "set", ".skill-review", "on", cwd=repo, env=PANEL_A).returncode == 0
    marker = repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".skill-review"
    saved = marker.read_bytes()
    start(repo, PANEL_A)  # startup clears volatile markers; put the old one back by hand
    assert not marker.exists()
    marker.write_bytes(saved)
    assert cos("state", "get", ".skill-review", cwd=repo, env=PANEL_A).stderr.strip() == "session_mismatch"


def test_horizons_come_from_the_project_config(repo: Path) -> None:
    start(repo, PANEL_A)
    assert cos("state", "set", ".gate-lint", "ok", cwd=repo, env=PANEL_A).returncode == 0
    marker = repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".gate-lint"
    old = time.time() - 3 * 3600
    os.utime(marker, (old, old))
    assert cos("state", "get", ".gate-lint", cwd=repo, env=PANEL_A).stderr.strip() == "stale"
    (repo / ".coding-os.yaml").write_text('state:\n  horizons:\n    ".gate-*": 4h\n', encoding="utf-8")
    assert cos("state", "get", ".gate-lint", cwd=repo, env=PANEL_A).stdout == "ok\n"


def test_task_current_has_an_eight_hour_horizon_by_default(repo: Path) -> None:
    start(repo, PANEL_A)
    assert cos("state", "set", ".task-current", "T", cwd=repo, env=PANEL_A).returncode == 0
    marker = repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".task-current"
    for hours, expected in ((7.5, 0), (8.5, 1)):
        old = time.time() - hours * 3600
        os.utime(marker, (old, old))
        assert cos("state", "get", ".task-current", cwd=repo, env=PANEL_A).returncode == expected


def test_agent_tier_files_live_in_the_agent_dir(repo: Path) -> None:
    start(repo, PANEL_A)
    assert cos("state", "set", ".model", "opus", cwd=repo, env=PANEL_A).returncode == 0
    assert (repo / ".coding-os" / "claude" / ".model").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("args,code", [
    (("state", "set", "../escape", "x"), 2),
    (("state", "set", "session-id", "x"), 2),
    (("state", "set", ".task-current", "a\nb"), 2),
    (("state", "get", "a/b"), 2),
])
def test_bad_state_arguments_fail_with_one_line(repo: Path, args: tuple[str, ...], code: int) -> None:
    start(repo, PANEL_A)
    proc = cos(*args, cwd=repo, env=PANEL_A)
    assert proc.returncode == code
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (repo / ".coding-os" / "claude" / "escape").exists()


def test_state_set_before_any_session_start_writes_nothing(repo: Path) -> None:
    proc = cos("state", "set", ".task-current", "T", cwd=repo, env=PANEL_A)
    assert proc.returncode == 1 and "no session" in proc.stderr
    assert not (repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".task-current").exists()


def test_bad_horizon_in_config_is_a_clear_error(repo: Path) -> None:
    start(repo, PANEL_A)
    (repo / ".coding-os.yaml").write_text("state:\n  horizons:\n    .task-current: soon\n",
                                          encoding="utf-8")
    proc = cos("state", "check", ".task-current", "--json", cwd=repo, env=PANEL_A)
    assert proc.returncode == 2 and "duration" in proc.stderr


def test_a_value_over_the_byte_limit_is_refused_not_truncated(repo: Path) -> None:
    start(repo, PANEL_A)
    proc = cos("state", "set", ".task-current", "é" * 40_000, cwd=repo, env=PANEL_A)
    assert proc.returncode == 2 and "bytes" in proc.stderr
    assert not (repo / ".coding-os" / "claude" / "panels" / "panel-a" / ".task-current").exists()


def test_a_config_whose_state_section_is_not_a_mapping_is_a_clear_error(repo: Path) -> None:
    start(repo, PANEL_A)
    assert cos("state", "set", ".task-current", "T", cwd=repo, env=PANEL_A).returncode == 0
    (repo / ".coding-os.yaml").write_text("state: foo\n", encoding="utf-8")
    proc = cos("state", "get", ".task-current", cwd=repo, env=PANEL_A)
    assert proc.returncode == 2 and "state must be a mapping" in proc.stderr
    hook = fire("PostToolUse", {"session_id": "panel-a", "tool_name": "Bash"}, cwd=repo, env=PANEL_A)
    assert hook.returncode == 0  # the hook falls back to the default horizon and says so
    assert "config_error" in (repo / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
