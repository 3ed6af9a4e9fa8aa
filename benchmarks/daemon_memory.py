"""Memory of the supervisor with 20 idle background jobs, and of one job's runner.

Figures (VmRSS from /proc/<pid>/status; no target yet): the supervisor (`cos daemon`) just
started with no job; the same supervisor with 20 idle jobs, after a sweep over them; and the
runners of those jobs (`python -m coding_os.jobs.runner ID`, one process per job): the median,
smallest and largest. Each job is a Python agent (examples/echo_agent.py, which runs inside its
runner: no other process) started with `cos bg --isolation none`, that has answered its first
prompt and waits for the next input (state `done`, status `idle`). Every job is stopped with
`cos stop` and the supervisor with `cos daemon stop` at the end, also on failure.

`BENCH_JOBS` (default 20) sets the number of jobs.
"""

from __future__ import annotations

import compileall
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
from _jobs import cos, stop_jobs  # noqa: E402

JOBS = int(os.environ.get("BENCH_JOBS", "20"))
AGENT = Path(__file__).resolve().parents[1] / "examples" / "echo_agent.py"
IDLE_TIMEOUT = 90.0  # seconds for every job to answer its first prompt
SWEEP_WAIT = 2.5  # seconds: longer than the supervisor's sweep period (supervisor.SWEEP_S)


def rss_kb(pid: int) -> int:
    """VmRSS of `pid`, in kB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise SystemExit(f"no VmRSS for pid {pid}")


def daemon_pid(env: dict[str, str], cwd: Path) -> int:
    status = json.loads(cos(["daemon", "status", "--json"], env, cwd))
    if not status.get("running") or not isinstance(status.get("pid"), int):
        raise SystemExit(f"the supervisor does not run: {status}")
    return int(status["pid"])


def idle_runners(env: dict[str, str], cwd: Path, ids: list[str]) -> dict[str, int]:
    """The runner pid of every job once each is idle (its first prompt answered)."""
    deadline = time.monotonic() + IDLE_TIMEOUT
    while True:
        rows = {row["id"]: row for row in json.loads(cos(["agents", "--json"], env, cwd))}
        idle = {job: rows[job]["pid"] for job in ids if job in rows
                and rows[job]["state"] == "done" and rows[job]["status"] == "idle"
                and isinstance(rows[job]["pid"], int)}
        if len(idle) == len(ids):
            return idle
        failed = [job for job in ids if rows.get(job, {}).get("state") in ("failed", "stopped")]
        if failed or time.monotonic() > deadline:
            raise SystemExit(f"jobs not idle: {[rows.get(job) for job in ids if job not in idle]}")
        time.sleep(0.5)


def main() -> None:
    import coding_os

    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-memory-"))
    home = scratch / "home"
    home.mkdir()
    env = _fixtures.bench_env(home)
    project = _fixtures.project(scratch, env)
    ids: list[str] = []
    try:
        cos(["daemon", "start"], env, project)
        time.sleep(SWEEP_WAIT)  # let it settle: its first sweep and watches
        supervisor = daemon_pid(env, project)
        alone = rss_kb(supervisor)
        for number in range(JOBS):
            row = json.loads(cos(["bg", "--json", "--agent", f"python:{AGENT}:EchoAgent",
                                  "--isolation", "none", "--name", f"idle-{number}",
                                  f"hello {number}"], env, project))
            ids.append(row["id"])
        runners = idle_runners(env, project, ids)
        time.sleep(SWEEP_WAIT)  # a sweep over the idle jobs
        if daemon_pid(env, project) != supervisor:
            raise SystemExit("the supervisor was restarted meanwhile")
        with_jobs = rss_kb(supervisor)
        sizes = sorted(rss_kb(pid) for pid in runners.values())
        one = statistics.median(sizes)
        print(f"{JOBS} idle jobs: Python agents ({AGENT.name}) that answered their first prompt "
              "and wait; VmRSS")
        print(f"supervisor, no job           {alone / 1024:7.1f} MB")
        print(f"supervisor, {JOBS} idle jobs    {with_jobs / 1024:7.1f} MB")
        print(f"one runner (median of {JOBS})   {one / 1024:7.1f} MB   (min "
              f"{sizes[0] / 1024:.1f}, max {sizes[-1] / 1024:.1f})")
        print(f"RESULT daemon_memory daemon_mb={with_jobs / 1024:.1f} "
              f"daemon_alone_mb={alone / 1024:.1f} runner_mb={one / 1024:.1f} jobs={JOBS} "
              "(no target)")
    finally:
        stop_jobs(env, project, ids)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
