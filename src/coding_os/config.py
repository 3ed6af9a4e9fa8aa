"""Project configuration: `.coding-os.yaml` at the project root.

Read lazily (PyYAML is not imported on the hook's hot path). Known keys:

    state:
      horizons:            # trust horizon per state file name or prefix*, as a duration
        .task-current: 8h
        .gate-*: 120m
    checkpoints:           # docs/checkpoints.md
      auto: true
      mode: worktree       # or tracked
      max_file_bytes: 2MiB
      max_total_bytes: 2GiB
      start_daemon: true   # a hook starts the daemon's file watcher for a large tree
    gates:                 # policy gates on tool calls, each off by default (docs/gates.md)
      require_task_for_edits: true
      protect_paths: [".env", "secrets/**"]
      block_secrets: true
    summarizer:
      command: claude -p   # docs/checkpoints.md
    redact: true           # false keeps secrets in what cos logs, stores and indexes (redact.py)

A repository brings this file, so it is read as data from elsewhere (DESIGN.md §11, bounded
input): only a regular file (never through a symlink, never a device or a FIFO) of at most
MAX_CONFIG_BYTES, with no aliases (`*name`: a configuration never needs one, and a few hundred
bytes of them stand for billions of values), at most MAX_DEPTH levels of nesting and MAX_NODES
values. Anything else is one InvalidInput.
"""

from __future__ import annotations

import os

from coding_os.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CONFIG_FILE", "MAX_CONFIG_BYTES", "MAX_DEPTH", "MAX_NODES", "load_config",
           "load_config_cached", "parse_duration"]

CONFIG_FILE = ".coding-os.yaml"
MAX_CONFIG_BYTES = 1 << 20
MAX_DEPTH = 64  # mappings and lists inside one another
MAX_NODES = 10_000  # keys, values and list items in all
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(raw: object, what: str = "duration") -> float:
    """Seconds from a number of seconds or a string like `90s`, `120m`, `8h`, `2d`.

    Raises:
        InvalidInput: it is not a positive duration.
    """
    if isinstance(raw, bool):
        raise InvalidInput(f"{what}: expected a duration like 120m or 8h, got {raw!r}")
    if isinstance(raw, (int, float)):
        seconds = float(raw)
    else:
        text = str(raw).strip().lower()
        unit = _UNITS.get(text[-1:]) if text else None
        number = text[:-1] if unit else text
        try:
            seconds = float(number) * (unit or 1)
        except ValueError:
            raise InvalidInput(f"{what}: expected a duration like 120m or 8h, got {str(raw)[:40]!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise InvalidInput(f"{what}: a duration must be positive, got {str(raw)[:40]!r}")
    return seconds


def load_config(project_root: str) -> dict[str, Any]:
    """The parsed `.coding-os.yaml` of the project, or {} when there is none.

    Raises:
        InvalidInput: the file is not a regular file, is larger than MAX_CONFIG_BYTES, cannot
            be read, is not valid YAML, holds an alias, nests deeper than MAX_DEPTH, holds more
            than MAX_NODES values, or is not a mapping.
    """
    from coding_os import durable

    path = os.path.join(project_root, CONFIG_FILE)
    try:
        raw = durable.read_regular(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None
    if raw is None:
        return {}
    import yaml

    try:
        loader = _bounded_loader()(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not UTF-8 text") from None
    try:
        data = loader.get_single_data()
    except _Refused as exc:
        raise InvalidInput(f"{path} (line {exc.line}): {exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise InvalidInput(f"{path}{where}: not valid YAML") from None
    finally:
        loader.dispose()
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: expected a mapping at the top level")
    return data


class _Refused(Exception):
    """What the bounded loader will not compose; `line` is where (1-based)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


def _bounded_loader() -> type[Any]:
    """PyYAML's SafeLoader, refusing aliases and counting depth and values as it composes the
    document: the refusal comes before anything is built, and a document of aliases (which the
    loader would share, not copy) never reaches code that walks it as a tree."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.nodes = 0
            self.depth = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # type: ignore[no-untyped-call]
            line = event.start_mark.line + 1
            if isinstance(event, yaml.AliasEvent):
                raise _Refused(f"aliases (*{event.anchor}) are not allowed in a configuration",
                               line)
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise _Refused(f"more than {MAX_NODES} values", line)
            if self.depth >= MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep", line)
            self.depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

    return BoundedLoader


def load_config_cached(project_root: str, state_dir: str) -> dict[str, Any]:
    """`load_config`, through a JSON cache in the state dir keyed by the file's mtime and size.

    The hook path calls this: parsing YAML means importing PyYAML, which costs more than the
    whole hook; the cache is read with the hot path's JSON reader instead.

    Raises:
        InvalidInput: as `load_config`.
    """
    from coding_os import jsonwire
    from coding_os import durable

    path = os.path.join(project_root, CONFIG_FILE)
    try:
        st = os.lstat(path)  # as load_config reads it: a symlink is refused, never followed
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror}") from None
    key = f"{st.st_mtime_ns}:{st.st_size}"
    cache_path = os.path.join(state_dir, ".config-cache.json")
    cached = durable.read_small(cache_path)
    if cached:
        try:
            record = jsonwire.loads(cached.decode("utf-8", "replace"))
        except ValueError:
            record = None
        if isinstance(record, dict) and record.get("key") == key:
            config = record.get("config")
            if isinstance(config, dict):
                return config
    config = load_config(project_root)
    try:
        encoded = jsonwire.dumps({"key": key, "config": config})
    except (TypeError, ValueError):
        return config  # YAML values JSON cannot hold (dates, ...): parse each time instead
    if os.path.isdir(state_dir):
        from coding_os.errors import StateIOError

        try:
            durable.atomic_write(cache_path, encoded.encode("ascii"), sync=False)
        except StateIOError:
            pass  # the cache is an optimisation; the parsed config is still right
    return config
