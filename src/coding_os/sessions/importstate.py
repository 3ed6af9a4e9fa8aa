"""The import state on disk: a small stat record, and the importers' aggregates kept apart.

`<state_dir>/.import-state.json` (`STATE_FILE`, the stat record) holds, for every native log read,
its size, mtime, inode, resume offset and tail fingerprint, the head of its aggregate (what the
importer needs to tell which session the file belongs to) and where its whole aggregate is kept;
the index's own bookkeeping rides along in the same document (`extras`). The whole aggregates are
in `<state_dir>/.import-state.<generation>.pack`, the pack the record names: one JSON document a
line, each found by its offset, length and CRC-32. An unchanged re-import reads the record alone
and stats the logs; a file that changed has its own aggregate read back (to resume from it), and
a session assembled again those of its files.

Crash safety: a save appends the aggregates it has not kept yet to the pack and flushes it, then
replaces the record atomically, so a record only ever names bytes that are on disk. An append
leaves the aggregates it replaces behind as garbage; once the garbage outgrows what is live, the
save writes a new pack of the live aggregates only (and a full import always starts one), then
the record naming it, then deletes the other packs. Saves take `.import-state.lock`, so two
processes never append at once; the last record written wins, as before. A reader keeps the pack
it loaded open, so a pack deleted under it is still read. A pack missing, cut short or changed
(`AggregateLost` when an aggregate is read back) means the logs are read again: nothing here
trusts bytes the record does not vouch for.

Gemini CLI's session files are read whole, not resumed: `<state_dir>/.import-state.gemini.jsonl`
(`GEMINI_FILE`) keeps each one's session as it was read, with the file's key
(`coding_os.adapters.gemini.kept`), so that an import reads again only the files that changed.
Its first line says whether the texts it keeps are redacted; each other line is one file. It is
replaced atomically after an import that read a Gemini file or found one gone, and a file it
does not vouch for (absent, of another format, another redaction, a line that is not one file's)
is read again.
"""

from __future__ import annotations

import json
import os
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coding_os import durable, jsonwire
from coding_os.adapters.gemini import kept as gemini_kept
from coding_os.adapters.gemini.sessions import KnownFile
from coding_os.adapters.native import (
    STATE_VERSION,
    AggregateLost,
    FileRecord,
    ImportState,
    StoredAggregate,
)
from coding_os.errors import CosError

__all__ = ["STATE_FILE", "LOCK_FILE", "GEMINI_FILE", "KeptGemini", "KeptState", "load", "save",
           "load_gemini", "save_gemini"]

STATE_FILE = ".import-state.json"
GEMINI_FILE = ".import-state.gemini.jsonl"
_GEMINI_MAX = 1 << 30  # a larger one is not read: every Gemini file is, instead
LOCK_FILE = ".import-state.lock"
_PACK = re.compile(r"^\.import-state\.([0-9a-f]{16})\.pack$")
# A pack is written anew when its garbage is more than what is live and more than this.
_GARBAGE_MIN = 8 << 20

# What a record's aggregate and head are kept as (secrets redacted): (aggregate, head).
Transform = Callable[[FileRecord], tuple[Any, Any]]


