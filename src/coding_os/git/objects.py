"""Reading a repository's objects without starting git: loose objects and packs (index version
2), deltas resolved, alternates followed.

A rewind reads the blobs of the commit's files it puts back, and a snapshot fed by the watcher
reads what the commit holds at a few paths; starting `git cat-file` or `git status` for that
costs more than the read. Whatever this module cannot read for sure (a SHA-256 repository, an
object it does not find, a pack it does not understand) raises `Unreadable`, and the caller asks
git, which also knows what this module does not (a promisor remote, a replace ref). Callers
check what they read against its id where it matters (a blob's bytes against the entry's sha1).

Like `git.command`, it reads the repository holding the tree, whatever `GIT_DIR`-style variables say.
A repository whose objects git would read otherwise than their ids say — replace refs
(`refs/replace/`), grafts — is left to git entirely.
"""

from __future__ import annotations

import os
import zlib

__all__ = ["Unreadable", "Objects", "objects_of", "blob_sha1"]

_TYPES = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
_MAX_DEPTH = 200  # git's own packs keep deltas 50 deep (pack.depth); more means damage
_TREE = 0o40000


def blob_sha1(data: bytes) -> str:
    """The id git gives a blob of `data`."""
    from coding_os.digest import sha1_hex

    return sha1_hex(b"blob %d\0" % len(data), data)


class Unreadable(Exception):
    """This object cannot be read here (ask git)."""


class _Pack:
    """One pack and its index, mapped on first use."""

    def __init__(self, idx_path: str) -> None:
        import mmap

        with open(idx_path, "rb") as f:
            self.idx = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        if self.idx[:8] != b"\377tOc\0\0\0\2":
            raise Unreadable(f"{idx_path}: not a version 2 pack index")
        self.count = int.from_bytes(self.idx[8 + 255 * 4:8 + 256 * 4], "big")
        self.names = 8 + 256 * 4
        self.offsets = self.names + 24 * self.count  # past the names and the CRCs
        self.large = self.offsets + 4 * self.count
        self.path = idx_path[:-4] + ".pack"
        self._data: object = None

    @property
    def data(self):  # type: ignore[no-untyped-def]
        if self._data is None:
            import mmap

            with open(self.path, "rb") as f:
                self._data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._data

    def offset(self, name: bytes) -> int | None:
        """Where object `name` (20 bytes) starts in the pack, or None."""
        idx = self.idx
        first = name[0]
        low = int.from_bytes(idx[8 + (first - 1) * 4:8 + first * 4], "big") if first else 0
        high = int.from_bytes(idx[8 + first * 4:12 + first * 4], "big")
        while low < high:
            middle = (low + high) // 2
            at = self.names + 20 * middle
            found = idx[at:at + 20]
            if found < name:
                low = middle + 1
            elif found > name:
                high = middle
            else:
                at = self.offsets + 4 * middle
                value = int.from_bytes(idx[at:at + 4], "big")
                if value & 0x80000000:
                    at = self.large + 8 * (value & 0x7FFFFFFF)
                    value = int.from_bytes(idx[at:at + 8], "big")
                return value
        return None


