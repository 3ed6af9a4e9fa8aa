"""From starting `cos bg` to the job's first agent event, against starting the agent directly.

Figure: the median time from starting the real `cos bg --json "PROMPT"` (a regular install of
this checkout, as users get it; a Claude Code job against the scripted model server of the e2e
tests) until the job's first `agent_message` is in its events log (the log `state.json` names,
read every 5 ms), divided by the median time from starting `claude -p --input-format
stream-json --output-format stream-json --verbose` in the same project (the pinned client of
tests/e2e/clients, as protocol_latency.py drives it) and writing the same prompt as a `user` line
until its first `assistant` line with a text block. Two `cos bg` variants: `--isolation none`
(the job runs in the project's checkout) and the default worktree isolation (`git worktree add`
of the project's tree, then the job there); the target applies to both. Target: ratio <= 1.2.

The scripted model answers at once, so the figure is start-up: the direct side is Claude Code's
own start and first turn; the `cos bg` side adds the command itself (making the job, its
worktree, starting the runner and asking the supervisor to look), the runner's start (Python,
the engine, the session and its events log) and the relay of Claude Code's events into the log.
The supervisor's spare runner and spare worktree (docs/background.md, "Starting fast") are
used as users get them: the daemon makes them between jobs, at low priority and never within a
second of a job's making, so one may be in the making while another side's round runs; the
breakdown says in how many rounds the worktree side took the spare worktree.
The project is a committed tree of BENCH_FILES (default 1,000) files of about 5 KB; a scratch
HOME. The three sides run interleaved, round after round; each job is stopped (`cos stop`) and
removed (`cos rm`) after its round, untimed, so no job runs during the next one.

`BENCH_RUNS` (default 8) sets the timed rounds.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _installs import make_installs  # noqa: E402
from _jobs import kill_leftovers  # noqa: E402
from _stream_json import assistant_text  # noqa: E402
from _worktree import make_tree  # noqa: E402

from tests.e2e.harness import BIN_DIR, CLAUDE_BIN, claude_env, clients_installed  # noqa: E402
from tests.e2e.model_server import ModelServer, Text  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "8"))
FILES = int(os.environ.get("BENCH_FILES", "1000"))
WARMUP = 1
TARGET = 1.2
WAIT = 60.0  # seconds for any one first event
POLL = 0.005  # seconds between two reads of the job's state or events log
ANSWER = "Hello from the scripted model."
PROMPT = "say hello"


def _fail(message: str) -> None:
    raise SystemExit(message)


class BgSide:
    """`cos bg` of a Claude Code job, timed to the first `agent_message` in its events log."""

    def __init__(self, cos: str, isolation: str, project: Path, env: dict[str, str]) -> None:
        self.cos = cos
        self.isolation = isolation
        self.project = project
        self.env = env
        self.jobs_dir = Path(env["HOME"]) / ".coding-os" / "jobs"
        self.started: list[str] = []  # every job id, for the clean-up
        self.returned: list[float] = []  # seconds `cos bg` took to return
        # Seconds from the start to the events' own stamps (ms): the agent started and
        # initialised (`session_configured`), the prompt given (`task_started`).
        self.configured: list[float] = []
        self.started_task: list[float] = []
        self.took_spare_tree: list[bool] = []  # the job took the spare worktree (all written)

    def round(self) -> float:
        wall = time.time()
        start = time.perf_counter()
        proc = subprocess.run([self.cos, "bg", "--json", "--isolation", self.isolation, PROMPT],
                              cwd=self.project, env=self.env, capture_output=True, text=True,
                              timeout=WAIT)
        returned = time.perf_counter()
        if proc.returncode != 0:
            _fail(f"cos bg failed (exit {proc.returncode}): {proc.stderr.strip()}")
        job = str(json.loads(proc.stdout)["id"])
        self.started.append(job)
        self.took_spare_tree.append(
            _read_json(self.jobs_dir / job / "state.json").get("checked_out") is True)
        text, stamps = self._first_message(job, start)
        elapsed = time.perf_counter() - start
        self.configured.append(stamps.get("session_configured", wall) - wall)
        self.started_task.append(stamps.get("task_started", wall) - wall)
        if text != ANSWER:
            _fail(f"job {job}: first agent_message {text!r}, not {ANSWER!r}")
        self.returned.append(returned - start)
        self._cos("stop", job)
        self._cos("rm", job)
        return elapsed

    def _first_message(self, job: str, start: float) -> tuple[str, dict[str, float]]:
        """The text of the job's first agent_message, as soon as its events log holds it, and
        the stamps of the events before it (Unix seconds, by type)."""
        stamps: dict[str, float] = {}
        folder = self.jobs_dir / job
        events: str | None = None
        offset = 0
        pending = b""
        while time.perf_counter() - start < WAIT:
            if events is None:
                state = _read_json(folder / "state.json")
                if state.get("state") in ("failed", "stopped"):
                    stderr = (folder / "stderr.log").read_text(errors="replace")[-2000:]
                    _fail(f"job {job} {state['state']}: {state.get('error')}\n{stderr}")
                found = state.get("events")
                events = found if isinstance(found, str) else None
            if events is not None:
                try:
                    with open(events, "rb") as handle:
                        handle.seek(offset)
                        chunk = handle.read()
                except FileNotFoundError:
                    chunk = b""
                offset += len(chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    event = json.loads(line)
                    msg = event.get("msg") or {}
                    stamps.setdefault(str(msg.get("type")), _unix(event.get("ts")))
                    if msg.get("type") == "agent_message":
                        return str(msg.get("text")), stamps
            time.sleep(POLL)
        _fail(f"job {job}: no agent_message within {WAIT}s")
        raise AssertionError  # not reached

    def _cos(self, command: str, job: str) -> None:
        proc = subprocess.run([self.cos, command, job], cwd=self.project, env=self.env,
                              capture_output=True, text=True, timeout=WAIT)
        if proc.returncode != 0:
            _fail(f"cos {command} {job} failed (exit {proc.returncode}): {proc.stderr.strip()}")

    def cleanup(self) -> None:
        for job in self.started:
            subprocess.run([self.cos, "stop", job], cwd=self.project, env=self.env,
                           capture_output=True, timeout=WAIT)


def _unix(stamp: object) -> float:
    """An event's `ts` (ISO 8601, UTC, ms) in Unix seconds."""
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        found = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


