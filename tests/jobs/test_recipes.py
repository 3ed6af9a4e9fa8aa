"""Recipes (jobs/recipes.py, DESIGN.md §6): `cos run --recipe` renders and validates as a user
sees it (the python echo agent answers `echo: <prompt>`, so the prompt it got is on stdout),
records the seed in the session, and `cos resume --replay | --rerun` resumes a recipe session;
the rendering sandbox and the example recipes are checked in process."""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import COS, cos, git, one_line_failure, tree, until

ROOT = Path(__file__).resolve().parents[2]
ECHO = f"python:{ROOT / 'examples' / 'echo_agent.py'}:EchoAgent"

KINDS = """\
title: Every kind
prompt: "{{ who }} n={{ n + 1 }} flag={{ flag }} pick={{ pick }} body={{ body }}"
parameters:
  - {key: who, input_type: string, requirement: required}
  - {key: n, input_type: number, requirement: optional, default: 41}
  - {key: flag, input_type: boolean, requirement: optional, default: "no"}
  - {key: pick, input_type: select, requirement: optional, default: b, options: [a, b, c]}
  - {key: body, input_type: file, requirement: required}
"""

WRITE = """\
title: Write a line
prompt: "write {{ target }}: {{ line }}"
parameters:
  - {key: target, input_type: string, requirement: optional, default: out.txt}
  - {key: line, input_type: string, requirement: required}
"""


