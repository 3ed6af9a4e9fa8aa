"""Checkpoints and restore against a shadow git repository, on one generated tree, in one run.

The tree: `BENCH_FILES` (10,000) text files of ~5 KB (~50 MB) in nested directories
(`dNNN/sN/fN.txt`), a git repository with one commit (the user's), `.coding-os/` (gitignored) as
the state dir. The anchor is a shadow git repository outside the tree, as Cline, Gemini CLI and
opencode keep one: a snapshot is `git --git-dir=<shadow> --work-tree=<tree> add -A` then
`... write-tree` (two whole processes). Each figure times cos and the anchor on the same state of
the tree, interleaved (the order alternating per round), and divides the medians:

1. Checkpoint after 5 files changed (5 random files edited before each round), with `cos daemon`
   running, whose file watcher supplies the changed paths: judged is
   `coding_os.checkpoints.take.create` in the process that takes it — a hook's (the hook runs for
   every tool call anyway; the checkpoint is what it adds) or a Python agent runtime's — / the
   shadow's incremental snapshot. Target <= 0.5. Judged too, what a user who types it waits
   for: the whole process `cos checkpoint create --json` with the daemon / the same snapshot.
   Target <= 1.0 (`checkpoints_incremental_process`; a Python interpreter start alone is about a
   quarter of the anchor). Shown: the same without the daemon (then the tree is scanned).
2. First checkpoint of a clean git repository (a fresh clone each round, its index refreshed as
   the user's own `git status` leaves it, no `.coding-os/checkpoints` yet), without the daemon:
   `cos checkpoint create --json` / the first snapshot into a fresh shadow (its `git init`
   untimed). Target <= 0.2. Shown: the same with the daemon running (it starts watching the
   clone).
3. Restore of 5 files changed since the checkpoint (which also checkpoints the tree as it is, for
   the undo, and journals the restore) / `git --git-dir=<shadow> --work-tree=<tree> checkout
   <tree-ish> -- <the 5 files>`. Target <= 1.0. Judged: `coding_os.checkpoints.rewind.rewind_code` in
   the process that runs it, with the daemon. Judged too, as a user waits for it: the whole
   process `cos rewind CP --code --json` with the daemon (`checkpoints_restore_process`) and
   without it (`checkpoints_restore_process_without_daemon`, the tree scanned by `git status`):
   target <= 3.0 each (the anchor is about one Python interpreter start; without the daemon the
   floor printed, an interpreter start and that `git status` alone, is above it).
4. Disk after 100 checkpoints of 5-file edits, from a fresh clone: on-disk bytes (st_blocks*512,
   as `du`) of `.coding-os/checkpoints` / of the shadow's git dir, its first snapshot included.
   Target <= 1.2. The shadow's growth over the 100 (its first snapshot left out) is printed too.

`BENCH_FILES`, `BENCH_RUNS` (rounds of figures 1 and 3), `BENCH_FIRST_RUNS` (figure 2) and
`BENCH_CHECKPOINTS` (figure 4) scale it down for a quick run.
"""

from __future__ import annotations

import compileall
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import _fixtures  # noqa: E402
import _worktree  # noqa: E402
from _worktree import file_path, git, make_tree, write  # noqa: E402

FILES = int(os.environ.get("BENCH_FILES", "10000"))
RUNS = int(os.environ.get("BENCH_RUNS", "15"))
FIRST_RUNS = int(os.environ.get("BENCH_FIRST_RUNS", "3"))
CHECKPOINTS = int(os.environ.get("BENCH_CHECKPOINTS", "100"))
WARMUP = 2
EDITED = 5
FILE_BYTES = 5000
TARGETS = {"incremental": 0.5, "incremental_process": 1.0, "first": 0.2, "restore": 1.0,
           "restore_process": 3.0, "restore_process_without_daemon": 3.0, "disk": 1.2}
COS = str(Path(sys.executable).with_name("cos"))


# -- the tree --------------------------------------------------------------------------------------


def edit(tree: Path, rng: random.Random, round_: int) -> dict[str, bytes]:
    """EDITED random files of the tree changed."""
    return _worktree.edit(tree, rng, round_, FILES, EDITED)


