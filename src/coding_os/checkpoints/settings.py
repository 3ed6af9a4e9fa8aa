"""`checkpoints:` of `.coding-os.yaml` and the limits it sets (DESIGN.md §5)."""

from __future__ import annotations

from coding_os.errors import InvalidInput

__all__ = ["MODES", "DEFAULT_CAP_BYTES", "DEFAULT_MAX_FILE_BYTES", "GRACE_S",
           "WATCHER_FROM_FILES", "Settings", "parse_size"]

DEFAULT_MAX_FILE_BYTES = 2 << 20  # files larger are listed as skipped (checkpoints.max_file_bytes)
MODES = ("worktree", "tracked")
DEFAULT_CAP_BYTES = 2 << 30
GRACE_S = 3600  # an object this young may belong to a checkpoint being taken: never collected
# From this many files in git's index a hook starts the daemon's file watcher when none answers:
# a `git status` of the tree then costs more than asking the watcher (see fingerprint.LIMIT,
# below which a stat of the tree spares even that).
WATCHER_FROM_FILES = 2000


class Settings:
    """`checkpoints:` of `.coding-os.yaml`: `mode`, `max_file_bytes`, `max_total_bytes`, and
    `start_daemon` (whether a hook starts the daemon's file watcher for a tree of
    `WATCHER_FROM_FILES` files or more)."""

    __slots__ = ("mode", "max_file_bytes", "max_total_bytes", "start_daemon")

    def __init__(self, config: dict[str, object] | None = None) -> None:
        section = (config or {}).get("checkpoints") or {}
        if not isinstance(section, dict):
            raise InvalidInput("checkpoints: in .coding-os.yaml must be a mapping")
        self.mode = str(section.get("mode", "worktree"))
        if self.mode not in MODES:
            raise InvalidInput(f"checkpoints.mode must be worktree or tracked, not {self.mode!r}")
        self.max_file_bytes = parse_size(section.get("max_file_bytes", DEFAULT_MAX_FILE_BYTES),
                                         "checkpoints.max_file_bytes")
        self.max_total_bytes = parse_size(section.get("max_total_bytes", DEFAULT_CAP_BYTES),
                                          "checkpoints.max_total_bytes")
        start = section.get("start_daemon", True)
        if not isinstance(start, bool):
            raise InvalidInput(f"checkpoints.start_daemon must be true or false, not {start!r}")
        self.start_daemon = start


def parse_size(value: object, what: str) -> int:
    """A size like `2MiB`, `512k` or `2000000`, in bytes.

    Raises:
        InvalidInput: it is not one, or not positive.
    """
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = str(value).strip().lower().removesuffix("ib").removesuffix("b")
    factor = units.get(text[-1:], 1)
    number = text[:-1] if text[-1:] in units else text
    try:
        size = int(float(number) * factor)
    except ValueError:
        raise InvalidInput(f"{what} must be a size like 2MiB or 2000000, not {value!r}") from None
    if size < 1:
        raise InvalidInput(f"{what} must be positive, not {value!r}")
    return size
