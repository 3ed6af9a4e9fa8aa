"""How cos prints what it has to say, for every interface: an error as one line on stderr with
its exit code, and JSON as the `--json` forms print it."""

from __future__ import annotations

import sys

__all__ = ["EXIT_INTERNAL", "error_exit", "dump_json"]

EXIT_INTERNAL = 70


def error_exit(exc: BaseException) -> int:
    """Print `exc` as the one line cos prints for it on stderr; return its exit code."""
    from coding_os.errors import CosError, NotTrusted

    if isinstance(exc, NotTrusted):
        print(exc.reason, file=sys.stderr)
        return exc.exit_code
    if isinstance(exc, CosError):
        print(f"cos: {' '.join(str(exc).split())}", file=sys.stderr)
        return exc.exit_code
    print(f"cos: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
    return EXIT_INTERNAL


def dump_json(data: object) -> str:
    """`data` as cos prints JSON: indented, UTF-8 as is; escaped to ASCII when it holds a
    string UTF-8 cannot encode (a file name that is not UTF-8), so the output stays UTF-8."""
    import json

    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=2, ensure_ascii=True, default=str)
    return text
