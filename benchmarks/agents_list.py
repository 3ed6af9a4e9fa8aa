"""`cos agents --json --all` with 1,000 background jobs against 10.

Figure: the median wall time of the real `cos agents --json --all` (a subprocess, as a user runs
it: it asks the supervisor to sweep the jobs, then lists them from the roster) with 1,000 jobs,
divided by the same with 10 jobs. Each set has a HOME of its own (its own supervisor, started
by the first `cos agents`), with two live jobs (`cos bg --exec "sleep ..."`, each a runner
process of its own) and the rest finished: job folders made with `coding_os.jobs.jobs.new_job`
and brought to a final state (`done` with an exit code, `failed`, `stopped`; pid null, as a
runner that ended leaves them) with `jobs.update`, over several projects and all four agents.

`cos agents` runs once in each set before the timing, so the roster (the cache of every job's
row, ~/.coding-os/daemon/roster.json) is warm; then the two sets run interleaved (A B A B ...),
medians. Target: ratio <= 1.5 (every row printed: 1,000 against 10). Also printed: `cos
agents --json` without `--all` in the project of the two live jobs (two rows in both sets: the
cost of the jobs not shown), and the cold figure, each run after the roster was
deleted (the supervisor's sweep and the listing rebuild it from the 1,000 state files).

`BENCH_RUNS` (default 15) sets the warm runs; `BENCH_COLD_RUNS` (default 5) the cold ones.
"""

from __future__ import annotations

import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
from _jobs import COS, cos, kill_leftovers, stop_jobs  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "15"))
COLD_RUNS = int(os.environ.get("BENCH_COLD_RUNS", "5"))
WARMUP = 2
SMALL, LARGE = 10, 1_000
LIVE = 2  # jobs with a running runner in each set
PROJECTS = 10
TARGET = 1.5
AGENTS = ("claude", "codex", "exec", "python")


def finished_jobs(count: int, scratch: Path, env: dict[str, str]) -> None:
    """`count` finished jobs over PROJECTS projects, as runners that ended leave them."""
    from coding_os.jobs import jobs

    for number in range(count):
        agent = AGENTS[number % len(AGENTS)]
        project = scratch / f"project-{number % PROJECTS}"
        worktree = project / ".coding-os" / "worktrees"
        fields: dict[str, Any] = {
            "name": f"job-{number}", "agent": agent, "cwd": str(project), "project": str(project),
            "worktree": None, "branch": None, "model": None, "permission_mode": None,
            "options": {"target": "examples/echo_agent.py:EchoAgent"} if agent == "python"
            else {}, "isolation": "worktree", "seed_ref": None}
        prompt = "make test" if agent == "exec" else f"fix the flaky test number {number}"
        job = jobs.new_job(fields, prompt, env)
        session = f"ses-{agent}-20261101-{number:06d}-{job.id[:4]}"
        final: dict[str, Any] = {
            "cwd": str(worktree / job.id), "worktree": str(worktree / job.id),
            "branch": f"cos/{job.id}", "cos_session": session,
            "events": str(project / ".coding-os" / agent / "events" / f"{session}.jsonl"),
            "sessionId": None if agent in ("exec", "python") else f"{number:08x}-0000-4000-8000-"
                                                                    f"{number:012x}",
            "last_seq": 5 + number % 40, "pid": None, "status": None, "waitingFor": None}
        kind = number % 10
        if agent == "exec":
            final.update(state="done", exit_code=number % 3)
        elif kind == 7:
            final.update(state="failed", error="its runner ended without a word (killed); "
                                               "cos respawn resumes it")
        elif kind == 8:
            final.update(state="stopped")
        else:
            final.update(state="done")
        jobs.update(job, **final)


def job_set(count: int, scratch: Path) -> tuple[dict[str, str], Path, list[str]]:
    """A HOME with `count` jobs (LIVE of them running); its env, project and live job ids."""
    root = scratch / f"with-{count}"
    root.mkdir()
    home = root / "home"
    home.mkdir()
    env = _fixtures.bench_env(home)
    project = _fixtures.project(root, env)
    live = []
    for number in range(LIVE):
        row = json.loads(cos(["bg", "--json", "--exec", "sleep 600", "--isolation", "none",
                              "--name", f"live-{number}"], env, project))
        live.append(row["id"])
    finished_jobs(count - LIVE, root, env)
    return env, project, live


