"""The checkpoint object store (DESIGN.md §5): content-addressed, algorithm-tagged, shared.

An object is the bytes of a file (or a symlink's target, or a checkpoint's manifest), stored once
under `<state_dir>/checkpoints/objects/<algo>/<2 hex>/<rest>` as zlib-compressed bytes. Its id is
`<algo>:<hex digest of the raw bytes>`, today always `sha256:…`; the algorithm is part of the id
and of the path so a later one can live beside it. Two checkpoints that hold the same content
share one object, and an object is never rewritten: a writer that finds it present stops there.

An object is written to a temporary file in its own directory, flushed to disk, then renamed into
place, so a reader sees it whole or not at all, and one found in place is on disk; concurrent
writers of one object both succeed. A store made with `defer_sync` keeps its new objects in their
temporary files until `flush`, which flushes them all at once (the filesystem's journal commits
flushes that wait together in one go) and only then renames them into place: a snapshot of many
files pays about one flush instead of one per file, and the record naming them is written after.
Files of a git repository that git already holds are not copied here: a checkpoint refers to them
as `git:<blob id>` (see snapshot.py), and `verify` checks those too.
"""

from __future__ import annotations

import os

from coding_os.errors import CosError, InvalidInput, StateIOError

TYPE_CHECKING = False  # collections.abc is not imported at run time: see lock.py
if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["ALGORITHM", "ObjectStore", "DamagedObject", "valid_oid"]

ALGORITHM = "sha256"
_HEX = frozenset("0123456789abcdef")
_LEVEL = 1  # best speed, as git compresses loose objects (core.looseCompression)


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
    temporary files until `flush`; with `compress=False`, they are written as zlib streams of
    stored blocks (level 0: readers see no difference), for a caller the user waits on."""

    __slots__ = ("root", "defer_sync", "level", "_pending")

    def __init__(self, checkpoints_dir: str, *, defer_sync: bool = False,
                 compress: bool = True) -> None:
        self.root = os.path.join(checkpoints_dir, "objects")
        self.defer_sync = defer_sync
        self.level = _LEVEL if compress else 0
        self._pending: dict[str, str] = {}  # oid -> its temporary file, until `flush`

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
        import hashlib

        return f"{ALGORITHM}:{hashlib.sha256(data).hexdigest()}"

    def has(self, oid: str) -> bool:
        return oid in self._pending or os.path.exists(self.path(oid))

    def put(self, data: bytes, *, sync: bool = True) -> tuple[str, int]:
        """Store `data`; return its id and the bytes written on disk (0 when it was there).

        Raises:
            StateIOError: the object cannot be written (a full disk, a read-only store).
        """
        oid = self.oid_of(data)
        path = self.path(oid)
        if oid in self._pending:
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
        tmp = f"{path}.tmp-{os.getpid()}-{os.urandom(3).hex()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
        try:
            try:
                fd = os.open(tmp, flags, 0o400)
            except FileNotFoundError:  # the first object of its fan-out directory
                self._make_folders(folder)
                fd = os.open(tmp, flags, 0o400)
            try:
                view = memoryview(packed)
                while view:
                    view = view[os.write(fd, view):]
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
            os.makedirs(top, mode=0o700, exist_ok=True)
            for number in range(256):
                try:
                    os.mkdir(os.path.join(top, f"{number:02x}"), 0o700)
                except FileExistsError:
                    pass
        os.makedirs(folder, mode=0o700, exist_ok=True)

    def flush(self, also: list[str] | None = None) -> None:
        """Flush the objects put since the last flush, and the files or directories `also`,
        to disk at once; then rename the objects into place.

        Raises:
            StateIOError: a flush or rename failed (the objects not in place are discarded).
        """
        from coding_os.state import durable

        try:
            durable.sync_files([*self._pending.values(), *(also or [])])
            for oid in list(self._pending):
                os.replace(self._pending[oid], self.path(oid))
                del self._pending[oid]
        except OSError as exc:
            self.discard()
            raise StateIOError(f"cannot write checkpoint objects: {exc.strerror or exc}") from None
        except StateIOError:
            self.discard()
            raise

    def discard(self) -> None:
        """Remove the objects put and not flushed (a snapshot given up)."""
        for tmp in self._pending.values():
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self._pending.clear()

    def get(self, oid: str) -> bytes:
        """The bytes of object `oid`, checked against its id.

        Raises:
            DamagedObject: it is missing, unreadable, or damaged.
        """
        import zlib

        path = self._pending.get(oid) or self.path(oid)
        try:
            with open(path, "rb") as f:
                data = zlib.decompress(f.read())
        except FileNotFoundError:
            raise DamagedObject(f"checkpoint object {oid} is missing") from None
        except (OSError, zlib.error) as exc:
            raise DamagedObject(f"checkpoint object {oid} cannot be read: {exc}") from None
        if self.oid_of(data) != oid:
            raise DamagedObject(f"checkpoint object {oid} is damaged (its bytes hash otherwise)")
        return data

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """Every (oid, path) stored, and stray files as (``""``, path)."""
        for algo in _names(self.root):
            top = os.path.join(self.root, algo)
            for fan in _names(top):
                folder = os.path.join(top, fan)
                for name in _names(folder):
                    oid = f"{algo}:{fan}{name}"
                    yield (oid if valid_oid(oid) else ""), os.path.join(folder, name)

    def remove(self, oid: str) -> int:
        """Delete object `oid`; return the bytes freed (0 when it was not there)."""
        path = self.path(oid)
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
