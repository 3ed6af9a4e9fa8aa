"""The `cos` console script: `cos hook …` goes straight to the fast hook entry; everything
else loads the click CLI. Keeps click and the rest of the CLI off the hook's hot path."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> int:
    """Entry point of the `cos` console script."""
    argv = sys.argv[1:]
    if argv[:1] == ["hook"] and not any(a in ("--help", "-h") for a in argv[1:]):
        from coding_os.interfaces.hook import main as hook_main

        return hook_main(argv[1:])
    from coding_os.interfaces.cli import run

    return run(argv)
