"""Whole-process latency of the installed hook commands against a bare interpreter start, for
regular (non-editable) installs of this checkout made by three installers.

The wheel of this checkout is built once, with its dependencies, into a scratch wheelhouse; it is
then installed into three scratch venvs of the interpreter this script runs on:

- `pip-<bundled version>`: the venv `python -m venv` makes, with the pip that ships with Python
  (23.x for 3.11), whose console scripts import `re` on every start;
- `pip-<current version>`: the same, with pip upgraded to the current release;
- `uv-<version>`: a venv made by `uv venv` and filled by `uv pip install`.

For each install, `cos init --agent claude` from that install writes the hook entries; then, in
one interleaved run (launcher, console script, anchor, launcher, ...) so drift on a shared
machine hits all alike:

- figure 1: `cos hook PostToolUse` exactly as installed (its env assignment and argv, executed
  directly), with a realistic Claude Code payload on stdin;
- figure 2: `cos hook PreToolUse` for a Bash call, which takes a checkpoint of the tree first
  (DESIGN.md §5), on a small committed repository that does not change between calls (a
  checkpoint that stores nothing new);

each divided by the median of `python -I -c pass` of the same interpreter. Target: ratio <= 1.5.
Beside each, the same hook run through the install's `cos` console script (what an older init
installed) against the same anchor, to show what the launcher saves; and the ratio of the CPU
time (user and system) the processes used, which other work on a shared machine disturbs less
than the elapsed time. Also shown per install: `python -I -S -c pass` (the interpreter without
`site`, as the hooks run it) and the `.pth` files `site` runs there, which set the installs'
anchors apart (a venv `python -m venv` makes carries setuptools' `distutils-precedence.pth`, one
uv makes carries none, so the uv anchor is the fastest); and the installed hook's ten most
expensive imports (`-X importtime`) for the first install.

`BENCH_RUNS` (default 30) sets the timed runs of each command.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _installs import Install, installed_command, make_installs, run, timed  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "30"))
WARMUP = 3
TARGET = 1.5
SESSION_ID = "0b6c2c47-5a43-4f0e-9d2a-3f1e3c5f9a10"


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


def top_imports(argv: list[str], env: dict[str, str], cwd: Path,
                stdin: bytes) -> list[tuple[int, str]]:
    """The most expensive imports of `argv` (an interpreter and its arguments)."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], env=env, cwd=cwd,
                          input=stdin, capture_output=True)
    rows = []
    for line in proc.stderr.decode(errors="replace").splitlines():
        if not line.startswith("import time:"):
            continue
        parts = [part.strip() for part in line[len("import time:"):].split("|")]
        if len(parts) == 3 and parts[0].isdigit():
            rows.append((int(parts[0]), parts[2]))
    return sorted(rows, reverse=True)[:10]


