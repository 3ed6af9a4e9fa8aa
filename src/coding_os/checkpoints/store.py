"""The checkpoint object store (DESIGN.md §5): content-addressed, algorithm-tagged, shared.

An object is the bytes of a file (or a symlink's target, or a checkpoint's manifest), stored once
under `<state_dir>/checkpoints/objects/<algo>/<2 hex>/<rest>` as zlib-compressed bytes. Its id is
`<algo>:<hex digest of the raw bytes>`, `sha256:…` for every object cos writes; the algorithm
is part of the id and of the path so that objects of another algorithm can live beside them.
Two checkpoints that hold the same content share one object, and an object is never rewritten:
a writer that finds it present stops there.

An object is written to a temporary file in its own directory, flushed to disk, then renamed into
place, so a reader sees it whole or not at all, and one found in place is on disk; concurrent
writers of one object both succeed. A store made with `defer_sync` keeps its new objects in their
temporary files until `flush`, which flushes them all at once (the filesystem's journal commits
flushes that wait together in one go) and only then renames them into place: a snapshot of many
files pays about one flush instead of one per file, and the record naming them is written after.
Files of a git repository that git already holds are not copied here: a checkpoint refers to them
as `git:<blob id>` (see snapshot.py), and `verify` checks those too.

A store made with `pack` (a rewind's: the user waits on it) holds its new objects in memory and
`flush` writes them as one file, `objects/packs/<sha256 of the file>.pack`: the line
`cos-pack 1`, a line `<id> <length>` per object, an empty line, then the objects' zlib streams in
that order. One file made and flushed instead of one per object; its objects are read as any
other (a reader looks there for an object not found loose), and `gc` moves the ones still needed
out to loose objects and removes the pack.
"""

from __future__ import annotations

import os

from coding_os.errors import CosError, InvalidInput, StateIOError
from coding_os import durable

TYPE_CHECKING = False  # collections.abc is not imported at run time: see lock.py
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ALGORITHM", "PACKS", "ObjectStore", "DamagedObject", "valid_oid", "pack_entries"]

ALGORITHM = "sha256"
_HEX = frozenset("0123456789abcdef")
_LEVEL = 1  # best speed, as git compresses loose objects (core.looseCompression)
PACKS = "packs"
_PACK_MAGIC = b"cos-pack 1\n"


class DamagedObject(CosError):
    """An object is missing, unreadable, or its bytes no longer hash to its id."""

    exit_code = 6


def valid_oid(oid: object) -> bool:
    """Whether `oid` is a well-formed object id of this store (`sha256:` and 64 hex digits)."""
    if not isinstance(oid, str) or not oid.startswith(ALGORITHM + ":"):
        return False
    digest = oid[len(ALGORITHM) + 1:]
    return len(digest) == 64 and set(digest) <= _HEX


