"""Several processes appending to one transcript at once (DESIGN.md §4.1): each entry gets a
unique seq, the seqs are dense, and every process's entries are there in the order it wrote."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers

WORKERS = 6
APPENDS = 60

# Waits for "go" on stdin so that every worker starts appending at the same moment.
WORKER = r'''
import sys
from coding_os.sessions import transcript
from coding_os.state.tiers import Tiers

state_dir, session, wid, appends = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tiers = Tiers(state_dir)
print("ready", flush=True)
assert sys.stdin.readline() == "go\n"
for k in range(appends):
    text = f"w{wid}-{k}-" + "x" * (k * 997 % 70_000)  # some lines longer than a pipe buffer
    mode = ("event", "turn", "none")[k % 3]
    transcript.append(tiers, session, "user", {"text": text, "turn": k}, durability=mode)
'''


def test_concurrent_appenders_get_unique_dense_seqs(tiers: Tiers, session: str) -> None:
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, tiers.state_dir, session,
                                 str(wid), str(APPENDS)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for wid in range(WORKERS)]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline() == "ready\n"
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.close()
    for worker in workers:
        assert worker.wait(timeout=60) == 0
        assert worker.stdout is not None
        worker.stdout.close()
    path = transcript.transcript_path(tiers, session)
    read = transcript.read(path)
    assert read.report.ok, read.report.problems
    assert [e["seq"] for e in read.entries] == list(range(WORKERS * APPENDS + 1))
    order: dict[str, list[int]] = defaultdict(list)
    writers = []
    for entry in read.entries[1:]:
        wid, k, _ = entry["text"].split("-", 2)
        order[wid].append(int(k))
        writers.append(wid)
    assert order == {f"w{wid}": list(range(APPENDS)) for wid in range(WORKERS)}
    switches = sum(1 for a, b in zip(writers, writers[1:]) if a != b)
    assert switches > 2 * WORKERS, "the workers hardly overlapped; the test proved little"
    assert not Path(path + ".torn").exists()