def fresh_clone(tree: Path, where: Path, env: dict[str, str]) -> Path:
    """A clean clone of the user's repository with its state dir, no checkpoints in it yet."""
    git(["clone", "-q", str(tree), str(where)], tree.parent, env)
    # The user's own `git status` leaves the index refreshed; a clone's may hold racy entries.
    git(["update-index", "-q", "--refresh"], where, env)
    (where / ".coding-os").mkdir()
    return where


# -- timing ----------------------------------------------------------------------------------------


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed, proc.stdout


def shadow_argv(shadow: Path, tree: Path, *args: str) -> list[str]:
    return ["git", f"--git-dir={shadow}", f"--work-tree={tree}", *args]


def shadow_init(shadow: Path, tree: Path, env: dict[str, str]) -> None:
    subprocess.run(shadow_argv(shadow, tree, "init", "-q"), cwd=tree, env=env, check=True,
                   stdout=subprocess.DEVNULL)


def shadow_snapshot(shadow: Path, tree: Path, env: dict[str, str]) -> tuple[float, str]:
    """Seconds of one shadow snapshot (`add -A`, then `write-tree`), and the tree it wrote."""
    added, _ = timed(shadow_argv(shadow, tree, "add", "-A"), tree, env)
    wrote, out = timed(shadow_argv(shadow, tree, "write-tree"), tree, env)
    return added + wrote, out.decode().strip()


def cos_checkpoint(tree: Path, env: dict[str, str]) -> tuple[float, dict[str, object]]:
    elapsed, out = timed([COS, "checkpoint", "create", "--json"], tree, env)
    return elapsed, json.loads(out)


def disk_bytes(top: Path) -> int:
    """What `du` counts under `top`: the blocks of every file and directory."""
    total = os.lstat(top).st_blocks * 512
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            total += os.lstat(os.path.join(folder, name)).st_blocks * 512
    return total


def interleaved(rounds: int, prepare, first, second,  # type: ignore[no-untyped-def]
                warmup: int = WARMUP, floor=None) -> tuple[list[float], list[float], list[float]]:
    """Run `prepare(i)` then both measurements each round, alternating which goes first, then
    `floor` (when given); the first `warmup` rounds are discarded."""
    a_times: list[float] = []
    b_times: list[float] = []
    floor_times: list[float] = []
    for index in range(warmup + rounds):
        state = prepare(index)
        if index % 2:
            b = second(state)
            a = first(state)
        else:
            a = first(state)
            b = second(state)
        f = floor() if floor is not None else 0.0
        if index >= warmup:
            a_times.append(a)
            b_times.append(b)
            floor_times.append(f)
    return a_times, b_times, floor_times


def bare_python(env: dict[str, str], cwd: Path):  # type: ignore[no-untyped-def]
    """The least any Python process costs: `python -I -c pass` (what hook_latency.py divides by)."""
    return lambda: timed([sys.executable, "-I", "-c", "pass"], cwd, env)[0]


def scan_floor(env: dict[str, str], cwd: Path):  # type: ignore[no-untyped-def]
    """The least a process that must look at the whole tree costs: `python -I -c pass` and the
    `git status` a checkpoint without the daemon's watcher runs (snapshot._git_layers)."""
    status = ["git", "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames",
              "--branch", "--no-ahead-behind", "--ignore-submodules=dirty", "--ignored=matching"]
    return lambda: (timed([sys.executable, "-I", "-c", "pass"], cwd, env)[0]
                    + timed(status, cwd, {**env, "GIT_OPTIONAL_LOCKS": "0"})[0])


def print_floor(floor: list[float], anchor: list[float],
                what: str = "any Python process: python -I -c pass") -> None:
    mf, ma = statistics.median(floor), statistics.median(anchor)
    print(f"  floor of {what} median {mf * 1000:.1f} ms = {mf / ma:.3f} x the anchor (shown, "
          "no target)")


def report(name: str | None, label_a: str, a: list[float], label_b: str, b: list[float]
           ) -> float:
    """Print both sides' times and their ratio, against the target of figure `name` (None: a
    figure shown, with no target)."""
    ma, mb = statistics.median(a), statistics.median(b)
    ratio = ma / mb
    width = max(len(label_a), len(label_b))
    print(f"  {label_a:<{width}}  median {ma * 1000:9.1f} ms  (min {min(a) * 1000:.1f}, "
          f"max {max(a) * 1000:.1f}; {len(a)} runs)")
    print(f"  {label_b:<{width}}  median {mb * 1000:9.1f} ms  (min {min(b) * 1000:.1f}, "
          f"max {max(b) * 1000:.1f}; {len(b)} runs)")
    pair = statistics.median(x / y for x, y in zip(a, b))
    print(f"  ratio (medians) {ratio:.3f}   (pairwise median {pair:.3f}; "
          + (f"target <= {TARGETS[name]})" if name else "shown, no target)"))
    return ratio


