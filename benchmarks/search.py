"""`cos_search`'s first page over 100,000 observations against a plain `LIKE` scan, on SQLite and
on PostgreSQL.

Figure: median wall time of the first page as the user gets it (`brain.search.search_page`, the
call behind `cos_search` and `cos search`: the query parsed into terms, the full-text search,
the snippets), in this process with the storage already open and warm, divided by the median of
the same query as a plain LIKE scan in the same database (SQLite: a `sqlite3` connection to the
same file; PostgreSQL: a psycopg connection to the same schema), both returning the same page of
20, newest first. Two anchors, each printed:

- the LIKE scan (judged): `SELECT oid, session, ts, text FROM observations WHERE lower(text)
  LIKE '%word%' [AND ...] ORDER BY seq + 0 DESC LIMIT 20`: every row read, the newest matches
  kept, which is what a search without an index costs;
- the early-stopping scan (the strictest anchor): the same with `ORDER BY seq DESC`, which walks
  the primary key newest first and stops at the 20th match (PostgreSQL is held to that plan with
  `enable_seqscan = off`, the plan SQLite takes by itself).

The corpus: `BENCH_ROWS` (100,000) observations over 200 sessions, as the hooks record them: tool
calls (Bash, Edit, Read, Grep, Write), prompts and assistant messages, their words drawn from a
vocabulary of 4,000 with a Zipf-like distribution, inserted in batches through
`Storage.add_observations` (which also fills the full-text index). On PostgreSQL the tables are
then `VACUUM ANALYZE`d, as autovacuum does soon after such a load: without statistics on
`search_docs.tsv` the planner reads every word's matches newest first through the primary key
instead of the GIN index, which for a rare word costs a scan. Set-up is not timed.

One row per query class, each word picked from the corpus by how many observations hold it:
a rare word (~0.1% of them), a medium word (~2%), two words ANDed (~6% each), a common word
(~30%). Every query word occurs only as a whole word, never inside another (nor in a file path,
which PostgreSQL's parser keeps as one token), so the cos page and the LIKE page must list the
same observations; that is checked for every query (OK, or exit 1). The three sides run
interleaved (the order rotating per round), medians. Target: ratio <= 0.1 on each backend, every
query class on its own; the RESULT lines list each against both anchors.

Why the medium, two-word and common rows miss 0.1 against the early-stopping scan: newest first,
it stops at its 20th match, so it gets cheaper as the word gets commoner (~1,000 rows for a word
in 2% of the observations, a few dozen for one in 30%, the `read` column) until it costs less
than the fixed part of any cos page (a query to the engine, 21 rows back, the query parsed and
snippets cut in Python), which the script prints when a row is over.

PostgreSQL: `COS_TEST_PG_URL` (default postgresql://postgres@127.0.0.1:5432/test), in a private
schema dropped at the end. When it does not answer, its half is skipped (an error under CI=true).
`BENCH_ROWS` and `BENCH_RUNS` scale the run down.
"""

from __future__ import annotations

import os
import random
import re
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coding_os.storage import Storage
    from coding_os.storage.base import Observation

