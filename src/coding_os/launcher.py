"""The hook launcher: how a hook entry starts this installation's cos, without the installer's
console script and without `site`.

`cos hook <Event>` runs on every tool call of every agent. A console script costs more than it
looks: the wrapper some installers write imports `re` on every start, and `site` reads every
`.pth` file of site-packages. So the hook entries `cos init` writes run

    COS_AGENT=<agent> '<python>' -I -S '<hub>/launchers/hook-<key>.py' hook <Event>

`-I` keeps the caller's environment out (PYTHON* variables, the user site, the current
directory), `-S` skips `site`. The launcher, a few lines that cos writes itself, sets `sys.path`
to what `site` gives the installing interpreter (its site-packages and what their `.pth` files
add, so an editable install or a PostgreSQL driver there still imports; the directory of this
coding-os in front when that path would find another one or none) and calls
the hook's entry (`coding_os.interfaces.hook.run`), which ends the process as soon as the
hook's output is written; the console script's entry (`interfaces.entry.main`), whose other
fast paths a hook does not need, only for any other command line (`--version`). The interpreter is named in the command, so no `#!` line limits the
length of a path.

The launcher lives in the user's hub (`~/.coding-os/launchers/`, 0700; the file 0600), never in
a project: a repository is data from elsewhere and must never supply the program a hook runs
(DESIGN.md §11). There is one per installation of cos (its interpreter and package directory,
hashed into the name), shared by every project that installation set up; `cos init` rewrites it
when what it would write differs, and otherwise changes no byte of it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

import coding_os
from coding_os.errors import StateIOError
from coding_os import durable
from coding_os.state.root import hub_dir

__all__ = [
    "LAUNCHERS_DIR_NAME",
    "HOOK_FLAGS",
    "Launcher",
    "HookCommand",
    "launchers_dir",
    "launcher_path",
    "this_launcher",
    "site_path",
    "render",
    "write",
    "read_launcher",
    "hook_command",
    "console_script_command",
    "parse_hook_command",
]

LAUNCHERS_DIR_NAME = "launchers"
HOOK_FLAGS = ("-I", "-S")
PROBE_TIMEOUT_S = 30.0
# What `site` gives the interpreter, as the installed `cos` starts with it (see site_path).
_PROBE = ("import importlib.util, json, sys\n"
          "spec = importlib.util.find_spec('coding_os')\n"
          "print(json.dumps({'path': sys.path, 'origin': spec.origin if spec else None}))\n")


@dataclass(frozen=True)
class Launcher:
    """One installation's launcher: the interpreter that runs it, the `coding_os` package it
    starts, where it lives and the `sys.path` it sets."""

    interpreter: str
    package_dir: str
    path: str
    sys_path: tuple[str, ...]


@dataclass(frozen=True)
class HookCommand:
    """A hook entry's command as `cos init` writes it (`shape` "launcher") or as an older init
    wrote it (`shape` "console_script": `program` is that `cos` script, `interpreter` None)."""

    shape: str
    program: str
    interpreter: str | None


def launchers_dir(hub: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The hub's directory of launchers (`hub` defaults to `state.root.hub_dir(env)`)."""
    return os.path.join(hub if hub is not None else hub_dir(env), LAUNCHERS_DIR_NAME)


def launcher_path(interpreter: str, package_dir: str, hub: str | None = None,
                  env: Mapping[str, str] | None = None) -> str:
    """Where the launcher of the installation (`interpreter`, `package_dir`) lives."""
    key = hashlib.sha256(os.fsencode(interpreter) + b"\0" + os.fsencode(package_dir))
    return os.path.join(launchers_dir(hub, env), f"hook-{key.hexdigest()[:16]}.py")


def this_launcher(hub: str | None = None, env: Mapping[str, str] | None = None) -> Launcher:
    """The launcher of this installation (the running interpreter and this `coding_os`).

    Raises:
        StateIOError: the interpreter cannot report its `sys.path`.
    """
    interpreter = os.path.abspath(sys.executable)
    package_dir = os.path.dirname(os.path.abspath(coding_os.__file__))
    return Launcher(interpreter, package_dir, launcher_path(interpreter, package_dir, hub, env),
                    tuple(site_path(interpreter, package_dir, env)))