class _Pack:
    """One pack file, open for reading: the store of the records loaded with it."""

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self.fd = fd
        self.read_back: list[str] = []

    def read(self, path: str, offset: int, length: int, check: int) -> dict[str, Any]:
        """The aggregate of `path` kept at `offset` (see `AggregateStore`).

        Raises:
            AggregateLost: the bytes there are not the ones the record names.
        """
        raw = self.raw(path, offset, length, check)
        try:
            value = json.loads(raw)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise AggregateLost(f"the aggregate of {path} in {self.path} is not an object")
        self.read_back.append(path)
        return value

    def raw(self, path: str, offset: int, length: int, check: int) -> bytes:
        """The bytes of the aggregate of `path` kept at `offset`, checked.

        Raises:
            AggregateLost: they cannot be read or are not the ones the record names.
        """
        if self.fd < 0:
            raise AggregateLost(f"{self.path} is closed")
        try:
            raw = os.pread(self.fd, length, offset)
        except OSError as exc:
            raise AggregateLost(f"cannot read {self.path}: {exc.strerror or exc}") from None
        if len(raw) != length or zlib.crc32(raw) != check:
            raise AggregateLost(f"the aggregate of {path} in {self.path} was cut short or "
                                "changed")
        return raw

    def close(self) -> None:
        """Close the file (records loaded with it can no longer read their aggregates)."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class KeptState:
    """The import state as the last save left it: the record's document (`extras`: the index's
    bookkeeping), the `ImportState` (heads loaded, aggregates read back when asked for), and
    the paths whose aggregates were read back so far (`read_back`). Close it when done (a
    context manager)."""

    def __init__(self, extras: dict[str, Any] | None = None, state: ImportState | None = None,
                 pack: _Pack | None = None) -> None:
        self.extras: dict[str, Any] = extras if extras is not None else {}
        self.state = state if state is not None else ImportState()
        self.pack = pack

    @property
    def read_back(self) -> list[str]:
        """The files whose whole aggregates were read back from the pack, in that order."""
        return list(self.pack.read_back) if self.pack is not None else []

    def close(self) -> None:
        """Close the pack."""
        if self.pack is not None:
            self.pack.close()

    def __enter__(self) -> KeptState:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load(state_dir: str) -> KeptState:
    """The import state kept in `state_dir`; what cannot be read (no record, a record of
    another version, no pack) gives a state without those files: they are read again.

    The record's other keys are the index's (`extras`), kept whatever the version.
    """
    try:
        with open(os.path.join(state_dir, STATE_FILE), "rb") as f:
            document = json.loads(f.read())
    except (OSError, ValueError):
        return KeptState()
    if not isinstance(document, dict):
        return KeptState()
    extras = {key: value for key, value in document.items()
              if key not in ("version", "files", "links", "pack")}
    name = document.get("pack")
    if document.get("version") != STATE_VERSION or not isinstance(name, str) \
            or _PACK.match(name) is None:
        return KeptState(extras)
    path = os.path.join(state_dir, name)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC)
    except OSError:
        return KeptState(extras)  # every file is read again
    pack = _Pack(path, fd)

    def stored(_path: str, raw: Mapping[str, Any]) -> StoredAggregate | None:
        at = raw.get("at")
        if not (isinstance(at, list) and len(at) == 3
                and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in at)):
            return None
        return StoredAggregate(pack, at[0], at[1], at[2])

    return KeptState(extras, ImportState.from_dict(document, stored), pack)


def save(state_dir: str, state: ImportState, extras: Mapping[str, Any], kept: KeptState,
         transform: Transform | None = None, again: bool = False) -> None:
    """Keep `state` (and the index's `extras`) in `state_dir`: the aggregates not kept yet are
    added to the pack (`kept`'s, the one loaded), each record's aggregate and head passed
    through `transform` first (with `again`, every record's is, read back and written anew);
    then the record is replaced.

    Raises:
        StateIOError: the pack or the record cannot be written.
        AggregateLost: an aggregate to write anew cannot be read back.
    """
    durable.ensure_dir(state_dir)
    with durable.exclusive_lock(os.path.join(state_dir, LOCK_FILE)):
        _save(state_dir, state, extras, kept, transform, again)


def _save(state_dir: str, state: ImportState, extras: Mapping[str, Any], kept: KeptState,
          transform: Transform | None, again: bool) -> None:
    pack = kept.pack
    kept_here: dict[str, StoredAggregate] = {}  # in the loaded pack, as they are
    new: list[tuple[str, bytes, Any]] = []  # (path, bytes, head) to write
    for path in sorted(state.files):
        record = state.files[path]
        stored = record.stored
        if pack is not None and stored is not None and stored.store is pack and not again:
            kept_here[path] = stored
            continue
        aggregate: Any = record.aggregate
        head: Any = record.head
        if transform is not None and (again or stored is None):
            aggregate, head = transform(record)
        new.append((path, _encode(aggregate), head))
    live = sum(at.length for at in kept_here.values()) + sum(len(blob) for _, blob, _ in new)
    if pack is not None and not again and pack.fd >= 0 and _same_file(pack.path, pack.fd) \
            and os.fstat(pack.fd).st_size - (live - sum(len(b) for _, b, _ in new)) \
            <= max(live, _GARBAGE_MIN):
        name = os.path.basename(pack.path)
        places = {path: [at.offset, at.length, at.check] for path, at in kept_here.items()}
        places.update(_append(pack.path, new))
    else:  # a new pack: the live aggregates only
        name = f".import-state.{os.urandom(8).hex()}.pack"
        copies: list[tuple[str, bytes, Any]] = []
        if pack is not None:
            copies = [(path, pack.raw(path, at.offset, at.length, at.check), None)
                      for path, at in kept_here.items()]
        places = _append(os.path.join(state_dir, name), copies + new, create=True)
    heads = {path: head for path, _, head in new}
    files: dict[str, Any] = {}
    for path in sorted(state.files):
        record = state.files[path]
        entry = record.stat_dict()
        entry["head"] = heads.get(path, record.head)
        entry["at"] = places[path]
        files[path] = entry
    document = {**extras, "version": STATE_VERSION, "pack": name, "links": state.links,
                "files": files}
    # ASCII: a text with a lone surrogate (a log may escape one) is kept, and any reader of the
    # record (brain.search) reads it as UTF-8.
    durable.atomic_write(os.path.join(state_dir, STATE_FILE),
                         json.dumps(document, separators=(",", ":")).encode("ascii"))
    for other in _names(state_dir):
        if _PACK.match(other) and other != name:
            durable.unlink_quietly(os.path.join(state_dir, other))


def _encode(aggregate: Any) -> bytes:
    # A lone surrogate (a log may escape one) is kept as it is: `json.loads` of bytes reads it.
    return json.dumps(aggregate, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8", "surrogatepass") + b"\n"


def _append(path: str, blobs: list[tuple[str, bytes, Any]],
            create: bool = False) -> dict[str, list[int]]:
    """Append `blobs` to the pack at `path` (a new file with `create`), flushed to disk; where
    each went, by path.

    Raises:
        StateIOError: the pack cannot be written.
    """
    flags = os.O_WRONLY | os.O_APPEND | (os.O_EXCL if create else 0)
    try:
        fd = durable.open_private(path, flags)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    places: dict[str, list[int]] = {}
    try:
        offset = os.fstat(fd).st_size
        chunk: list[bytes] = []
        pending = 0
        for name, blob, _head in blobs:
            places[name] = [offset, len(blob), zlib.crc32(blob)]
            offset += len(blob)
            chunk.append(blob)
            pending += len(blob)
            if pending >= 1 << 22:
                durable.write_all(fd, b"".join(chunk))
                chunk, pending = [], 0
        if chunk:
            durable.write_all(fd, b"".join(chunk))
        os.fsync(fd)
    except OSError as exc:
        raise durable.io_error(path, exc) from None
    finally:
        os.close(fd)
    return places


def _same_file(path: str, fd: int) -> bool:
    """Whether `path` is still the file open as `fd` (not deleted or replaced since)."""
    try:
        named, opened = os.stat(path, follow_symlinks=False), os.fstat(fd)
    except OSError:
        return False
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def _names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except OSError:
        return []


@dataclass
class KeptGemini:
    """The Gemini session files kept (see `GEMINI_FILE`) with the redaction a refresh asked
    for: each file's KnownFile, by path, and the line it was read from (written back as it is
    when the file is still unchanged)."""

    files: dict[str, KnownFile] = field(default_factory=dict)
    lines: dict[str, bytes] = field(default_factory=dict)


def load_gemini(state_dir: str, redacting: bool) -> KeptGemini:
    """The Gemini session files kept in `state_dir`, when their texts were kept as `redacting`
    asks (else none: every file is read again); a line that holds no file is left out."""
    try:
        data = durable.read_regular(os.path.join(state_dir, GEMINI_FILE), _GEMINI_MAX)
    except (OSError, CosError):  # unreadable, not a regular file: every file is read again
        data = None
    kept = KeptGemini()
    if data is None:
        return kept
    head, *lines = data.split(b"\n")
    header = jsonwire.loads_object(head)
    if header is None or header.get("format") != gemini_kept.FORMAT \
            or header.get("redacted") is not redacting:
        return kept
    for line in lines:
        found = gemini_kept.from_line(line)
        if found is not None:
            path, known = found
            kept.files[path] = known
            kept.lines[path] = line
    return kept


def save_gemini(state_dir: str, files: Mapping[str, KnownFile], kept: KeptGemini,
                redacting: bool) -> None:
    """Keep `files` (a Gemini scan's) in `state_dir` in place of `kept`, what `load_gemini`
    gave for the same `redacting`, unless they are the same (texts redacted when
    `redacting`).

    Raises:
        StateIOError: the file cannot be written.
    """
    if files.keys() == kept.files.keys() \
            and all(known is kept.files[path] for path, known in files.items()):
        return
    header = json.dumps({"format": gemini_kept.FORMAT, "redacted": redacting}).encode()
    lines = [header]
    for path, known in sorted(files.items()):
        line = kept.lines.get(path) if kept.files.get(path) is known else None
        lines.append(line if line is not None else gemini_kept.line(known, path, redacting))
    durable.ensure_dir(state_dir)
    # Not synced: after a crash, what is not there, or is not whole, is read again.
    durable.atomic_write(os.path.join(state_dir, GEMINI_FILE), b"\n".join(lines) + b"\n",
                         sync=False)