ROWS = int(os.environ.get("BENCH_ROWS", "100000"))
RUNS = int(os.environ.get("BENCH_RUNS", "21"))
WARMUP = 3
SESSIONS = 200
BATCH = 2_000
VOCABULARY = 4_000
PAGE = 20
TARGET = 0.1
PG_URL = os.environ.get("COS_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
# (label, share of observations holding each word, words)
QUERY_CLASSES = (("rare word", 0.001, 1), ("medium word", 0.02, 1),
                 ("two words ANDed", 0.06, 2), ("common word", 0.30, 1))

_WORDS = re.compile(r"[^\W_]+")
# The head of the vocabulary: words any session is full of. The rest are made of syllables.
_HEAD = ("the to code and a of in is it for that this test file i with on we be not fix can "
         "run error now function should add use from check are so then but if update "
         "let me need change all tests as or new one have by there value return will just "
         "what make see why failing config at type call still an when look path first "
         "output method line class import build into because does module pass instead "
         "missing data next also wrong case handle result works expected here time back "
         "only after default set read user name list variable field string option "
         "before was get note same empty write each keep other version remove "
         "server client request response commit branch merge review docs comment flag "
         "cache query schema index table column row database migration lock retry timeout "
         "parser token buffer stream event hook panel session agent task status log").split()
_SYLLABLES = ("ka ro mi te sa lu vo ne pi da gor len tur bax fen quil mar sto dre vin pol "
              "zan hek rud cim tav bri fon gle nup ost yar wen").split()
_TOOLS = ("Bash", "Edit", "Read", "Grep", "Write")
_DIRS = ("src/coding_os", "src/coding_os/storage", "src/coding_os/state", "tests/storage",
         "tests/e2e", "docs", "benchmarks")
_FILES = ("api.py", "cli.py", "sqlite.py", "postgres.py", "base.py", "hook.py", "index.py",
          "README.md", "conftest.py", "Makefile")
# PostgreSQL's parser keeps a path such as `tests/e2e/cli.py` as one token, so a query word is
# never one of these.
_PATH_WORDS = {part for name in (*_DIRS, *_FILES) for part in _WORDS.findall(name.lower())}


def vocabulary(rng: random.Random) -> list[str]:
    """`VOCABULARY` distinct words, most frequent first."""
    words = list(dict.fromkeys(_HEAD))
    seen = set(words) | _PATH_WORDS
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


class Corpus:
    """Observations made up of words drawn from the vocabulary with weight 1/rank."""

    def __init__(self, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng)
        weights = [1.0 / rank for rank in range(1, len(self.words) + 1)]
        total = sum(weights)
        self._cumulative = []
        running = 0.0
        for weight in weights:
            running += weight / total
            self._cumulative.append(running)
        self.sessions = [f"ses-bench-{number:04d}-{secrets.token_hex(4)}"
                         for number in range(SESSIONS)]
        self.holding: Counter[str] = Counter()  # word -> observations holding it
        self.tokens: set[str] = set()

    def prose(self, low: int, high: int) -> str:
        count = self.rng.randint(low, high)
        words = self.rng.choices(self.words, cum_weights=self._cumulative, k=count)
        return words[0].capitalize() + " " + " ".join(words[1:]) + "."

    def text(self, event: str, tool: str | None) -> str:
        rng = self.rng
        if event == "UserPromptSubmit":
            return self.prose(6, 30)
        if event == "Stop":
            return self.prose(15, 60)
        path = f"{rng.choice(_DIRS)}/{rng.choice(_FILES)}"
        if tool == "Bash":
            return (f"Bash: pytest {rng.choice(_DIRS)} -q -k {self.prose(1, 1)[:-1].lower()} "
                    f"-> {rng.randint(0, 300)} passed, {rng.randint(0, 4)} failed")
        if tool == "Grep":
            return f"Grep {self.prose(1, 2)[:-1].lower()!r} in {rng.choice(_DIRS)}: " \
                   f"{rng.randint(0, 40)} matches"
        if tool == "Read":
            return f"Read {path} ({rng.randint(10, 900)} lines)"
        return f"{tool} {path}: {self.prose(4, 14)}"

    def observations(self, count: int) -> Iterator[Observation]:
        from coding_os.storage.base import Observation

        start = 1_790_000_000
        for number in range(count):
            place = number * SESSIONS // count
            # A few sessions overlap: a panel keeps working while the next one starts.
            if place and self.rng.random() < 0.2:
                place -= 1
            session = self.sessions[place]
            kind = self.rng.random()
            event, tool = (("UserPromptSubmit", None) if kind < 0.15 else
                           ("Stop", None) if kind < 0.35 else
                           ("PostToolUse", self.rng.choice(_TOOLS)))
            text = self.text(event, tool)
            held = set(_WORDS.findall(text.lower()))
            self.holding.update(held)
            self.tokens |= held
            ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start + number * 7)) + ".000Z"
            yield Observation(oid=f"obs-{number:07d}", session=session,
                              agent="claude" if place % 3 else "codex",
                              panel=f"{place % 4}", ts=ts, event=event, tool=tool, text=text,
                              data={"duration_ms": self.rng.randint(1, 5000)})

    def pick(self, share: float, count: int, rows: int, avoid: Sequence[str]) -> list[str]:
        """`count` words held by about `share` of the observations, each occurring only as a
        whole word (never inside another token of the corpus), so a LIKE finds what the
        full-text index finds."""
        wanted = share * rows
        candidates = sorted((w for w in self.words
                             if self.holding[w] and w not in avoid and w not in _PATH_WORDS),
                            key=lambda w: abs(self.holding[w] - wanted))
        picked: list[str] = []
        for word in candidates:
            if not any(word in token for token in self.tokens if token != word):
                picked.append(word)
                if len(picked) == count:
                    return picked
        raise SystemExit(f"no whole-only word held by ~{share:.1%} of the observations")


