"""Gemini CLI's registry of projects, written as Gemini CLI 0.61 writes it (its
`ProjectRegistry`): what a session materialised from another host needs for `gemini --resume`
to find it.

Gemini CLI keeps a project's sessions under `<gemini dir>/tmp/<slug>/chats/`, the slug found by
the project's path (the directory the CLI runs in) in `<gemini dir>/projects.json`
(`{"projects": {"<path>": "<slug>"}}`), each slug folder owned by the path in its `.project_root`
(in `tmp/<slug>` and `history/<slug>`). For a path it does not know, it takes the slug folder
whose `.project_root` names the path, else claims a new slug: the folder's name in lower case,
every other character than `a-z0-9` a `-` (runs of them one, none at either end; `project` when
nothing is left), then `-1`, `-2`… while that slug is registered or its folder owned by another
path. It edits `projects.json` under a lock of its own (`proper-lockfile`: a directory
`projects.json.lock`, taken as stale after 10 s), which cos takes too.
"""

from __future__ import annotations

import json
import os
import re
import time

from coding_os import durable
from coding_os.errors import CosError, InvalidInput, StateIOError

__all__ = ["REGISTRY_FILE", "ROOT_MARKER", "Slug", "find_slug", "register", "slugify"]

REGISTRY_FILE = "projects.json"
ROOT_MARKER = ".project_root"
MAX_REGISTRY_BYTES = 4 << 20
LOCK_STALE_S = 10.0  # proper-lockfile's default `stale`
LOCK_WAIT_S = 10.0  # as long as Gemini CLI waits for it
LOCK_RETRY_S = 0.1
_SLUG = re.compile(r"^[a-z0-9-]+$")
# The folders whose `<slug>/.project_root` Gemini CLI keeps (Storage: the temp and history dirs).
_BASE_DIRS = ("tmp", "history")


class Slug:
    """A project's slug, and whether `projects.json` maps the project to it already."""

    __slots__ = ("name", "registered")

    def __init__(self, name: str, registered: bool) -> None:
        self.name = name
        self.registered = registered

    def __repr__(self) -> str:
        return f"Slug({self.name!r}, registered={self.registered})"


def slugify(text: str) -> str:
    """A folder name as Gemini CLI makes a slug of it."""
    slug = re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")
    return slug or "project"


def _registry(gemini_dir: str) -> dict[str, str]:
    """The path -> slug map of `projects.json` (empty when there is none).

    Raises:
        InvalidInput: it is not what Gemini CLI writes (Gemini would reset it: cos leaves it).
        StateIOError: it cannot be read.
    """
    path = os.path.join(gemini_dir, REGISTRY_FILE)
    try:
        raw = durable.read_regular(path, MAX_REGISTRY_BYTES)
    except (OSError, CosError) as exc:
        raise StateIOError(f"cannot read {path}: {exc}") from None
    if raw is None:
        return {}
    try:
        data = json.loads(raw.decode("utf-8")) if raw.strip() else {"projects": {}}
    except (ValueError, UnicodeDecodeError):
        data = None
    projects = data.get("projects") if isinstance(data, dict) else None
    if not isinstance(projects, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and _SLUG.match(v)
            for k, v in projects.items()):
        raise InvalidInput(f"{path} is not a Gemini CLI project registry "
                           "({\"projects\": {path: slug}}): fix or remove it; nothing was written")
    return dict(projects)


def _owner(gemini_dir: str, base: str, slug: str) -> str | None:
    """The path in `<base>/<slug>/.project_root`, None when there is no such file."""
    marker = os.path.join(gemini_dir, base, slug, ROOT_MARKER)
    try:
        raw = durable.read_regular(marker, 64 << 10)
    except (OSError, CosError):
        return ""  # there, but not readable: owned by nobody this can name
    return raw.decode("utf-8", "replace").strip() if raw is not None else None


