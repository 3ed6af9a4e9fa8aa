"""Shared fixtures: every test gets its own HOME, a scrubbed environment and helpers to run
`cos` as a subprocess the way an agent's hook or a user's shell does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

COS = str(Path(sys.executable).with_name("cos"))
# Variables from the developer's shell that would change who `cos` thinks it is.
_SCRUB_PREFIXES = ("COS_", "CLAUDE", "CODEX_", "ANTHROPIC_", "OPENAI_")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private HOME and no agent variables from the outside."""
    for key in list(os.environ):
        if key.startswith(_SCRUB_PREFIXES):
            monkeypatch.delenv(key)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / ".gitconfig"))
    monkeypatch.setenv("GIT_AUTHOR_NAME", "t")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "t@example.invalid")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "t")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "t@example.invalid")
    yield home


def git(cwd: Path | str, *args: str) -> str:
    """Run git in `cwd` and return its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, outside HOME (like /tmp checkouts)."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("hello\n", encoding="utf-8")
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "init")
    return path.resolve()


def cos(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None,
        input: str | bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the installed `cos` script as a subprocess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    if isinstance(input, bytes):
        proc = subprocess.run([COS, *args], cwd=cwd, env=full_env, input=input,
                              capture_output=True, timeout=timeout)
        return subprocess.CompletedProcess(proc.args, proc.returncode,
                                           proc.stdout.decode("utf-8", "replace"),
                                           proc.stderr.decode("utf-8", "replace"))
    return subprocess.run([COS, *args], cwd=cwd, env=full_env, input=input, text=True,
                          capture_output=True, timeout=timeout)


def fire(event: str, payload: Mapping[str, object], *, cwd: Path | str, agent: str = "claude",
         env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Fire one hook the way an installed hook entry does: `COS_AGENT=<agent> cos hook <Event>`."""
    full = {"COS_AGENT": agent}
    if env:
        full.update(env)
    body = {"hook_event_name": event, "cwd": str(cwd), **payload}
    return cos("hook", event, cwd=cwd, env=full, input=json.dumps(body))


def cos_json(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None) -> object:
    """Run `cos … --json` and parse its output; fails the test on a non-zero exit."""
    proc = cos(*args, "--json", cwd=cwd, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _namespaces_work() -> bool:
    """Whether `unshare -rm` may mount here (read-only bind mounts, small tmpfs for full disks)."""
    import shutil

    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


needs_namespaces = pytest.mark.skipif(not _namespaces_work(),
                                      reason="needs unshare -rm with mount rights")


def as_an_older_init_wrote_it(repo: Path, agent: str, cos_path: str) -> None:
    """Turn the hooks `cos init` installed in `repo` (settings file and manifest) into what an
    older init wrote: the same groups, running the `cos` console script at `cos_path`."""
    from coding_os.launcher import console_script_command, parse_hook_command

    settings = repo / (".claude/settings.json" if agent == "claude" else ".codex/hooks.json")
    manifest = repo / ".coding-os" / "installed-manifest.json"
    hooks = json.loads(settings.read_text(encoding="utf-8"))["hooks"]
    texts = {path: path.read_text(encoding="utf-8") for path in (settings, manifest)}
    for event, groups in hooks.items():
        for command in [h["command"] for g in groups for h in g["hooks"]]:
            if parse_hook_command(command, agent, event) is not None:
                old = console_script_command(agent, cos_path, event)
                for path in texts:
                    texts[path] = texts[path].replace(json.dumps(command)[1:-1],
                                                      json.dumps(old)[1:-1])
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
    data = json.loads(manifest.read_text(encoding="utf-8"))
    for record in data["installations"]:
        record.pop("launcher", None)
    manifest.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
