"""The live leaf of a Claude Code transcript, read from its end: what a hook records as the
native point of a checkpoint (checkpoints/auto.py). On the hook's path: the standard library
and jsonwire only. The whole tree is tree.py's.
"""

from __future__ import annotations

import os

from coding_os import jsonwire

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

__all__ = ["MESSAGE_TYPES", "entry_uuid", "in_tree", "is_message", "leaf_uuid"]

# The entries a live leaf can be: what the model was sent or answered.
MESSAGE_TYPES = frozenset({"user", "assistant"})
# A tail read starts with this many bytes and doubles until it finds a message.
_TAIL_START = 64 * 1024


def entry_uuid(entry: Mapping[str, Any]) -> str | None:
    """The entry's uuid, or None when it has none."""
    value = entry.get("uuid")
    return value if isinstance(value, str) and value else None


def in_tree(entry: Mapping[str, Any]) -> bool:
    """Whether the entry is a node of the conversation's tree (a uuid, not a sidechain's)."""
    return entry_uuid(entry) is not None and entry.get("isSidechain") is not True


def is_message(entry: Mapping[str, Any]) -> bool:
    """Whether the entry is a message of the conversation (what a live leaf can be)."""
    return entry.get("type") in MESSAGE_TYPES and in_tree(entry)


def leaf_uuid(path: str | os.PathLike[str]) -> str | None:
    """The uuid of the live leaf of the transcript at `path`: its last-written message.

    Reads the file from its end, a growing window at a time, so a long transcript costs about
    its last entries. A torn last line (a writer mid-append) is skipped. None when the file has
    no message or cannot be read.
    """
    try:
        handle = open(path, "rb")
    except OSError:
        return None
    with handle:
        try:
            size = os.fstat(handle.fileno()).st_size
            end, window, first = size, _TAIL_START, True
            while True:
                start = max(0, end - window)
                handle.seek(start)
                chunk = handle.read(end - start)
                # At the end of the file, what follows the last newline is torn (or nothing).
                body = chunk[: chunk.rfind(b"\n") + 1] if first else chunk
                head = -1
                if start > 0:
                    # The window starts inside a line: that line is read with the next window.
                    head = body.find(b"\n")
                    if head < 0:
                        window *= 2
                        continue
                for raw in reversed(body[head + 1:].split(b"\n")):
                    found = _message_uuid(raw)
                    if found is not None:
                        return found
                if start == 0:
                    return None
                end, window, first = start + head + 1, window * 2, False
        except OSError:
            return None


def _message_uuid(raw: bytes) -> str | None:
    body = raw.strip()
    if not body or b'"uuid"' not in body:
        return None
    try:
        entry = jsonwire.loads(body)
    except ValueError:
        return None
    if isinstance(entry, dict) and is_message(entry):
        return entry_uuid(entry)
    return None