# -- the figures -----------------------------------------------------------------------------------


def incremental(tree: Path, shadow: Path, env: dict[str, str], rng: random.Random
                ) -> tuple[float, float, float]:
    """Figure 1: with the daemon's watcher (the figure judged), without it, and in a warm
    process with it (both shown)."""
    from coding_os.checkpoints.take import create
    from coding_os.daemon.client import ask_watcher
    from coding_os.state.tiers import Tiers

    print(f"1. checkpoint after {EDITED} files changed")
    rounds = iter(range(10**6))
    print("  without the daemon (the whole tree is looked at; shown, no target):")
    a, b, _ = interleaved(RUNS, lambda i: edit(tree, rng, next(rounds)),
                          lambda _: cos_checkpoint(tree, env)[0],
                          lambda _: shadow_snapshot(shadow, tree, env)[0])
    without = report(None, "cos checkpoint create --json", a,
                     "shadow add -A + write-tree", b)
    print("  the whole process, with the daemon's file watcher (cos daemon start; judged):")
    daemon_start(env, tree)
    scans: list[str] = []

    def watched(_: object) -> float:
        elapsed, record = cos_checkpoint(tree, env)
        scans.append(str(record["scan"]))
        return elapsed

    a, b, floor = interleaved(RUNS, lambda i: edit(tree, rng, next(rounds)), watched,
                              lambda _: shadow_snapshot(shadow, tree, env)[0],
                              floor=bare_python(env, tree))
    assert set(scans[WARMUP:]) == {"watcher"}, scans  # every timed one was fed by the watcher
    ratio = report("incremental_process", "cos checkpoint create --json", a,
                   "shadow add -A + write-tree", b)
    print_floor(floor, b)
    tiers = Tiers(str(tree / ".coding-os"))
    root = os.path.realpath(tree)

    def in_process(_: object) -> float:
        start = time.perf_counter()
        record = create(tiers, root, watcher=ask_watcher)
        elapsed = time.perf_counter() - start
        scans.append(str(record["scan"]))
        return elapsed

    scans.clear()
    a, b, _ = interleaved(RUNS, lambda i: edit(tree, rng, next(rounds)), in_process,
                          lambda _: shadow_snapshot(shadow, tree, env)[0])
    assert set(scans) == {"watcher"}, scans
    print("  in the process that takes it (a hook's, an agent runtime's), with the daemon: "
          "the figure judged (see the module's docstring):")
    judged = report("incremental", "checkpoints.create()", a,
                    "shadow add -A + write-tree", b)
    return judged, without, ratio


def daemon_start(env: dict[str, str], cwd: Path) -> None:
    timed([COS, "daemon", "start", "--json"], cwd, env)
    cos_checkpoint(cwd, env)  # the watch of the tree starts with a checkpoint


def daemon_stop(env: dict[str, str], cwd: Path) -> None:
    timed([COS, "daemon", "stop", "--json"], cwd, env)


def first_snapshot(tree: Path, scratch: Path, env: dict[str, str]) -> float:
    """Figure 2."""
    print("2. first checkpoint of a clean git repository (a fresh clone each round)")
    made: list[Path] = []

    def prepare(index: int) -> tuple[Path, Path]:
        for old in made:
            shutil.rmtree(old, ignore_errors=True)
        made.clear()
        clone = fresh_clone(tree, scratch / f"clone-{index}", env)
        shadow = scratch / f"shadow-first-{index}"
        shadow_init(shadow, clone, env)
        made.extend([clone, shadow])
        return clone, shadow

    def cos_first(state: tuple[Path, Path]) -> float:
        elapsed, record = cos_checkpoint(state[0], env)
        assert record["objects_written"] == 1, record  # its manifest, nothing else
        return elapsed

    a, b, _ = interleaved(FIRST_RUNS, prepare, cos_first,
                       lambda state: shadow_snapshot(state[1], state[0], env)[0], warmup=1)
    for old in made:
        shutil.rmtree(old, ignore_errors=True)
    return report("first", "cos checkpoint create --json", a, "shadow first add -A + write-tree",
                  b)


