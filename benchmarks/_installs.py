"""Regular (non-editable) installs of this checkout in scratch venvs, as users get them: the
wheel and its dependencies built once into a wheelhouse, then installed offline from it by the
pip that `python -m venv` ships, by a current pip, or by uv; and the hook entries `cos init`
wrote, read back as the env assignments and argv they run."""

from __future__ import annotations

import json
import resource
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ROOT", "Install", "run", "timed", "version_of", "uv_binary", "make_installs",
           "installed_command"]

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Install:
    """One scratch venv holding a regular install of this checkout."""

    name: str
    venv: Path

    @property
    def python(self) -> str:
        return str(self.venv / "bin" / "python")

    @property
    def cos(self) -> str:
        return str(self.venv / "bin" / "cos")


def run(argv: list[str], what: str, **kwargs: object) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        raise SystemExit(f"{what} failed (exit {proc.returncode}): {shlex.join(argv)}\n"
                         f"{proc.stderr[-2000:]}")


def version_of(python: str, module: str) -> str:
    return subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()


def uv_binary() -> str:
    """The `uv` of this venv (the `test` extra installs it)."""
    try:
        from uv import find_uv_bin
    except ImportError:
        raise SystemExit("uv is not installed in this venv: `make test` installs it (the test "
                         "extra), or `pip install uv`") from None
    return str(find_uv_bin())


def installed_command(project: Path, event: str) -> tuple[dict[str, str], list[str]]:
    """The env assignments and argv of the hook entry `cos init` wrote for `event`."""
    settings = json.loads((project / ".claude" / "settings.json").read_text(encoding="utf-8"))
    command = settings["hooks"][event][0]["hooks"][0]["command"]
    words = shlex.split(command)
    env = {}
    while "=" in words[0] and not words[0].startswith("/"):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return env, words


def make_installs(scratch: Path, which: tuple[str, ...] = ("bundled-pip", "current-pip", "uv")
                  ) -> list[Install]:
    """Build the wheelhouse once and make the regular installs named in `which` from it:
    `bundled-pip` (the pip `python -m venv` ships), `current-pip`, `uv`."""
    base = getattr(sys, "_base_executable", sys.executable)
    wheelhouse = scratch / "wheelhouse"
    # This checkout's wheel with every dependency, and the current pip: nothing more is fetched.
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheelhouse),
         str(ROOT), "pip"], "building the wheelhouse")
    offline = ["--no-index", "--find-links", str(wheelhouse)]
    installs = []
    for kind in which:
        venv = scratch / f"venv-{kind}"
        if kind == "uv":
            uv = uv_binary()
            uv_version = subprocess.run([uv, "--version"], capture_output=True, text=True,
                                        check=True).stdout.split()[1]
            run([uv, "venv", "--quiet", "--python", base, str(venv)], "uv venv")
            run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
                 *offline, "coding-os"], "uv pip install")
            installs.append(Install(f"uv-{uv_version}", venv))
            continue
        python = str(venv / "bin" / "python")
        run([base, "-m", "venv", str(venv)], "python -m venv")
        if kind == "current-pip":
            run([python, "-m", "pip", "install", "--quiet", "--upgrade", *offline, "pip"],
                "upgrading pip")
        run([python, "-m", "pip", "install", "--quiet", *offline, "coding-os"],
            f"pip install ({kind})")
        installs.append(Install(f"pip-{version_of(python, 'pip')}", venv))
    return installs


def timed(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"",
          cpu: list[float] | None = None) -> float:
    """Seconds one run of `argv` took as a whole process; a failure ends the benchmark. `cpu`,
    when given, gets the CPU seconds the process used (user and system: what other work on the
    machine disturbs less than the elapsed time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, input=stdin, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if cpu is not None:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} failed: {proc.stderr.decode(errors='replace')}")
    return elapsed
