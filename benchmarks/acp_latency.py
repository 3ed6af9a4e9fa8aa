"""A prompt's first `session/update` through `cos acp` against the same prompt to the same agent
through `cos protocol` (DESIGN.md §12.1, issue 27).

Figure: the median time from writing a prompt to reading its first update made from one of the
session's events, through `cos acp` (a `session/prompt` request → the first `session/update`
carrying `cos/seq`: the agent's `agent_message_chunk`), divided by the same through `cos
protocol` (a `user_input` op → the first `agent_message` event, the event that update is made
from). The agent is the model-less python agent examples/echo_agent.py (`echo: <input>`), so
the figure is cos's own: what `cos acp` adds is the hop through the session's runner (a
background job, §6, whose socket `cos acp` relays) and the mapping of each event to an update.

Each side is one process started before the timing, in a project of its own, its session made
(and, for `cos acp`, the `available_commands_update` read) before the first round, and kept for
every round; each round waits for the task's end before the next. After WARMUP rounds the sides
run interleaved, each going first in turn, so drift on a shared machine hits them alike. A third
side, printed but not the anchor, speaks cos's protocol to the runner of a job directly (as `cos
attach` does): it splits the difference into the runner's part and `cos acp`'s own. At the end
the jobs are stopped. Target: ratio <= 1.10.

Where the difference goes (medians of one run with a timestamp at each step, the state dir on
tmpfs so that no fsync blurs it, on a loaded 2-core VM): a round is about 2 ms, most of it the
prompt's checkpoint, and what `cos acp` adds is two more process hops, each a wakeup of a
sleeping process (0.1-0.6 ms here: 0.1 when a core is free, more when the woken process waits
for one, as it does right after a task's end, when the engine starts the turn-end checkpoint),
and its own work: 0.19 ms for the prompt (0.13 of it the ACP SDK's dispatch; a prompt of text
blocks skips the schema pass) and 0.07 ms for the update. The runner adds no time of its own
(its side is as fast as `cos protocol`): it writes the job's state (a thread and an fsync)
STATE_SETTLE_S after the events that change it, a task's quick changes as one write
(jobs/runner.py), not as the task starts, where the write would slow the prompt's checkpoint by
0.2 ms, nor at its end before its clients have the events. With the state on a disk, the fsyncs before the first event goes out (the agent's message in the transcript, the
task's end in the events log) are 0.5-7 ms on a shared machine and set most of the figure; the
job's deferred state write then falls in another side's round. With an agent behind a model
(tens of milliseconds a turn) the same hops are a few percent.

`BENCH_RUNS` (default 200) sets the timed rounds.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _jobs import COS, stop_jobs  # noqa: E402
from _lines import Lines, ProtocolSide, msg  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "200"))
WARMUP = 10
TARGET = 1.10
AGENT = f"python:{ROOT / 'examples' / 'echo_agent.py'}:EchoAgent"


class ThroughAcp:
    """`cos acp --agent <echo agent>` with one session; a round is one `session/prompt`."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.lines = Lines([COS, "acp", "--agent", AGENT], cwd, env)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        result = self.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        self.session = result["sessionId"]
        self.lines.until(lambda m: _update(m).get("sessionUpdate") ==
                         "available_commands_update")

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        number = self.next_id
        self.lines.send({"jsonrpc": "2.0", "id": number, "method": method, "params": params})
        answer = self.lines.until(lambda m: m.get("id") == number and "method" not in m)
        if "error" in answer:
            raise SystemExit(f"cos acp {method}: {answer['error']}")
        return answer["result"]

    def round(self, text: str) -> float:
        self.next_id += 1
        number = self.next_id
        start = time.perf_counter()
        self.lines.send({"jsonrpc": "2.0", "id": number, "method": "session/prompt",
                         "params": {"sessionId": self.session,
                                    "prompt": [{"type": "text", "text": text}]}})
        first = self.lines.until(lambda m: "cos/seq" in (_update(m).get("_meta") or {}))
        elapsed = time.perf_counter() - start
        assert _update(first)["content"]["text"] == f"echo: {text}", first
        answer = self.lines.until(lambda m: m.get("id") == number)
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
        return elapsed

    def end(self) -> None:
        self.lines.end()