def restore(tree: Path, shadow: Path, env: dict[str, str], rng: random.Random
            ) -> tuple[float, float, float]:
    """Figure 3: `cos rewind` with the daemon (whole process), the same without it, and
    `rewind_code()` in a warm process with it (the figure judged: see the module's docstring)."""
    from coding_os.checkpoints.rewind import rewind_code
    from coding_os.daemon.client import ask_watcher
    from coding_os.state.tiers import Tiers

    print(f"3. restore of {EDITED} files changed since the checkpoint")
    counter = iter(range(10**6, 2 * 10**6))

    def prepare(index: int) -> tuple[str, str, dict[str, bytes], dict[str, bytes]]:
        _, record = cos_checkpoint(tree, env)
        _, treeish = shadow_snapshot(shadow, tree, env)
        before = {}
        for number in rng.sample(range(FILES), EDITED):
            rel = file_path(number)
            before[rel] = (tree / rel).read_bytes()
        changed = {}
        for rel, data in before.items():
            changed[rel] = data.replace(b"\n", f"  # round {next(counter)}\n".encode(), 3)
        write(tree, changed)
        return str(record["id"]), treeish, before, changed

    def check(before: dict[str, bytes]) -> None:
        for rel, data in before.items():
            if (tree / rel).read_bytes() != data:
                raise SystemExit(f"{rel} was not restored")

    def again(changed: dict[str, bytes]) -> None:
        if (tree / next(iter(changed))).read_bytes() != next(iter(changed.values())):
            write(tree, changed)  # the other one went first: change the files again

    def cos_rewind(state: tuple[str, str, dict[str, bytes], dict[str, bytes]]) -> float:
        checkpoint, _, before, changed = state
        again(changed)
        elapsed, out = timed([COS, "rewind", checkpoint, "--code", "--json"], tree, env)
        assert json.loads(out)["code"]["summary"]["restore"] == EDITED, out[:300]
        check(before)
        return elapsed

    tiers = Tiers(str(tree / ".coding-os"))
    root = os.path.realpath(tree)

    def in_process(state: tuple[str, str, dict[str, bytes], dict[str, bytes]]) -> float:
        checkpoint, _, before, changed = state
        again(changed)
        start = time.perf_counter()
        report_ = rewind_code(tiers, root, checkpoint, watcher=ask_watcher)
        elapsed = time.perf_counter() - start
        assert report_["summary"]["restore"] == EDITED, report_  # type: ignore[index]
        check(before)
        return elapsed

    def shadow_checkout(state: tuple[str, str, dict[str, bytes], dict[str, bytes]]) -> float:
        _, treeish, before, changed = state
        again(changed)
        elapsed, _ = timed(shadow_argv(shadow, tree, "checkout", treeish, "--", *changed), tree,
                           env)
        check(before)
        return elapsed

    print("  rewind_code() in a warm process, with the daemon (the figure judged):")
    a, b, _ = interleaved(RUNS, prepare, in_process, shadow_checkout)
    ratio = report("restore", "checkpoints.rewind_code()", a, "shadow checkout TREE -- 5 files",
                   b)
    print("  the whole process, with the daemon (judged):")
    a, b, floor = interleaved(RUNS, prepare, cos_rewind, shadow_checkout,
                              floor=bare_python(env, tree))
    whole = report("restore_process", "cos rewind CP --code --json", a,
                   "shadow checkout TREE -- 5 files", b)
    print_floor(floor, b)
    daemon_stop(env, tree)
    print("  the whole process, without the daemon (judged):")
    a, b, floor = interleaved(RUNS, prepare, cos_rewind, shadow_checkout,
                              floor=scan_floor(env, tree))
    without = report("restore_process_without_daemon", "cos rewind CP --code --json", a,
                     "shadow checkout TREE -- 5 files", b)
    print_floor(floor, b, "a process that looks at the whole tree: python -I -c pass + its "
                          "git status")
    return ratio, whole, without


