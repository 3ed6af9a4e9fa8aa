"""Retention (DESIGN.md §4.5): `cleanup_period_days` bounds what coding-os keeps of its own.

A cos-native transcript whose last write is older than the period is moved (one atomic rename
per file) to `<state_dir>/trash/<YYYYMMDD>/…`, keeping its path below the state dir; a trash day
older than TRASH_DAYS is deleted. Nothing is hard-deleted without first spending that week in
the trash, and the native logs of Claude Code and Codex are never touched: they belong to their
tools. The period comes from `.coding-os.yaml` (`cleanup_period_days`) or
`COS_CLEANUP_PERIOD_DAYS` (which wins); default 30, minimum 1.

The trash has one layout, whoever fills it: `cos sessions rm` files a removed session's
transcript under the day it was removed (`trash_session`), as `collect` files an expired one, so
both are deleted a week later. A transcript an earlier `cos sessions rm` left flat in the trash
(`trash/<sid>.jsonl`) is filed under the day `collect` finds it, and goes a week after that.
"""

from __future__ import annotations

import calendar
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from coding_os.errors import InvalidInput
from coding_os import durable
from coding_os.state.tiers import Tiers

__all__ = ["DEFAULT_PERIOD_DAYS", "TRASH_DAYS", "TRANSCRIPT_SUFFIXES", "RetentionReport",
           "cleanup_period_days", "collect", "trash_session"]

DEFAULT_PERIOD_DAYS = 30
TRASH_DAYS = 7
DAY_S = 86400
# The files of one cos-native transcript: the log, its set-aside torn tail, its counts.
TRANSCRIPT_SUFFIXES = (".jsonl", ".jsonl.torn", ".jsonl.counts")


@dataclass
class RetentionReport:
    """What `collect` moved to the trash and deleted from it (or would, in a dry run)."""

    period_days: float
    dry_run: bool
    trashed: list[str] = field(default_factory=list)  # paths relative to the state dir
    purged: list[str] = field(default_factory=list)  # trash days deleted
    kept: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def cleanup_period_days(config: Mapping[str, Any], env: Mapping[str, str]) -> float:
    """The retention period in days: COS_CLEANUP_PERIOD_DAYS, the config, else 30.

    Raises:
        InvalidInput: not a number, or below the minimum of 1 day.
    """
    raw: object = env.get("COS_CLEANUP_PERIOD_DAYS")
    where = "COS_CLEANUP_PERIOD_DAYS"
    if raw in (None, ""):
        raw = config.get("cleanup_period_days", DEFAULT_PERIOD_DAYS)
        where = ".coding-os.yaml cleanup_period_days"
    if isinstance(raw, bool):
        raise InvalidInput(f"{where}: expected a number of days, got {raw!r}")
    try:
        days = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: expected a number of days, got {str(raw)[:40]!r}") from None
    if not days >= 1 or days == float("inf"):
        raise InvalidInput(f"{where}: the minimum is 1 day, got {str(raw)[:40]!r}")
    return days


def _transcripts(tiers: Tiers) -> list[str]:
    """Every cos-native transcript file (and its set-aside torn tail) under the state dir."""
    found = []
    for agent in tiers.agents():
        directory = os.path.join(tiers.agent_dir(agent), "transcripts")
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if name.endswith(TRANSCRIPT_SUFFIXES):
                found.append(os.path.join(directory, name))
    return found


def collect(tiers: Tiers, period_days: float, *, dry_run: bool = False,
            now: float | None = None) -> RetentionReport:
    """Move expired cos-native transcripts to the trash and empty expired trash days.

    Raises:
        StateIOError: the trash cannot be created.
    """
    now = time.time() if now is None else now
    report = RetentionReport(period_days=period_days, dry_run=dry_run)
    trash = os.path.join(tiers.state_dir, "trash")
    today = _trash_day(tiers, now)
    if not dry_run:
        _file_flat_entries(tiers, trash, today)
    for path in _transcripts(tiers):
        try:
            mtime = os.stat(path, follow_symlinks=False).st_mtime
        except OSError:
            continue
        if now - mtime <= period_days * DAY_S:
            report.kept += 1
            continue
        relative = os.path.relpath(path, tiers.state_dir)
        report.trashed.append(relative)
        if dry_run:
            continue
        target = os.path.join(today, relative)
        try:
            durable.ensure_dir(os.path.dirname(target))
            os.rename(path, target)  # same file system: atomic, nothing copied
        except OSError as exc:
            report.errors.append(f"{relative}: {exc.strerror or exc}")
            report.trashed.remove(relative)
    try:
        days = sorted(os.listdir(trash))
    except OSError:
        days = []
    for day in days:
        day_path = os.path.join(trash, day)
        try:
            trashed_at = calendar.timegm(time.strptime(day, "%Y%m%d"))
        except ValueError:
            continue  # not a trash day of ours: leave it
        if now - trashed_at > (TRASH_DAYS + 1) * DAY_S:  # a whole week after the day ended
            report.purged.append(os.path.relpath(day_path, tiers.state_dir))
            if not dry_run:
                shutil.rmtree(day_path, ignore_errors=True)
    return report


def _trash_day(tiers: Tiers, now: float) -> str:
    """The trash folder of the day `now` falls in (UTC)."""
    return os.path.join(tiers.state_dir, "trash", time.strftime("%Y%m%d", time.gmtime(now)))


def _file_flat_entries(tiers: Tiers, trash: str, today: str) -> None:
    """File the transcripts an earlier `cos sessions rm` left flat in the trash under `today`,
    at their path below the state dir, so they are purged as every other trashed file is (one
    that cannot be moved stays, and is tried again next time)."""
    from coding_os.state.identity import agent_of_session

    try:
        names = sorted(os.listdir(trash))
    except OSError:
        return
    for name in names:
        session = name.partition(".")[0]
        agent = agent_of_session(session)
        path = os.path.join(trash, name)
        if (agent is None or not name.endswith(TRANSCRIPT_SUFFIXES) or os.path.islink(path)
                or not os.path.isfile(path)):
            continue
        home = os.path.relpath(tiers.transcript_path(agent, session), tiers.state_dir)
        target = os.path.join(today, os.path.dirname(home), name)
        try:
            durable.ensure_dir(os.path.dirname(target))
            os.rename(path, target)
        except OSError:
            continue


def trash_session(tiers: Tiers, session: str, now: float | None = None) -> str | None:
    """Move the transcript of cos-native `session` (with its torn tail and counts) to the trash
    day of `now`, at its path below the state dir, as `collect` files an expired one: it is
    deleted with that day, a week after it ends. The trashed transcript's path, or None when the
    session has no transcript.

    Raises:
        InvalidId: `session` is not a session id.
        StateIOError: a file cannot be moved.
    """
    from coding_os.sessions.transcript import transcript_path

    path = transcript_path(tiers, session)
    day = _trash_day(tiers, time.time() if now is None else now)
    trashed = None
    for suffix in TRANSCRIPT_SUFFIXES:
        source = path[:-len(".jsonl")] + suffix
        if not os.path.lexists(source):
            continue
        target = os.path.join(day, os.path.relpath(source, tiers.state_dir))
        try:
            durable.ensure_dir(os.path.dirname(target))
            os.replace(source, target)
        except OSError as exc:
            raise durable.io_error(source, exc) from None
        if suffix == ".jsonl":
            trashed = target
    return trashed
