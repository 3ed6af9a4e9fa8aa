"""Reaping panels whose heartbeat is older than the TTL (`cos gc --panels`).

A panel is reaped only when its heartbeat is older than COS_PANEL_GC_TTL (default 24 h) and no
hook holds its lock: the check is repeated under the panel's exclusive lock, the same lock every
hook takes (state/presence.py PanelLock), so a panel that fires a hook while gc runs is never
removed. Before removal, a session that never got a summary gets one (reason `reaped`), so
nothing the hooks observed is lost.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field

from coding_os.errors import CosError
from coding_os.state import presence
from coding_os.state.caller import read_panel_session
from coding_os.state.tiers import Tiers

__all__ = ["ReapedPanel", "PanelGcReport", "reap_panels", "iter_panels"]


@dataclass
class ReapedPanel:
    agent: str
    panel: str
    session: str | None
    heartbeat_age_s: float | None
    summarised: bool = False


@dataclass
class PanelGcReport:
    ttl_s: float
    dry_run: bool
    reaped: list[ReapedPanel] = field(default_factory=list)
    kept: int = 0
    busy: int = 0
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def iter_panels(tiers: Tiers) -> Iterator[tuple[str, str, str]]:
    """(agent, panel id, panel dir) of every panel under the state dir."""
    for agent in tiers.agents():
        try:
            panels = sorted(os.listdir(tiers.panels_dir(agent)))
        except OSError:
            continue
        for panel in panels:
            path = tiers.panel_dir(agent, panel)
            if not panel.startswith(".") and os.path.isdir(path) and not os.path.islink(path):
                yield agent, panel, path


def _stale(panel_dir: str, ttl_s: float, now: float) -> tuple[bool, float | None]:
    age = presence.heartbeat_age(panel_dir, now)
    if age is None:  # never fired a hook: judge by the directory's own age
        try:
            age = max(0.0, now - os.stat(panel_dir).st_mtime)
        except OSError:
            return False, None
    return age > ttl_s, round(age, 1)


def reap_panels(tiers: Tiers, env: Mapping[str, str], *, dry_run: bool = False,
                now: float | None = None) -> PanelGcReport:
    """Reap stale panels (or, with dry_run, list what would be reaped).

    Raises:
        InvalidInput: COS_PANEL_GC_TTL is not a duration.
    """
    ttl = presence.panel_ttl(env)
    now = time.time() if now is None else now
    report = PanelGcReport(ttl_s=ttl, dry_run=dry_run)
    for agent, panel, panel_dir in iter_panels(tiers):
        stale, age = _stale(panel_dir, ttl, now)
        if not stale:
            report.kept += 1
            continue
        current = read_panel_session(panel_dir)
        entry = ReapedPanel(agent, panel, current[0] if current else None, age)
        if dry_run:
            report.reaped.append(entry)
            continue
        try:
            lock = presence.PanelLock.try_take(panel_dir)
        except OSError:
            continue  # gone already
        if lock is None:
            report.busy += 1  # a hook is writing into it right now: it is live
            continue
        try:
            stale, age = _stale(panel_dir, ttl, now)  # re-check under the lock
            if not stale:
                report.kept += 1
                continue
            if entry.session:
                entry.summarised = _summarise_reaped(tiers, agent, panel, entry.session,
                                                     current[1] if current else None, report, env)
            graveyard = os.path.join(tiers.panels_dir(agent),
                                     f".reaped-{panel}-{os.urandom(3).hex()}")
            os.rename(panel_dir, graveyard)  # atomic: hooks now recreate a fresh panel
            shutil.rmtree(graveyard, ignore_errors=True)
            report.reaped.append(entry)
        except OSError as exc:
            report.errors.append(f"{agent}/{panel}: {exc.strerror or exc}")
        except CosError as exc:  # one panel's trouble never stops the rest of the run
            report.errors.append(f"{agent}/{panel}: {exc}")
        finally:
            lock.release()
    return report


def _summarise_reaped(tiers: Tiers, agent: str, panel: str, session: str,
                      native: str | None, report: PanelGcReport, env: Mapping[str, str]) -> bool:
    from coding_os.state import observations
    from coding_os.state.summary import summarize
    from coding_os.storage import StorageError, open_storage

    try:
        storage = open_storage(tiers.database, env=env)
    except StorageError as exc:
        report.errors.append(str(exc))
        return False
    try:
        observations.ingest(storage, tiers.observations_spool)
        _, new = summarize(storage, session, agent, panel, "reaped", native_id=native)
        if new:
            storage.touch_session(session, "", status="reaped")
    except StorageError as exc:
        report.errors.append(str(exc))
        return False
    finally:
        storage.close()
    if new:
        presence.write_presence(tiers, agent, session, {"status": "reaped"})
    return new
