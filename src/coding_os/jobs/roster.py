"""`~/.coding-os/daemon/roster.json`: the rows of every job (DESIGN.md §6), a cache; and the
rows every host published to the shared storage (DESIGN.md §8, `cos agents --all-hosts`).

The jobs' folders are canonical; the roster keeps each job's row with the signature of the
`state.json` it was read from, so listing a thousand jobs reads the roster and the few state
files that changed since, not a thousand files. A roster missing, torn or of another version is
rebuilt from the folders, with the same rows.

With a shared storage (`COS_DATABASE_URL=postgresql://…`) each host publishes the rows of its
jobs (`Storage.publish_jobs`): whenever the roster changes (so also in the daemon's sweep) and
whenever `cos agents` lists them. A published row is the row `cos agents --json` prints, with
`host` (state.hosts.this_host), `projectKeys` (state.hosts.project_keys of its project: the
same repository on every host shares one) and `publishedAt` (epoch ms). On SQLite there is one host: nothing is
published.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from coding_os import durable
from coding_os.jobs import jobs
from coding_os.errors import CosError, CrossProject

TYPE_CHECKING = False
if TYPE_CHECKING:
    from coding_os.storage.base import Storage

__all__ = ["ROSTER", "roster_path", "current", "rebuild", "shared_storage", "publish",
           "published", "published_job", "refuse_elsewhere"]

ROSTER = "roster.json"
VERSION = 1
LIMIT = 64 << 20


def roster_path(env: Mapping[str, str] | None = None) -> str:
    from coding_os.daemon.client import daemon_dir

    return os.path.join(daemon_dir(env), ROSTER)


# The roster as this process last parsed it, by the signature of the file it read: the
# supervisor looks at every job several times a second, and a listing once; neither parses an
# unchanged roster again.
_parsed: dict[str, tuple[tuple[int, ...], dict[str, Any]]] = {}


def _read(path: str) -> dict[str, Any]:
    try:
        info = os.lstat(path)
        sig: tuple[int, ...] | None = (info.st_ino, info.st_size, info.st_mtime_ns,
                                       info.st_ctime_ns)
    except OSError:
        sig = None
    memo = _parsed.get(path)
    if sig is not None and memo is not None and memo[0] == sig:
        return memo[1]
    rows = _parse(path)
    if sig is not None:
        _parsed[path] = (sig, rows)
    return rows


def _parse(path: str) -> dict[str, Any]:
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
        info = os.lstat(f"{folder}/{jobs.STATE}")  # os.path.join costs as much as the lstat
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
        folder = f"{root}/{name}"
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
    found.sort(key=_started)
    if changed:
        _write(path, fresh)
        _publish_quietly(env, found)
    return found


def _started(job: jobs.Job) -> tuple[Any, str]:
    return job.state.get("startedAt") or 0, job.state["id"]


def rebuild(env: Mapping[str, str] | None = None) -> list[jobs.Job]:
    """Write the roster anew from the jobs' folders."""
    found = list(jobs.all_jobs(env))
    _write(roster_path(env), {job.id: {"sig": _signature(job.folder), "state": job.state}
                              for job in found})
    return found


def _write(path: str, rows: Mapping[str, Any]) -> None:
    try:
        durable.ensure_dir(os.path.dirname(path))
        durable.atomic_write(path, json.dumps({"version": VERSION, "jobs": rows},
                                              ensure_ascii=False).encode("utf-8"), sync=False)
    except (OSError, CosError):
        pass


# -- the rows every host published (a shared storage) ----------------------------------------


def shared_storage(env: Mapping[str, str] | None = None) -> Storage | None:
    """The storage every host shares (PostgreSQL, from `COS_DATABASE_URL`), opened; None when
    the storage is SQLite (one host).

    Raises:
        StorageError: it cannot be opened.
    """
    if not _shared(env):
        return None
    from coding_os.storage import open_storage

    return open_storage("", env=env)


