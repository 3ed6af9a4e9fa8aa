"""The roster (jobs/roster.py): a cache of every job's row that a long-lived process (the
supervisor) reads again and again; what another process changed is always what it sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from coding_os.jobs import jobs, roster


def _job(number: int) -> jobs.Job:
    fields = {"name": f"job-{number}", "agent": "exec", "cwd": "/", "project": "/",
              "worktree": None, "branch": None, "model": None, "permission_mode": None,
              "options": {}, "isolation": "none", "seed_ref": None}
    return jobs.new_job(fields, "true", None)


def test_a_process_reading_the_roster_again_sees_what_other_processes_changed(
        isolated_env: Path) -> None:
    made = [_job(number) for number in range(3)]
    assert [job.state["state"] for job in roster.current()] == ["starting"] * 3
    script = ("import sys; from coding_os.jobs import jobs, roster; "
              "jobs.update(jobs.load(sys.argv[1]), state='done', exit_code=0); roster.current()")
    subprocess.run([sys.executable, "-c", script, made[1].id], check=True)
    found = {job.id: job.state for job in roster.current()}
    assert found[made[1].id]["state"] == "done" and found[made[1].id]["exit_code"] == 0
    # The roster rewritten by another process, its jobs unchanged: the same rows.
    subprocess.run([sys.executable, "-c", "from coding_os.jobs import roster; "
                    "roster.rebuild()"], check=True)
    assert {job.id: job.state for job in roster.current()} == found
    jobs.update(made[2], state="stopped")
    assert {job.id: job.state["state"] for job in roster.current()} == {
        made[0].id: "starting", made[1].id: "done", made[2].id: "stopped"}
