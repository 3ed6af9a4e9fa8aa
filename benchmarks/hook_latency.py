"""Whole-process latency of `cos hook PostToolUse` against a bare interpreter start.

Figure: median wall time of the PostToolUse hook command exactly as `cos init --agent claude`
installs it (its env assignment and absolute `cos` path, executed directly), with a realistic
Claude Code payload on stdin, divided by the median of `python -I -c pass` from the same venv.
The two run interleaved (A B A B ...) so drift on a shared machine hits both alike.
Target: ratio <= 1.5. Also prints the hook's ten most expensive imports (`-X importtime`).

Second figure, the same way: `cos hook PreToolUse` for a Bash call, which takes a checkpoint of
the tree first (DESIGN.md §5), on a small committed repository that does not change between
calls (a checkpoint that stores nothing new), against the same `python -I -c pass`. Target 1.5.
"""

from __future__ import annotations

import compileall
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = 3
TARGET = 1.5


def _payload(project: Path, session_id: str, event: str, tool_input: dict[str, str],
             tool_use_id: str) -> dict[str, object]:
    return {
        "session_id": session_id,
        "transcript_path": f"/home/dev/.claude/projects/-tmp-proj/{session_id}.jsonl",
        "cwd": str(project),
        "permission_mode": "acceptEdits",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": tool_input,
        "tool_use_id": tool_use_id,
    }


def realistic_payload(project: Path, session_id: str) -> dict[str, object]:
    payload = _payload(project, session_id, "PostToolUse",
                       {"command": "pytest -q tests/test_api.py",
                        "description": "Run the API tests"}, "toolu_01ABCDEFGHIJKLMNOPQRSTUV")
    payload["tool_response"] = {"stdout": "." * 60 + "\n60 passed in 1.23s\n" + "x" * 2000,
                                "stderr": "", "interrupted": False, "isImage": False}
    return payload


def pre_tool_use_payload(project: Path, session_id: str) -> dict[str, object]:
    return _payload(project, session_id, "PreToolUse",
                    {"command": "sed -i 's/old/new/' src/app.py", "description": "Rename"},
                    "toolu_01ABCDEFGHIJKLMNOPQRSTUW")


def small_repository(project: Path, env: dict[str, str]) -> None:
    """200 committed files in 20 directories, as a small project has."""
    for number in range(200):
        path = project / f"pkg{number // 10}" / f"mod{number % 10}.py"
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"# module {number}\n" + "def f(x):\n    return x + 1\n" * 40,
                        encoding="utf-8")
    git_env = {**env, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "bench@example.com",
               "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "bench@example.com"}
    subprocess.run(["git", "add", "-A"], cwd=project, env=git_env, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "small project"], cwd=project, env=git_env,
                   check=True)


def installed_command(project: Path, cos: str, event: str) -> tuple[dict[str, str], list[str]]:
    """The env assignments and argv of the hook entry `cos init` wrote for `event`."""
    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    command = settings["hooks"][event][0]["hooks"][0]["command"]
    words = shlex.split(command)
    env = {}
    while "=" in words[0] and not words[0].startswith("/"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def timed(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, input=stdin, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def top_imports(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes) -> list[tuple[int, str]]:
    proc = subprocess.run([sys.executable, "-X", "importtime", *argv], env=env, cwd=cwd,
                          input=stdin, capture_output=True)
    rows = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:"):
            continue
        parts = [part.strip() for part in line[len("import time:"):].split("|")]
        if len(parts) == 3 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[2]))
    return sorted(rows, reverse=True)[:10]


def interleaved(hook_argv: list[str], hook_env: dict[str, str], project: Path, payload: bytes,
                anchor: list[str], anchor_env: dict[str, str]) -> tuple[list[float], list[float]]:
    hook_times: list[float] = []
    anchor_times: list[float] = []
    for index in range(WARMUP + RUNS):
        h = timed(hook_argv, hook_env, project, payload)
        a = timed(anchor, anchor_env, project, b"")
        if index >= WARMUP:
            hook_times.append(h)
            anchor_times.append(a)
    return hook_times, anchor_times


