"""Writers killed mid-write (DESIGN.md §3.4, §3.5): a state file always holds the old or the new
value whole, and a killed hooks-log appender never leaves half a line for the next one to join."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from coding_os import clock
from coding_os.state import hookslog
from coding_os.state.statefile import MAX_VALUE, parse_state, write_state


pytestmark = pytest.mark.slow

KILLS = 200
FIELDS = 16  # fields of MAX_VALUE characters in each line the log writer appends
SID = "ses-claude-20261129-100000-abcd"
# Three large values, each just under the state file limit.
VALUES = tuple(letter * (MAX_VALUE - 16) for letter in "ABC")

STATE_WRITER = r'''
import sys
from coding_os.state.statefile import write_state

path, session = sys.argv[1], sys.argv[2]
values = [letter * int(sys.argv[3]) for letter in "ABC"]
print("ready", flush=True)
i = 0
while True:
    write_state(path, session, values[i % 3])
    i += 1
'''

LOG_WRITER = r'''
import sys
from coding_os import clock, durable
from coding_os.state import hookslog

path, wid, FIELDS = sys.argv[1], sys.argv[2], int(sys.argv[3])
fields = {"ts": clock.utc_now(), "agent": "claude", "panel": "p" + wid,
          "session": "ses-claude-20261129-100000-abcd", "task": "T-" + wid, "event": "PostToolUse"}
for k in range(FIELDS):  # a line of about 130 KB: one write long enough to be cut into
    fields[f"f{k}"] = chr(ord("a") + k % 26) * (hookslog.MAX_VALUE - 2) + " é"
# What hookslog.append does, with the formatting hoisted out of the loop so that the writer
# spends its time inside the append (where a kill can cut a line), not in building it.
record = hookslog.format_line(fields).encode("utf-8")
print("ready", flush=True)
while True:
    durable.locked_append(path, record)
'''


def start_and_kill(script: str, args: list[str], rng: random.Random, max_delay: float) -> None:
    """Start a writer, let it run for a random moment, and SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    time.sleep(rng.uniform(0, max_delay))  # a random moment into the writer's loop
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL


def test_a_state_file_killed_mid_write_always_holds_one_whole_value(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    path = tmp_path / "panel" / ".task-current"
    write_state(str(path), SID, VALUES[0])
    observed = set()
    for kill in range(KILLS):
        start_and_kill(STATE_WRITER, [str(path), SID, str(len(VALUES[0]))], rng, 0.012)
        parsed = parse_state(path.read_bytes())
        assert parsed is not None, f"kill {kill}: the state file is not a state file"
        owner, value = parsed
        assert owner == SID
        assert value in VALUES, f"kill {kill}: a torn value ({len(value)} chars, {value[:1]!r})"
        observed.add(value)
    assert observed == set(VALUES)  # the writers did replace the file, again and again
    # The kills landed inside writes: their temp files are left behind, never the state file.
    leftovers = [p.name for p in path.parent.iterdir() if p.name != path.name]
    assert leftovers, "no kill interrupted a write; the test proved nothing"
    assert all(name.startswith(f".{path.name}.tmp-") for name in leftovers)


class KillRound:
    """What the log looked like after one killed appender and one marker append."""

    def __init__(self, kill: int, lines: list[str]) -> None:
        self.kill = kill
        self.ends_with_newline = lines[-1] == ""
        body = lines[:-1]
        self.marker = hookslog.parse_line(body[-1] + "\n") if body else None
        # Lines before the marker that are not one whole record of the killed appender.
        self.torn = [line for line in body[:-1] if not whole_record(line, f"p{kill}")]


def whole_record(line: str, panel: str) -> bool:
    fields = hookslog.parse_line(line + "\n")
    return (fields is not None and fields["panel"] == panel
            and all(len(fields.get(f"f{k}") or "") == hookslog.MAX_VALUE for k in range(FIELDS)))


@pytest.fixture(scope="module")
def killed_appenders(tmp_path_factory: pytest.TempPathFactory) -> list[KillRound]:
    """KILLS rounds of: an appender of long lines killed at a random moment, then a marker line
    appended the ordinary way (what the next hook fire does)."""
    rng = random.Random(1129)
    log = tmp_path_factory.mktemp("crash") / ".hooks.log"
    rounds = []
    for kill in range(KILLS):
        start_and_kill(LOG_WRITER, [str(log), str(kill), str(FIELDS)], rng, 0.006)
        hookslog.append(str(log), {"ts": clock.utc_now(), "agent": "codex", "panel": "marker",
                                   "session": SID, "task": f"after-kill-{kill}", "event": "Stop"})
        rounds.append(KillRound(kill, log.read_bytes().decode("utf-8", "replace").split("\n")))
        log.write_bytes(b"")  # the next round starts from an empty log
    return rounds


def test_a_hooks_log_appender_killed_mid_line_never_merges_with_the_next_line(
        killed_appenders: list[KillRound]) -> None:
    for round_ in killed_appenders:
        assert round_.ends_with_newline, f"kill {round_.kill}: the log does not end a line"
        marker = round_.marker
        assert marker is not None, f"kill {round_.kill}: the next line merged with a torn one"
        assert (marker["panel"], marker["task"], marker["event"]) == (
            "marker", f"after-kill-{round_.kill}", "Stop")


def test_a_hooks_log_appender_killed_mid_line_leaves_no_torn_line_behind(
        killed_appenders: list[KillRound]) -> None:
    torn = [(r.kill, line[:60] + "…" + line[-40:]) for r in killed_appenders for line in r.torn]
    assert torn == [], f"{len(torn)} torn lines left in the log, e.g. {torn[:2]}"