def fill(storage: Storage, observations: Sequence[Observation], label: str) -> float:
    """Insert the observations through `add_observations` in batches; return the seconds it
    took."""
    show = sys.stderr.isatty()
    rows = len(observations)
    batch: list[Observation] = []
    start = time.perf_counter()
    added = 0
    for observation in observations:
        batch.append(observation)
        if len(batch) == BATCH:
            added += storage.add_observations(batch)
            batch = []
            if show:
                print(f"\r{label}: {added:,} / {rows:,} observations", end="", file=sys.stderr,
                      flush=True)
    if batch:
        added += storage.add_observations(batch)
    if show:
        print("\r" + " " * 60 + "\r", end="", file=sys.stderr, flush=True)
    if added != rows:
        raise SystemExit(f"{label}: add_observations added {added} rows, not {rows}")
    return time.perf_counter() - start


def like_sql(words: Sequence[str], placeholder: str, early_stop: bool) -> str:
    """The query as a LIKE scan: over every row, then the newest page (`seq + 0` keeps the
    engine from walking the primary key), or, with `early_stop`, newest first through the
    primary key, stopping at the page's last match."""
    where = " AND ".join(f"lower(text) LIKE {placeholder}" for _ in words)
    order = "seq" if early_stop else "seq + 0"
    return (f"SELECT oid, session, ts, text FROM observations WHERE {where} "
            f"ORDER BY {order} DESC LIMIT {PAGE}")


def measure(sides: Sequence[Callable[[], list[str]]]) -> tuple[list[list[float]], list[list[str]]]:
    """Interleaved timings of every side (the order rotating per round), after warm-ups; and
    the ids of the last page of each."""
    times: list[list[float]] = [[] for _ in sides]
    pages: list[list[str]] = [[] for _ in sides]
    for index in range(WARMUP + RUNS):
        for offset in range(len(sides)):
            side = (index + offset) % len(sides)
            start = time.perf_counter()
            pages[side] = sides[side]()
            elapsed = time.perf_counter() - start
            if index >= WARMUP:
                times[side].append(elapsed)
    return times, pages


