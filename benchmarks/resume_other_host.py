"""Resume on host B of a 50 MB Claude Code session written on host A (DESIGN.md §8).

Two hosts simulated on this machine, as tests/e2e/test_hosts_resume.py does: two HOMEs, two
clones of one repository at different paths, COS_HOST=a and b, one fresh PostgreSQL schema. Host A
holds a Claude Code transcript of about 50 MB whose lines are the fixture transcripts'
(/work/shared/fixtures/claude) over and over, re-chained (uuid, parentUuid), with A's checkout as
their cwd; A indexes it, which on PostgreSQL replicates its lines as `cos sync` does (any line
left is stored with the storage's `add_replica_lines`).

Figure: seconds for `api.resume_session(ID)` on host B — the index lookup, the replicated lines
read back in batches, every `cwd` mapped to B's checkout, the file compared with the disk and
written atomically (fsync) to `~/.claude/projects/<B's munged cwd>/ID.jsonl`: everything before
`claude --resume` is exec'd — divided by the anchor: a plain `SELECT line FROM replica_lines …
ORDER BY seq` of the same rows on a fresh connection, concatenated with newlines. The file is
removed before each resume, and the session given back to A (the resume moves it to B:
`Storage.move_session`, outside the timing), so each one writes it whole and takes it over. The resume reads the lines in batches
on a helper thread while it maps the batch before, so it can come out under the anchor's one
large query. Rounds interleaved (A B A B ...),
medians; the materialised file is checked equal to A's with the cwd mapped.
Target: ratio (resume / plain read) <= 1.5.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from coding_os import api
from coding_os.hosts.identity import project_keys
from coding_os.storage import open_storage
from coding_os.storage.base import ReplicaSource

ROUNDS = int(os.environ.get("BENCH_RUNS", "5"))
MEGABYTES = int(os.environ.get("BENCH_MB", "50"))
TARGET = 1.5
PG_URL = os.environ.get("COS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
FIXTURES = Path(os.environ.get("COS_CLAUDE_FIXTURES", "/work/shared/fixtures/claude"))
NATIVE = "3f0c9a4e-5b1d-4c2e-9f7a-0123456789ab"
REPLICATE_BATCH = 2000


def fixture_entries() -> list[dict[str, Any]]:
    entries = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("type") in ("user", "assistant", "system"):
                entries.append(entry)
    if not entries:
        raise SystemExit(f"no Claude Code fixture transcripts in {FIXTURES}")
    return entries


def write_session(path: Path, cwd: str, megabytes: int) -> int:
    """A transcript of about `megabytes` MB of fixture lines re-chained; how many lines."""
    entries, parent, n, size = fixture_entries(), None, 0, 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        while size < megabytes * 1_000_000:
            entry = dict(entries[n % len(entries)])
            uuid = f"00000000-0000-4000-8000-{n:012d}"
            entry.update({"parentUuid": parent, "uuid": uuid, "sessionId": NATIVE,
                          "cwd": cwd if n % 7 else f"{cwd}/src", "isSidechain": False,
                          "timestamp": f"2026-11-30T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:"
                                       f"{n % 60:02d}.000Z"})
            line = json.dumps(entry, separators=(",", ":"), ensure_ascii=False) + "\n"
            f.write(line)
            size += len(line.encode("utf-8"))
            parent, n = uuid, n + 1
    return n


def host_env(root: Path, name: str, url: str) -> tuple[dict[str, str], Path]:
    home = root / f"home-{name}"
    home.mkdir()
    checkout = root / ("host-a/src/proj" if name == "a" else "host-b/work/deeper/proj")
    subprocess.run(["git", "clone", "-q", str(root / "origin"), str(checkout)], check=True)
    (checkout / ".coding-os").mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "COS_HOST": name,
           "COS_DATABASE_URL": url}
    return env, checkout


def plain_read(url: str) -> tuple[float, bytes]:
    start = time.perf_counter()
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT line FROM replica_lines WHERE session = %s AND stream = %s "
                            "ORDER BY seq", (NATIVE, "native")).fetchall()
    data = b"\n".join(bytes(row[0]) for row in rows) + b"\n"
    return time.perf_counter() - start, data


def run(root: Path, url: str) -> None:
    origin = root / "origin"
    origin.mkdir()
    (origin / "README").write_text("bench\n", encoding="utf-8")
    for argv in (["git", "init", "-q"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit",
                  "-q", "-m", "initial"]):
        subprocess.run(argv, cwd=origin, check=True)
    env_a, checkout_a = host_env(root, "a", url)
    env_b, checkout_b = host_env(root, "b", url)
    munged_a = re.sub(r"[^A-Za-z0-9]", "-", str(checkout_a))
    source_path = Path(env_a["HOME"]) / ".claude" / "projects" / munged_a / f"{NATIVE}.jsonl"
    lines = write_session(source_path, str(checkout_a), MEGABYTES)
    os.environ["COS_HOST"] = "a"  # the process is host a while it indexes and replicates
    api.import_sessions(env=env_a, cwd=str(checkout_a))  # A's index row, host a
    storage = open_storage(str(checkout_a / ".coding-os" / "coding-os.db"), env=env_a)
    keys = project_keys(str(checkout_a))
    source = ReplicaSource(session=NATIVE, stream="native", host="a", agent="claude",
                           path=str(source_path), project_key=keys[0] if keys else None,
                           root=str(checkout_a))
    with open(source_path, "rb") as f:
        raw = f.read().split(b"\n")[:-1]
    stored = storage.replica_source(NATIVE, "native")
    for at in range(stored.lines if stored else 0, len(raw), REPLICATE_BATCH):
        storage.add_replica_lines(source, [(at + i + 1, line) for i, line in
                                           enumerate(raw[at:at + REPLICATE_BATCH])])
    for key in keys:
        storage.set_project_host(key, "a", str(checkout_a))
    storage.close()
    os.environ["COS_HOST"] = "b"

    munged_b = re.sub(r"[^A-Za-z0-9]", "-", str(checkout_b))
    target = Path(env_b["HOME"]) / ".claude" / "projects" / munged_b / f"{NATIVE}.jsonl"
    expected = source_path.read_bytes().replace(f'"cwd":"{checkout_a}'.encode(),
                                                f'"cwd":"{checkout_b}'.encode())
    ours, anchor = [], []
    api.resume_session(NATIVE, env=env_b, cwd=str(checkout_b))  # warm-up: imports, page cache
    for _ in range(ROUNDS):
        target.unlink()
        with open_storage(str(checkout_a / ".coding-os" / "coding-os.db"), env=env_a) as owner:
            owner.move_session(NATIVE, "b", "a")  # the resume moved it to b: a's again
        start = time.perf_counter()
        report = api.resume_session(NATIVE, env=env_b, cwd=str(checkout_b))
        ours.append(time.perf_counter() - start)
        seconds, data = plain_read(url)
        anchor.append(seconds)
        assert report.host == "a" and report.materialized[0]["action"] == "written", report
        assert len(data) == source_path.stat().st_size
    assert target.read_bytes() == expected
    resume, read = statistics.median(ours), statistics.median(anchor)
    ratio = resume / read
    print(f"session: {lines} lines, {len(expected) / 1e6:.1f} MB; {ROUNDS} rounds, medians")
    print(f"resume on host b (materialise)  {resume:8.3f} s")
    print(f"plain SELECT of the rows        {read:8.3f} s")
    print(f"ratio (resume / plain read) {ratio:.2f}   (target <= {TARGET})")
    print(f"RESULT resume_other_host ratio={ratio:.2f} target<={TARGET} "
          f"{'OK' if ratio <= TARGET else 'OVER'}")


def main() -> None:
    schema = f"cos_bench_{os.urandom(4).hex()}"
    admin = psycopg.connect(PG_URL, autocommit=True)
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-resume-other-host-"))
    try:
        run(scratch, url)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()


if __name__ == "__main__":
    main()