def publish(env: Mapping[str, str] | None = None,
            found: list[jobs.Job] | None = None) -> bool:
    """Publish the rows of this host's jobs (`found`, default every job now) to the shared
    storage, replacing what this host published before; False when there is none (SQLite).

    Raises:
        InvalidInput: COS_HOST is not a valid host name. StorageError: the storage fails.
    """
    if not _shared(env):
        return False
    from coding_os.hosts.identity import this_host

    host = this_host(env)
    storage = shared_storage(env)
    if storage is None:
        return False
    try:
        rows = _published_rows(host, current(env) if found is None else found)
        storage.publish_jobs(host, rows)
    finally:
        storage.close()
    return True


def _publish_quietly(env: Mapping[str, str] | None, found: list[jobs.Job]) -> None:
    """`publish`, when the roster changed: a failure is no failure (the next change or
    `cos agents` publishes again)."""
    if not _shared(env):
        return
    try:
        publish(env, found)
    except CosError:
        pass


def _shared(env: Mapping[str, str] | None) -> bool:
    """Whether COS_DATABASE_URL selects a shared storage (PostgreSQL)."""
    url = (os.environ if env is None else env).get("COS_DATABASE_URL") or ""
    return url.startswith(("postgresql://", "postgres://"))


def _published_rows(host: str, found: list[jobs.Job]) -> list[dict[str, Any]]:
    from coding_os.hosts.identity import project_keys

    keys: dict[str, list[str]] = {}
    now = int(time.time() * 1000)
    rows = []
    for job in found:
        row = jobs.row(job)
        project = job.state.get("project")
        if isinstance(project, str) and project not in keys:
            try:
                keys[project] = project_keys(project)
            except (CosError, OSError):
                keys[project] = []
        row.update(host=host, projectKeys=keys.get(project, []) if isinstance(project, str)
                   else [], publishedAt=now)
        rows.append(row)
    return rows


def published(env: Mapping[str, str] | None = None, project_keys: Sequence[str] = (),
              every_project: bool = False) -> list[dict[str, Any]]:
    """The rows the other hosts published (each with its `host`), of the project one of whose
    identities (state.hosts.project_keys) is in `project_keys`, or of `every_project`; oldest
    first. Empty on SQLite.

    Raises:
        StorageError: the shared storage fails.
    """
    if not _shared(env):
        return []
    from coding_os.hosts.identity import this_host

    host = this_host(env)
    storage = shared_storage(env)
    if storage is None:
        return []
    try:
        found = storage.host_jobs()
    finally:
        storage.close()
    rows = []
    for published_by, row in found:
        if published_by == host:
            continue
        keys = row.get("projectKeys")
        if not every_project and not (isinstance(keys, list) and set(project_keys) & {
                key for key in keys if isinstance(key, str)}):
            continue
        rows.append({**row, "host": published_by})
    rows.sort(key=lambda row: (_number(row.get("startedAt")), str(row.get("host")),
                               str(row.get("id"))))
    return rows


def published_job(key: str, env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The row another host published of the job `key` names (its id, a unique prefix of one,
    or its name), with its `host`; None when no other host published one, or several match."""
    key = key.strip()
    if not key:
        return None
    rows = published(env, every_project=True)
    matches = [row for row in rows if row.get("id") == key] or \
        [row for row in rows if row.get("name") == key] or \
        [row for row in rows if re.fullmatch(r"[0-9a-fA-F]{1,8}", key)
         and isinstance(row.get("id"), str) and row["id"].startswith(key.lower())]
    return matches[0] if len(matches) == 1 else None


def refuse_elsewhere(key: str, command: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse `cos <command> <key>` for a job this host does not have but another host
    published: CrossProject naming the command to run there. Nothing when no other host has it
    (or the shared storage cannot say).

    Raises:
        CrossProject: the job runs on another host.
    """
    try:
        row = published_job(key, env)
    except CosError:
        return
    if row is not None:
        raise CrossProject(f"job {row['id']} ({row.get('name')}) runs on another host: "
                           f"on host {row['host']}: cos {command} {row['id']}")


def _number(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0