def run_backend(name: str, storage: Storage, like: Callable[[str, Sequence[object]], list[str]],
                placeholder: str, queries: list[tuple[str, list[str]]],
                matching: Callable[[list[str]], tuple[int, int]]) -> dict[str, float]:
    """Time every query class on one backend; print a row each; return each class's ratio
    against the LIKE scan (and, keyed `<class> (early stop)`, against the early-stopping one)."""
    from coding_os.brain.search import parse_query, search_page

    print(f"{name}:")
    print(f"  {'query':<16} {'words':<20} {'matches':>7} {'read':>7}   {'cos ms':>7} "
          f"{'scan ms':>8} {'ratio':>6} {'target':<6}  {'stop ms':>8} {'ratio':>6} {'target':<6}")
    ratios: dict[str, float] = {}
    for label, words in queries:
        query = " ".join(words)
        params = [f"%{word}%" for word in words]

        def cos_side(query: str = query) -> list[str]:
            return [str(hit["ref"]) for hit in search_page(storage, query, limit=PAGE).hits]

        def scan(sql: str = like_sql(words, placeholder, False),
                 params: list[str] = params) -> list[str]:
            return like(sql, params)

        def stop(sql: str = like_sql(words, placeholder, True),
                 params: list[str] = params) -> list[str]:
            return like(sql, params)

        times, pages = measure((cos_side, scan, stop))
        if not pages[0] == pages[1] == pages[2] or len(pages[0]) != PAGE:
            raise SystemExit(f"{name}, {label} {query!r}: the pages differ:\n"
                             f"  cos  {pages[0]}\n  scan {pages[1]}\n  stop {pages[2]}")
        cos_ms, scan_ms, stop_ms = (statistics.median(t) for t in times)
        ratios[label] = cos_ms / scan_ms
        ratios[f"{label} (early stop)"] = cos_ms / stop_ms
        matches, read = matching(words)
        print(f"  {label:<16} {query:<20} {matches:>7,} {read:>7,}   {cos_ms * 1000:7.2f} "
              f"{scan_ms * 1000:8.2f} {cos_ms / scan_ms:6.3f} {_mark(cos_ms / scan_ms):<6}  "
              f"{stop_ms * 1000:8.2f} {cos_ms / stop_ms:6.3f} {_mark(cos_ms / stop_ms):<6}")
    over = [label for label, ratio in ratios.items() if label.endswith("(early stop)")
            and ratio > TARGET]
    if over:
        # The fixed part of a page: the storage call alone (the query to the engine, 21 rows
        # back) for the common word; the rest of a page is parsing and snippets.
        terms = parse_query(queries[-1][1][0])
        floor = statistics.median(_timings(lambda: storage.search(terms, limit=PAGE + 1)))
        print(f"  over {TARGET} against the early-stopping scan: {', '.join(over)}: newest "
              f"first, it stops at its {PAGE}th match, after the rows in the 'read' column,")
        print(f"    fewer as the word gets commoner, until it costs less than the fixed part of "
              f"a cos page (storage.search alone {floor * 1000:.2f} ms; the rest is parsing and "
              "snippets)")
    return ratios


def _mark(ratio: float) -> str:
    return "OK" if ratio <= TARGET else "OVER"


def _timings(call: Callable[[], object]) -> list[float]:
    times = []
    for index in range(WARMUP + RUNS):
        start = time.perf_counter()
        call()
        if index >= WARMUP:
            times.append(time.perf_counter() - start)
    return times


def sqlite_half(scratch: Path, observations: Sequence[Observation],
                queries: list[tuple[str, list[str]]],
                matching: Callable[[list[str]], tuple[int, int]]) -> dict[str, float]:
    import sqlite3

    from coding_os.storage import open_storage

    path = scratch / "sqlite" / "coding-os.db"
    storage = open_storage(str(path), env={})
    try:
        seconds = fill(storage, observations, "sqlite")
        print(f"SQLite {sqlite3.sqlite_version}: {ROWS:,} observations through add_observations "
              f"in {seconds:.1f} s (database {_size(path.parent) / 1e6:.0f} MB)")
        plain = sqlite3.connect(path)
        try:
            def like(sql: str, params: Sequence[object]) -> list[str]:
                return [row[0] for row in plain.execute(sql, params).fetchall()]

            return run_backend("sqlite", storage, like, "?", queries, matching)
        finally:
            plain.close()
    finally:
        storage.close()