def protocol_side(cwd: Path, env: dict[str, str]) -> ProtocolSide:
    """`cos protocol` with the echo agent configured; a round is one `user_input`."""
    return ProtocolSide([COS, "protocol"], {"type": "configure", "agent": "python",
                                            "target": AGENT.partition(":")[2]},
                        lambda text: f"echo: {text}", cwd, env)


class ThroughRunner:
    """The session's runner spoken to directly: a second `cos acp` session whose editor left
    (the job goes on), its runner's socket attached as `cos attach` does; a round is one
    `user_input` op, to the first `agent_message`. Not the anchor: it says how much of the
    difference is the runner's hop and how much `cos acp`'s own."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        from coding_os.jobs import control

        editor = ThroughAcp(cwd, env)
        editor.end()
        row = control.session_job(editor.session, env)
        if row is None:
            raise SystemExit(f"no job serves {editor.session}")
        job, connection, _ = control.attach(str(row["id"]), 0, env)
        if connection is None:
            raise SystemExit(f"job {job.id}: its runner does not run")
        self.connection = connection
        self.events = connection.events()
        self.rounds = 0

    def until(self, match: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        for event in self.events:
            if match(event):
                return event
        raise SystemExit("the runner's connection ended")

    def round(self, text: str) -> float:
        self.rounds += 1
        start = time.perf_counter()
        self.connection.send({"type": "user_input", "text": text}, f"r{self.rounds}")
        first = self.until(lambda e: msg(e).get("type") == "agent_message")
        elapsed = time.perf_counter() - start
        assert msg(first).get("text") == f"echo: {text}", first
        self.until(lambda e: msg(e).get("type") in ("task_complete", "turn_aborted"))
        return elapsed

    def end(self) -> None:
        self.connection.close()


def _update(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("method") != "session/update":
        return {}
    update = message.get("params", {}).get("update")
    return update if isinstance(update, dict) else {}


def _job_ids(env: dict[str, str], cwd: Path) -> list[str]:
    proc = subprocess.run([COS, "agents", "--json", "--all"], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=60)
    try:
        rows = json.loads(proc.stdout or "[]")
    except ValueError:
        return []
    return [str(row["id"]) for row in rows if isinstance(row, dict) and "id" in row]


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        env = {**os.environ, "HOME": str(home)}
        env.pop("COS_STATE_DIR", None)
        projects = [Path(scratch) / name for name in ("acp", "protocol", "runner")]
        for project in projects:  # each side's checkpoints in a store of their own
            project.mkdir()
            subprocess.run(["git", "init", "-q", str(project)], check=True)
        sides: list[Any] = []
        times: list[list[float]] = [[], [], []]
        try:
            for side, project in zip((ThroughAcp, protocol_side, ThroughRunner), projects):
                sides.append(side(project, env))
            for index in range(WARMUP + RUNS):
                # Each side goes first in turn: a turn's end leaves work behind it (its
                # turn-end checkpoint, in a thread), which the side after it shares the
                # machine with.
                start = index % len(sides)
                for number in (*range(start, len(sides)), *range(start)):
                    elapsed = sides[number].round(f"round {index}: say hello")
                    if index >= WARMUP:
                        times[number].append(elapsed)
        finally:
            for side in sides:
                side.end()
            for project in projects:
                stop_jobs(env, project, _job_ids(env, project))
    through_acp, through_protocol, through_runner = (statistics.median(found)
                                                     for found in times)
    ratio = through_acp / through_protocol
    print(f"acp first update: the echo agent, {RUNS} rounds each after {WARMUP} warm-ups, "
          "interleaved")
    print(f"  cos acp       session/prompt -> first session/update  median "
          f"{through_acp * 1000:7.2f} ms (min {min(times[0]) * 1000:.2f})")
    print(f"  cos protocol  user_input -> first agent_message       median "
          f"{through_protocol * 1000:7.2f} ms (min {min(times[1]) * 1000:.2f})")
    print(f"  (the runner   user_input -> first agent_message       median "
          f"{through_runner * 1000:7.2f} ms (min {min(times[2]) * 1000:.2f}): cos protocol on "
          "the job's socket, not the anchor)")
    print(f"RESULT acp_latency.first_update ratio={ratio:.2f} target<={TARGET} "
          f"{'OK' if ratio <= TARGET else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