@dataclass
class Times:
    """The elapsed and CPU seconds of each run of one command."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def run(self, argv: list[str], env: dict[str, str], project: Path, stdin: bytes,
            keep: bool) -> None:
        cpu: list[float] = []
        elapsed = timed(argv, env, project, stdin, cpu=cpu)
        if keep:
            self.wall.append(elapsed)
            self.cpu += cpu

    @property
    def ms(self) -> float:
        return statistics.median(self.wall) * 1000

    @property
    def cpu_ms(self) -> float:
        return statistics.median(self.cpu) * 1000


def interleaved(commands: list[list[str]], env: dict[str, str], project: Path,
                payload: bytes, anchors: list[list[str]]) -> tuple[list[Times], list[Times]]:
    """Times of each of `commands` and of each of `anchors`, run in turn."""
    times = [Times() for _ in commands]
    anchor_times = [Times() for _ in anchors]
    for index in range(WARMUP + RUNS):
        for slot, argv in zip(times, commands):
            slot.run(argv, env, project, payload, index >= WARMUP)
        for slot, argv in zip(anchor_times, anchors):
            slot.run(argv, env, project, b"", index >= WARMUP)
    return times, anchor_times


@dataclass
class Figure:
    install: str
    name: str
    hook: Times
    console: Times
    anchor: Times
    bare: Times  # the interpreter without site: python -I -S -c pass

    @property
    def ratio(self) -> float:
        return self.hook.ms / self.anchor.ms

    @property
    def console_ratio(self) -> float:
        return self.console.ms / self.anchor.ms

    @property
    def cpu_ratio(self) -> float:
        return self.hook.cpu_ms / self.anchor.cpu_ms


def measure(install: Install, scratch: Path, show_imports: bool) -> list[Figure]:
    home = scratch / f"home-{install.name}"
    home.mkdir()
    project = scratch / f"proj-{install.name}"
    project.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home)}
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    small_repository(project, env)
    run([install.cos, "init", "--agent", "claude"], f"{install.name}: cos init", cwd=project,
        env=env)
    start_env, start_argv = installed_command(project, "SessionStart")
    run(start_argv, "SessionStart", env={**env, **start_env}, cwd=project,
        input=json.dumps({"session_id": SESSION_ID, "source": "startup",
                          "hook_event_name": "SessionStart"}))
    anchor = [install.python, "-I", "-c", "pass"]
    bare = [install.python, "-I", "-S", "-c", "pass"]
    site_packages = next((install.venv / "lib").glob("python*/site-packages"))
    print(f"{install.name}: .pth files site runs: "
          f"{', '.join(p.name for p in sorted(site_packages.glob('*.pth'))) or 'none'}")
    post_env, post_argv = installed_command(project, "PostToolUse")
    print(f"{install.name}: installed PostToolUse command: "
          f"{' '.join(f'{k}={v}' for k, v in post_env.items())} {shlex.join(post_argv)}")
    figures = []
    log = project / ".coding-os" / ".hooks.log"
    for event, name, payload in (
            ("PostToolUse", "hook_latency", realistic_payload(project, SESSION_ID)),
            ("PreToolUse", "hook_latency_checkpoint", pre_tool_use_payload(project, SESSION_ID))):
        hook_env, hook_argv = installed_command(project, event)
        hook_env = {**env, **hook_env}
        console_argv = [install.cos, "hook", event]
        if hook_argv[0] != install.python or console_argv == hook_argv:
            raise SystemExit(f"{install.name}: the installed {event} hook is not this install's "
                             f"launcher: {shlex.join(hook_argv)}")
        body = json.dumps(payload).encode()
        log_before = log.read_text(encoding="utf-8")
        (hook_times, console_times), (anchor_times, bare_times) = interleaved(
            [hook_argv, console_argv], hook_env, project, body, [anchor, bare])
        if event == "PreToolUse":
            # Each call took its checkpoint, or (nothing changed since) reused the latest one.
            new = log.read_text(encoding="utf-8")[len(log_before):].splitlines()
            taken = sum(1 for line in new if " checkpoint=cp-" in line)
            if taken != 2 * (WARMUP + RUNS) or any("checkpoint_error=" in ln for ln in new):
                raise SystemExit(f"PreToolUse Bash checkpointed {taken} of "
                                 f"{2 * (WARMUP + RUNS)} calls: "
                                 f"{new[-1][:300] if new else 'no hooks-log line'}")
        figures.append(Figure(install.name, name, hook_times, console_times, anchor_times,
                              bare_times))
        if show_imports:
            print(f"{install.name}: ten most expensive imports of the installed {event} hook "
                  "(self time, us):")
            for self_us, module in top_imports(hook_argv, hook_env, project, body):
                print(f"  {self_us:6d}  {module}")
    return figures


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cos-hook-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        started = time.perf_counter()
        installs = make_installs(scratch)
        print(f"regular installs of this checkout: {', '.join(i.name for i in installs)} "
              f"(made in {time.perf_counter() - started:.0f} s)")
        print(f"runs: {RUNS} of each command, interleaved, after {WARMUP} warm-ups")
        print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        figures: list[Figure] = []
        for index, install in enumerate(installs):
            figures += measure(install, scratch, show_imports=index == 0)
        print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print()
        print(f"{'install':<12} {'figure':<24} {'launcher':>9} {'console':>9} {'anchor':>8} "
              f"{'no site':>8} {'ratio':>6} {'console':>8} {'cpu':>10} {'cpu ratio':>9}")
        for f in figures:
            print(f"{f.install:<12} {f.name:<24} {f.hook.ms:7.2f}ms {f.console.ms:7.2f}ms "
                  f"{f.anchor.ms:6.2f}ms {f.bare.ms:6.2f}ms {f.ratio:6.2f} "
                  f"{f.console_ratio:8.2f} {f.hook.cpu_ms:5.2f}/{f.anchor.cpu_ms:.2f} "
                  f"{f.cpu_ratio:9.2f}")
        print("(launcher: the command cos init installs; console: the same hook through the "
              "install's cos console script; anchor: python -I -c pass of the same interpreter; "
              "no site: python -I -S -c pass; cpu: ms of CPU time, the hook's / the anchor's)")
        for f in figures:
            print(f"RESULT {f.name}.{f.install} ratio={f.ratio:.2f} target<={TARGET} "
                  f"{'OK' if f.ratio <= TARGET else 'OVER'} "
                  f"console_script_ratio={f.console_ratio:.2f} cpu_ratio={f.cpu_ratio:.2f}")


if __name__ == "__main__":
    main()
