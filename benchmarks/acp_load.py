"""`cos acp`'s `session/load` of a 200 MB Claude Code transcript (DESIGN.md §12.1).

Figure: seconds for the whole replay (`interfaces/acp/history.load_updates`, every update taken)
divided by seconds for the anchor: a plain `json.loads` of each line of the file, nothing else;
and the seconds until the replay's first update divided by the same anchor. The transcript is
one conversation made from the shared fixtures by repetition: copies of the claude-code-log
session and of the claude-code-viewer one (its subagents inline) in turn, each copy's uuids made
its own and its root continuing the previous copy's last entry, so the live chain runs through
the whole file. Each round times both, interleaved (A B A B ...); medians.
Targets: whole replay / anchor <= 1.5; first update / anchor <= 0.05.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coding_os.interfaces.acp import history

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "5"))
SIZE = int(os.environ.get("BENCH_BYTES", str(200 * 1024 * 1024)))
FIXTURES = Path(os.environ.get("BENCH_FIXTURES",
                               Path(__file__).resolve().parents[2] / "shared" / "fixtures"))
SOURCES = ("claude-code-log__89488521-e2e7-4d97-bc02-38197efdddc8.jsonl",
           "claude-code-viewer__5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl")
WHOLE_TARGET, FIRST_TARGET = 1.5, 0.05


def generate(path: str) -> int:
    """Write the transcript; returns its number of lines."""
    templates = [[json.loads(line) for line in (FIXTURES / "claude" / name).open(
        encoding="utf-8") if line.strip()] for name in SOURCES]
    written = lines = copy = 0
    last: str | None = None
    with open(path, "w", encoding="utf-8") as out:
        while written < SIZE:
            for entry in templates[copy % len(templates)]:
                entry = dict(entry)
                if isinstance(entry.get("uuid"), str):
                    entry["uuid"] = f"{entry['uuid']}-{copy}"
                parent = entry.get("parentUuid")
                if isinstance(parent, str):
                    entry["parentUuid"] = f"{parent}-{copy}"
                elif "parentUuid" in entry and entry.get("isSidechain") is not True:
                    entry["parentUuid"] = last
                if isinstance(entry.get("uuid"), str) and entry.get("isSidechain") is not True:
                    last = entry["uuid"]
                text = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
                out.write(text)
                written += len(text.encode("utf-8"))
                lines += 1
            copy += 1
    return lines


def plain(path: str) -> float:
    start = time.perf_counter()
    with open(path, "rb") as f:
        for line in f:
            json.loads(line)
    return time.perf_counter() - start


def replay(path: str) -> tuple[float, float, int]:
    start = time.perf_counter()
    updates = history._claude_updates(path)  # noqa: SLF001 (the reader load_updates picks)
    next(updates)
    first = time.perf_counter() - start
    count = 1 + sum(1 for _ in updates)
    return time.perf_counter() - start, first, count


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "transcript.jsonl")
        lines = generate(path)
        size = os.path.getsize(path)
        plain(path)  # into the page cache
        anchors, wholes, firsts = [], [], []
        count = 0
        for _ in range(ROUNDS):
            anchors.append(plain(path))
            whole, first, count = replay(path)
            wholes.append(whole)
            firsts.append(first)
        anchor = statistics.median(anchors)
        whole_ratio = statistics.median(wholes) / anchor
        first_ratio = statistics.median(firsts) / anchor
        print(f"acp session/load: {size / 1e6:.0f} MB, {lines} lines, {count} updates, "
              f"{ROUNDS} rounds")
        print(f"  anchor (json.loads of each line): {anchor:.3f} s")
        print(f"  whole replay: {statistics.median(wholes):.3f} s  ratio {whole_ratio:.2f} "
              f"(target <= {WHOLE_TARGET})")
        print(f"  first update: {statistics.median(firsts) * 1000:.1f} ms  ratio "
              f"{first_ratio:.3f} (target <= {FIRST_TARGET})")
        for name, ratio, target in (("whole", whole_ratio, WHOLE_TARGET),
                                    ("first_update", first_ratio, FIRST_TARGET)):
            print(f"RESULT acp_load.{name} ratio={ratio:.3f} target<={target} "
                  f"{'OK' if ratio <= target else 'MISS'}")
        return 0


if __name__ == "__main__":
    sys.exit(main())
