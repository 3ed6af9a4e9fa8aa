"""Consent to a repository's commands (DESIGN.md §11): a command a project's `.coding-os.yaml`
configures (`summarizer.command`, and whatever else a repository may configure) runs only after
this user said so with `cos trust`, which records the file's sha256 in the user's hub
(`~/.coding-os/trust.json`), as direnv's `allow` does. A changed file needs it again; `cos trust
--revoke` takes it back. A `--dry-run` never runs one.
"""

from __future__ import annotations

import hashlib
import json
import os

from coding_os import durable
from coding_os.config import CONFIG_FILE, MAX_CONFIG_BYTES
from coding_os.errors import ConsentNeeded, InvalidInput

__all__ = ["TRUST_FILE", "digest", "trust", "revoke", "is_trusted", "require"]

TRUST_FILE = "trust.json"  # in the user's hub


def _config_path(project_root: str) -> str:
    return os.path.join(os.path.realpath(project_root), CONFIG_FILE)


def digest(project_root: str) -> str | None:
    """The sha256 of the project's `.coding-os.yaml` as it is now, or None when it has none.

    Raises:
        InvalidInput: it is not a regular file, or too large to be a configuration.
    """
    path = _config_path(project_root)
    try:
        data = durable.read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    if data is None:
        return None
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _load(hub: str) -> dict[str, str]:
    data = durable.read_small(os.path.join(hub, TRUST_FILE), 4 << 20)
    try:
        found = json.loads(data) if data else {}
    except ValueError:
        return {}  # unreadable: trusts nothing, and the next `cos trust` writes it anew
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)} \
        if isinstance(found, dict) else {}


def _save(hub: str, entries: dict[str, str]) -> None:
    durable.ensure_dir(hub)
    durable.atomic_write(os.path.join(hub, TRUST_FILE),
                         (json.dumps(entries, indent=2, sort_keys=True) + "\n").encode())


def trust(project_root: str, hub: str) -> dict[str, object]:
    """Trust the project's `.coding-os.yaml` as it is now.

    Raises:
        InvalidInput: the project has no `.coding-os.yaml`, or it cannot be read.
        StateIOError: the hub cannot be written.
    """
    found = digest(project_root)
    path = _config_path(project_root)
    if found is None:
        raise InvalidInput(f"{path} does not exist: there is nothing to trust")
    entries = _load(hub)
    entries[path] = found
    _save(hub, entries)
    return {"file": path, "sha256": found, "trusted": True}


def revoke(project_root: str, hub: str) -> dict[str, object]:
    """Take back the trust in the project's `.coding-os.yaml` (whatever its content).

    Raises:
        StateIOError: the hub cannot be written.
    """
    path = _config_path(project_root)
    entries = _load(hub)
    was = entries.pop(path, None) is not None
    if was:
        _save(hub, entries)
    return {"file": path, "trusted": False, "was_trusted": was}


def is_trusted(project_root: str, hub: str) -> bool:
    """Whether this user trusted the project's `.coding-os.yaml` exactly as it is now."""
    try:
        found = digest(project_root)
    except InvalidInput:
        return False
    return found is not None and _load(hub).get(_config_path(project_root)) == found


def require(project_root: str, hub: str, what: str) -> None:
    """Refuse to run `what` (a command the project's configuration names) without consent.

    Raises:
        ConsentNeeded: this user has not trusted the configuration as it is now.
    """
    if not is_trusted(project_root, hub):
        raise ConsentNeeded(f"{_config_path(project_root)} configures {what}, which runs only "
                            "once you trust the file: read it, then run `cos trust` (a changed "
                            "file needs it again)")
