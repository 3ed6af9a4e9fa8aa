"""Retention: expired cos-native transcripts go to the trash for a week, then away."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from coding_os.errors import InvalidInput
from coding_os.sessions.retention import DAY_S, cleanup_period_days, collect, trash_session
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


def test_a_removed_session_goes_to_the_trash_day_with_its_torn_tail_and_is_purged_with_it(
        tmp_path: Path) -> None:
    now = time.time()
    state = tmp_path / ".coding-os"
    name = "ses-claude-20260101-000000-aaaa"
    log = transcript(state, "claude", f"{name}.jsonl", 1, now)
    torn = transcript(state, "claude", f"{name}.jsonl.torn", 1, now)
    trashed = trash_session(Tiers(str(state)), name, now=now - 9 * DAY_S)
    day = state / "trash" / time.strftime("%Y%m%d", time.gmtime(now - 9 * DAY_S))
    assert trashed == str(day / "claude" / "transcripts" / log.name)
    assert (day / "claude" / "transcripts" / torn.name).is_file()
    assert not log.exists() and not torn.exists()
    assert trash_session(Tiers(str(state)), name) is None  # nothing left to move
    report = collect(Tiers(str(state)), 30, now=now)
    assert report.purged == [os.path.relpath(day, state)] and not day.exists()


def test_a_transcript_left_flat_in_the_trash_is_filed_under_a_day_and_purged_a_week_later(
        tmp_path: Path) -> None:
    now = time.time()
    state = tmp_path / ".coding-os"
    (state / "trash").mkdir(parents=True)
    flat = state / "trash" / "ses-codex-20250101-000000-bbbb.jsonl"
    flat.write_text('{"v":1,"seq":0}\n', encoding="utf-8")
    os.utime(flat, (now - 400 * DAY_S, now - 400 * DAY_S))
    other = state / "trash" / "notes.txt"  # not a transcript: left alone
    other.write_text("x", encoding="utf-8")
    dry = collect(Tiers(str(state)), 30, dry_run=True, now=now)
    assert dry.purged == [] and flat.exists()  # a dry run changes nothing
    collect(Tiers(str(state)), 30, now=now)
    day = time.strftime("%Y%m%d", time.gmtime(now))
    filed = state / "trash" / day / "codex" / "transcripts" / flat.name
    assert filed.is_file() and not flat.exists() and other.exists()
    report = collect(Tiers(str(state)), 30, now=now + 9 * DAY_S)
    assert report.purged == [f"trash/{day}"] and not filed.exists()
