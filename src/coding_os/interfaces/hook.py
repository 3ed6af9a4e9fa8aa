"""`cos hook <EventName>`: the fast entry every agent hook runs.

Reads the hook payload (JSON) on stdin, hands it to `hooks.events.handle`, and obeys the hook
output contract: exit 0 with JSON on stdout or nothing; exit 2 only for a deliberate block (a
policy gate, hooks/gates.py: the deny decision as JSON on stdout for Claude Code, the reason on
stderr for Codex). When its own plumbing fails it never blocks the agent: one line on
stderr, a hooks-log line when it can, and exit 1, which both Claude Code and Codex treat as a
non-blocking error. A misroute exits 3 and writes nothing.

Imports only the standard library and the state modules (no click): see benchmarks/hook_latency.py.
The hook launcher `cos init` writes (launcher.py) starts here (`run`), not at the console
script's entry (interfaces/entry.py), whose other fast paths a hook would import for nothing.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["main", "run", "exit_now", "MAX_PAYLOAD_BYTES", "EXIT_OK", "EXIT_ERROR",
           "EXIT_BLOCK", "EXIT_MISROUTE"]
# A state dir that is not this user's exits 8 (errors.ForeignState) and writes nothing.

MAX_PAYLOAD_BYTES = 64 << 20
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_BLOCK = 2
EXIT_MISROUTE = 3


def read_payload(stream: object) -> dict[str, object]:
    """Read and parse one hook payload from a binary stream.

    Raises:
        InvalidInput: empty, too large, not UTF-8 JSON, or not an object with string ids.
    """
    from coding_os import jsonwire
    from coding_os.errors import InvalidInput
    from coding_os.hooks.context import validate_payload

    data = stream.read(MAX_PAYLOAD_BYTES + 1)  # type: ignore[attr-defined]
    if len(data) > MAX_PAYLOAD_BYTES:
        raise InvalidInput(f"hook payload larger than {MAX_PAYLOAD_BYTES >> 20} MiB")
    if not data.strip():
        raise InvalidInput("empty hook payload on stdin (expected a JSON object)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("hook payload is not UTF-8") from None
    try:
        payload = jsonwire.loads(text)
    except ValueError as exc:
        raise InvalidInput(f"hook payload is not valid JSON ({exc})") from None
    return validate_payload(payload)


def main(argv: list[str]) -> int:
    """Run one hook event; `argv` is what follows `cos hook`."""
    from coding_os.errors import CosError, ForeignState, Misroute

    event = argv[0] if argv else ""
    try:
        if len(argv) != 1:
            from coding_os.errors import InvalidInput

            raise InvalidInput("usage: cos hook <EventName> < payload.json")
        payload = read_payload(sys.stdin.buffer)
        from coding_os.hooks.events import handle

        result = handle(event, payload)
    except Misroute as exc:
        _say(str(exc))
        return EXIT_MISROUTE
    except ForeignState as exc:  # nothing is read from it, nor written into it
        _say(str(exc))
        return exc.exit_code
    except CosError as exc:
        _say(str(exc))
        _log_failure(event, str(exc))
        return EXIT_ERROR
    except Exception as exc:  # noqa: BLE001 - a bug in cos must never block the agent
        _say(f"internal error: {type(exc).__name__}: {exc}")
        _log_failure(event, f"internal {type(exc).__name__}: {exc}")
        return EXIT_ERROR
    if result.message:
        sys.stderr.write(result.message.rstrip("\n") + "\n")
    if result.output is not None:
        from coding_os import jsonwire

        # The state is written all the same when the output cannot be.
        try:
            if sys.stdout is None:
                raise BrokenPipeError  # started with stdout closed
            sys.stdout.write(jsonwire.dumps(result.output))
            sys.stdout.flush()
        except BrokenPipeError:
            _say("the agent closed stdout before the hook's output was written")
            return EXIT_ERROR
        except OSError as exc:  # a full disk behind a redirection
            _say(f"the hook's output could not be written: {exc.strerror or exc}")
            return EXIT_ERROR
    return result.exit_code


def run(argv: list[str]) -> NoReturn:
    """`cos hook ARGV`, then the process ended by `exit_now`: without the cyclic garbage
    collector, since a hook is a short process that makes few reference cycles, and those die
    with it (the collector's passes over the objects its imports create cost more)."""
    import gc

    gc.disable()
    exit_now(main(argv))


def exit_now(code: int) -> NoReturn:
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


def _say(message: str) -> None:
    line = " ".join(message.split())
    if sys.stderr is not None:  # None: started with stderr closed
        sys.stderr.write(f"cos hook: {line[:1000]}\n")


def _log_failure(event: str, message: str) -> None:
    """Best effort: record the failed fire in the hooks log; a second failure is only stderr."""
    from coding_os import clock
    from coding_os.errors import CosError
    from coding_os.state import hookslog, registry
    from coding_os.state.root import resolve
    from coding_os.state.tiers import Tiers

    try:
        resolution = resolve()
        tiers = Tiers(resolution.state_dir)
        if not registry.registered(tiers.state_dir, resolution.hub):
            return  # never create a state dir just to complain in it, nor write a foreign one
        safe_event = event if event.isascii() and event.isalnum() and len(event) <= 64 else None
        hookslog.append(tiers.hooks_log, {
            "ts": clock.utc_now(), "agent": os.environ.get("COS_AGENT"),
            "event": safe_event, "error": message,
        })
    except (CosError, OSError):
        pass  # already said on stderr; the log is what failed