def site_path(interpreter: str, package_dir: str,
              env: Mapping[str, str] | None = None) -> list[str]:
    """The `sys.path` the launcher sets: what `site` gives `interpreter`, with the parent of
    `package_dir` in front when that path would import another `coding_os`, or none. PYTHONPATH
    and the current directory are left out (-E -P): they belong to the shell `cos init` ran in,
    not to the installation.

    Raises:
        StateIOError: the interpreter cannot be run or says something else than a path.
    """
    try:
        # -s as well when cos itself started without the user site (a `#!python -s` script).
        flags = ["-E", "-P", *(["-s"] if sys.flags.no_user_site else [])]
        proc = subprocess.run([interpreter, *flags, "-c", _PROBE], capture_output=True,
                              env=dict(os.environ if env is None else env), cwd="/",
                              timeout=PROBE_TIMEOUT_S, check=False)
        found = json.loads(proc.stdout) if proc.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        raise StateIOError(f"cannot ask {interpreter} for its sys.path: {exc}") from None
    if not (isinstance(found, dict) and isinstance(found.get("path"), list)
            and all(isinstance(entry, str) for entry in found["path"])):
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:]
        raise StateIOError(f"cannot ask {interpreter} for its sys.path"
                           f"{': ' + tail[0][:200] if tail else ''}")
    path = [entry for entry in found["path"] if entry]
    origin = found.get("origin")
    here = os.path.realpath(package_dir)
    if not isinstance(origin, str) or os.path.realpath(os.path.dirname(origin)) != here:
        parent = os.path.dirname(package_dir)
        path = [parent] + [entry for entry in path if entry != parent]
    return path


def render(launcher: Launcher) -> bytes:
    """The bytes of the launcher file: every path a Python literal, so no path can break out of
    it, and nothing read from the caller's directory or environment."""
    lines = [
        "# The coding-os hook launcher, written by `cos init` (which rewrites it) and checked by",
        "# `cos doctor`. Hook entries run it as INTERPRETER -I -S <this file> hook <Event>: with",
        "# no `site`, it sets sys.path itself to what site gives INTERPRETER, then starts the",
        "# coding-os in PACKAGE.",
        "import sys",
        "",
        f"INTERPRETER = {launcher.interpreter!r}",
        f"PACKAGE = {launcher.package_dir!r}",
        "sys.path[:] = [",
        *(f"    {entry!r}," for entry in launcher.sys_path),
        "]",
        "if sys.argv[1:2] == ['hook'] and not {'--help', '-h'} & set(sys.argv[2:]):",
        "    from coding_os.interfaces.hook import run",
        "",
        "    run(sys.argv[2:])",
        "from coding_os.interfaces.entry import main",
        "",
        "raise SystemExit(main())",
        "",
    ]
    return "\n".join(lines).encode("utf-8", "surrogateescape")


def write(launcher: Launcher) -> bool:
    """Write the launcher atomically in a private directory of the hub; True when a byte
    changed (its mode made private again counts as no change).

    Raises:
        StateIOError: the directory is a symlink or another user's, or the file cannot be
            written.
    """
    directory = os.path.dirname(launcher.path)
    durable.ensure_dir(directory)
    try:
        info = os.lstat(directory)
        if os.path.islink(directory) or info.st_uid != os.geteuid():
            raise StateIOError(f"refusing to write the hook launcher in {directory}: it is a "
                               "symlink or not this user's directory")
        if info.st_mode & 0o077:
            os.chmod(directory, durable.DIR_MODE)
    except OSError as exc:
        raise durable.io_error(directory, exc) from None
    data = render(launcher)
    if durable.read_small(launcher.path, 1 << 20) == data:
        try:
            if os.stat(launcher.path).st_mode & 0o077:
                os.chmod(launcher.path, durable.FILE_MODE)
        except OSError as exc:
            raise durable.io_error(launcher.path, exc) from None
        return False
    durable.atomic_write(launcher.path, data)
    return True


def read_launcher(path: str) -> tuple[str, str] | None:
    """(INTERPRETER, PACKAGE) of a launcher file, read without running it; None when the file
    is missing or is not a launcher cos wrote."""
    data = durable.read_small(path, 1 << 20)
    if data is None:
        return None
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    values: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            values[node.targets[0].id] = node.value.value
    if "INTERPRETER" not in values or "PACKAGE" not in values:
        return None
    return values["INTERPRETER"], values["PACKAGE"]


def hook_command(agent: str, launcher: Launcher, event: str) -> str:
    """The shell command a hook entry runs for `event`."""
    return (f"COS_AGENT={agent} {shlex.quote(launcher.interpreter)} {' '.join(HOOK_FLAGS)} "
            f"{shlex.quote(launcher.path)} hook {event}")


def console_script_command(agent: str, cos_path: str, event: str) -> str:
    """The command an older `cos init` wrote: the installer's `cos` console script."""
    return f"COS_AGENT={agent} {shlex.quote(cos_path)} hook {event}"


def parse_hook_command(command: str, agent: str, event: str) -> HookCommand | None:
    """What a hook command `hook_command` or `console_script_command` renders for this agent
    and event runs; None for any other command."""
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if words[:1] != [f"COS_AGENT={agent}"] or words[-2:] != ["hook", event]:
        return None
    if len(words) == 4:
        return HookCommand("console_script", words[1], None)
    if len(words) == 7 and tuple(words[2:4]) == HOOK_FLAGS:
        return HookCommand("launcher", words[4], words[1])
    return None
