"""The page parameters of every paged listing (tasks, the work log, search): a size and the
cursor a previous page handed out."""

from __future__ import annotations

from coding_os.errors import InvalidInput

__all__ = ["page_size", "parse_cursor"]


def page_size(limit: object, maximum: int = 200) -> int:
    """`limit` if it is a whole number from 1 to `maximum`.

    Raises:
        InvalidInput: it is not.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= maximum:
        raise InvalidInput(f"limit must be a whole number from 1 to {maximum}")
    return limit


def parse_cursor(cursor: object) -> int | None:
    """A page cursor: a whole number from 1 to 2^63 - 1, given as a number or in ASCII digits.

    Raises:
        InvalidInput: anything else.
    """
    if cursor is None:
        return None
    if isinstance(cursor, str) and cursor.isascii() and cursor.isdigit() and len(cursor) <= 19:
        cursor = int(cursor)
    if isinstance(cursor, bool) or not isinstance(cursor, int) or not 1 <= cursor < 1 << 63:
        raise InvalidInput("cursor must be the next_cursor of a previous page")
    return cursor