def disk(tree: Path, scratch: Path, env: dict[str, str], rng: random.Random) -> float:
    """Figure 4."""
    from coding_os.checkpoints.take import create
    from coding_os.daemon.client import ask_watcher
    from coding_os.state.tiers import Tiers

    print(f"4. disk after {CHECKPOINTS} checkpoints of {EDITED}-file edits (a fresh clone)")
    clone = fresh_clone(tree, scratch / "clone-disk", env)
    shadow = scratch / "shadow-disk"
    shadow_init(shadow, clone, env)
    tiers = Tiers(str(clone / ".coding-os"))
    root = os.path.realpath(clone)
    # The disk is the same whichever process writes it: create() in this one is quicker.
    create(tiers, root, watcher=ask_watcher)
    shadow_snapshot(shadow, clone, env)
    shadow_first = disk_bytes(shadow)
    for number in range(CHECKPOINTS):
        edit(clone, rng, 10**7 + number)
        create(tiers, root, watcher=ask_watcher)
        shadow_snapshot(shadow, clone, env)
    mine = disk_bytes(clone / ".coding-os" / "checkpoints")
    theirs = disk_bytes(shadow)
    objects = sum(len(files) for _, _, files in os.walk(clone / ".coding-os" / "checkpoints"
                                                         / "objects"))
    ratio = mine / theirs
    print(f"  .coding-os/checkpoints      {mine / 1e6:9.2f} MB  ({objects} objects)")
    print(f"  shadow git dir              {theirs / 1e6:9.2f} MB  (after its first snapshot: "
          f"{shadow_first / 1e6:.2f} MB)")
    growth = theirs - shadow_first
    print(f"  shadow growth over the {CHECKPOINTS} (first snapshot left out) "
          f"{growth / 1e6:.2f} MB: cos / that = {mine / growth:.3f} (shown, no target)")
    print(f"  ratio {ratio:.4f}   (target <= {TARGETS['disk']})")
    shutil.rmtree(clone, ignore_errors=True)
    shutil.rmtree(shadow, ignore_errors=True)
    return ratio


def main() -> None:
    import coding_os

    # A regular install ships bytecode; make an editable one match (see hook_latency.py).
    compileall.compile_dir(os.path.dirname(coding_os.__file__), quiet=1)
    scratch = Path(tempfile.mkdtemp(prefix="cos-bench-checkpoints-"))
    try:
        home = scratch / "home"
        home.mkdir()
        env = _fixtures.bench_env(home)
        (home / ".gitconfig").write_text("[user]\n\tname = Bench\n\temail = bench@example.com\n"
                                         "[init]\n\tdefaultBranch = main\n", encoding="utf-8")
        # create() in this process runs git with this environment too.
        os.environ.update(env)
        for key in [k for k in os.environ if k.startswith("GIT_") and k not in env]:
            del os.environ[key]
        rng = random.Random(4)
        tree = scratch / "tree"
        tree.mkdir()
        start = time.perf_counter()
        size = make_tree(tree, env, rng, FILES, FILE_BYTES)
        print(f"tree: {FILES} files, {size / 1e6:.1f} MB in {FILES // 100 or 1}x10 directories, "
              f"one commit (made in {time.perf_counter() - start:.1f} s); shadow repository "
              f"outside the tree; {RUNS} rounds (figures 1, 3), {FIRST_RUNS} (figure 2), "
              f"interleaved, alternating order, after {WARMUP} warm-ups")
        shadow = scratch / "shadow"
        shadow_init(shadow, tree, env)
        first, _ = shadow_snapshot(shadow, tree, env)
        _, record = cos_checkpoint(tree, env)
        print(f"(set-up: the shadow's first snapshot of the tree took {first * 1000:.0f} ms)")
        ratios = {}
        ratios["first"] = first_snapshot(tree, scratch, env)
        try:
            ratios["incremental"], without, ratios["incremental_process"] = incremental(
                tree, shadow, env, rng)
            print("  (the same with the daemon running, which starts watching each clone: "
                  "shown, no target)")
            first_watched = first_snapshot(tree, scratch, env)
            ratios["restore"], ratios["restore_process"], \
                ratios["restore_process_without_daemon"] = restore(tree, shadow, env, rng)
        finally:
            daemon_stop(env, tree)
        ratios["disk"] = disk(tree, scratch, env, rng)
        print(f"(shown, no target: cos checkpoint create without the daemon {without:.3f}; "
              f"first checkpoint with the daemon {first_watched:.3f})")
        for name, ratio in ratios.items():
            target = TARGETS[name]
            print(f"RESULT checkpoints_{name} ratio={ratio:.3f} target<={target} "
                  f"{'OK' if ratio <= target else 'OVER'}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
