"""The user's repository the checkpoint and hook benchmarks work on: `files` text files of about
`file_bytes` each in nested directories (`dNNN/sN/fN.txt`), one commit, `.coding-os/` ignored;
and the edits of a few of its files between rounds."""

from __future__ import annotations

import random
import subprocess
from pathlib import Path

__all__ = ["line_pool", "file_path", "make_tree", "git", "edit", "write"]


def line_pool(rng: random.Random, lines: int = 20000) -> list[bytes]:
    """Lines that look like code and prose: what a repository's files are made of."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(3000)]
    pool = []
    for _ in range(lines):
        kind = rng.random()
        w = rng.choices(words, k=6)
        if kind < 0.4:
            text = f"    {w[0]}_{w[1]} = {w[2]}({w[3]}, {rng.randint(0, 9999)})"
        elif kind < 0.6:
            text = f"def {w[0]}_{w[1]}({w[2]}: {w[3]}) -> {w[4]}:"
        elif kind < 0.8:
            text = "    # " + " ".join(rng.choices(words, k=rng.randint(4, 12)))
        else:
            text = f"        if {w[0]} is not None and {w[1]}.{w[2]} > {rng.randint(0, 99)}:"
        pool.append(text.encode() + b"\n")
    return pool


def file_path(number: int) -> str:
    return f"d{number // 100:03d}/s{number // 10 % 10}/f{number % 10}.txt"


def make_tree(tree: Path, env: dict[str, str], rng: random.Random, files: int,
              file_bytes: int = 5000) -> int:
    """The user's repository: `files` files, one commit, `.coding-os/` ignored. Returns its
    bytes."""
    pool = line_pool(rng)
    total = 0
    for number in range(files):
        path = tree / file_path(number)
        path.parent.mkdir(parents=True, exist_ok=True)
        parts = [f"# file {number}\n".encode()]
        size = len(parts[0])
        while size < file_bytes:
            chunk = rng.choices(pool, k=16)
            parts.extend(chunk)
            size += sum(map(len, chunk))
        data = b"".join(parts)
        path.write_bytes(data)
        total += len(data)
    (tree / ".gitignore").write_bytes(b".coding-os/\n")
    git(["init", "-q", "-b", "main"], tree, env)
    git(["add", "-A"], tree, env)
    git(["commit", "-q", "-m", "the user's project"], tree, env)
    (tree / ".coding-os").mkdir()
    return total


def git(args: list[str], cwd: Path, env: dict[str, str]) -> bytes:
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True,
                          stdout=subprocess.PIPE).stdout


def edit(tree: Path, rng: random.Random, round_: int, files: int,
         edited: int = 5) -> dict[str, bytes]:
    """Change `edited` random files of the `files` (a line replaced, one added); returns their
    new bytes."""
    changed = {}
    for number in rng.sample(range(files), edited):
        rel = file_path(number)
        lines = (tree / rel).read_bytes().splitlines(keepends=True)
        at = rng.randrange(1, len(lines))
        lines[at] = f"    value_{round_} = compute({at}, {rng.random():.6f})\n".encode()
        lines.insert(at, f"    # changed in round {round_}\n".encode())
        changed[rel] = b"".join(lines)
    write(tree, changed)
    return changed


def write(tree: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        (tree / rel).write_bytes(data)
