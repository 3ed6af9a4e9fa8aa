"""`cos web`'s sessions page over an index of 100,000 sessions against one of 1,000.

Figure: the median time of `GET /sessions` (the first page: 50 rows, default scope `repo`) from
a running `cos web --json --port 0` in a project whose index holds 100,000 sessions, divided by
the same request to a second `cos web` in a project whose index holds 1,000. Each request asks
its path under the token the token URL redirected to, and is timed from opening its
connection to the last byte of the page. The same requests on a kept-alive connection (as a
browser sends them) are timed too and printed beside, with no target: they also pay whatever
the server's socket options cost (the script notes it when they wait out the client's delayed
ACK). The indexes are filled as
sessions_list.py fills them (`Storage.upsert_index_rows`, synthetic rows of all three agents,
half of them in the project's checkout); the Claude Code and Codex log directories of the
private HOME are empty, so the import each page runs first finds nothing and nothing changes
between requests. The two servers are asked interleaved (A B A B ...), medians. Target: ratio <= 1.5 (the page's cost follows the page,
not the store).

`WebServer` (a `cos web` started in a project and asked over HTTP under its token) is used by
web_first_screen.py and web_sse.py too. `BENCH_RUNS` (default 30) sets the timed requests.
"""

from __future__ import annotations

import compileall
import http.client
import json
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
from sessions_list import fill  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = 3
SMALL, LARGE = 1_000, 100_000
PAGE = 50  # SESSIONS_PAGE of interfaces/web/app.py
TARGET = 1.5
COS = str(Path(sys.executable).with_name("cos"))
WAIT = 120.0
_ROW = re.compile(rb'data-testid="session-row" data-session="([^"]+)"')


class _NoDelay(http.client.HTTPConnection):
    """An HTTP connection with TCP_NODELAY, as browsers open theirs (without it, a request
    sent on a kept-alive connection can wait out the peer's 40 ms delayed ACK)."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class WebServer:
    """A real `cos web --json --port 0` serving the project at `cwd`, asked over one kept-alive
    HTTP connection, under the token's path its token URL redirects to (`root`). `stop` ends
    it."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([COS, "web", "--json", "--port", "0"], cwd=cwd, env=env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            self.stop()
            raise SystemExit(f"cos web did not start: {self.stderr()}")
        info = json.loads(line)
        self.port = int(info["port"])
        self.token = str(info["token"])
        self.connection = self.connect()
        # As a browser: the printed URL once, which redirects under the token's path.
        self.connection.request("GET", f"/?token={self.token}")
        first = self.connection.getresponse()
        first.read()
        self.root = f"/{self.token}"
        if first.status != 303 or first.getheader("location") != f"{self.root}/":
            self.stop()
            raise SystemExit(f"cos web's token URL answered {first.status} "
                             f"{first.getheader('location')!r}")

    def connect(self) -> http.client.HTTPConnection:
        return _NoDelay("127.0.0.1", self.port, timeout=WAIT)

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Accept": "text/html", **extra}

    def get(self, path: str, keep_alive: bool = False) -> tuple[float, bytes]:
        """Seconds from sending `GET path` to the last byte of its 200 answer, and the body:
        on a connection of its own (its connect timed too), or with `keep_alive` on the one
        this object keeps open (opened again, untimed, when the server closed it while idle:
        uvicorn keeps an idle connection 5 s)."""
        if keep_alive:
            connection = self.connection
            if connection.sock is None:
                connection.connect()
            else:
                # A connection the server closed reads as ready with nothing in it.
                ready, _, _ = select.select([connection.sock], [], [], 0)
                if ready and not connection.sock.recv(1, socket.MSG_PEEK):
                    connection.close()
                    connection.connect()
        start = time.perf_counter()
        if not keep_alive:
            connection = self.connect()
        try:
            connection.request("GET", self.root + path, headers=self.headers())
            answer = connection.getresponse()
            body = answer.read()
        finally:
            if not keep_alive:
                connection.close()
        elapsed = time.perf_counter() - start
        if answer.status != 200:
            raise SystemExit(f"GET {path}: {answer.status} {body[:2000]!r}")
        return elapsed, body

    def stderr(self) -> str:
        return self.process.stderr.read().decode(errors="replace")[-2000:] \
            if self.process.stderr is not None and self.process.poll() is not None else ""

    def stop(self) -> None:
        if getattr(self, "connection", None) is not None:
            self.connection.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


def byte_compile() -> None:
    """As the other benchmarks: an editable install byte-compiled like a regular one."""
    import coding_os

    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)


def main() -> None:
    byte_compile()
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-web-sessions-"))
    servers: dict[int, WebServer] = {}
    try:
        home = scratch / "home"
        (home / ".claude" / "projects").mkdir(parents=True)
        (home / ".codex" / "sessions").mkdir(parents=True)
        env = _fixtures.bench_env(home)
        elsewhere = scratch / "elsewhere"
        elsewhere.mkdir()
        for count in (SMALL, LARGE):
            root = scratch / f"with-{count}"
            root.mkdir()
            project = _fixtures.project(root, env)
            indexed = fill(project, env, count, elsewhere)
            if indexed != count:
                raise SystemExit(f"the index holds {indexed} rows, not {count}")
            servers[count] = WebServer(project, env)
        newest = str(uuid.UUID(int=(0x5E55 << 112))).encode()
        fresh: dict[int, list[float]] = {SMALL: [], LARGE: []}
        kept: dict[int, list[float]] = {SMALL: [], LARGE: []}
        sizes: dict[int, int] = {}
        for index in range(WARMUP + RUNS):
            for count in (SMALL, LARGE):
                for keep_alive, times in ((False, fresh), (True, kept)):
                    elapsed, body = servers[count].get("/sessions", keep_alive)
                    rows = _ROW.findall(body)
                    if len(rows) != PAGE or rows[0] != newest or b"sessions-next" not in body:
                        raise SystemExit(f"{count}: expected the {PAGE} newest sessions and a "
                                         f"next page, got {len(rows)} starting at {rows[:1]}")
                    sizes[count] = len(body)
                    if index >= WARMUP:
                        times[count].append(elapsed)
        small = statistics.median(fresh[SMALL])
        large = statistics.median(fresh[LARGE])
        ratio = large / small
        pairs = sorted(b / a for a, b in zip(fresh[SMALL], fresh[LARGE]))
        kept_small, kept_large = (statistics.median(kept[count]) for count in (SMALL, LARGE))
        print(f"request: GET /sessions (first page, {PAGE} rows, scope repo) to cos web under "
              f"its token; pages of {sizes[SMALL]:,} and {sizes[LARGE]:,} bytes")
        print(f"runs: {RUNS} each, interleaved, after {WARMUP} warm-ups")
        for count, median, kept_median in ((SMALL, small, kept_small),
                                           (LARGE, large, kept_large)):
            print(f"{count:>7,} sessions   new connection: median {median * 1000:7.1f} ms, "
                  f"min {min(fresh[count]) * 1000:6.1f} ms   kept-alive connection: median "
                  f"{kept_median * 1000:7.1f} ms")
        print(f"ratio (medians, new connections)  {ratio:.2f}   (pairwise median "
              f"{statistics.median(pairs):.2f}; target <= {TARGET})")
        if max(kept_small, kept_large) > 0.035 > max(small, large):
            print("note: a request on a kept-alive connection (what a browser sends) waits ~40 "
                  "ms: cos web's answers are written without TCP_NODELAY (Nagle against the "
                  "client's delayed ACK)")
        print(f"RESULT web_sessions_page ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
    finally:
        for server in servers.values():
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
