"""The first event of `cos run --agent gemini` against `gemini --acp` driven directly, both
against the scripted Gemini API server of the e2e tests (tests/e2e/gemini_server.py; the pinned
Gemini CLI of tests/e2e/clients).

Figure: the median time from starting the process to the first piece of the agent's answer,

- cos: `cos run --agent gemini --approve allow --json PROMPT` started → the first
  `agent_message_delta` (or `agent_message`) event on its stdout (cos starts, opens the session's
  events log, spawns `gemini --acp`, initializes it, opens the ACP session and sends the prompt);
- direct: `gemini --acp` started → `initialize`, `session/new`, `session/prompt` written as soon
  as each answer is read → the first `session/update` with an `agent_message_chunk`;

divided, cos by direct. Both run in the same private HOME and project, interleaved (cos, direct,
cos, direct, ...) after a warm-up of each, so drift on a shared machine hits both alike; each run
is waited for (or killed) before the next. The model answers at once, so what is measured is the
start of Gemini CLI (node) and what cos adds around it. Target: ratio <= 1.2.

`BENCH_RUNS` (default 7) sets the timed runs of each side.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.gemini_cli import (GEMINI_BIN, gemini_env, gemini_installed,  # noqa: E402
                                  write_gemini_settings)
from tests.e2e.gemini_server import GeminiServer, Text  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
TARGET = 1.2
WAIT = 120.0  # seconds a run may take to its first event
COS = str(Path(sys.executable).with_name("cos"))
PROMPT = "Say hello."


def _lines(proc: subprocess.Popen[bytes], deadline: float) -> Any:
    """The JSON objects `proc` writes on stdout, one a line, until `deadline`."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = b""
    while True:
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([fd], [], [], max(left, 0))
            if not ready:
                raise SystemExit(f"{proc.args!r}: no event in {WAIT:.0f} s")
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise SystemExit(f"{proc.args!r} ended (exit {proc.wait()}) before its first "
                                 "event")
            buffer += chunk
        line, buffer = buffer.split(b"\n", 1)
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            yield value


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


def through_cos(project: Path, env: dict[str, str]) -> float:
    """Seconds from starting `cos run --agent gemini` to its first agent message event."""
    start = time.perf_counter()
    proc = subprocess.Popen([COS, "run", "--agent", "gemini", "--approve", "allow", "--json",
                             PROMPT], cwd=project, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        for event in _lines(proc, time.monotonic() + WAIT):
            msg = event.get("msg")
            if isinstance(msg, dict) and msg.get("type") in ("agent_message_delta",
                                                            "agent_message"):
                return time.perf_counter() - start
        raise AssertionError("unreachable")
    finally:
        _stop(proc)


def direct(project: Path, env: dict[str, str]) -> float:
    """Seconds from starting `gemini --acp` to its first `agent_message_chunk`, driven as an
    ACP client does."""
    start = time.perf_counter()
    proc = subprocess.Popen([str(GEMINI_BIN), "--acp"], cwd=project, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)

    def send(request_id: int, method: str, params: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method,
                                     "params": params}).encode() + b"\n")
        proc.stdin.flush()

    try:
        lines = _lines(proc, time.monotonic() + WAIT)
        send(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}})
        next(m for m in lines if m.get("id") == 1 and "result" in m)
        send(2, "session/new", {"cwd": str(project), "mcpServers": []})
        session = next(m for m in lines if m.get("id") == 2)["result"]["sessionId"]
        send(3, "session/prompt", {"sessionId": session,
                                   "prompt": [{"type": "text", "text": PROMPT}]})
        for message in lines:
            update = (message.get("params") or {}).get("update") or {}
            if message.get("method") == "session/update" \
                    and update.get("sessionUpdate") == "agent_message_chunk":
                return time.perf_counter() - start
        raise AssertionError("unreachable")
    finally:
        _stop(proc)


def main() -> None:
    if not gemini_installed():
        print("the pinned Gemini CLI is not installed (make clients)")
        print("RESULT gemini_first_event skipped")
        return
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-gemini-first-"))
    # Every run asks for one answer; the script has one for any number of sessions.
    with GeminiServer([Text("Hello from the scripted Gemini.")]) as server:
        try:
            home = scratch / "home"
            write_gemini_settings(home)
            env = gemini_env(server, home)
            env["PATH"] = f"{GEMINI_BIN.parent}{os.pathsep}{env['PATH']}"
            project = scratch / "project"
            project.mkdir()
            subprocess.run(["git", "init", "-q", "-b", "main"], cwd=project, env=env,
                           check=True)
            through_cos(project, env)
            direct(project, env)
            cos_times: list[float] = []
            direct_times: list[float] = []
            for _ in range(RUNS):
                cos_times.append(through_cos(project, env))
                direct_times.append(direct(project, env))
            cos_median = statistics.median(cos_times)
            direct_median = statistics.median(direct_times)
            ratio = cos_median / direct_median
            print(f"runs: {RUNS} each, interleaved, after 1 warm-up each")
            print(f"cos run --agent gemini   median {cos_median * 1000:7.0f} ms  "
                  f"(min {min(cos_times) * 1000:.0f}, max {max(cos_times) * 1000:.0f})")
            print(f"gemini --acp directly    median {direct_median * 1000:7.0f} ms  "
                  f"(min {min(direct_times) * 1000:.0f}, max {max(direct_times) * 1000:.0f})")
            print(f"ratio (cos/direct) {ratio:.2f}   (target <= {TARGET})")
            print(f"RESULT gemini_first_event ratio={ratio:.2f} target<={TARGET} "
                  f"{'OK' if ratio <= TARGET else 'OVER'}")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