class Objects:
    """The object database under `objects_dir` (and its alternates), read-only."""

    def __init__(self, objects_dir: str) -> None:
        self.dirs = [objects_dir]
        try:
            with open(os.path.join(objects_dir, "info", "alternates"), encoding="utf-8") as f:
                for line in f.read().splitlines():
                    line = line.strip()
                    if line and not line.startswith("#"):
                        self.dirs.append(os.path.join(objects_dir, line))
        except (OSError, UnicodeDecodeError):
            pass
        self._packs: list[_Pack] | None = None
        self._seen: dict[str, tuple[str, bytes]] = {}  # trees and commits read (deltas' bases)

    def _pack_list(self) -> list[_Pack]:
        if self._packs is None:
            self._packs = []
            for folder in self.dirs:
                pack_dir = os.path.join(folder, "pack")
                try:
                    names = sorted(os.listdir(pack_dir))
                except OSError:
                    continue
                for name in names:
                    if name.endswith(".idx") and name[:-4] + ".pack" in names:
                        try:
                            self._packs.append(_Pack(os.path.join(pack_dir, name)))
                        except (OSError, ValueError, Unreadable):
                            continue
        return self._packs

    def read(self, sha: str, _depth: int = 0) -> tuple[str, bytes]:
        """The type and content of object `sha` (40 hex digits).

        Raises:
            Unreadable: not found here, or not readable by this module.
        """
        if sha in self._seen:
            return self._seen[sha]
        if len(sha) != 40 or _depth > _MAX_DEPTH:
            raise Unreadable(sha)
        try:
            return self._read(sha, _depth)
        except OSError as exc:  # a pack removed by a repack meanwhile, an unreadable file
            self._packs = None
            raise Unreadable(f"{sha}: {exc}") from None

    def _read(self, sha: str, _depth: int) -> tuple[str, bytes]:
        for folder in self.dirs:
            try:
                with open(os.path.join(folder, sha[:2], sha[2:]), "rb") as f:
                    raw = f.read()
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise Unreadable(sha) from exc
            return self._keep(sha, _loose(raw))
        try:
            name = bytes.fromhex(sha)
        except ValueError:
            raise Unreadable(sha) from None
        for pack in self._pack_list():
            at = pack.offset(name)
            if at is not None:
                return self._keep(sha, self._unpack(pack, at, _depth))
        raise Unreadable(sha)

    def _keep(self, sha: str, found: tuple[str, bytes]) -> tuple[str, bytes]:
        if found[0] != "blob" and len(self._seen) < 4096:
            self._seen[sha] = found
        return found

    def _unpack(self, pack: _Pack, at: int, depth: int) -> tuple[str, bytes]:
        data = pack.data
        try:
            byte = data[at]
            kind, size, shift, pos = (byte >> 4) & 7, byte & 15, 4, at + 1
            while byte & 0x80:
                byte = data[pos]
                pos += 1
                size |= (byte & 0x7F) << shift
                shift += 7
            if kind in _TYPES:
                return _TYPES[kind], _inflate(data, pos, size)
            if kind == _OFS_DELTA:
                byte = data[pos]
                pos += 1
                back = byte & 0x7F
                while byte & 0x80:
                    byte = data[pos]
                    pos += 1
                    back = ((back + 1) << 7) | (byte & 0x7F)
                if depth > _MAX_DEPTH or not 0 < back <= at:
                    raise Unreadable("a delta's base is out of reach")
                base = self._unpack(pack, at - back, depth + 1)
            elif kind == _REF_DELTA:
                base = self.read(bytes(data[pos:pos + 20]).hex(), depth + 1)
                pos += 20
            else:
                raise Unreadable(f"object type {kind} in {pack.path}")
            return base[0], _patch(base[1], _inflate(data, pos, size))
        except (IndexError, zlib.error) as exc:
            raise Unreadable(str(exc)) from None

    def tree_entry(self, commit: str, path: str) -> tuple[int, str] | None:
        """What `commit` holds at `path` (from the repository's top): its mode and object id,
        or None when nothing is there.

        Raises:
            Unreadable: an object on the way cannot be read here.
        """
        kind, data = self.read(commit)
        if kind != "commit" or not data.startswith(b"tree "):
            raise Unreadable(commit)
        tree = data[5:45].decode("ascii")
        parts = path.encode("utf-8", "surrogateescape").split(b"/")
        for number, part in enumerate(parts):
            kind, data = self.read(tree)
            if kind != "tree":
                raise Unreadable(tree)
            found = _tree_find(data, part)
            if found is None:
                return None
            if number == len(parts) - 1:
                return found
            if found[0] != _TREE:
                return None  # a file where the path needs a directory
            tree = found[1]
        return None


def _loose(raw: bytes) -> tuple[str, bytes]:
    try:
        data = zlib.decompress(raw)
    except zlib.error as exc:
        raise Unreadable(str(exc)) from None
    header, _, content = data.partition(b"\0")
    kind, _, size = header.partition(b" ")
    if kind.decode("ascii", "replace") not in _TYPES.values() or not size.isdigit() \
            or int(size) != len(content):
        raise Unreadable("a damaged loose object")
    return kind.decode("ascii"), content


