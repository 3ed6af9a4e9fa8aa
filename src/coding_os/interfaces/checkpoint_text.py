"""What `cos checkpoint create` and `cos rewind` print without `--json`: one copy of the lines,
for the click CLI (interfaces/cli.py) and the plain forms that skip it (interfaces/entry.py).
The lines are returned as they are; the caller makes their control characters visible."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["pruned_line", "created_line", "skipped_lines", "code_lines"]


def pruned_line(record: dict[str, Any]) -> str | None:
    """The stderr line of a checkpoint that pruned the oldest ones over the cap, or None."""
    pruned = record.get("pruned")
    return f"cos: checkpoints over their cap: pruned the {len(pruned)} oldest" if pruned else None


def created_line(record: dict[str, Any]) -> str:
    """The line of a checkpoint taken."""
    return (f"checkpoint {record['id']} ({record['mode']}): {record['objects_written']} new "
            f"objects, {record['bytes_written']} bytes")


def skipped_lines(record: dict[str, Any]) -> list[str]:
    """The stderr lines of the files a checkpoint left out (too large)."""
    return [f"skipped {path}: {reason} ({size} bytes)"
            for path, reason, size in record.get("skipped") or []]


def code_lines(code: dict[str, Any], verb: str) -> list[str]:
    """The lines of the code half of a rewind (or its preview, or an undo): the checkpoint,
    each file, the counts; `verb` says what was done (`restored`, `would restore`, `undone`)."""
    row = code["checkpoint"]
    lines = [f"checkpoint {row['id']} ({code['mode']}, {row.get('ts')}, turn "
             f"{row.get('turn') if row.get('turn') is not None else '-'})"]
    for item in code["files"]:
        stat = ("" if "binary" not in item else "  binary" if item["binary"]
                else f"  +{item['added']} -{item['removed']}")
        outside = "  [changed outside the session]" if item.get("changed_outside") else ""
        lines.append(f"  {item['action']:<8} {item['path']}{stat}{outside}")
    summary = code["summary"]
    lines.append(f"{verb}: {summary['restore']} restored, {summary['create']} created, "
                 f"{summary['delete']} deleted"
                 + ("; undo with cos rewind --undo" if code.get("before") else ""))
    return lines
