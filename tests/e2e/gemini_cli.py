"""Run the real Gemini CLI (the pinned ``@google/gemini-cli``) offline against a GeminiServer.

Every run gets a private ``HOME`` holding ``.gemini/settings.json`` that selects the API-key auth
(the base URL alone selects an auth type the CLI then rejects: "Invalid auth method selected",
exit 41) and turns off update checks and usage statistics, and an environment built from
scratch, so the client talks to 127.0.0.1 only. ``GEMINI_CLI_TRUST_WORKSPACE=true`` lets a
headless run work in a folder it has not been told to trust.

Headless runs (``gemini -p … --output-format json --yolo``) cover a session, its resume
(``--resume <id>``) and a fork (``--session-file <a session file>``: a new session holding a copy
of that one's messages). What only the interactive CLI does (``/rewind``) is driven in a detached
tmux session of its own server (``GeminiTerminal``).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Optional

from .gemini_server import GeminiServer

__all__ = [
    "GEMINI_BIN",
    "GeminiTerminal",
    "gemini_chats",
    "gemini_env",
    "gemini_installed",
    "gemini_sessions",
    "require_gemini",
    "run_gemini",
    "write_gemini_settings",
]

GEMINI_BIN = Path(__file__).resolve().parent / "clients" / "node_modules" / ".bin" / "gemini"
DEFAULT_TIMEOUT = 120.0

# What every scripted run needs in $HOME/.gemini/settings.json.
BASE_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
}


def gemini_installed() -> bool:
    """Whether the pinned Gemini CLI and a ``node`` to run it are present."""
    return os.access(GEMINI_BIN, os.X_OK) and shutil.which("node") is not None


def require_gemini() -> None:
    """Skip when the pinned Gemini CLI is not installed, except under CI=true, where that fails."""
    import pytest

    if gemini_installed():
        return
    message = "the Gemini CLI is not installed (npm ci --prefix tests/e2e/clients)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def write_gemini_settings(home: Path, extra: Optional[Mapping[str, Any]] = None) -> Path:
    """Write ``$HOME/.gemini/settings.json``: BASE_SETTINGS with ``extra`` merged in."""
    settings = Path(home) / ".gemini" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(_merge(BASE_SETTINGS, extra or {}), indent=2),
                        encoding="utf-8")
    return settings


def _search_path() -> str:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    node = shutil.which("node")
    return os.pathsep.join([str(Path(node).parent), path]) if node else path


def gemini_env(server: GeminiServer, home: Path,
               extra: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The environment of a Gemini CLI run: private HOME, the scripted server, a trusted folder."""
    env = {
        "PATH": _search_path(),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "GOOGLE_GEMINI_BASE_URL": server.base_url,
        "GEMINI_API_KEY": "scripted-gemini-test-key",
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    env.update(extra or {})
    return env


def run_gemini(project_dir: Path, prompt: str, server: GeminiServer, home: Path,
               extra_args: Sequence[str] = (), timeout: float = DEFAULT_TIMEOUT,
               env: Optional[Mapping[str, str]] = None,
               yolo: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``gemini -p PROMPT --output-format json --yolo`` in ``project_dir`` (without
    ``--yolo`` when ``yolo`` is false); stdout is its
    JSON result (``session_id``, ``response``, ``stats``). ``extra_args`` come after the prompt
    (``("--resume", session_id)``, ``("--session-file", path)``); the settings file is written
    if there is none. The run is its own process group, killed whole on timeout.

    Raises:
        subprocess.TimeoutExpired: the run took longer than ``timeout`` seconds.
    """
    home = Path(home)
    if not (home / ".gemini" / "settings.json").exists():
        write_gemini_settings(home)
    argv = [str(GEMINI_BIN), "-p", prompt, "--output-format", "json",
            *(["--yolo"] if yolo else []), *extra_args]
    process = subprocess.Popen(argv, cwd=project_dir, env=gemini_env(server, home, env),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as timed_out:
        os.killpg(process.pid, signal.SIGKILL)
        stdout, stderr = process.communicate()
        raise subprocess.TimeoutExpired(argv, timeout, stdout, stderr) from timed_out
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)


def gemini_chats(home: Path, project: Path) -> Path:
    """``$HOME/.gemini/tmp/<slug>/chats`` of ``project``, its slug read from ``projects.json``.

    Raises:
        KeyError: Gemini CLI has not registered the project.
    """
    registry = json.loads((Path(home) / ".gemini" / "projects.json").read_text(encoding="utf-8"))
    slug = str(registry["projects"][str(project)])
    return Path(home) / ".gemini" / "tmp" / slug / "chats"


def gemini_sessions(home: Path, project: Path) -> list[Path]:
    """The session files (``session-*.jsonl``) of ``project``, oldest first (no subagents)."""
    try:
        chats = gemini_chats(home, project)
    except (FileNotFoundError, KeyError):
        return []
    return sorted(chats.glob("session-*.jsonl"), key=lambda p: (p.stat().st_mtime_ns, p.name))


class GeminiTerminal:
    """The interactive Gemini CLI in a detached tmux session (its own server, 200x50).

    Use as a context manager; ``type`` sends text and Enter, ``wait_for`` polls the screen.
    """

    def __init__(self, project_dir: Path, server: GeminiServer, home: Path,
                 args: Sequence[str] = ()) -> None:
        self.project_dir = Path(project_dir)
        self.env = gemini_env(server, Path(home), {"TERM": "xterm-256color"})
        self.env.pop("NO_COLOR", None)
        if not (Path(home) / ".gemini" / "settings.json").exists():
            write_gemini_settings(Path(home))
        self.args = list(args)
        self.socket = os.path.join(tempfile.mkdtemp(prefix="gemini-tmux-"), "socket")

    def tmux(self, *args: str) -> str:
        """Run a tmux command on this terminal's server; its stdout."""
        done = subprocess.run(["tmux", "-S", self.socket, *args], capture_output=True, text=True,
                              timeout=30, check=True)
        return done.stdout

    def __enter__(self) -> GeminiTerminal:
        command = " ".join(_quote(part) for part in [str(GEMINI_BIN), *self.args])
        environment = [f"{key}={value}" for key, value in self.env.items()]
        subprocess.run(["tmux", "-S", self.socket, "-f", "/dev/null", "new-session", "-d",
                        "-x", "200", "-y", "50", "-s", "gemini", "-c", str(self.project_dir),
                        "env", "-i", *environment, "sh", "-c", command],
                       check=True, timeout=30)
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["tmux", "-S", self.socket, "kill-server"], capture_output=True,
                       timeout=30)
        shutil.rmtree(os.path.dirname(self.socket), ignore_errors=True)

    def screen(self) -> str:
        """The visible screen, as text."""
        return self.tmux("capture-pane", "-p", "-t", "gemini")

    def keys(self, *keys: str) -> None:
        """Send tmux key names (``Enter``, ``Escape``, ``Up``...)."""
        self.tmux("send-keys", "-t", "gemini", *keys)

    def type(self, text: str, enter: bool = True) -> None:
        """Type ``text`` literally, then Enter."""
        self.tmux("send-keys", "-t", "gemini", "-l", text)
        if enter:
            # Enter arriving with the text would be read as part of a paste: wait until the
            # input box shows what was typed.
            self.wait_for(text[-40:].strip() or text)
            self.keys("Enter")

    def wait_closed(self, timeout: float = 60.0) -> None:
        """Return once the CLI has exited (its tmux session is gone).

        Raises:
            TimeoutError: it had not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            alive = subprocess.run(["tmux", "-S", self.socket, "has-session", "-t", "gemini"],
                                   capture_output=True, timeout=30)
            if alive.returncode != 0:
                return
            time.sleep(0.2)
        raise TimeoutError(f"the Gemini CLI did not exit; screen:\n{self.screen()}")

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        """The screen once it shows ``text``.

        Raises:
            TimeoutError: it did not within ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise TimeoutError(f"the Gemini CLI never showed {text!r}; screen:\n{screen}")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