def timed(env: dict[str, str], cwd: Path, expected: int, every: bool = True) -> float:
    start = time.perf_counter()
    proc = subprocess.run([COS, "agents", "--json", *(["--all"] if every else [])], env=env,
                          cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"cos agents failed: {proc.stderr.decode(errors='replace')}")
    rows = json.loads(proc.stdout)
    live = [row for row in rows if row["pid"] is not None]
    if len(rows) != expected or len(live) != LIVE:
        raise SystemExit(f"cos agents listed {len(rows)} jobs ({len(live)} live), not "
                         f"{expected} ({LIVE} live)")
    return elapsed


def main() -> None:
    import coding_os

    # As sessions_list.py: an editable install byte-compiled like a regular one.
    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-agents-"))
    sets: dict[int, tuple[dict[str, str], Path, list[str]]] = {}
    try:
        made = {}
        for count in (SMALL, LARGE):
            start = time.perf_counter()
            env, project, live = job_set(count, scratch)
            sets[count] = (env, project, live)
            made[count] = time.perf_counter() - start
            # The first `cos agents` starts the supervisor and warms the roster.
            cos(["agents", "--json", "--all"], env, project)
        times: dict[int, list[float]] = {SMALL: [], LARGE: []}
        for index in range(WARMUP + RUNS):
            for count in (SMALL, LARGE):
                env, project, _ = sets[count]
                elapsed = timed(env, project, count)
                if index >= WARMUP:
                    times[count].append(elapsed)
        # `cos agents --json` in the project of the two live jobs (the others are in other
        # projects): the same two rows in both sets.
        here: dict[int, list[float]] = {SMALL: [], LARGE: []}
        for index in range(WARMUP + RUNS):
            for count in (SMALL, LARGE):
                env, project, _ = sets[count]
                elapsed = timed(env, project, LIVE, every=False)
                if index >= WARMUP:
                    here[count].append(elapsed)
        cold: dict[int, list[float]] = {SMALL: [], LARGE: []}
        for _ in range(COLD_RUNS):
            for count in (SMALL, LARGE):
                env, project, _ = sets[count]
                from coding_os.jobs.roster import roster_path

                os.unlink(roster_path(env))
                cold[count].append(timed(env, project, count))
        small, large = (statistics.median(times[count]) for count in (SMALL, LARGE))
        cold_small, cold_large = (statistics.median(cold[count]) for count in (SMALL, LARGE))
        ratio = large / small
        here_small, here_large = (statistics.median(here[count]) for count in (SMALL, LARGE))
        roster_bytes = os.path.getsize(_roster(sets[LARGE][0]))
        print(f"command: cos agents --json --all; {LIVE} live exec jobs in each set, the rest "
              f"finished (made in {made[SMALL]:.1f} s and {made[LARGE]:.1f} s)")
        print(f"runs: {RUNS} each, interleaved, after {WARMUP} warm-ups; roster of {LARGE:,} "
              f"jobs: {roster_bytes / 1e6:.2f} MB")
        print(f"{SMALL:>6,} jobs   warm median {small * 1000:7.1f} ms   cold (roster deleted) "
              f"median {cold_small * 1000:7.1f} ms")
        print(f"{LARGE:>6,} jobs   warm median {large * 1000:7.1f} ms   cold (roster deleted) "
              f"median {cold_large * 1000:7.1f} ms")
        print(f"ratio (warm medians) {ratio:.2f}; cold {cold_large / cold_small:.2f} "
              f"(target <= {TARGET}, warm)")
        print(f"cos agents --json (this project's {LIVE} jobs; no target): {SMALL:,} jobs "
              f"{here_small * 1000:.1f} ms, {LARGE:,} jobs {here_large * 1000:.1f} ms, ratio "
              f"{here_large / here_small:.2f}")
        print(f"RESULT agents_list ratio={ratio:.2f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'} cold_ratio={cold_large / cold_small:.2f}")
    finally:
        for env, project, live in sets.values():
            stop_jobs(env, project, live)
        for count in (SMALL, LARGE):
            if count not in sets:  # a set that failed while it was made
                home = scratch / f"with-{count}" / "home"
                if home.is_dir():
                    subprocess.run([COS, "daemon", "stop"], env=_fixtures.bench_env(home),
                                   cwd=scratch, capture_output=True, timeout=60)
                    kill_leftovers(home)
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def _roster(env: dict[str, str]) -> str:
    from coding_os.jobs.roster import roster_path

    return roster_path(env)


if __name__ == "__main__":
    main()