def postgres_half(scratch: Path, observations: Sequence[Observation],
                  queries: list[tuple[str, list[str]]],
                  matching: Callable[[list[str]], tuple[int, int]]) -> dict[str, float] | None:
    try:
        import psycopg
        from psycopg import sql
    except ImportError as exc:
        _skip(f"psycopg is not installed ({exc})")
        return None
    try:
        admin = psycopg.connect(PG_URL, autocommit=True, connect_timeout=5)
    except psycopg.Error as exc:
        _skip(f"PostgreSQL at {PG_URL} does not answer: {str(exc).splitlines()[0]}")
        return None
    from coding_os.storage import open_storage

    schema = f"cos_bench_search_{secrets.token_hex(4)}"
    url = f"{PG_URL}{'&' if '?' in PG_URL else '?'}options=-csearch_path%3D{schema}"
    try:
        storage = open_storage(str(scratch / "unused.db"), env={"COS_DATABASE_URL": url})
        try:
            seconds = fill(storage, observations, "postgres")
            plain: Any = psycopg.connect(url, autocommit=True)
            try:
                # The anchor reads newest first and stops at its 20th match, as SQLite's does.
                # Left to itself the planner flips between that and a whole-table scan and sort
                # (3x slower on a rare word) as psycopg starts preparing the statement.
                plain.execute("SET enable_seqscan = off")
                start = time.perf_counter()
                plain.execute("VACUUM ANALYZE observations")
                plain.execute("VACUUM ANALYZE search_docs")
                vacuum = time.perf_counter() - start
                version = plain.execute("SHOW server_version").fetchone()[0]
                size = plain.execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = %s AND c.relkind = 'r'", (schema,)).fetchone()[0]
                print(f"PostgreSQL {version.split()[0]}: {ROWS:,} observations through "
                      f"add_observations in {seconds:.1f} s, VACUUM ANALYZE {vacuum:.1f} s "
                      f"(schema {int(size) / 1e6:.0f} MB)")

                def like(query: str, params: Sequence[object]) -> list[str]:
                    return [row[0] for row in plain.execute(query, params).fetchall()]

                return run_backend("postgres", storage, like, "%s", queries, matching)
            finally:
                plain.close()
        finally:
            storage.close()
    finally:
        admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        admin.close()


def _skip(reason: str) -> None:
    if os.environ.get("CI") == "true":
        raise SystemExit(f"{reason} (CI=true needs it)")
    print(f"postgres: skipped: {reason}")


def _size(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.iterdir())


def main() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-search-"))
    try:
        # One corpus, generated once (the same seed gives the same words for both backends;
        # the first pass also counts which observations hold which word).
        corpus = Corpus()
        observations = list(corpus.observations(ROWS))
        queries: list[tuple[str, list[str]]] = []
        used: list[str] = []
        for label, share, count in QUERY_CLASSES:
            words = corpus.pick(share, count, ROWS, used)
            used.extend(words)
            queries.append((label, words))
        newest_first = [(o.text or "").lower() for o in reversed(observations)]

        def matching(words: list[str]) -> tuple[int, int]:
            """How many observations hold all the words, and how many rows a scan newest first
            reads to find the first page of them (the words occur only whole, so a substring
            test is a word test)."""
            hits = [i for i, text in enumerate(newest_first) if all(w in text for w in words)]
            return len(hits), hits[PAGE - 1] + 1 if len(hits) >= PAGE else len(newest_first)

        print(f"corpus: {ROWS:,} observations in {SESSIONS} sessions (prompts, assistant "
              f"messages, tool calls), {len(corpus.tokens):,} distinct words, Zipf-like; page "
              f"{PAGE}, newest first")
        print(f"runs: {RUNS} per query and side, interleaved, alternating order, after "
              f"{WARMUP} warm-ups; times are medians")
        ratios = {"sqlite": sqlite_half(scratch, observations, queries, matching),
                  "postgres": postgres_half(scratch, observations, queries, matching)}
        for name, by_class in ratios.items():
            if by_class is None:
                print(f"RESULT search_{name} skipped")
                continue
            for anchor, early in (("like_scan", False), ("like_early_stop", True)):
                print(f"RESULT search_{name}_vs_{anchor} target<={TARGET} " + " ".join(
                    f"{label.split(' (')[0].replace(' ', '_')}={ratio:.3f}:{_mark(ratio)}"
                    for label, ratio in by_class.items()
                    if label.endswith("(early stop)") == early))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
