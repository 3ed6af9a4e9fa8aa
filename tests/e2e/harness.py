"""Run the real Claude Code and Codex CLIs in a scratch environment against a ModelServer.

The clients are the pinned npm packages under ``tests/e2e/clients`` (``npm ci`` there installs
them). Every run gets a private ``HOME`` (and ``CODEX_HOME``) and an environment built from
scratch, so nothing of the developer's own configuration, keys or agent session leaks in, and
the clients talk to 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from .model_server import ModelServer, Step, ToolCall

from tests.helpers import COS, claude_project_dir

__all__ = [
    "CLAUDE_BIN",
    "CODEX_BIN",
    "CODEX_MODEL",
    "claude_env",
    "claude_project_dir",
    "claude_transcript",
    "claude_transcripts",
    "clients_installed",
    "codex_env",
    "codex_rollout",
    "codex_rollouts",
    "run_claude",
    "run_codex",
    "write_codex_config",
]

CLIENTS_DIR = Path(__file__).resolve().parent / "clients"
BIN_DIR = CLIENTS_DIR / "node_modules" / ".bin"
CLAUDE_BIN = BIN_DIR / "claude"
CODEX_BIN = BIN_DIR / "codex"

CODEX_MODEL = "mock-model"
DEFAULT_TIMEOUT = 60.0

# Codex knows nothing of "mock-model" and would fall back to metadata that offers no apply_patch
# tool. This catalog entry (the fields Codex 0.169 requires, plus the two that matter) makes it
# offer apply_patch as a freeform tool, exec_command as its shell, and the multi_agent_v1
# subagent tools.
_CODEX_MODEL_INFO = {
    "slug": CODEX_MODEL,
    "display_name": "Scripted mock model",
    "base_instructions": "You are a scripted test model.",
    "apply_patch_tool_type": "freeform",
    "shell_type": "unified_exec",
    "multi_agent_version": "v1",
    "supported_reasoning_levels": [],
    "visibility": "list",
    "supported_in_api": True,
    "priority": 0,
    "support_verbosity": False,
    "truncation_policy": {"mode": "tokens", "limit": 10000},
    "experimental_supported_tools": [],
}


def clients_installed() -> bool:
    """Whether both pinned CLIs and a ``node`` to run them are present."""
    return (
        os.access(CLAUDE_BIN, os.X_OK)
        and os.access(CODEX_BIN, os.X_OK)
        and shutil.which("node") is not None
    )


def _search_path() -> str:
    """The caller's PATH, with the directory of ``node`` first (the npm shims need it)."""
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    node = shutil.which("node")
    if node:
        path = os.pathsep.join([str(Path(node).parent), path])
    return path


def _base_env(home: Path) -> dict[str, str]:
    return {
        "PATH": _search_path(),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
    }


def claude_env(
    server: ModelServer, home: Path, extra: Optional[Mapping[str, str]] = None
) -> dict[str, str]:
    """The environment for a Claude Code run: private HOME, the scripted server, no telemetry."""
    env = _base_env(home)
    env.update(
        {
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-scripted-test-key",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            # Lets --dangerously-skip-permissions pass when the tests run as root.
            "IS_SANDBOX": "1",
        }
    )
    env.update(extra or {})
    return env


def write_codex_config(
    codex_home: Path, server: ModelServer, extra_toml: str = ""
) -> Path:
    """Write ``$CODEX_HOME/config.toml`` (and its model catalog) pointing Codex at ``server``.

    ``extra_toml`` is appended at top level before the tables, e.g.
    ``model_auto_compact_token_limit = 100000``. Returns the config path.
    """
    codex_home.mkdir(parents=True, exist_ok=True)
    catalog = codex_home / "mock-model-catalog.json"
    catalog.write_text(json.dumps({"models": [_CODEX_MODEL_INFO]}, indent=1), encoding="utf-8")
    config = codex_home / "config.toml"
    config.write_text(
        f"model = {json.dumps(CODEX_MODEL)}\n"
        'model_provider = "mock"\n'
        f"model_catalog_json = {json.dumps(str(catalog))}\n"
        f"{extra_toml}\n"
        "[model_providers.mock]\n"
        'name = "mock"\n'
        f"base_url = {json.dumps(server.base_url + '/v1')}\n"
        'wire_api = "responses"\n'
        'env_key = "MOCK_KEY"\n'
        # A workspace-write sandbox also makes /tmp writable, and Codex leaves empty mount
        # points (.git, .codex, .agents, .aws) in every writable root: keep it out of /tmp.
        "[sandbox_workspace_write]\n"
        "exclude_slash_tmp = true\n"
        "exclude_tmpdir_env_var = true\n",
        encoding="utf-8",
    )
    return config