class ObjectStore:
    """The objects of one state dir's checkpoints. With `defer_sync`, new objects stay in their
    temporary files until `flush`; with `pack`, in memory until `flush` writes them as one pack;
    with `compress=False`, they are written as zlib streams of stored blocks (level 0: readers
    see no difference). The last two are for a caller the user waits on."""

    __slots__ = ("root", "defer_sync", "level", "pack", "_pending", "_held", "_packed")

    def __init__(self, checkpoints_dir: str, *, defer_sync: bool = False,
                 compress: bool = True, pack: bool = False) -> None:
        self.root = os.path.join(checkpoints_dir, "objects")
        self.defer_sync = defer_sync
        self.level = _LEVEL if compress else 0
        self.pack = pack
        self._pending: dict[str, str] = {}  # oid -> its temporary file, until `flush`
        self._held: dict[str, bytes] = {}  # oid -> its zlib stream, until `flush` (`pack`)
        # oid -> (pack, offset, length) of the packs in place, read at the first object not
        # found loose
        self._packed: dict[str, tuple[str, int, int]] | None = None

    def path(self, oid: str) -> str:
        """Where object `oid` lives.

        Raises:
            InvalidInput: `oid` is not an id of this store (so never a path outside it).
        """
        if not valid_oid(oid):
            raise InvalidInput(f"not an object id: {oid[:80]!r}")
        algo, digest = oid.split(":", 1)
        return os.path.join(self.root, algo, digest[:2], digest[2:])

    @staticmethod
    def oid_of(data: bytes) -> str:
        """The id `data` has (or would have) in the store."""
        from coding_os.digest import sha256_hex

        return f"{ALGORITHM}:{sha256_hex(data)}"

    def has(self, oid: str) -> bool:
        return (oid in self._pending or oid in self._held or os.path.exists(self.path(oid))
                or self._in_pack(oid) is not None
                or os.path.exists(self.path(oid)))  # `gc` moved its pack out meanwhile

    def put(self, data: bytes, *, sync: bool = True) -> tuple[str, int]:
        """Store `data`; return its id and the bytes written on disk (0 when it was there).

        Raises:
            StateIOError: the object cannot be written (a full disk, a read-only store).
        """
        oid = self.oid_of(data)
        path = self.path(oid)
        if oid in self._pending or oid in self._held:
            return oid, 0
        if os.path.exists(path):
            try:
                os.utime(path)  # in use again: `collect`'s grace counts from now
            except OSError:
                pass
            return oid, 0
        import zlib

        folder = os.path.dirname(path)
        packed = zlib.compress(data, self.level)
        if self.pack:
            self._held[oid] = packed
            return oid, len(packed)
        tmp = f"{path}.tmp-{os.getpid()}-{os.urandom(3).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            try:
                fd = os.open(tmp, flags, 0o400)
            except FileNotFoundError:  # the first object of its fan-out directory
                self._make_folders(folder)
                fd = os.open(tmp, flags, 0o400)
            try:
                durable.write_all(fd, packed)
                if sync and not self.defer_sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if self.defer_sync and sync:
                self._pending[oid] = tmp
            else:
                os.replace(tmp, path)
        except OSError as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise StateIOError(f"cannot write checkpoint object {oid}: "
                               f"{exc.strerror or exc}") from None
        return oid, len(packed)

    @staticmethod
    def _make_folders(folder: str) -> None:
        """Make the fan-out directory `folder`; in a store being made, all 256 of them at once:
        making a directory costs about what writing a small object does, and the first
        hundreds of checkpoints and restores would each make a few."""
        top = os.path.dirname(folder)
        if not os.path.isdir(top):
            durable.ensure_dir(top)
            for number in range(256):
                try:
                    os.mkdir(os.path.join(top, f"{number:02x}"), 0o700)
                except FileExistsError:
                    pass
        durable.ensure_dir(folder)

    def flush(self, also: list[str] | None = None) -> None:
        """Flush the objects put since the last flush, and the files or directories `also`,
        to disk at once; then rename the objects into place.

        Raises:
            StateIOError: a flush or rename failed (the objects not in place are discarded).
        """
        pack: tuple[str, str] | None = None
        try:
            pack = self._write_pack() if self._held else None
            durable.sync_files([*self._pending.values(), *([pack[0]] if pack else []),
                                *(also or [])])
            for oid in list(self._pending):
                os.replace(self._pending[oid], self.path(oid))
                del self._pending[oid]
            if pack is not None:
                os.replace(*pack)
                self._packed = None  # read again when asked
                self._held.clear()
        except OSError as exc:
            self._drop(pack)
            raise StateIOError(f"cannot write checkpoint objects: {exc.strerror or exc}") from None
        except StateIOError:
            self._drop(pack)
            raise

    def _write_pack(self) -> tuple[str, str]:
        """Write the objects held as a pack's temporary file; returns it and the pack's path."""
        from coding_os.digest import sha256_hex

        body = b"".join([_PACK_MAGIC, *(f"{oid} {len(data)}\n".encode("ascii")
                                        for oid, data in self._held.items()),
                         b"\n", *self._held.values()])
        folder = os.path.join(self.root, PACKS)
        final = os.path.join(folder, f"{sha256_hex(body)}.pack")
        tmp = f"{final}.tmp-{os.getpid()}-{os.urandom(3).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o400)
        except FileNotFoundError:  # the store's first pack
            durable.ensure_dir(folder)
            fd = os.open(tmp, flags, 0o400)
        try:
            durable.write_all(fd, body)
        except OSError:
            os.close(fd)
            durable.unlink_quietly(tmp)
            raise
        os.close(fd)
        return tmp, final

    def _drop(self, pack: tuple[str, str] | None) -> None:
        """A failed flush: nothing it held is kept."""
        if pack is not None:
            durable.unlink_quietly(pack[0])
        self.discard()

    def discard(self) -> None:
        """Remove the objects put and not flushed (a snapshot given up)."""
        for tmp in self._pending.values():
            durable.unlink_quietly(tmp)
        self._pending.clear()
        self._held.clear()

    def get(self, oid: str) -> bytes:
        """The bytes of object `oid`, checked against its id: loose, or else in a pack (a pack's
        copy also stands in for a damaged loose one).

        Raises:
            DamagedObject: it is missing, unreadable, or damaged.
        """
        if oid in self._held:
            return self._checked(oid, self._held[oid])
        path = self._pending.get(oid) or self.path(oid)
        try:
            return self._checked(oid, _read(path, oid))
        except FileNotFoundError:
            damage = None
        except DamagedObject as exc:
            damage = exc
        found = self._in_pack(oid)
        if found is not None:
            try:
                return self.get_packed(oid, *found)
            except DamagedObject:
                if damage is not None or os.path.exists(found[0]):
                    raise
        if damage is not None:
            raise damage
        try:  # `gc` moved the pack's objects out to loose ones meanwhile
            return self._checked(oid, _read(path, oid))
        except FileNotFoundError:
            raise DamagedObject(f"checkpoint object {oid} is missing") from None

    def get_loose(self, oid: str) -> bytes:
        """The bytes of the loose object `oid`, checked, whatever a pack holds (what `verify`
        and `gc` check a loose copy with).

        Raises:
            DamagedObject: it is missing, unreadable, or damaged.
        """
        try:
            return self._checked(oid, _read(self.path(oid), oid))
        except FileNotFoundError:
            raise DamagedObject(f"checkpoint object {oid} is missing") from None

    def _checked(self, oid: str, stream: bytes) -> bytes:
        """The bytes of the zlib `stream` of object `oid`, checked against its id.

        Raises:
            DamagedObject: they are not.
        """
        import zlib

        try:
            data = zlib.decompress(stream)
        except zlib.error as exc:
            raise DamagedObject(f"checkpoint object {oid} cannot be read: {exc}") from None
        if self.oid_of(data) != oid:
            raise DamagedObject(f"checkpoint object {oid} is damaged (its bytes hash otherwise)")
        return data

    def get_packed(self, oid: str, pack: str, offset: int, length: int) -> bytes:
        """The bytes of object `oid` in `pack` (where `pack_entries` says it is), checked.

        Raises:
            DamagedObject: it cannot be read or is damaged.
        """
        try:
            with open(pack, "rb") as f:
                f.seek(offset)
                stream = f.read(length)
        except OSError as exc:
            raise DamagedObject(f"checkpoint object {oid} cannot be read from "
                                f"{os.path.basename(pack)}: {exc}") from None
        if len(stream) != length:
            raise DamagedObject(f"checkpoint object {oid} is cut short in "
                                f"{os.path.basename(pack)}")
        return self._checked(oid, stream)

    def packs(self) -> list[str]:
        """The packs in place."""
        folder = os.path.join(self.root, PACKS)
        return [os.path.join(folder, name) for name in _names(folder) if _pack_name(name)]

    def _in_pack(self, oid: str) -> tuple[str, int, int] | None:
        """Where a pack holds `oid` (the packs are read again when it is not found: one may
        have been written since)."""
        if self._packed is None or oid not in self._packed:
            self._packed = {}
            for pack in self.packs():
                try:
                    for entry, offset, length in pack_entries(pack):
                        self._packed.setdefault(entry, (pack, offset, length))
                except (OSError, ValueError):
                    continue  # `verify` reports it
        return self._packed.get(oid)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """Every (oid, path) stored loose, and stray files as (``""``, path) (a pack's
        temporary file among them; the packs themselves are `packs`)."""
        for name in _names(os.path.join(self.root, PACKS)):
            if not _pack_name(name):
                yield "", os.path.join(self.root, PACKS, name)
        for algo in _names(self.root):
            if algo == PACKS:
                continue
            top = os.path.join(self.root, algo)
            for fan in _names(top):
                folder = os.path.join(top, fan)
                for name in _names(folder):
                    oid = f"{algo}:{fan}{name}"
                    yield (oid if valid_oid(oid) else ""), os.path.join(folder, name)

    def remove(self, oid: str) -> int:
        """Delete object `oid` (its loose file); return the bytes freed (0 when it was not
        there)."""
        return _remove_file(self.path(oid))

    @staticmethod
    def remove_pack(pack: str) -> int:
        """Delete `pack` (one of `packs`); return the bytes freed (0 when it was not there)."""
        return _remove_file(pack)