def recipe(folder: Path, text: str, name: str = "r.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return cos("run", "--agent", ECHO, *args, cwd=project)


def run_json(project: Path, *args: str) -> list[dict[str, object]]:
    done = run(project, "--json", *args)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def nothing_started(project: Path) -> None:
    """No session and no checkpoint: a refused recipe writes nothing."""
    listed = cos("sessions", "--json", cwd=project)
    assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout
    points = cos("checkpoints", "--json", cwd=project)
    assert points.returncode == 0 and json.loads(points.stdout) == [], points.stdout


# -- parameters --------------------------------------------------------------------------------


def test_parameters_of_each_kind_reach_the_prompt_typed(project: Path, tmp_path: Path) -> None:
    (project / "body.txt").write_text("the body", encoding="utf-8")
    path = recipe(tmp_path / "recipes", KINDS)
    done = run(project, "--recipe", str(path), "--param", "who=me", "--param", "n=1.5",
               "--param", "flag=YES", "--param", "pick=c", "--param", "body=body.txt")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: me n=2.5 flag=True pick=c body=the body\n"


def test_optional_parameters_take_their_defaults(project: Path, tmp_path: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "body.txt").write_text("b", encoding="utf-8")
    path = recipe(tmp_path / "recipes", KINDS)
    done = cos("run", "--agent", ECHO, "--recipe", str(path), "--param", "who=me",
               "--param", "body=body.txt", cwd=project / "sub")  # a file is read from here
    assert done.returncode == 0, done.stderr
    assert done.stdout == "echo: me n=42 flag=False pick=b body=b\n"


def test_an_unused_parameter_is_refused_and_nothing_runs(project: Path, tmp_path: Path) -> None:
    path = recipe(tmp_path / "recipes", KINDS.replace(" body={{ body }}", ""))
    done = run(project, "--recipe", str(path), "--param", "who=me")
    assert "parameter 'body' is never used" in one_line_failure(done, 2)
    nothing_started(project)


def test_an_undefined_variable_is_refused(project: Path, tmp_path: Path) -> None:
    path = recipe(tmp_path / "recipes", WRITE.replace("{{ line }}", "{{ line }} {{ extra }}"))
    done = run(project, "--recipe", str(path), "--param", "line=x")
    assert "{{ extra }} is used but is no parameter" in one_line_failure(done, 2)
    nothing_started(project)


def test_a_missing_required_parameter_is_refused(project: Path, tmp_path: Path) -> None:
    path = recipe(tmp_path / "recipes", WRITE)
    done = run(project, "--recipe", str(path))
    assert "--param line is required" in one_line_failure(done, 2)
    nothing_started(project)


@pytest.mark.slow
@pytest.mark.parametrize("param, says", [
    ("nope=1", "the recipe has no such parameter"),
    ("n=ten", "'ten' is not a number"),
    ("flag=maybe", "'maybe' is not a boolean"),
    ("pick=z", "'z' is not one of a, b, c"),
    ("who", "--param takes KEY=VALUE"),
])
def test_an_unknown_key_or_a_value_not_of_its_type_is_refused(
        project: Path, tmp_path: Path, param: str, says: str) -> None:
    (project / "body.txt").write_text("b", encoding="utf-8")
    path = recipe(tmp_path / "recipes", KINDS)
    done = run(project, "--recipe", str(path), "--param", "who=me", "--param", "body=body.txt",
               "--param", param)
    assert says in one_line_failure(done, 2)
    nothing_started(project)


@pytest.mark.slow
def test_a_file_parameter_outside_the_project_is_refused(project: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("secret", encoding="utf-8")
    (project / "link.txt").symlink_to(secret)
    path = recipe(tmp_path / "recipes", KINDS)
    for value in ("../secret.txt", str(secret), "link.txt"):
        done = run(project, "--recipe", str(path), "--param", "who=me",
                   "--param", f"body={value}")
        assert "is outside the project" in one_line_failure(done, 2), value
        assert "secret" not in done.stdout
    done = run(project, "--recipe", str(path), "--param", "who=me", "--param", "body=.git/HEAD")
    assert "inside .git" in one_line_failure(done, 2)
    done = run(project, "--recipe", str(path), "--param", "who=me", "--param", "body=none.txt")
    assert "no file 'none.txt'" in one_line_failure(done, 2)
    nothing_started(project)


@pytest.mark.slow
@pytest.mark.parametrize("text, says", [
    ("title: [unclosed\n", "not valid YAML"),
    ("- a list\n", "expected a mapping at the top level"),
    ("a: &x [1]\nb: *x\n", "aliases are not allowed"),
    ("title: T\n", "`instructions` or `prompt` is required"),
    ("title: T\nprompt: hi\npromt: typo\n", "unknown field 'promt'"),
    ("title: T\nprompt: '{{ x'\n", "prompt (line 1)"),
    ("title: T\nprompt: hi\nsettings: {agent: exec}\n", "settings.agent must be one of"),
    ("title: T\nprompt: '{{ p }}'\nparameters: [{key: p, input_type: select}]\n",
     "a select needs `options`"),
    ("title: T\nprompt: '{{ p }}'\nparameters: [{key: p, input_type: date}]\n",
     "input_type must be one of"),
    ("title: T\nprompt: '{{ p }}'\nparameters: [{key: p}, {key: p}]\n", "declared twice"),
])
def test_a_malformed_recipe_is_a_one_line_error(project: Path, tmp_path: Path, text: str,
                                                 says: str) -> None:
    path = recipe(tmp_path / "recipes", text)
    done = run(project, "--recipe", str(path))
    assert says in one_line_failure(done, 2)
    nothing_started(project)


def test_a_missing_or_oversized_recipe_file_is_refused(project: Path, tmp_path: Path) -> None:
    done = run(project, "--recipe", str(tmp_path / "none.yaml"))
    assert "no recipe" in one_line_failure(done, 2)
    big = recipe(tmp_path, "title: T\nprompt: hi\n# " + "x" * (1 << 20) + "\n", "big.yaml")
    done = run(project, "--recipe", str(big))
    assert "larger than" in one_line_failure(done, 2)
    nothing_started(project)


def test_a_param_without_a_recipe_or_a_prompt_with_one_is_refused(project: Path,
                                                                  tmp_path: Path) -> None:
    assert "--param needs --recipe" in one_line_failure(
        run(project, "--param", "a=b", "hello"), 2)
    path = recipe(tmp_path / "recipes", WRITE)
    assert "give no PROMPT with it" in one_line_failure(
        run(project, "--recipe", str(path), "--param", "line=x", "hello"), 2)
    assert "give a PROMPT or --recipe" in one_line_failure(run(project), 2)


# -- the bounds of rendering (DESIGN.md §11: memory and time, not only output) ---------------

# 80 bytes that build a 1.5 GB string and render only its length: the output bound never trips.
FORMAT_BOMB = "Fix the tests.{{ ('%1500000000s'|format('') | length) and '' }}"
# Two nested loops over allowed repetitions, printing nothing: about 1e12 steps.
SPIN = "{% for a in 'x'*1000000 %}{% for b in 'x'*1000000 %}{% endfor %}{% endfor %}Fix it."


def test_a_recipe_that_allocates_without_bound_is_refused_and_the_process_stays_small(
        project: Path, tmp_path: Path) -> None:
    import resource

    path = recipe(tmp_path / "recipes", f"title: T\nprompt: {json.dumps(FORMAT_BOMB)}\n")

    def at_most_4_gb() -> None:  # as the probe does: a regression swaps, it does not OOM
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    ended: list[tuple[int, resource.struct_rusage]] = []

    def reaped() -> bool:  # wait4: the peak memory of cos and of what it started and reaped
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            ended.append((status, usage))
        return bool(pid)

    with open(tmp_path / "out", "w+", encoding="utf-8") as out, \
            open(tmp_path / "err", "w+", encoding="utf-8") as err:
        proc = subprocess.Popen([COS, "run", "--agent", ECHO, "--recipe", str(path)],
                                cwd=project, stdout=out, stderr=err, preexec_fn=at_most_4_gb)
        until(reaped, "cos run --recipe to end")
        status, usage = ended[0]
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        done = subprocess.CompletedProcess(proc.args, proc.returncode, "", err.read())
    assert "MiB of memory" in one_line_failure(done, 2)
    assert usage.ru_maxrss < 1 << 20  # KiB: far below the 1.5 GB the template asks for
    nothing_started(project)


@pytest.mark.slow
def test_a_recipe_that_loops_without_output_is_stopped_at_the_time_bound(
        project: Path, tmp_path: Path) -> None:
    path = recipe(tmp_path / "recipes", f"title: T\nprompt: {json.dumps(SPIN)}\n")
    done = run(project, "--recipe", str(path))
    assert "longer than 5 seconds" in one_line_failure(done, 2)
    nothing_started(project)


# -- the seed ----------------------------------------------------------------------------------


def test_the_seed_ref_is_in_the_session_meta_with_a_checkpoint_taken_before(
        project: Path, tmp_path: Path) -> None:
    (project / "body.txt").write_text("b", encoding="utf-8")
    path = recipe(tmp_path / "recipes", "version: 2.1.0\n" + KINDS)
    events = run_json(project, "--recipe", str(path), "--param", "who=me",
                      "--param", "body=body.txt")
    configured = events[0]["msg"]
    assert isinstance(configured, dict) and configured["type"] == "session_configured"
    seed = configured["options"]["seed_ref"]
    assert seed["path"] == str(path)
    assert seed["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert seed["version"] == "2.1.0"
    assert seed["params"] == {"who": "me", "n": "41", "flag": "no", "pick": "b",
                              "body": "body.txt"}
    rows = json.loads(cos("checkpoints", "--json", cwd=project).stdout)
    manual = [row for row in rows if row["id"] == seed["checkpoint"]]
    assert manual and manual[0]["trigger"] == "manual"
    # the stored log holds it too
    log = next(project.rglob(f"events/{events[0]['session']}.jsonl")).read_text(encoding="utf-8")
    assert json.loads(log.splitlines()[0])["msg"]["options"]["seed_ref"] == seed


# -- resume ------------------------------------------------------------------------------------


def seeded_session(project: Path, tmp_path: Path) -> tuple[str, Path]:
    path = recipe(tmp_path / "recipes", WRITE)
    events = run_json(project, "--approve", "allow", "--recipe", str(path),
                      "--param", "line=seeded")
    return str(events[0]["session"]), path


def test_rerun_reproduces_the_seed_tree_in_a_fresh_worktree_and_leaves_the_main_tree_alone(
        project: Path, tmp_path: Path) -> None:
    (project / "old.txt").write_text("old\n", encoding="utf-8")
    git(project, "add", "old.txt")
    git(project, "commit", "-q", "-m", "old")
    # The tree at the seed: a tracked file changed, one deleted, an untracked executable.
    (project / "README.md").write_text("seed readme\n", encoding="utf-8")
    (project / "old.txt").unlink()
    (project / "tool.sh").write_text("#!/bin/sh\necho seed\n", encoding="utf-8")
    (project / "tool.sh").chmod(0o755)
    (project / "dir").mkdir()
    (project / "dir" / "nested.txt").write_text("nested\n", encoding="utf-8")
    at_seed = tree(project)
    session, _ = seeded_session(project, tmp_path)
    assert (project / "out.txt").read_text(encoding="utf-8") == "seeded\n"
    # Afterwards: everything changes and is committed (HEAD moves on).
    (project / "README.md").write_text("later readme\n", encoding="utf-8")
    (project / "tool.sh").unlink()
    (project / "old.txt").write_text("back\n", encoding="utf-8")
    (project / "later.txt").write_text("later\n", encoding="utf-8")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "later")
    main_before = tree(project)
    head_before = git(project, "rev-parse", "HEAD")

    done = cos("resume", session, "--rerun", "--approve", "allow", cwd=project)
    assert done.returncode == 0, done.stderr
    report = dict(line.split(None, 1) for line in done.stdout.splitlines()
                  if line[:1] != " " and len(line.split(None, 1)) == 2)
    assert report["mode"] == "rerun"
    worktree = Path(report["worktree"])
    assert worktree.parent == project / ".coding-os" / "worktrees"
    assert "wrote out.txt" in done.stdout
    rerun = tree(worktree)
    rerun.pop(".git")  # a linked worktree's .git file
    assert rerun == {**at_seed, "out.txt": ("f", b"seeded\n", False)}
    assert tree(project) == main_before
    assert git(project, "rev-parse", "HEAD") == head_before
    assert git(project, "status", "--porcelain") == ""
    assert git(worktree, "branch", "--show-current") == report["branch"]


def test_rerun_dry_run_and_json_show_the_plan_and_make_nothing(project: Path,
                                                               tmp_path: Path) -> None:
    session, path = seeded_session(project, tmp_path)
    plan = json.loads(cos("resume", session, "--rerun", "--json", cwd=project).stdout)
    assert plan["mode"] == "rerun" and plan["seed"]["params"] == {"target": "out.txt",
                                                                   "line": "seeded"}
    assert plan["recipe"] == {"path": str(path), "sha256": plan["seed"]["sha256"],
                              "changed": False}
    shown = cos("resume", session, "--rerun", "--dry-run", cwd=project)
    assert shown.returncode == 0 and "mode       rerun" in shown.stdout
    assert not (project / ".coding-os" / "worktrees").exists() or not [
        p for p in (project / ".coding-os" / "worktrees").iterdir() if p.is_dir()]


@pytest.mark.slow
def test_rerun_refuses_a_recipe_changed_since_the_seed_unless_forced(
        project: Path, tmp_path: Path) -> None:
    session, path = seeded_session(project, tmp_path)
    path.write_text(WRITE.replace("write ", "write  "), encoding="utf-8")
    done = cos("resume", session, "--rerun", cwd=project)
    assert "changed since" in one_line_failure(done, 2) and "--force" in done.stderr
    forced = cos("resume", session, "--rerun", "--force", "--approve", "allow", cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert "changed    yes" in forced.stdout


@pytest.mark.slow
def test_replay_resumes_the_transcript_and_says_mode_replay(project: Path,
                                                            tmp_path: Path) -> None:
    session, path = seeded_session(project, tmp_path)
    shown = cos("resume", session, "--replay", cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "mode       replay" in shown.stdout and f"recipe     {path}" in shown.stdout
    report = json.loads(cos("resume", session, "--replay", "--json", cwd=project).stdout)
    assert report["mode"] == "replay" and report["session"]["id"] == session
    assert report["seed_ref"]["path"] == str(path)


@pytest.mark.slow
def test_a_recipe_session_resumed_without_a_mode_off_a_terminal_names_both_flags(
        project: Path, tmp_path: Path) -> None:
    session, _ = seeded_session(project, tmp_path)
    message = one_line_failure(cos("resume", session, cwd=project), 2)
    assert "--replay" in message and "--rerun" in message


@pytest.mark.slow
def test_a_recipe_session_resumed_on_a_terminal_asks_which_mode(project: Path,
                                                               tmp_path: Path) -> None:
    session, _ = seeded_session(project, tmp_path)
    primary, secondary = pty.openpty()
    try:
        proc = subprocess.Popen([COS, "resume", session], cwd=project, stdin=secondary,
                                stdout=secondary, stderr=secondary)
    finally:
        os.close(secondary)
    shown = b""
    deadline = time.monotonic() + 60
    asked = False
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 1)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
            if not asked and b"(replay, rerun)" in shown:
                os.write(primary, b"replay\n")
                asked = True
        assert proc.wait(timeout=30) == 0, shown
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(primary)
    assert asked and b"mode       replay" in shown


@pytest.mark.slow
def test_replay_or_rerun_of_a_session_not_from_a_recipe_is_refused(project: Path) -> None:
    events = run_json(project, "plain prompt")
    session = str(events[0]["session"])
    for flag in ("--replay", "--rerun"):
        message = one_line_failure(cos("resume", session, flag, cwd=project), 2)
        assert "was not started from a recipe" in message
    assert "--force goes with --rerun" in one_line_failure(
        cos("resume", session, "--force", cwd=project), 2)


# -- in process: the sandbox and the examples --------------------------------------------------


PARAM_W = "  - {key: w, requirement: optional}\n"


def load(tmp_path: Path, prompt: str, params: str = "") -> object:
    from coding_os.jobs import recipes

    text = f"title: T\nprompt: {json.dumps(prompt)}\n" + (
        f"parameters:\n{params}" if params else "")
    return recipes.load_recipe(str(recipe(tmp_path, text)))


@pytest.mark.parametrize("template", [
    "{{ ''.__class__.__mro__ }}",
    "{{ 'a' * 100000000 }}",
    "{{ 'a' ~ ('b' * 2000000) }}",
    "{% for i in range(100000) %}{{ 'x' * 50 }}{% endfor %}",
])
def test_rendering_is_sandboxed_and_bounded(tmp_path: Path, template: str) -> None:
    from coding_os.jobs import recipes

    loaded = load(tmp_path, template)
    with pytest.raises(recipes.RecipeError) as raised:
        recipes.render(loaded, {}, cwd=str(tmp_path))  # type: ignore[arg-type]
    assert "\n" not in str(raised.value)


@pytest.mark.slow
@pytest.mark.parametrize("template", [
    "{{ ('%1500000000s'|format('')) | length }}",
    "{{ ('%1500000000s' % '') | length }}",
    "{{ 'x'|center(1500000000)|length }}",
    "{{ 'a\\nb'|indent(1500000000)|length }}",
    "{{ ('x' * 1000000)|replace('x', 'x' * 2000)|length }}",
    "{% set l = [0] %}{% for i in range(60) %}{% set d = l.extend(l) %}{% endfor %}"
    "{{ l|length }}",
    "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}"
    "{% endfor %}{{ ns.s|length }}",
], ids=["format", "percent", "center", "indent", "replace", "list-doubling", "text-doubling"])
def test_a_template_that_needs_more_memory_than_its_bound_is_refused(tmp_path: Path,
                                                                      template: str) -> None:
    from coding_os.jobs import recipes

    with pytest.raises(recipes.RecipeError) as raised:
        recipes.render(load(tmp_path, template), {})  # type: ignore[arg-type]
    assert "MiB of memory" in str(raised.value) and "\n" not in str(raised.value)


def test_a_template_that_loops_past_the_time_bound_is_stopped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from coding_os.jobs import recipes

    monkeypatch.setattr(recipes, "RENDER_SECONDS", 1.0)
    with pytest.raises(recipes.RecipeError, match="longer than 1 seconds"):
        recipes.render(load(tmp_path, SPIN), {})  # type: ignore[arg-type]


@pytest.mark.slow
def test_rendering_from_a_thread_is_bounded_too(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """cos web renders the new-job form's recipe in a server thread: there the renderer is a
    fresh interpreter, not a fork, and holds the same bounds."""
    import threading

    from coding_os.jobs import recipes

    monkeypatch.setattr(recipes, "RENDER_SECONDS", 2.0)
    said: dict[str, str] = {}

    def render_each() -> None:
        said["plain"] = recipes.render(load(tmp_path, "Say {{ w }}.", PARAM_W),
                                       {"w": "hi"}).text  # type: ignore[arg-type]
        for name, template in (("memory", FORMAT_BOMB), ("time", SPIN)):
            try:
                recipes.render(load(tmp_path, template), {})  # type: ignore[arg-type]
            except recipes.RecipeError as exc:
                said[name] = str(exc)

    worker = threading.Thread(target=render_each)
    worker.start()
    worker.join(timeout=60)
    assert said["plain"] == "Say hi."
    assert "MiB of memory" in said["memory"]
    assert "longer than 2 seconds" in said["time"]


def test_a_template_nested_too_deeply_for_jinjas_parser_is_refused(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    with pytest.raises(recipes.RecipeError, match="nests too deeply"):
        load(tmp_path, "{{ " + "(" * 100 + "1" + ")" * 100 + " }}")


def test_a_template_that_renders_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    with pytest.raises(recipes.RecipeError, match=r"lone surrogate \(\\ud800\)"):
        recipes.render(load(tmp_path, '{{ "\\ud800" }}'), {})  # type: ignore[arg-type]


def test_a_template_cannot_reach_a_file(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    (tmp_path / "other.txt").write_text("other", encoding="utf-8")
    for template in ("{% include 'other.txt' %}", "{% import 'other.txt' as o %}x"):
        loaded = load(tmp_path, template)
        with pytest.raises(recipes.RecipeError):
            recipes.render(loaded, {}, cwd=str(tmp_path))  # type: ignore[arg-type]


def test_goose_keys_cos_does_not_use_are_ignored(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    text = ("version: 1.0.0\ntitle: T\ndescription: d\nprompt: hi\nauthor: {contact: me}\n"
            "extensions: [{type: builtin, name: developer}]\nactivities: [one]\n"
            "settings: {goose_provider: x, goose_model: y, temperature: 0.2, model: m}\n")
    loaded = recipes.load_recipe(str(recipe(tmp_path, text)))
    assert (loaded.version, loaded.model, loaded.agent) == ("1.0.0", "m", None)
    assert recipes.render(loaded, {}).text == "hi"


def test_instructions_and_prompt_are_joined_by_a_blank_line(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    text = ("title: T\ninstructions: |\n  Be brief.\nprompt: |\n  Say {{ w }}.\n"
            "parameters: [{key: w, requirement: optional}]\n")
    loaded = recipes.load_recipe(str(recipe(tmp_path, text)))
    assert recipes.render(loaded, {"w": "hi"}).text == "Be brief.\n\nSay hi."
    assert recipes.render(loaded, {}).text == "Be brief.\n\nSay ."


def test_the_example_recipes_load_and_render() -> None:
    from coding_os.jobs import recipes

    fix = recipes.load_recipe(str(ROOT / "examples" / "recipes" / "fix-failing-test.yaml"))
    text = recipes.render(fix, {"test": "tests/t.py::test_x", "source": "examples/echo_agent.py",
                                "runner": "go test"}, cwd=str(ROOT)).text
    assert "The test tests/t.py::test_x fails. Run it with go test." in text
    assert "class EchoAgent" in text
    docs = recipes.load_recipe(str(ROOT / "examples" / "recipes" / "write-docs.yaml"))
    text = recipes.render(docs, {"module": "examples/echo_agent.py", "examples": "no"},
                          cwd=str(ROOT)).text
    assert "for users, in docs/MODULE.md" in text and "runnable example" not in text
    assert (fix.agent, docs.agent) == ("claude", "claude")


def test_seed_ref_hashes_the_file_and_keeps_the_params(tmp_path: Path) -> None:
    from coding_os.jobs import recipes

    path = recipe(tmp_path, "title: T\nprompt: hi\n")
    seed = recipes.seed_ref(str(path), {"a": "1"}, "cp-x")
    assert seed == {"path": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                    "version": None, "params": {"a": "1"}, "checkpoint": "cp-x"}
    assert recipes.valid_seed_ref(seed) == seed
    assert recipes.valid_seed_ref({**seed, "path": "relative"}) is None
