"""`~/.coding-os/daemon/roster.json`: the rows of every job (DESIGN.md §6), a cache.

The jobs' folders are canonical; the roster keeps each job's row with the signature of the
`state.json` it was read from, so listing a thousand jobs reads the roster and the few state
files that changed since, not a thousand files. A roster missing, torn or of another version is
rebuilt from the folders, with the same rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from coding_os import durable
from coding_os.daemon import jobs
from coding_os.errors import CosError

__all__ = ["ROSTER", "roster_path", "current", "rebuild"]

ROSTER = "roster.json"
VERSION = 1
LIMIT = 64 << 20


def roster_path(env: Mapping[str, str] | None = None) -> str:
    from coding_os.daemon.client import daemon_dir

    return os.path.join(daemon_dir(env), ROSTER)


def _read(path: str) -> dict[str, Any]:
    data = durable.read_regular(path, LIMIT)
    try:
        roster = json.loads(data) if data is not None else None
    except ValueError:
        roster = None
    if (not isinstance(roster, dict) or roster.get("version") != VERSION
            or not isinstance(roster.get("jobs"), dict)):
        return {}
    return {key: value for key, value in roster["jobs"].items()
            if jobs.JOB_ID.match(key) and isinstance(value, dict)
            and isinstance(value.get("state"), dict) and isinstance(value.get("sig"), list)}


def _signature(folder: str) -> list[int] | None:
    try:
        info = os.lstat(os.path.join(folder, jobs.STATE))
    except OSError:
        return None
    return [info.st_ino, info.st_size, info.st_mtime_ns, info.st_uid]


def current(env: Mapping[str, str] | None = None) -> list[jobs.Job]:
    """Every job of this user, oldest first, each as its state file says now; the roster is
    brought up to date on the way (a failure to write it is no failure: it is a cache)."""
    path = roster_path(env)
    cached = _read(path)
    root = jobs.jobs_dir(env)
    try:
        names = [entry.name for entry in os.scandir(root) if jobs.JOB_ID.match(entry.name)]
    except FileNotFoundError:
        names = []
    except OSError as exc:
        raise durable.io_error(root, exc) from None
    found: list[jobs.Job] = []
    fresh: dict[str, Any] = {}
    changed = set(cached) - set(names)
    for name in names:
        folder = os.path.join(root, name)
        sig = _signature(folder)
        entry = cached.get(name)
        if sig is not None and entry is not None and entry["sig"] == sig:
            state = entry["state"]
        else:
            changed.add(name)
            try:
                job = jobs.load(name, env)
            except CosError:
                continue
            state = job.state  # under the signature taken before: a change meanwhile is seen next time
        fresh[name] = {"sig": sig, "state": state}
        found.append(jobs.Job(folder, state))
    if changed:
        _write(path, fresh)
    found.sort(key=lambda job: (job.state.get("startedAt") or 0, job.id))
    return found


def rebuild(env: Mapping[str, str] | None = None) -> list[jobs.Job]:
    """Write the roster anew from the jobs' folders."""
    found = list(jobs.all_jobs(env))
    _write(roster_path(env), {job.id: {"sig": _signature(job.folder), "state": job.state}
                              for job in found})
    return found


def _write(path: str, rows: Mapping[str, Any]) -> None:
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        durable.atomic_write(path, json.dumps({"version": VERSION, "jobs": rows},
                                              ensure_ascii=False).encode("utf-8"), sync=False)
    except (OSError, CosError):
        pass