def pack_entries(pack: str) -> list[tuple[str, int, int]]:
    """The objects of `pack`: (id, offset, length of its zlib stream).

    Raises:
        OSError: it cannot be read.
        ValueError: it is not a whole pack.
    """
    with open(pack, "rb") as f:
        if f.readline(len(_PACK_MAGIC)) != _PACK_MAGIC:
            raise ValueError("not a pack")
        rows = []
        while True:
            line = f.readline(100)
            if line == b"\n":
                break
            oid, _, digits = line.decode("ascii").rstrip("\n").partition(" ")
            if not line.endswith(b"\n") or not valid_oid(oid) or not digits.isdigit():
                raise ValueError("a damaged pack index")
            rows.append((oid, int(digits)))
        offset = f.tell()
        entries = []
        for oid, length in rows:
            entries.append((oid, offset, length))
            offset += length
        if offset != f.seek(0, os.SEEK_END):
            raise ValueError("a pack of the wrong length")
    return entries


def _pack_name(name: str) -> bool:
    digest = name.removesuffix(".pack")
    return name.endswith(".pack") and len(digest) == 64 and set(digest) <= _HEX


def _read(path: str, oid: str) -> bytes:
    """The bytes of the file at `path`, object `oid`'s.

    Raises:
        FileNotFoundError: there is none.
        DamagedObject: it cannot be read.
    """
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise DamagedObject(f"checkpoint object {oid} cannot be read: {exc}") from None


def _remove_file(path: str) -> int:
    try:
        size = os.lstat(path).st_blocks * 512
        os.unlink(path)
    except FileNotFoundError:
        return 0
    return size


def _names(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise StateIOError(f"cannot list {folder}: {exc.strerror or exc}") from None
