"""`cos resume --continue --json` on a session whose transcript is 200 MB, against a full parse.

Figure: the median wall time of the real `cos resume --continue --json` (a subprocess, the index
already built, nothing changed since) divided by the median wall time of a full parse of the same
transcript, two ways, interleaved with it:

- the transcript read in full by cos's own reader (`coding_os.sessions.transcript.read`: every
  line parsed and checked), which is what a resume that loads the whole conversation runs. The
  target applies to this ratio: <= 0.05 (resume reads the transcript's tail, not its whole);
- a bare `json.loads` of every line, the least any full load could cost: printed as well, so the
  reader's own overhead is not hidden in the figure.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE_MB = int(os.environ.get("BENCH_TRANSCRIPT_MB", "200"))
RUNS = int(os.environ.get("BENCH_RUNS", "7"))
TARGET = 0.05
COS = str(Path(sys.executable).with_name("cos"))
BARE_PARSE = "import json, sys\nfor line in open(sys.argv[1], 'rb'):\n    json.loads(line)\n"
COS_READ = "import sys\nfrom coding_os.sessions import transcript\ntranscript.read(sys.argv[1])\n"


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[:3]} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed


def main() -> None:
    import compileall

    import coding_os
    from coding_os import api
    from coding_os.sessions import transcript

    # A regular install ships bytecode; make an editable one match (see hook_latency.py).
    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)

    with tempfile.TemporaryDirectory() as scratch:
        home = Path(scratch) / "home"
        home.mkdir()
        project = Path(scratch) / "project"
        project.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        (project / ".coding-os").mkdir()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
               "CODEX_HOME": str(home / ".codex"), "COS_AGENT": "myagent"}
        session = api.create_session("myagent", title="A long session", env=env,
                                     cwd=str(project), durability="none")
        path = Path(transcript.transcript_path(transcript_tiers(project), session))
        # A long conversation, written as the writer writes it (dense seqs, v1 lines).
        answer = "x" * 2000
        seq = 1
        with open(path, "ab") as f:
            while f.tell() < SIZE_MB << 20:
                turn = (seq + 1) // 2
                kind, text = ("user", f"prompt {turn}") if seq % 2 else ("assistant", answer)
                f.write(json.dumps({"v": 1, "seq": seq, "ts": "2026-11-29T10:00:00.000Z",
                                    "type": kind, "text": text, "turn": turn},
                                   separators=(",", ":")).encode() + b"\n")
                seq += 1
        size = path.stat().st_size
        subprocess.run([COS, "import"], cwd=project, env=env, check=True,
                       stdout=subprocess.DEVNULL)
        resume = [COS, "resume", "--continue", "--json"]
        first = time.perf_counter()
        check = subprocess.run(resume, cwd=project, env=env, capture_output=True, text=True)
        first = time.perf_counter() - first
        report = json.loads(check.stdout)
        assert report["session"]["id"] == session, report
        assert report["restored"]["entries"] == seq, report["restored"]
        full = [sys.executable, "-c", COS_READ, str(path)]
        bare = [sys.executable, "-c", BARE_PARSE, str(path)]
        resume_times, full_times, bare_times = [], [], []
        for index in range(RUNS + 1):
            r = timed(resume, project, env)
            f = timed(full, project, env)
            b = timed(bare, project, env)
            if index:  # the first round warms the page cache
                resume_times.append(r)
                full_times.append(f)
                bare_times.append(b)
        resume_median = statistics.median(resume_times)
        full_median = statistics.median(full_times)
        bare_median = statistics.median(bare_times)
        ratio = resume_median / full_median
        print(f"transcript: {size / (1 << 20):.0f} MB, {seq} entries; {RUNS} runs each, interleaved")
        print(f"first resume (counts the whole transcript once) {first * 1000:8.1f} ms")
        print(f"cos resume --continue --json     median {resume_median * 1000:8.1f} ms")
        print(f"full read by the transcript reader median {full_median * 1000:8.1f} ms")
        print(f"bare json.loads of every line    median {bare_median * 1000:8.1f} ms")
        print(f"ratio vs the bare json.loads parse {resume_median / bare_median:.3f} (shown, no target)")
        print(f"ratio vs the full read {ratio:.3f} (target <= {TARGET})")
        print(f"RESULT resume_continue ratio={ratio:.3f} target<={TARGET} "
              f"{'OK' if ratio <= TARGET else 'OVER'}")


def transcript_tiers(project: Path):  # type: ignore[no-untyped-def]
    from coding_os.state.tiers import Tiers

    return Tiers(str(project / ".coding-os"))


if __name__ == "__main__":
    main()
