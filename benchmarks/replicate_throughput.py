"""Throughput of replicating a cos-native transcript to PostgreSQL against a plain COPY.

Figure: lines per second through `coding_os.hosts.replicate.replicate` (what `cos sync` runs):
a cos-native transcript of 100,000 lines (BENCH_LINES; JSON entries of 100–700 bytes) pushed from
line 1 into a fresh schema — the file read and split into lines, batches of BATCH_LINES lines each
stored in one transaction with `add_replica_lines` (insert of the lines not stored yet, the source
row moved) — divided by lines per second through the anchor: the same file read and split the
same way, its lines written with psycopg's `COPY … FROM STDIN` into a bare table `(seq, line)`
without keys, in one transaction. Each round starts both from empty (the replica removed and the
marks file deleted; the bare table truncated). Rounds interleaved (A B A B ...), medians; the
stored lines are checked equal to the file. Measured in process against the checkout's code, as
benchmarks/events_append.py is.
Target: ratio (replicate / COPY) >= 0.3.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import statistics
import tempfile
import time

import psycopg
from psycopg import sql

from coding_os.hosts import replicate
from coding_os.state.tiers import Tiers
from coding_os.storage.postgres import PostgresStorage

ROUNDS = int(os.environ.get("BENCH_RUNS", "5"))
LINES = int(os.environ.get("BENCH_LINES", "100000"))
TARGET = 0.3
PG_URL = os.environ.get("COS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
SESSION = "ses-claude-20261202-070000-bech"


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"


def write_transcript(path: str, lines: int) -> int:
    """A cos-native transcript of `lines` entries; its size in bytes."""
    rng = random.Random(7)
    words = "the module reads its input and returns a value for each file in the tree".split()
    with open(path, "wb") as f:
        f.write(json.dumps({"v": 1, "type": "session_meta", "session": SESSION,
                            "agent": "claude", "ts": "2026-12-02T07:00:00.000Z"}).encode() + b"\n")
        for n in range(1, lines):
            text = " ".join(rng.choice(words) for _ in range(rng.randint(10, 110)))
            kind = ("user", "assistant")[n % 2]
            f.write(json.dumps({"v": 1, "type": kind, "turn": n // 2, "text": text,
                                "ts": f"2026-12-02T07:{n // 6000 % 60:02d}:{n // 100 % 60:02d}."
                                      f"{n % 1000:03d}Z"}).encode() + b"\n")
    return os.path.getsize(path)


def through_replicate(storage: PostgresStorage, tiers: Tiers, path: str) -> float:
    storage.remove_replica(SESSION, "transcript")
    marks = os.path.join(tiers.state_dir, replicate.STATE_FILE)
    if os.path.exists(marks):
        os.unlink(marks)
    source = replicate.Source(SESSION, "transcript", "claude", path)
    start = time.perf_counter()
    report = replicate.replicate(storage, tiers, host="bench", sources=[source])
    elapsed = time.perf_counter() - start
    assert report.lines == LINES, report
    return elapsed


def through_copy(conn: psycopg.Connection[tuple[object, ...]], path: str) -> float:
    conn.execute("TRUNCATE bare")
    start = time.perf_counter()
    with open(path, "rb") as f:
        data = f.read()
    lines = data.split(b"\n")[:-1]
    with conn.transaction(), conn.cursor() as cursor:
        with cursor.copy("COPY bare (seq, line) FROM STDIN") as copy:
            for seq, line in enumerate(lines, 1):
                copy.write_row((seq, line))
    return time.perf_counter() - start


def main() -> None:
    schema = f"cos_bench_{secrets.token_hex(6)}"
    admin = psycopg.connect(PG_URL, autocommit=True)
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    scratch = tempfile.mkdtemp(prefix="cos-bench-replicate-")
    try:
        tiers = Tiers(os.path.join(scratch, ".coding-os"))
        folder = os.path.join(tiers.state_dir, "claude", "transcripts")
        os.makedirs(folder)
        path = os.path.join(folder, f"{SESSION}.jsonl")
        size = write_transcript(path, LINES)
        url = with_schema(PG_URL, schema)
        storage = PostgresStorage(url)
        bare = psycopg.connect(url, autocommit=True)
        bare.execute("CREATE TABLE bare (seq BIGINT NOT NULL, line BYTEA NOT NULL)")
        through_replicate(storage, tiers, path)  # warm-up of both
        through_copy(bare, path)
        ours, anchor = [], []
        for _ in range(ROUNDS):
            ours.append(through_replicate(storage, tiers, path))
            anchor.append(through_copy(bare, path))
        with open(path, "rb") as f:
            expected = f.read()
        stored = b"".join(line + b"\n" for _, line in storage.replica_lines(SESSION, "transcript"))
        assert stored == expected, "the replicated lines differ from the file"
        storage.close()
        bare.close()
        mine, plain = statistics.median(ours), statistics.median(anchor)
        ratio = plain / mine
        print(f"transcript: {LINES} lines, {size / 1e6:.1f} MB; batches of "
              f"{replicate.BATCH_LINES} lines")
        print(f"replicate: {mine:.3f} s ({LINES / mine:,.0f} lines/s); "
              f"COPY: {plain:.3f} s ({LINES / plain:,.0f} lines/s); rounds {ROUNDS}")
        verdict = "OK" if ratio >= TARGET else "OVER"
        print(f"RESULT replicate_throughput ratio={ratio:.2f} target>={TARGET} {verdict}")
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