def _owned_by(gemini_dir: str, slug: str, project: str) -> bool:
    """Whether no marker of `slug` names another path than `project`."""
    return all(_owner(gemini_dir, base, slug) in (None, project) for base in _BASE_DIRS)


def _listed(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _choose(gemini_dir: str, project: str, projects: dict[str, str]) -> Slug:
    """The slug Gemini CLI would take for `project`, given the registry `projects`."""
    known = projects.get(project)
    if known is not None and _owned_by(gemini_dir, known, project):
        return Slug(known, True)
    for base in _BASE_DIRS:
        for candidate in _listed(os.path.join(gemini_dir, base)):
            if _SLUG.match(candidate) and _owner(gemini_dir, base, candidate) == project:
                return Slug(candidate, False)
    stem = slugify(os.path.basename(project) or "project")
    taken = {slug for path, slug in projects.items() if path != project}
    counter = 0
    while True:
        candidate = stem if counter == 0 else f"{stem}-{counter}"
        counter += 1
        if candidate not in taken and _owned_by(gemini_dir, candidate, project):
            return Slug(candidate, False)


def find_slug(gemini_dir: str, project: str) -> Slug:
    """The slug Gemini CLI takes for the project at the absolute path `project`, nothing
    written.

    Raises:
        InvalidInput: `projects.json` is not a registry Gemini CLI writes.
        StateIOError: it cannot be read.
    """
    return _choose(gemini_dir, project, _registry(gemini_dir))


class _RegistryLock:
    """Gemini CLI's lock of `projects.json`: the directory `projects.json.lock`, made with
    mkdir, taken over when older than LOCK_STALE_S."""

    def __init__(self, registry: str) -> None:
        self.path = registry + ".lock"

    def __enter__(self) -> _RegistryLock:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                os.mkdir(self.path, 0o755)
                return self
            except FileExistsError:
                pass
            except OSError as exc:
                raise StateIOError(f"cannot lock {self.path}: {exc.strerror}") from None
            try:
                stale = time.time() - os.stat(self.path).st_mtime > LOCK_STALE_S
            except FileNotFoundError:
                continue
            if stale:
                try:
                    os.rmdir(self.path)
                except OSError:
                    pass
                continue
            if time.monotonic() > deadline:
                raise StateIOError(f"{self.path} is held (a Gemini CLI starting?): try again")
            time.sleep(LOCK_RETRY_S)

    def __exit__(self, *exc: object) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def register(gemini_dir: str, project: str) -> Slug:
    """Register the project at the absolute path `project` with Gemini CLI as it does itself:
    its slug (`find_slug`, under Gemini's lock of `projects.json`) mapped in `projects.json`,
    and `.project_root` naming it in the slug's temp and history folders. Changes nothing that
    is already so; returns the slug (`registered`: it was mapped before).

    Raises:
        InvalidInput: `projects.json` is not a registry Gemini CLI writes.
        StateIOError: a file cannot be read or written, or the lock is held too long.
    """
    durable.ensure_dir(gemini_dir)
    registry = os.path.join(gemini_dir, REGISTRY_FILE)
    with _RegistryLock(registry):
        projects = _registry(gemini_dir)
        slug = _choose(gemini_dir, project, projects)
        for base in _BASE_DIRS:
            folder = durable.ensure_dir(os.path.join(gemini_dir, base, slug.name))
            if _owner(gemini_dir, base, slug.name) is None:
                _write_marker(os.path.join(folder, ROOT_MARKER), project)
        if projects.get(project) != slug.name:
            projects[project] = slug.name
            text = json.dumps({"projects": projects}, indent=2, ensure_ascii=False)
            durable.atomic_write(registry, text.encode("utf-8"))
    return slug


def _write_marker(path: str, project: str) -> None:
    """Write a slug folder's `.project_root` once (another writer's stays)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o644)
    except FileExistsError:
        return
    except OSError as exc:
        raise StateIOError(f"cannot write {path}: {exc.strerror}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(project)