def main() -> None:
    venv_bin = Path(sys.executable).parent
    cos = str(venv_bin / "cos")
    import coding_os

    # A regular (non-editable) install ships compiled bytecode; make the editable one match,
    # so the figure does not depend on PYTHONDONTWRITEBYTECODE in the caller's environment.
    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        project = Path(scratch) / "proj"
        project.mkdir()
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
        subprocess.run(["git", "init", "-q"], cwd=project, check=True)
        small_repository(project, base_env)
        subprocess.run([cos, "init", "--agent", "claude"], cwd=project, env=base_env, check=True,
                       stdout=subprocess.DEVNULL)
        session_id = "0b6c2c47-5a43-4f0e-9d2a-3f1e3c5f9a10"
        start_env, start_argv = installed_command(project, cos, "SessionStart")
        subprocess.run(start_argv, env={**base_env, **start_env}, cwd=project, check=True,
                       input=json.dumps({"session_id": session_id, "source": "startup",
                                         "hook_event_name": "SessionStart"}).encode(),
                       stdout=subprocess.DEVNULL)
        hook_env, hook_argv = installed_command(project, cos, "PostToolUse")
        hook_env = {**base_env, **hook_env}
        payload = json.dumps(realistic_payload(project, session_id)).encode()
        anchor = [sys.executable, "-I", "-c", "pass"]

        hook_times, anchor_times = interleaved(hook_argv, hook_env, project, payload, anchor,
                                               base_env)
        hook_median = statistics.median(hook_times)
        anchor_median = statistics.median(anchor_times)
        ratio = hook_median / anchor_median
        pair_ratios = sorted(h / a for h, a in zip(hook_times, anchor_times))
        print(f"hook command: {' '.join(f'{k}={v}' for k, v in hook_env.items() if k == 'COS_AGENT')} "
              f"{' '.join(hook_argv)}")
        print(f"runs: {RUNS} each, interleaved, after {WARMUP} warm-ups")
        print(f"cos hook PostToolUse   median {hook_median * 1000:7.2f} ms")
        print(f"python -I -c pass      median {anchor_median * 1000:7.2f} ms")
        print(f"ratio (medians)        {ratio:.2f}   (pairwise median "
              f"{statistics.median(pair_ratios):.2f}; target <= {TARGET})")
        log_lines = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8").count("\n")
        print(f"hooks-log lines written: {log_lines}")
        print("ten most expensive imports of the hook (self time, us):")
        for self_us, name in top_imports(hook_argv, hook_env, project, payload):
            print(f"  {self_us:6d}  {name}")
        pre_env, pre_argv = installed_command(project, cos, "PreToolUse")
        pre_env = {**base_env, **pre_env}
        pre_payload = json.dumps(pre_tool_use_payload(project, session_id)).encode()
        log_before = (project / ".coding-os" / ".hooks.log").read_text(encoding="utf-8")
        pre_times, pre_anchor_times = interleaved(pre_argv, pre_env, project, pre_payload, anchor,
                                                  base_env)
        log_new = (project / ".coding-os" / ".hooks.log").read_text(
            encoding="utf-8")[len(log_before):].splitlines()
        # Each call took its checkpoint, or (nothing changed since) reused the latest one.
        taken = sum(1 for line in log_new if " checkpoint=cp-" in line)
        if taken != WARMUP + RUNS or any("checkpoint_error=" in line for line in log_new):
            raise SystemExit(f"PreToolUse Bash checkpointed {taken} of {WARMUP + RUNS} calls: "
                             f"{log_new[-1][:300] if log_new else 'no hooks-log line'}")
        pre_median = statistics.median(pre_times)
        pre_anchor = statistics.median(pre_anchor_times)
        pre_ratio = pre_median / pre_anchor
        print()
        print(f"cos hook PreToolUse (Bash: takes a checkpoint of an unchanged 200-file "
              f"repository; every call logged its checkpoint)")
        print(f"cos hook PreToolUse    median {pre_median * 1000:7.2f} ms")
        print(f"python -I -c pass      median {pre_anchor * 1000:7.2f} ms")
        print(f"ratio (medians)        {pre_ratio:.2f}   (pairwise median "
              f"{statistics.median(h / a for h, a in zip(pre_times, pre_anchor_times)):.2f}; "
              f"target <= {TARGET})")
        print("ten most expensive imports of the PreToolUse hook (self time, us):")
        for self_us, name in top_imports(pre_argv, pre_env, project, pre_payload):
            print(f"  {self_us:6d}  {name}")
        print(f"RESULT hook_latency ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")
        print(f"RESULT hook_latency_checkpoint ratio={pre_ratio:.2f} target<={TARGET} "
              f"{'OK' if pre_ratio <= TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
