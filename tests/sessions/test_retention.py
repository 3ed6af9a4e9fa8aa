"""Retention: expired cos-native transcripts go to the trash for a week, then away."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from coding_os.errors import InvalidInput
from coding_os.sessions.retention import DAY_S, cleanup_period_days, collect
from coding_os.state.tiers import Tiers


def transcript(state: Path, agent: str, name: str, age_days: float, now: float) -> Path:
    path = state / agent / "transcripts" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"v":1,"seq":0}\n', encoding="utf-8")
    os.utime(path, (now - age_days * DAY_S, now - age_days * DAY_S))
    return path


def test_expired_transcripts_move_to_the_trash_and_fresh_ones_stay(tmp_path: Path) -> None:
    now = time.time()
    state = tmp_path / ".coding-os"
    old = transcript(state, "claude", "ses-claude-20260101-000000-aaaa.jsonl", 40, now)
    torn = transcript(state, "claude", "ses-claude-20260101-000000-aaaa.jsonl.torn", 40, now)
    fresh = transcript(state, "codex", "ses-codex-20261120-000000-bbbb.jsonl", 3, now)
    dry = collect(Tiers(str(state)), 30, dry_run=True, now=now)
    assert sorted(dry.trashed) == ["claude/transcripts/" + old.name, "claude/transcripts/" + torn.name]
    assert old.exists()  # a dry run changes nothing
    report = collect(Tiers(str(state)), 30, now=now)
    assert report.trashed == dry.trashed and report.kept == 1 and report.errors == []
    day = time.strftime("%Y%m%d", time.gmtime(now))
    assert (state / "trash" / day / "claude" / "transcripts" / old.name).is_file()
    assert not old.exists() and fresh.exists()


def test_the_trash_is_emptied_a_week_after_its_day(tmp_path: Path) -> None:
    now = time.time()
    state = tmp_path / ".coding-os"
    recent = time.strftime("%Y%m%d", time.gmtime(now - 3 * DAY_S))
    expired = time.strftime("%Y%m%d", time.gmtime(now - 9 * DAY_S))
    for day in (recent, expired, "not-a-day"):
        (state / "trash" / day).mkdir(parents=True)
    report = collect(Tiers(str(state)), 30, now=now)
    assert report.purged == [f"trash/{expired}"]
    assert sorted(os.listdir(state / "trash")) == sorted([recent, "not-a-day"])


@pytest.mark.parametrize("env,config,days", [
    ({}, {}, 30),
    ({}, {"cleanup_period_days": 7}, 7),
    ({"COS_CLEANUP_PERIOD_DAYS": "2"}, {"cleanup_period_days": 7}, 2),
])
def test_the_period_comes_from_the_environment_then_the_config(
        env: dict[str, str], config: dict[str, object], days: float) -> None:
    assert cleanup_period_days(config, env) == days


@pytest.mark.parametrize("raw", ["0", "-3", "soon", "nan"])
def test_a_period_below_one_day_or_not_a_number_is_refused(raw: str) -> None:
    with pytest.raises(InvalidInput):
        cleanup_period_days({}, {"COS_CLEANUP_PERIOD_DAYS": raw})