class DirectSide:
    """Claude Code started directly in stream-json mode, timed to its first assistant text."""

    def __init__(self, project: Path, env: dict[str, str]) -> None:
        self.project = project
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.first_line: list[float] = []  # seconds to its first output line (system init)

    def round(self) -> float:
        start = time.perf_counter()
        self.proc = proc = subprocess.Popen(
            [str(CLAUDE_BIN), "-p", "--input-format", "stream-json", "--output-format",
             "stream-json", "--verbose"], cwd=self.project, env=self.env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"type": "user", "message": {
            "role": "user", "content": PROMPT}}).encode() + b"\n")
        proc.stdin.flush()
        fd = proc.stdout.fileno()
        buffer = b""
        text = None
        first_line = None
        while text is None:
            left = WAIT - (time.perf_counter() - start)
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                _fail(f"claude: no assistant text in {WAIT}s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                _fail(f"claude ended (exit {proc.wait()}) before its first assistant text")
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if first_line is None:
                    first_line = time.perf_counter() - start
                try:
                    found = json.loads(line)
                except ValueError:
                    continue
                if isinstance(found, dict) and (text := assistant_text(found)) is not None:
                    break
        elapsed = time.perf_counter() - start
        if text != ANSWER:
            _fail(f"claude's first assistant text {text!r}, not {ANSWER!r}")
        self.first_line.append(first_line or elapsed)
        self.end()
        return elapsed

    def end(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _ms(found: list[float]) -> str:
    """The median of the timed rounds (the warm-up left out), in ms."""
    return f"{statistics.median(found[WARMUP:]) * 1000:.0f} ms"


def main() -> None:
    if not clients_installed():
        print("the pinned clients are not installed (make clients)")
        print("RESULT bg_first_event skipped")
        return
    with tempfile.TemporaryDirectory(prefix="cos-bench-bg-") as scratch_dir, \
            ModelServer([Text(ANSWER)]) as server:
        scratch = Path(scratch_dir)
        install = make_installs(scratch, ("current-pip",))[0]
        home = scratch / "home"
        home.mkdir()
        env = claude_env(server, home, {
            "GIT_CONFIG_GLOBAL": str(home / ".gitconfig"), "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"})
        env["PATH"] = os.pathsep.join([str(BIN_DIR), env["PATH"]])  # `claude` for cos bg
        project = scratch / "project"
        project.mkdir()
        tree_bytes = make_tree(project, env, random.Random(3), FILES)
        sides: dict[str, Any] = {
            "cos bg --isolation none": BgSide(install.cos, "none", project, env),
            "cos bg (worktree)": BgSide(install.cos, "worktree", project, env),
            "claude directly": DirectSide(project, env)}
        times: dict[str, list[float]] = {name: [] for name in sides}
        try:
            for index in range(WARMUP + RUNS):
                for name, side in sides.items():
                    elapsed = side.round()
                    if index >= WARMUP:
                        times[name].append(elapsed)
        finally:
            sides["claude directly"].end()
            for side in sides.values():
                if isinstance(side, BgSide):
                    side.cleanup()
            subprocess.run([install.cos, "daemon", "stop"], cwd=project, env=env,
                           capture_output=True, timeout=WAIT)
            kill_leftovers(home)
        medians = {name: statistics.median(found) for name, found in times.items()}
        direct = medians["claude directly"]
        print(f"a regular install ({install.name}); a Claude Code job against the scripted model "
              f"server; a committed tree of {FILES} files ({tree_bytes / 1e6:.1f} MB)")
        print(f"{RUNS} rounds after {WARMUP} warm-up, the three sides interleaved; from the start "
              "of the command to the first agent text")
        for name, side in sides.items():
            found = times[name]
            print(f"  {name:<24} median {medians[name] * 1000:7.0f} ms (min "
                  f"{min(found) * 1000:4.0f})   ratio {medians[name] / direct:.2f}")
            if isinstance(side, BgSide):
                print(f"    of which: cos bg returned at {_ms(side.returned)}, the agent was "
                      f"started and initialised (session_configured) at {_ms(side.configured)}, "
                      f"the prompt given (task_started) at {_ms(side.started_task)}")
                if side.isolation == "worktree":
                    taken = sum(side.took_spare_tree[WARMUP:])
                    print(f"    the spare worktree was taken in {taken} of {RUNS} timed rounds "
                          "(the others wrote the worktree's files)")
            else:
                print(f"    of which: its first output line (system init) at "
                      f"{_ms(side.first_line)}")
        for key, name in (("none", "cos bg --isolation none"), ("worktree", "cos bg (worktree)")):
            ratio = medians[name] / direct
            print(f"RESULT bg_first_event.{key} ratio={ratio:.2f} target<={TARGET} "
                  f"{'OK' if ratio <= TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
