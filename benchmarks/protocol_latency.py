"""Latency of a user input through `cos protocol` against the same input sent to the client
directly, for Claude Code and for Codex, both against the scripted model server of the e2e tests
(tests/e2e/model_server.py; the pinned clients of tests/e2e/clients).

Figure, per client: the median time from writing a user input line to reading the first whole
assistant text, through `cos protocol --agent <client>` (a `user_input` op → the first
`agent_message` event), divided by the same through the client's own long-lived stdio mode:

- claude: `claude -p --input-format stream-json --output-format stream-json --verbose` (a `user`
  line → the first `assistant` line with a text block);
- codex: `codex app-server` (`turn/start` → the first `item/completed` of an `agentMessage`).

Each side is one process started before the timing (its start and the session's start excluded)
and kept for every round; each round waits for the turn's end before the next. After WARMUP
rounds, the two sides run interleaved (cos, direct, cos, direct, ...) so drift on a shared
machine hits both alike. Target: ratio <= 1.10.

Where the difference goes: the scripted model answers in a few milliseconds, so a turn takes
20-40 ms and the relay is what is measured: two more pipe hops (the input through cos to the
client, each event back through cos) and, per event, its append to the events log (no fsync
before the task ends: durability "turn") and its forwarding, about 0.1-0.2 ms of Python each.
Codex says about ten events before its first message (status, items, deltas), Claude Code two.
The paired rounds differ by 1-2 ms at the median; single rounds on a shared machine by far
more, hence the many rounds.

`BENCH_RUNS` (default 60) sets the timed rounds; `BENCH_AGENTS` (default `claude,codex`) the
clients.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _stream_json import assistant_text  # noqa: E402
from _lines import Lines, ProtocolSide  # noqa: E402
from tests.e2e.harness import (CLAUDE_BIN, CODEX_BIN, claude_env, clients_installed,  # noqa: E402
                               codex_env, write_codex_config)
from tests.e2e.model_server import ModelServer, Text  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "60"))
WARMUP = 5
TARGET = 1.10
COS = str(Path(sys.executable).with_name("cos"))
ANSWER = "Hello from the scripted model."


def cos_side(agent: str, program: Path, cwd: Path, env: dict[str, str]) -> ProtocolSide:
    """`cos protocol --agent <agent>`, configured; a round is one user_input."""
    return ProtocolSide([COS, "protocol", "--agent", agent],
                        {"type": "configure", "agent": agent,
                         "options": {"program": str(program)}},
                        lambda text: ANSWER, cwd, env)


class DirectClaude:
    """`claude -p` in stream-json mode; a round is one `user` line."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.lines = Lines([str(CLAUDE_BIN), "-p", "--input-format", "stream-json",
                            "--output-format", "stream-json", "--verbose"], cwd, env)

    def round(self, text: str) -> float:
        start = time.perf_counter()
        self.lines.send({"type": "user", "message": {"role": "user", "content": text}})
        first = self.lines.until(lambda line: assistant_text(line) is not None)
        elapsed = time.perf_counter() - start
        assert assistant_text(first) == ANSWER, first
        self.lines.until(lambda line: line.get("type") == "result")
        return elapsed

    def end(self) -> None:
        self.lines.end()


class DirectCodex:
    """`codex app-server` with one thread; a round is one `turn/start`."""

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self.lines = Lines([str(CODEX_BIN), "app-server"], cwd, env)
        self.next_id = 0
        self.request("initialize", {"clientInfo": {"name": "bench", "title": "bench",
                                                   "version": "0"}})
        self.lines.send({"method": "initialized"})
        result = self.request("thread/start", {"cwd": str(cwd), "approvalPolicy": "untrusted"})
        self.thread = result["thread"]["id"]

    def request(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        number = self.next_id
        self.lines.send({"id": number, "method": method, "params": params})
        answer = self.lines.until(lambda m: m.get("id") == number and "method" not in m)
        if "error" in answer:
            raise SystemExit(f"codex {method}: {answer['error']}")
        return answer.get("result")

    def round(self, text: str) -> float:
        self.next_id += 1
        start = time.perf_counter()
        self.lines.send({"id": self.next_id, "method": "turn/start",
                         "params": {"threadId": self.thread,
                                    "input": [{"type": "text", "text": text}]}})
        first = self.lines.until(_codex_agent_message)
        elapsed = time.perf_counter() - start
        assert first["params"]["item"].get("text") == ANSWER, first
        self.lines.until(lambda m: m.get("method") == "turn/completed")
        return elapsed

    def end(self) -> None:
        self.lines.end()


def _codex_agent_message(message: dict[str, Any]) -> bool:
    if message.get("method") != "item/completed":
        return False
    item = message.get("params", {}).get("item")
    return isinstance(item, dict) and item.get("type") == "agentMessage"


def measure(agent: str, scratch: Path, server: ModelServer) -> float:
    home = scratch / f"home-{agent}"
    home.mkdir()
    project = scratch / f"project-{agent}"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    if agent == "claude":
        env = {**os.environ, **claude_env(server, home)}
        sides: list[Any] = [cos_side(agent, CLAUDE_BIN, project, env),
                            DirectClaude(project, env)]
    else:
        codex_home = home / ".codex"
        write_codex_config(codex_home, server)
        env = {**os.environ, **codex_env(home, codex_home)}
        sides = [cos_side(agent, CODEX_BIN, project, env), DirectCodex(project, env)]
    times: list[list[float]] = [[], []]
    try:
        for index in range(WARMUP + RUNS):
            for side, found in zip(sides, times):
                elapsed = side.round(f"round {index}: say hello")
                if index >= WARMUP:
                    found.append(elapsed)
    finally:
        for side in sides:
            side.end()
    through_cos, direct = (statistics.median(found) for found in times)
    ratio = through_cos / direct
    print(f"{agent}: {RUNS} rounds each after {WARMUP} warm-ups, interleaved")
    print(f"  cos protocol --agent {agent}  median {through_cos * 1000:8.1f} ms "
          f"(min {min(times[0]) * 1000:.1f})")
    print(f"  {agent} directly{' ' * (13 - len(agent))}median {direct * 1000:8.1f} ms "
          f"(min {min(times[1]) * 1000:.1f})")
    print(f"RESULT protocol_latency.{agent} ratio={ratio:.2f} target<={TARGET} "
          f"{'OK' if ratio <= TARGET else 'OVER'}")
    return ratio


def main() -> None:
    agents = os.environ.get("BENCH_AGENTS", "claude,codex").split(",")
    if not clients_installed():
        print("the pinned clients are not installed (make clients)")
        for agent in agents:
            print(f"RESULT protocol_latency.{agent.strip()} skipped")
        return
    with tempfile.TemporaryDirectory() as scratch, ModelServer([Text(ANSWER)]) as server:
        for agent in agents:
            measure(agent.strip(), Path(scratch), server)


if __name__ == "__main__":
    main()
