"""Has any log the index is built from changed since the last import? Answered with stats alone.

A lookup (`cos resume`, `cos sessions`) imports what changed before it reads the index. When
nothing changed, even loading the importers costs more than the lookup itself, so the last
import leaves a fingerprint of every file it could have read: the path, size, mtime and inode of
each file under `<claude_dir>/projects`, `<codex_dir>/sessions`, Codex's `session_index.jsonl`,
Gemini CLI's `<gemini_dir>/projects.json` and `<gemini_dir>/tmp/*/chats`, and
the cos transcripts `<state_dir>/<agent>/transcripts/*.jsonl`. A lookup walks the same files,
and an equal fingerprint means the importers would find nothing to read.

The host name (COS_HOST, else the hostname) and the database (COS_DATABASE_URL) are part of the
fingerprint: the rows an import writes carry the name and go to that database, so an import under
another name, or into another database (a shared PostgreSQL that already holds other hosts' rows),
is never skipped.

The fingerprint is taken before an import reads anything and saved after the import state, so a
file that changes during an import, or an import killed half way, only makes the next lookup
import again. Standard library only: this runs before any importer is loaded.
"""

from __future__ import annotations

import os
import zlib

from coding_os import durable
from coding_os.adapters import log_dir
from coding_os.state.tiers import RESERVED_DIRS, Tiers

__all__ = ["FINGERPRINT_FILE", "fingerprint", "unchanged", "save", "forget"]

FINGERPRINT_FILE = ".import-state.fingerprint"
_MAX_BYTES = 4096


def _walk(top: str, out: list[str]) -> None:
    """Every file below `top` (symlinks not followed), as `path size mtime_ns inode` lines."""
    try:
        entries = list(os.scandir(top))
    except OSError:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _walk(entry.path, out)
                continue
            st = entry.stat(follow_symlinks=False)
        except OSError:
            out.append(f"{entry.path} ?")
            continue
        out.append(f"{entry.path} {st.st_size} {st.st_mtime_ns} {st.st_ino}")


def fingerprint(tiers: Tiers, claude_dir: str, codex_dir: str,
                gemini_dir: str | None = None) -> str:
    """The fingerprint of every log an import of these directories could read (`gemini_dir`:
    Gemini CLI's for this process's environment unless given)."""
    if gemini_dir is None:
        gemini_dir = log_dir("gemini", os.environ)
    lines: list[str] = [f"claude {claude_dir}", f"codex {codex_dir}", f"gemini {gemini_dir}",
                        f"host {os.environ.get('COS_HOST') or os.uname().nodename}",
                        f"database {os.environ.get('COS_DATABASE_URL', '')}"]
    _walk(os.path.join(claude_dir, "projects"), lines)
    _walk(os.path.join(codex_dir, "sessions"), lines)
    try:
        slugs = os.listdir(os.path.join(gemini_dir, "tmp"))
    except OSError:
        slugs = []
    for slug in slugs:
        _walk(os.path.join(gemini_dir, "tmp", slug, "chats"), lines)
    for index in (os.path.join(codex_dir, "session_index.jsonl"),
                  os.path.join(gemini_dir, "projects.json")):
        try:
            st = os.stat(index)
            lines.append(f"{index} {st.st_size} {st.st_mtime_ns} {st.st_ino}")
        except OSError:
            pass
    try:
        agents = os.listdir(tiers.state_dir)
    except OSError:
        agents = []
    for agent in agents:
        if agent.startswith(".") or agent in RESERVED_DIRS:
            continue
        folder = os.path.join(tiers.state_dir, agent, "transcripts")
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for name in names:
            if name.endswith(".jsonl") and not name.startswith("."):
                path = os.path.join(folder, name)
                try:
                    st = os.stat(path)
                except OSError:
                    lines.append(f"{path} ?")
                    continue
                lines.append(f"{path} {st.st_size} {st.st_mtime_ns} {st.st_ino}")
    lines.sort()
    data = "\n".join(lines).encode("utf-8", "surrogateescape")
    # Two checksums of different kinds and the length: a cache key, not a security boundary.
    return f"{len(lines)}-{len(data)}-{zlib.crc32(data):08x}-{zlib.adler32(data):08x}"


def unchanged(tiers: Tiers, claude_dir: str, codex_dir: str,
              gemini_dir: str | None = None) -> bool:
    """Whether the last import saw exactly the logs that are there now."""
    saved = durable.read_small(os.path.join(tiers.state_dir, FINGERPRINT_FILE), _MAX_BYTES)
    if not saved:
        return False
    return saved.decode("ascii", "replace") == fingerprint(tiers, claude_dir, codex_dir, gemini_dir)


def save(tiers: Tiers, value: str) -> None:
    """Remember `value`, taken before an import that has now been saved in full."""
    path = os.path.join(tiers.state_dir, FINGERPRINT_FILE)
    if durable.read_small(path, _MAX_BYTES) == value.encode("ascii"):
        return
    durable.atomic_write(path, value.encode("ascii"))


def forget(tiers: Tiers) -> None:
    """Drop the fingerprint, so the next lookup imports (before the index is emptied)."""
    try:
        os.unlink(os.path.join(tiers.state_dir, FINGERPRINT_FILE))
    except FileNotFoundError:
        pass
    except OSError as exc:
        from coding_os.errors import StateIOError

        raise StateIOError(f"cannot remove {FINGERPRINT_FILE} in {tiers.state_dir}: "
                           f"{exc.strerror or exc}") from None