def _inflate(data, pos: int, size: int) -> bytes:  # type: ignore[no-untyped-def]
    """The `size` bytes zlib-compressed at `pos` of `data`."""
    stream = zlib.decompressobj()
    parts = []
    step = size + 64
    while not stream.eof:
        chunk = data[pos:pos + step]
        if not chunk:
            raise Unreadable("a pack cut short")
        parts.append(stream.decompress(chunk))
        pos += step
        step = max(step, 1 << 16)
    out = b"".join(parts)
    if len(out) != size:
        raise Unreadable("a pack entry of the wrong size")
    return out


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _patch(base: bytes, delta: bytes) -> bytes:
    """`delta` (git's copy/insert instructions) applied to `base`."""
    size, pos = _varint(delta, 0)
    if size != len(base):
        raise Unreadable("a delta for another base")
    size, pos = _varint(delta, pos)
    out = bytearray()
    end = len(delta)
    while pos < end:
        op = delta[pos]
        pos += 1
        if op & 0x80:
            start = length = 0
            for bit in range(4):
                if op & (1 << bit):
                    start |= delta[pos] << (8 * bit)
                    pos += 1
            for bit in range(3):
                if op & (0x10 << bit):
                    length |= delta[pos] << (8 * bit)
                    pos += 1
            length = length or 0x10000
            if start + length > len(base):
                raise Unreadable("a delta copying past its base")
            out += base[start:start + length]
        elif op:
            out += delta[pos:pos + op]
            pos += op
        else:
            raise Unreadable("a reserved delta instruction")
    if len(out) != size or pos != end:
        raise Unreadable("a delta of the wrong size")
    return bytes(out)


def _tree_find(data: bytes, name: bytes) -> tuple[int, str] | None:
    """The mode and id of entry `name` of a tree object's content."""
    pos = 0
    end = len(data)
    while pos < end:
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        if data[space + 1:nul] == name:
            return int(data[pos:space], 8), data[nul + 1:nul + 21].hex()
        pos = nul + 21
    return None


_CACHE: dict[str, tuple[tuple[object, ...], Objects | None]] = {}


def _stamp(paths: list[str]) -> tuple[object, ...]:
    from coding_os.durable import signatures

    return tuple(signatures(paths))


def objects_of(top: str) -> Objects | None:
    """The object database of the checkout whose top is `top`, or None when it is not found,
    is SHA-256 (this module reads SHA-1 repositories only), or has replace refs or grafts.
    Kept for the process while what decides that, and the pack directories (its own and its
    alternates'), are unchanged: a repack makes it anew."""
    from coding_os.git.repo import git_dirs

    dirs = git_dirs(top)
    if dirs is None:
        return None
    common = dirs[1]
    objects_dir = os.path.join(common, "objects")
    watched = [os.path.join(common, "config"), os.path.join(common, "packed-refs"),
               os.path.join(common, "refs", "replace"), os.path.join(objects_dir, "info"),
               os.path.join(objects_dir, "info", "grafts"), os.path.join(common, "shallow"),
               os.path.join(objects_dir, "pack")]
    try:
        stamp = _stamp(watched)
        kept = _CACHE.get(objects_dir)
        if kept is not None and kept[1] is not None:
            stamp += _stamp([os.path.join(folder, "pack") for folder in kept[1].dirs[1:]])
        if kept is not None and kept[0] == stamp:
            return kept[1]
        found: Objects | None = Objects(objects_dir)
        if _rewritten(common, objects_dir):
            found = None
        elif found is not None:
            stamp += _stamp([os.path.join(folder, "pack") for folder in found.dirs[1:]])
    except OSError:
        return None
    _CACHE[objects_dir] = (stamp, found)
    return found


def _rewritten(common: str, objects_dir: str) -> bool:
    """Whether git reads this repository's objects otherwise than their ids say: another hash
    (`extensions.objectFormat`), replace refs, grafts."""
    with open(os.path.join(common, "config"), "rb") as f:
        if b"objectformat" in f.read().lower():
            return True
    if os.path.exists(os.path.join(objects_dir, "info", "grafts")):
        return True
    try:
        if os.listdir(os.path.join(common, "refs", "replace")):
            return True
    except (FileNotFoundError, NotADirectoryError):
        pass
    try:
        with open(os.path.join(common, "packed-refs"), "rb") as f:
            return b" refs/replace/" in f.read()
    except FileNotFoundError:
        return False