def codex_env(
    home: Path, codex_home: Path, extra: Optional[Mapping[str, str]] = None
) -> dict[str, str]:
    """The environment for a Codex run: private HOME and CODEX_HOME, the mock provider's key."""
    env = _base_env(home)
    env.update({"CODEX_HOME": str(codex_home), "MOCK_KEY": "mock-scripted-test-key"})
    env.update(extra or {})
    return env


def _run(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` in its own process group, killing the whole group on timeout.

    The npm shims start the native client as a child: killing the shim alone would leave it.

    Raises:
        subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds.
    """
    process = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as timed_out:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr) from timed_out
    return subprocess.CompletedProcess(list(argv), process.returncode, stdout, stderr)


def run_claude(
    project_dir: Path,
    prompt: str,
    server: ModelServer,
    home: Path,
    extra_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``claude -p PROMPT`` in ``project_dir``; stdout is its JSON result (``session_id``...).

    ``extra_args`` go before the prompt's options (e.g. ``("--resume", session_id)``); ``env``
    adds to the environment.

    Raises:
        subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds.
    """
    argv = [
        str(CLAUDE_BIN),
        "-p",
        prompt,
        *extra_args,
        "--output-format",
        "json",
        "--permission-mode",
        "acceptEdits",
        "--allowedTools",
        "Bash(*)",
        "Read",
        "Edit",
        "Write",
    ]
    return _run(argv, Path(project_dir), claude_env(server, Path(home), env), timeout)


def run_codex(
    project_dir: Path,
    prompt: str,
    server: ModelServer,
    home: Path,
    codex_home: Optional[Path] = None,
    extra_args: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
    env: Optional[Mapping[str, str]] = None,
    config_toml: str = "",
    as_set_up: bool = False,
) -> subprocess.CompletedProcess[str]:
    """Run ``codex exec PROMPT`` in ``project_dir`` with project hooks trusted.

    ``codex_home`` defaults to ``home/.codex``; its ``config.toml`` is (re)written to point at
    ``server`` with ``config_toml`` added at top level. ``--trust`` and
    ``--dangerously-bypass-hook-trust`` are both needed for ``.codex/hooks.json`` to run
    unless the user's config trusts the project and each hook. ``as_set_up``: run Codex as the
    user set it up instead: its ``config.toml`` as it is (``write_codex_config`` first), no
    trust flag.

    Raises:
        subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds.
    """
    home = Path(home)
    codex_home = Path(codex_home) if codex_home is not None else home / ".codex"
    if not as_set_up:
        write_codex_config(codex_home, server, config_toml)
    trust = () if as_set_up else ("--trust", "--dangerously-bypass-hook-trust")
    argv = [
        str(CODEX_BIN),
        "exec",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        *trust,
        *extra_args,
        prompt,
    ]
    return _run(argv, Path(project_dir), codex_env(home, codex_home, env), timeout)


def claude_transcripts(home: Path, cwd: Path) -> list[Path]:
    """The session transcripts Claude Code wrote for ``cwd``, oldest first (no subagents)."""
    directory = claude_project_dir(home, cwd)
    return sorted(directory.glob("*.jsonl"), key=lambda p: p.stat().st_mtime)


def claude_transcript(home: Path, cwd: Path, session_id: str) -> Path:
    """The transcript of one Claude Code session (the file may not exist)."""
    return claude_project_dir(home, cwd) / f"{session_id}.jsonl"


def codex_rollouts(codex_home: Path) -> list[Path]:
    """Every Codex rollout under ``$CODEX_HOME/sessions``, oldest first."""
    return sorted(Path(codex_home).glob("sessions/**/rollout-*.jsonl"))


def codex_rollout(codex_home: Path, session_id: str) -> Path:
    """The rollout of one Codex session (thread) id.

    Raises:
        FileNotFoundError: no rollout has that id.
    """
    for path in codex_rollouts(codex_home):
        if path.name.endswith(f"-{session_id}.jsonl"):
            return path
    raise FileNotFoundError(f"no Codex rollout for {session_id} under {codex_home}")


# -- the tree of a checkout, compared whole --------------------------------------------------


# What the agent's state and configuration live in: not part of the tree compared here.
NOT_THE_TREE = {".git", ".coding-os", ".claude", ".codex"}

# Each entry: (kind, permission and type bits, bytes of a file or target of a symlink).
Tree = dict[str, tuple[str, int, bytes]]


def tree_state(root: Path) -> Tree:
    """Every file, symlink and directory under `root` (bar the agents' and cos's own)."""
    found: Tree = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if here == root:
            dirnames[:] = [name for name in dirnames if name not in NOT_THE_TREE]
        for name in [*dirnames, *filenames]:
            path = here / name
            rel = path.relative_to(root).as_posix()
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("symlink", st.st_mode, os.readlink(path).encode())
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir", st.st_mode, b"")
            else:
                found[rel] = ("file", st.st_mode, path.read_bytes())
    return found


def tree_differences(expected: Tree, actual: Tree) -> list[str]:
    """Readable differences between two trees (empty when they are the same)."""
    problems = []
    for path in sorted(set(expected) | set(actual)):
        want, got = expected.get(path), actual.get(path)
        if want == got:
            continue
        if want is None or got is None:
            problems.append(f"{path}: {'missing' if got is None else 'unexpected'}")
        elif want[0] != got[0]:
            problems.append(f"{path}: a {got[0]} instead of a {want[0]}")
        elif want[1] != got[1]:
            problems.append(f"{path}: mode {oct(got[1])} instead of {oct(want[1])}")
        else:
            problems.append(f"{path}: content differs")
    return problems


# -- background jobs of the real clients (cos bg), as a user's shell runs cos ----------------

JOB_WAIT = 120.0  # seconds a job may take to reach a state (the real clients on a loaded machine)
Row = dict[str, Any]
Event = dict[str, Any]


def shell(agent: str, command: str) -> ToolCall:
    """A scripted call of the agent's shell tool running `command`."""
    if agent == "claude":
        return ToolCall("Bash", {"command": command, "description": "run it"})
    return ToolCall("exec_command", {"cmd": command})


class Jobs:
    """One test's model server, and `cos` run as a user's shell runs it in one project."""

    def __init__(self, project: Path, home: Path) -> None:
        self.project = project
        self.home = home
        self.server = ModelServer({}).start()
        env = dict(os.environ)
        env.update(claude_env(self.server, home))
        codex_home = home / ".codex"
        write_codex_config(codex_home, self.server)
        env.update(codex_env(home, codex_home))
        env["PATH"] = os.pathsep.join([str(BIN_DIR), env["PATH"]])  # `claude`, `codex`
        self.env = env

    def script(self, marker: str, steps: list[Step]) -> None:
        """The steps answering every conversation whose first prompt holds `marker`."""
        self.server.scripts[marker] = steps

    def run(self, *args: str, timeout: float = JOB_WAIT) -> subprocess.CompletedProcess[str]:
        return subprocess.run([COS, *args], cwd=self.project, env=self.env, text=True,
                              capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = self.run(*args)
        assert done.returncode == 0, f"cos {' '.join(args)}: {done.returncode}\n{done.stderr}"
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").stdout)

    def bg(self, *args: str) -> Row:
        row = self.json("bg", *args)
        assert isinstance(row, dict) and row["id"]
        return row

    def rows(self) -> dict[str, Row]:
        return {row["id"]: row for row in self.json("agents")}

    def until(self, job: str, wanted: Callable[[Row], bool], what: str) -> Row:
        """The job's row once `wanted` holds for it (polled through `cos agents --json`)."""
        deadline = time.monotonic() + JOB_WAIT
        row: Row | None = None
        while time.monotonic() < deadline:
            row = self.rows().get(job)
            if row is not None and wanted(row):
                return row
            time.sleep(0.2)
        stderr = self.run("logs", job, "--stderr").stdout[-3000:]
        raise AssertionError(f"job {job} never {what}; last row {row}\nstderr:\n{stderr}")

    def events(self, job: str) -> list[Event]:
        found = self.json("logs", job)["events"]
        assert isinstance(found, list)
        return found

    def until_task_ends(self, job: str, task: str) -> list[Event]:
        """The job's stored events once the task `task` completed."""
        deadline = time.monotonic() + JOB_WAIT
        while time.monotonic() < deadline:
            got = self.events(job)
            if any(e["msg"]["type"] == "task_complete" and e["msg"].get("task") == task
                   for e in got):
                return got
            time.sleep(0.2)
        raise AssertionError(f"task {task} of job {job} never completed")

    def asked(self, marker: str) -> list[str]:
        """The agent requests (those that carry tools) the model server got holding `marker`,
        each as its JSON text."""
        bodies = [json.dumps(r.body) for r in list(self.server.requests)
                  if isinstance(r.body, dict) and r.body.get("tools")]
        return [body for body in bodies if marker in body]

    def until_asked(self, marker: str) -> list[str]:
        deadline = time.monotonic() + JOB_WAIT
        while not self.asked(marker):
            assert time.monotonic() < deadline, f"the model server never got {marker!r}"
            time.sleep(0.1)
        return self.asked(marker)


def processes_of(home: Path) -> list[int]:
    """Every process (but this one) whose environment has HOME=`home`: runners, clients, the
    daemon."""
    wanted = b"HOME=" + os.fsencode(str(home))
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if wanted in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            continue
    return found


@contextlib.contextmanager
def running_jobs(project: Path, home: Path) -> Iterator[Jobs]:
    """A `Jobs` for one test; afterwards every process of `home` left running (runners, their
    clients, the daemon) is killed and the model server stopped."""
    from tests.helpers import require_clients

    require_clients()
    at = Jobs(project, home)
    try:
        yield at
    finally:
        for pid in processes_of(home):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        at.server.stop()
