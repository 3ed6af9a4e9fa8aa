"""Session and checkpoint ids as tables show them and as a user types them back (docs/cli.md,
"Ids you can type").

Session and checkpoint ids start with their kind and a time (`ses-claude-20260101-120000-ab12`,
`cp-20260101-120000-123-ab12`), so what tells two apart is their end: a table shows the shortest
end of each id, at least SHORT_MIN characters, that no other id of the table ends with (the
random part and the clock before it), as git shows the shortest unique start of a hash. A
command taking an id accepts the whole id, such an end, a start of it, or a start of the
agent's own id (`matching`).
"""

from __future__ import annotations

from collections.abc import Iterable

from coding_os.errors import Ambiguous

__all__ = ["SHORT_MIN", "SHORT_MAX", "abbreviate", "matches", "pick"]

SHORT_MIN = 8
SHORT_MAX = 12
# Shorter than this, a typed key would match too much to mean one id.
_KEY_MIN = 4


def abbreviate(ids: Iterable[str]) -> dict[str, str]:
    """Each of `ids` as a table shows it: its shortest end of at least SHORT_MIN characters
    that no other of `ids` ends with, not starting with `-`; the whole id when that end would
    be longer than SHORT_MAX."""
    unique = list(dict.fromkeys(ids))
    shown: dict[str, str] = {}
    for value in unique:
        others = [other for other in unique if other != value]
        size = SHORT_MIN
        while size < len(value) and (value[-size] == "-" or any(
                other.endswith(value[-size:]) for other in others)):
            size += 1
        shown[value] = value if size > SHORT_MAX or size >= len(value) else value[-size:]
    return shown


def matches(key: str, value: str, native: str | None = None) -> bool:
    """Whether the typed `key` names `value` (an id whose agent's own id is `native`): the
    whole id, an end of it or a start of it, or a start of `native`, of at least a few
    characters."""
    if key == value or (native is not None and key == native):
        return True
    if len(key) < _KEY_MIN:
        return False
    return (value.endswith(key) or value.startswith(key)
            or (native is not None and native.startswith(key)))


def pick(key: str, known: Iterable[tuple[str, str | None]], kind: str) -> str | None:
    """The one id of `known` (pairs of an id and its agent's own id, or None) that `key` names
    (`matches`), or None when none does.

    Raises:
        Ambiguous: several do; the message lists them, one a line.
    """
    found = list(dict.fromkeys(value for value, native in known if matches(key, value, native)))
    if len(found) == 1:
        return found[0]
    if not found:
        return None
    raise Ambiguous(f"{key!r} names {len(found)} {kind}s; give more of the id:\n"
                    + "\n".join(f"  {value}" for value in found[:20]))
