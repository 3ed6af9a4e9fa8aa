"""Several hosts (DESIGN.md §8): the name of this host and the identity of a project.

- `this_host()`: `COS_HOST` when set (1–64 characters of `[A-Za-z0-9._-]`), else the hostname
  made valid. Rows the local importer writes and lines it replicates carry it.
- `project_keys(root)`: every identity of the repository checked out at `root`, strongest first:
  `git:<sha of the root commit>` (the lowest sha when HEAD's history has several roots; left out
  in a shallow clone, whose oldest commit is not the root) then `origin:<normalised origin URL>`.
  `project_key(root)` is the first of them (None outside a repository without an origin).
- A host registers its root under every identity (`register_project`); two checkouts are the same
  project when they share one identity, so a full clone and a shallow clone of one repository on
  two hosts meet through their origin URL. `host_roots(storage, root)` is where this project is
  checked out on each host known to the storage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from coding_os.errors import InvalidInput
from coding_os.git.command import GitError, git
from coding_os.storage.base import Storage

__all__ = ["this_host", "valid_host", "project_key", "project_keys", "normalise_origin",
           "register_project", "host_roots", "HOST_MAX"]

HOST_MAX = 64
_HOST = re.compile(r"[A-Za-z0-9._-]{1,64}")
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")
# (root, HEAD, origin) -> identities: HEAD moving re-derives them, nothing else does.
_KEYS_CACHE: dict[tuple[str, str, str], list[str]] = {}


def valid_host(name: str) -> str:
    """`name` when it is a valid host name (1–64 characters of [A-Za-z0-9._-]).

    Raises:
        InvalidInput: it is not.
    """
    if not _HOST.fullmatch(name):
        raise InvalidInput(f"host name {name[:80]!r}: use 1-{HOST_MAX} characters of "
                           "A-Z a-z 0-9 . _ -")
    return name


def this_host(env: Mapping[str, str] | None = None) -> str:
    """The name of this host: COS_HOST when set, else the hostname made valid.

    Raises:
        InvalidInput: COS_HOST is set but not a valid host name.
    """
    given = (os.environ if env is None else env).get("COS_HOST")
    if given is not None:
        return valid_host(given)
    name = _INVALID.sub("-", os.uname().nodename).strip("-.")[:HOST_MAX]
    return name or "localhost"


def normalise_origin(url: str) -> str:
    """An origin URL as the same repository is named from any host: no scheme, user, password,
    default port or trailing `.git`/slash; the host in lower case. `git@host:path`,
    `ssh://git@host/path` and `https://host/path.git` all give `host/path`; a local path stays
    a path."""
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    colon, slash = url.find(":"), url.find("/")
    if sep and scheme != "file":
        netloc, _, path = rest.partition("/")
        host = netloc.rpartition("@")[2].lower()
        if re.fullmatch(r".*:\d*", host):  # a port: the same repository whatever it is
            host = host.rpartition(":")[0]
        text = f"{host}/{path}"
    elif sep:
        text = rest
    elif colon > 0 and (slash < 0 or colon < slash):  # scp-like: [user@]host:path
        host = url[:colon].rpartition("@")[2].lower()
        text = f"{host}/{url[colon + 1:].lstrip('/')}"
    else:
        text = url
    text = text.rstrip("/")
    if text.endswith(".git"):
        text = text[:-4]
    return text.rstrip("/")


def _git_text(root: str, *args: str) -> str | None:
    try:
        out = git(root, *args, check=True)
    except GitError:
        return None
    return out.decode("utf-8", "replace").strip()


def project_keys(root: str) -> list[str]:
    """Every identity of the repository at `root`, strongest first (see the module docstring);
    empty when it is not a repository with a commit or an origin."""
    head = _git_text(root, "rev-parse", "--verify", "--quiet", "HEAD") or ""
    origin = _git_text(root, "config", "--get", "remote.origin.url") or ""
    cached = _KEYS_CACHE.get((root, head, origin))
    if cached is not None:
        return list(cached)
    keys: list[str] = []
    if head and _git_text(root, "rev-parse", "--is-shallow-repository") != "true":
        roots = (_git_text(root, "rev-list", "--max-parents=0", "HEAD") or "").split()
        if roots:
            keys.append("git:" + min(roots))
    if origin:
        keys.append("origin:" + normalise_origin(origin))
    if head or origin:
        _KEYS_CACHE[(root, head, origin)] = list(keys)
    return keys


def project_key(root: str) -> str | None:
    """The project's identity: `git:<root commit>`, else `origin:<normalised URL>`, else None."""
    keys = project_keys(root)
    return keys[0] if keys else None


def register_project(storage: Storage, root: str, host: str | None = None) -> list[str]:
    """Record that the project at `root` is checked out there on `host` (default this host),
    under each of its identities; return them.

    Raises:
        StorageError: the storage cannot be written.
        InvalidInput: COS_HOST is not a valid host name.
    """
    keys = project_keys(root)
    name = host or this_host()
    for key in keys:
        storage.set_project_host(key, name, root)
    return keys


def host_roots(storage: Storage, root: str) -> dict[str, str]:
    """Where the project at `root` is checked out on each host the storage knows, found through
    any of its identities (the strongest identity wins for a host registered under several).

    Raises:
        StorageError: the storage cannot be read.
    """
    found: dict[str, str] = {}
    for key in project_keys(root):
        for host, where in storage.project_hosts(key).items():
            found.setdefault(host, where)
    return found
