"""The `cos` console script. Two forms skip the click CLI, whose import alone costs more than
the work they do: `cos hook …` (run on every tool call of every agent) goes to the fast hook
entry, and ends its process without the interpreter's teardown; the scripted resume
`cos resume (ID | -c | --continue) --json` (what tools and editors run to restore a session)
calls `coding_os.api` directly. Everything else, including any other option or `--help`, loads
the click CLI, which owns the documented interface."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["main"]

_JSON_RESUME_FLAGS = {"-c", "--continue", "--json"}


def _scripted_resume(args: list[str]) -> bool:
    """Whether `cos resume ARGS` is the scripted form: --json, and exactly one of an id or name
    (not an option, and not on a terminal) or -c/--continue; nothing else."""
    flags = [a for a in args if a.startswith("-")]
    keys = [a for a in args if not a.startswith("-")]
    if "--json" not in flags or not set(flags) <= _JSON_RESUME_FLAGS:
        return False
    latest = "-c" in flags or "--continue" in flags
    if keys and sys.stdin.isatty() and sys.stdout.isatty():
        return False  # a name several sessions have opens the picker on a terminal
    return len(keys) + latest == 1 and len(args) == len(set(args))


def _resume_json(args: list[str]) -> int:
    from coding_os import api
    from coding_os.interfaces.output import dump_json, error_exit

    keys = [a for a in args if not a.startswith("-")]
    try:
        report = api.resume_session(keys[0] if keys else None, latest=not keys)
        sys.stdout.write(dump_json(report.to_dict()) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return error_exit(exc)
    return 0


def _exit_now(code: int) -> NoReturn:
    """End the process with `code` once stdout and stderr are flushed, without the interpreter's
    teardown (freeing every module and object, a last pass of the garbage collector): about 3 ms
    of a hook's 5 (see benchmarks/hook_latency.py), for memory the process returns anyway. The
    hook path leaves nothing to that teardown: it closes its files and database itself, and
    starts no thread it does not join."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:  # None: the hook was started with that descriptor closed
                stream.flush()
        except Exception:  # noqa: BLE001 - the reader went away: nothing keeps the exit code
            pass
    os._exit(code)


def main() -> int:
    """Entry point of the `cos` console script."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("--help", "-h") for a in argv[1:]):
        import gc

        # A hook is a short process that makes few reference cycles, and those die with it;
        # the collector's passes over the objects its imports create cost more (see
        # benchmarks/hook_latency.py).
        gc.disable()
        from coding_os.interfaces.hook import main as hook_main

        _exit_now(hook_main(argv[1:]))
    if argv[:1] == ["resume"] and _scripted_resume(argv[1:]):
        return _resume_json(argv[1:])
    from coding_os.interfaces.cli import run

    return run(argv)
