"""`CosSessionStore.load`, on another host, of a 10,000-record Claude Agent SDK session.

Figure: seconds for `CosSessionStore.load` on host b (its own HOME, COS_HOST=b, a clone of the
repository: it holds no session of the key, so the store finds host a's session through the
index and reads its replicated transcript lines from the shared PostgreSQL) of a session host a
stored (10,000 records: a third user prompts, a third assistant replies with a tool call, a third
tool results; appended in batches of 100, as the SDK mirrors them, each batch replicated by the
append), divided by seconds for the anchor: a plain `SELECT line FROM replica_lines` of that
session's rows in order over one open connection, each line `json.loads`-ed and its `item` taken,
nothing else. Each round loads a few times, interleaved (A B A B ...), medians; the loaded
records are checked equal to what host a appended. Target: ratio <= 1.5.

Also printed (no target): host a's appends on PostgreSQL (each batch also pushed to the
storage) against the same appends on SQLite (nothing pushed).

PostgreSQL: `COS_TEST_PG_URL` (default postgresql://postgres@127.0.0.1:5432/test); the run uses a
schema of its own, dropped at the end. `BENCH_ROUNDS` (default 7), `BENCH_ENTRIES` (10000).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import statistics
import subprocess
import tempfile
import time
from typing import Any

import psycopg
from psycopg import sql

from claude_agent_sdk import project_key_for_directory

from coding_os.integrations.claude_agent_sdk import CosSessionStore

from _fixtures import sdk_record  # noqa: E402 (benchmarks/, the script's own folder)

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
ENTRIES = int(os.environ.get("BENCH_ENTRIES", "10000"))
PG_URL = os.environ.get("COS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
BATCH = 100
TARGET = 1.5
SESSION = "5d9a3c1e-bench-other-host"


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def host_env(scratch: str, name: str, url: str | None) -> dict[str, str]:
    home = os.path.join(scratch, f"home-{name}")
    os.makedirs(home, exist_ok=True)
    env = {"HOME": home, "COS_HOST": name, "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if url is not None:
        env["COS_DATABASE_URL"] = url
    return env


async def append_all(store: CosSessionStore, key: Any, records: list[Any]) -> float:
    start = time.perf_counter()
    for at in range(0, len(records), BATCH):
        await store.append(key, records[at:at + BATCH])
    return time.perf_counter() - start


def plain(conn: psycopg.Connection[Any], session: str) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    lines = conn.execute("SELECT line FROM replica_lines WHERE session = %s AND stream = %s "
                         "ORDER BY seq", (session, "transcript")).fetchall()
    rows = [row["item"] for row in (json.loads(line) for (line,) in lines) if "item" in row]
    return time.perf_counter() - start, rows


async def run(scratch: str, url: str, schema: str) -> None:
    checkout_a, checkout_b, alone = (os.path.join(scratch, name) for name in ("a", "b", "alone"))
    for path in (checkout_a, alone):
        git("init", "-q", path)
        git("-C", path, "-c", "user.name=b", "-c", "user.email=b@example.invalid", "commit",
            "-q", "--allow-empty", "-m", "init")
    git("clone", "-q", checkout_a, checkout_b)
    records = [sdk_record(i, SESSION) for i in range(ENTRIES)]

    key_a = {"project_key": project_key_for_directory(checkout_a), "session_id": SESSION}
    key_b = {"project_key": project_key_for_directory(checkout_b), "session_id": SESSION}
    on_a = CosSessionStore(project=checkout_a, env=host_env(scratch, "a", url))
    shared_append = await append_all(on_a, key_a, records)
    on_a.close()
    sqlite_store = CosSessionStore(project=alone, env=host_env(scratch, "alone", None))
    sqlite_append = await append_all(sqlite_store, key_a, records)

    on_b = CosSessionStore(project=checkout_b, env=host_env(scratch, "b", url))
    with psycopg.connect(url) as conn:
        [(session,)] = conn.execute("SELECT DISTINCT session FROM replica_lines").fetchall()
        ours, anchor = [], []
        await on_b.load(key_b)  # warm-up: imports, the connection
        plain(conn, session)
        for _ in range(ROUNDS):
            start = time.perf_counter()
            loaded = await on_b.load(key_b)
            ours.append(time.perf_counter() - start)
            seconds, rows = plain(conn, session)
            anchor.append(seconds)
            assert loaded == rows == records
    on_b.close()
    load, read = statistics.median(ours), statistics.median(anchor)
    ratio = load / read
    print(f"session: {ENTRIES} records appended on host a in batches of {BATCH}; "
          f"{ROUNDS} rounds, medians; schema {schema}")
    print(f"appends, PostgreSQL (each batch replicated)  {shared_append:8.2f} s")
    print(f"appends, SQLite (nothing replicated)         {sqlite_append:8.2f} s   "
          f"({shared_append / sqlite_append:.2f}x)")
    print(f"CosSessionStore.load on host b               {load:8.4f} s")
    print(f"plain SELECT of the rows + json.loads        {read:8.4f} s")
    print(f"ratio (load / plain SELECT) {ratio:.2f}   (target <= {TARGET})")
    print(f"RESULT claude_sdk_load_other_host ratio={ratio:.2f} target<={TARGET} "
          f"{'OK' if ratio <= TARGET else 'OVER'}")


def main() -> None:
    scratch = tempfile.mkdtemp(prefix="cos-bench-claude-sdk-other-host-")
    schema = f"cos_bench_{secrets.token_hex(6)}"
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    with psycopg.connect(PG_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            asyncio.run(run(scratch, url, schema))
        finally:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(schema)))
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
